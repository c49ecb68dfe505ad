//go:build mpi

package main

import (
	"fmt"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/mpi"
)

// mpiWorld is the world of an MPI job: one rank per process, every
// process running the same sweep.
type mpiWorld struct{ w *mpi.Comm }

// newMPIWorld initialises MPI; finish finalizes it and returns err, or
// the failure to finalize.
func newMPIWorld() (scaleWorld, func(err error) error, error) {
	w, err := mpi.Init()
	if err != nil {
		return nil, nil, fmt.Errorf("--mpi: %w", err)
	}
	finish := func(err error) error {
		if ferr := w.Finalize(); err == nil && ferr != nil {
			err = fmt.Errorf("--mpi: %w", ferr)
		}
		return err
	}
	return mpiWorld{w}, finish, nil
}

// run calls fn on this process's rank; every process learns whether any
// failed.
func (m mpiWorld) run(n int, fn func(c comm.Comm) error) error {
	if n != m.w.Size() {
		return fmt.Errorf("an MPI job of %d processes cannot run %d ranks", m.w.Size(), n)
	}
	return comm.Agree(m.w, fn(m.w), "bench")
}

func (m mpiWorld) once(fn func() error) error {
	var err error
	if m.w.Rank() == 0 {
		err = fn()
	}
	return comm.Agree(m.w, err, "bench (rank 0)")
}

func (m mpiWorld) size() int        { return m.w.Size() }
func (m mpiWorld) perProcess() bool { return true }
func (m mpiWorld) lead() bool       { return m.w.Rank() == 0 }
func (m mpiWorld) describe() string {
	return fmt.Sprintf("MPI job of %d processes (%s)", m.w.Size(), mpiLibrary())
}
