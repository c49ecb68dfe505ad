//go:build mpi

package main

import (
	"fmt"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/mpi"
)

// runWorld runs fn once in this MPI process, as its rank of
// MPI_COMM_WORLD; n must equal the world size mpirun started. A failure
// aborts the whole job so no rank is left waiting, but only after
// failed(rank, err) has reported the error: MPI_Abort does not return, and
// Open MPI kills every process of the job, so an error printed after it
// would never be seen.
func runWorld(n int, fn func(c comm.Comm) error, failed func(rank int, err error)) error {
	c, err := mpi.Init()
	if err != nil {
		return err
	}
	if c.Size() != n {
		err := fmt.Errorf("-ranks %d but mpirun started %d processes", n, c.Size())
		failed(c.Rank(), err)
		return abort(c, 2, err)
	}
	if err := fn(c); err != nil {
		failed(c.Rank(), err)
		return abort(c, 1, err)
	}
	return c.Finalize()
}

// abort ends the job with MPI_Abort. It returns only when MPI refuses,
// with err and the refusal.
func abort(c *mpi.Comm, code int, err error) error {
	if aerr := c.Abort(code); aerr != nil {
		return fmt.Errorf("%w (MPI_Abort failed: %v)", err, aerr)
	}
	return err
}

// underMPI reports whether this binary runs its ranks as MPI processes.
const underMPI = true
