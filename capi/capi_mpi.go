//go:build mpi

package main

/*
#include <mpi.h>

// ftigo_world_rank names the process in messages logged outside a session.
static int ftigo_world_rank(void) {
	int flag = 0, rank = 0;
	if (MPI_Initialized(&flag) != MPI_SUCCESS || !flag) return 0;
	if (MPI_Finalized(&flag) != MPI_SUCCESS || flag) return 0;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	return rank;
}
*/
import "C"

import (
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/mpi"
)

// setupComm gives the library what it needs of MPI: the world rank for
// messages, and the thread check below MPI_THREAD_SERIALIZED.
func setupComm(l *library) {
	l.worldRank = func() int { return int(C.ftigo_world_rank()) }
	l.wrongThread = func(c comm.Comm) string {
		if mc, ok := c.(*mpi.Comm); ok && !mc.MayCall() {
			return "called from another thread than FTI_Init's, and MPI granted MPI_THREAD_FUNNELED or less: " +
				"make every FTI call from the thread that initialised MPI (or ask MPI_Init_thread for more)"
		}
		return ""
	}
	l.trace.funnel = func() [5]int64 {
		mc, ok := l.comm.(*mpi.Comm)
		if !ok {
			return [5]int64{}
		}
		s := mc.FunnelStats()
		return [5]int64{s.Ops, s.Rounds, s.Yields, s.Sleeps, int64(s.Slept)}
	}
}

//export ftigo_capi_init
func ftigo_capi_init(cfg *C.char, libComm C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	path, _ := goString(cfg)
	c, err := mpi.FromHandle(int(libComm))
	if err != nil {
		lib.logger().Error("FTI_Init: cannot use the communicator: " + err.Error())
		return codeFailure
	}
	return C.int(lib.init(path, c))
}

// ftigo_capi_app_comm returns the Fortran handle of the application
// ranks' communicator of the session (the communicator FTI_Init was given
// without the heads, with head = 1), or -1 when there is none or it is
// not an MPI communicator.
//
//export ftigo_capi_app_comm
func ftigo_capi_app_comm() C.int {
	mu.Lock()
	defer mu.Unlock()
	if lib.rt == nil {
		return -1
	}
	if mc, ok := lib.rt.Comm().(*mpi.Comm); ok {
		return C.int(mc.Handle())
	}
	return -1
}
