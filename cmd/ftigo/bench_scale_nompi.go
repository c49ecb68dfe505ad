//go:build !mpi

package main

// newMPIWorld refuses --mpi in a binary built without MPI.
func newMPIWorld() (scaleWorld, func(err error) error, error) {
	return nil, nil, usagef("--mpi: this ftigo was built without MPI (go build -tags mpi ./cmd/ftigo, then mpirun -np N ftigo bench --mpi ...)")
}
