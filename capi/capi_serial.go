//go:build serial && !mpi

package main

import "C"

import "github.com/ftigo/ftigo/comm"

// The serial library (go build -tags serial): no MPI, one rank in an
// in-process world. Python uses it without mpi4py; C programs cannot,
// since fti.h's FTI_Init takes an MPI_Comm (ftigo.h's ftigo_init_f does
// not).

// setupComm has nothing to set up without MPI.
func setupComm(*library) {}

// ftigo_capi_init starts a session of one rank; the handle is ignored.
//
//export ftigo_capi_init
func ftigo_capi_init(cfg *C.char, _ C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	path, _ := goString(cfg)
	return C.int(lib.init(path, comm.NewWorld(1)[0]))
}

// ftigo_capi_app_comm: no MPI communicator in the serial library.
//
//export ftigo_capi_app_comm
func ftigo_capi_app_comm() C.int { return -1 }
