//go:build mpi

package main

import (
	"fmt"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/mpi"
)

// runWorld runs fn once in this MPI process, as its rank of
// MPI_COMM_WORLD; n must equal the world size mpirun started. A failure
// aborts the whole job so no rank is left waiting.
func runWorld(n int, fn func(c comm.Comm) error) error {
	c, err := mpi.Init()
	if err != nil {
		return err
	}
	if c.Size() != n {
		c.Abort(2)
		return fmt.Errorf("-ranks %d but mpirun started %d processes", n, c.Size())
	}
	if err := fn(c); err != nil {
		c.Abort(1)
		return err
	}
	return c.Finalize()
}

// underMPI reports whether this binary runs its ranks as MPI processes.
const underMPI = true
