//go:build !mpi

package main

import "github.com/ftigo/ftigo/comm"

// runWorld runs fn on n in-process goroutine ranks. failed is not called:
// the first failure is returned and the caller reports it.
func runWorld(n int, fn func(c comm.Comm) error, failed func(rank int, err error)) error {
	return comm.Run(n, fn)
}

// underMPI reports whether this binary runs its ranks as MPI processes.
const underMPI = false
