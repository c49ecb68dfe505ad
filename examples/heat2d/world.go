//go:build !mpi

package main

import "github.com/ftigo/ftigo/comm"

// runWorld runs fn on n in-process goroutine ranks.
func runWorld(n int, fn func(c comm.Comm) error) error { return comm.Run(n, fn) }

// underMPI reports whether this binary runs its ranks as MPI processes.
const underMPI = false
