// Command capi is FTI's C API implemented by ftigo. Built with
// -buildmode=c-shared it is libftigo.so. include/fti.h declares FTI 1.6's
// public interface with FTI's names, types, constants and return codes.
// C and C++ codes written for FTI switch to ftigo by compiling against
// fti.h and linking -lftigo; Fortran codes keep use fti, the module
// capi/fortran builds into the same library (capi/build.sh).
//
// How each call maps onto package ckpt, where ftigo differs from FTI on
// purpose, and the state of every function are in docs/capi.md.
//
// # Building and linking
//
// MPI_Comm is an int in MPICH and a pointer in Open MPI. So the library
// is built for the MPI the application uses, with the build tags of
// comm/mpi:
//
//	go build -buildmode=c-shared -tags mpi         -o lib/openmpi/libftigo.so ./capi
//	go build -buildmode=c-shared -tags 'mpi mpich' -o lib/mpich/libftigo.so   ./capi
//
//	mpicc prog.c -I capi/include -L lib/openmpi -lftigo -Wl,-rpath,$PWD/lib/openmpi
//
// The go build also writes libftigo.h, cgo's own header, which
// applications do not need.
//
// capi/build.sh does it all for one MPI (openmpi, mpich, or none: the
// serial library). It puts libftigo.so and a pkg-config file in OUT/lib,
// fti.h, ftigo.h and the compiled Fortran module fti.mod in
// OUT/include:
//
//	capi/build.sh --mpi openmpi out
//	mpicc   prog.c   -I out/include -L out/lib -lftigo -Wl,-rpath,$PWD/out/lib
//	mpifort prog.f90 -I out/include -L out/lib -lftigo -Wl,-rpath,$PWD/out/lib
//	PKG_CONFIG_PATH=out/lib/pkgconfig pkg-config --cflags --libs ftigo
//
// Python's package ftigo (python/) loads the same library through
// ctypes. pip builds it with build.sh for the MPI mpi4py uses:
//
//	pip install --no-build-isolation ./python
//
// # Lifecycle
//
// The application calls MPI_Init, then FTI_Init(config, comm) with
// MPI_COMM_WORLD or any intra-communicator. FTI_Init runs ckpt.Init on a
// private duplicate of the communicator. The application uses
// FTI_COMM_WORLD, another duplicate, for its own messages. At the end it
// calls FTI_Finalize before MPI_Finalize. Every function called before
// FTI_Init, after FTI_Finalize or after a failed FTI_Init refuses to run
// and logs why.
//
// # Concurrency
//
// One session per process, as in FTI. C calls are serialised by a lock:
// FTI is not thread-safe either. The collective calls (FTI_Init,
// FTI_Checkpoint, FTI_Snapshot, FTI_Recover, FTI_Finalize) return the
// same code on every rank. Every thread level works, plain MPI_Init
// included: below MPI_THREAD_MULTIPLE the library's MPI calls, those of
// heads and background post-processing too, are made by the thread that
// called FTI_Init (comm/mpi's funnel).
//
// # Files
//
// api.go holds the semantics over any comm.Comm (tested in-process).
// capi.go holds the cgo exports, fti.c FTI's C entry points and globals,
// types.go the type table, log.go FTI-style logging. datasets.go and
// datasets_cgo.go implement the global datasets. testdata/ holds the C
// and C++ programs the tests build with mpicc and run under mpirun, for
// Open MPI and MPICH. It also holds gobench, the Go twin of the heat
// solver for BenchmarkCheckpointCvsGo.
//
// # API stability
//
// The interface is FTI 1.6's C API as capi/include/fti.h declares it,
// and it follows FTI's. The Go code is package main and has no Go API.
package main
