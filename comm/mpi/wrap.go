//go:build mpi

package mpi

/*
#include <mpi.h>

// ftigo_wrap_state reports whether MPI is initialised and not yet
// finalised, and the thread level it granted.
static int ftigo_wrap_state(int *initialized, int *finalized, int *provided) {
	int rc = MPI_Initialized(initialized);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Finalized(finalized);
	if (rc != MPI_SUCCESS || !*initialized || *finalized) return rc;
	return MPI_Query_thread(provided);
}

// ftigo_wrap_check refuses MPI_COMM_NULL and inter-communicators and sets
// MPI_ERRORS_RETURN, so MPI reports errors instead of aborting the job.
static int ftigo_wrap_check(MPI_Fint h, int *isnull, int *inter) {
	MPI_Comm c = MPI_Comm_f2c(h);
	*isnull = c == MPI_COMM_NULL;
	if (*isnull) return MPI_SUCCESS;
	int rc = MPI_Comm_test_inter(c, inter);
	if (rc != MPI_SUCCESS || *inter) return rc;
	return MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
}

// ftigo_wrap_level maps MPI's thread level to the package's constants.
static int ftigo_wrap_level(int provided) {
	if (provided >= MPI_THREAD_MULTIPLE) return 3;
	if (provided >= MPI_THREAD_SERIALIZED) return 2;
	if (provided >= MPI_THREAD_FUNNELED) return 1;
	return 0;
}
*/
import "C"

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"

	"github.com/ftigo/ftigo/comm"
)

// FromHandle returns a Comm on a communicator the application created, in
// a process where the application (not this package) initialised MPI: a
// library such as ftigo's C API is handed an MPI_Comm and converts it with
// MPI_Comm_c2f. h is that Fortran handle.
//
// The caller keeps ownership of the handle, as of a world: [Comm.Close]
// is a no-op and the caller frees the communicator (MPI_Comm_free) once
// it is done with the Comm; communicators split from it are owned and
// freed by their Close as usual. MPI_ERRORS_RETURN is set on it.
// [Comm.Finalize] refuses with [ErrNotInitThread], since this package did
// not initialise MPI, and [Comm.Abort] ends the whole job as for a world
// from [Init]. The thread level is the one the application obtained;
// below MULTIPLE every call goes through the funnel, as after
// [InitThread]. At MPI_THREAD_SINGLE or FUNNELED the thread that may call
// MPI is the Init goroutine's when this package initialised MPI, else
// the caller's: FromHandle must then be called from the thread that
// initialised MPI, which alone serves the calls.
func FromHandle(h int) (*Comm, error) {
	if h < math.MinInt32 || h > math.MaxInt32 {
		return nil, fmt.Errorf("%w: communicator handle %d does not fit an MPI_Fint", comm.ErrBadArgument, h)
	}
	var initialized, finalized, provided C.int
	if err := mpiErr("MPI_Query_thread", C.ftigo_wrap_state(&initialized, &finalized, &provided)); err != nil {
		return nil, err
	}
	if initialized == 0 {
		return nil, fmt.Errorf("%w: MPI is not initialised (call MPI_Init first)", comm.ErrBadArgument)
	}
	if finalized != 0 {
		return nil, fmt.Errorf("%w: MPI is already finalised", comm.ErrClosed)
	}
	var isnull, inter C.int
	if err := mpiErr("MPI_Comm_test_inter", C.ftigo_wrap_check(C.MPI_Fint(h), &isnull, &inter)); err != nil {
		return nil, err
	}
	if isnull != 0 {
		return nil, fmt.Errorf("%w: MPI_COMM_NULL", comm.ErrBadArgument)
	}
	if inter != 0 {
		return nil, fmt.Errorf("%w: an inter-communicator; pass an intra-communicator", comm.ErrBadArgument)
	}
	granted := int(C.ftigo_wrap_level(provided))
	// Below SERIALIZED the thread that may call MPI is the one that
	// initialised it: this package's Init goroutine's, else the caller's
	// (a C program's thread calling into ftigo).
	owner := unix.Gettid()
	var shared *funnel
	if ie := initEnv.Load(); ie != nil {
		owner, shared = ie.initTid, ie.fun
	}
	e := newEnv(granted, owner)
	if shared != nil && e.fun != nil {
		e.fun = shared // one MPI, one funnel
	}
	e.initTid = -1 // no thread of this process may finalize
	c := &Comm{env: e, handle: C.MPI_Fint(h), world: true}
	var err error
	if e.fun != nil {
		err = e.fun.blocking("MPI_Comm_rank", func() C.int {
			if qe := c.query(); qe != nil {
				return C.int(qe.(*MPIError).Code)
			}
			return 0
		})
	} else {
		err = c.query()
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Handle returns the communicator's Fortran handle (MPI_Fint); C code
// converts it back with MPI_Comm_f2c. Ownership does not change.
func (c *Comm) Handle() int { return int(c.handle) }
