//go:build mpi

// Package mpi is ftigo's thin cgo binding of MPI: a [Comm] that implements
// comm.Comm, comm.Aborter, comm.Counter and the typed capabilities
// comm.Reducer, comm.Gatherer and comm.NonBlocker on an MPI communicator, for jobs that
// outgrow one machine. Every file carries the build tag mpi, so a build
// without the tag needs neither cgo nor an MPI installation.
//
// # Building and running
//
// One Go source serves Open MPI and MPICH: MPI handles cross into Go only as
// Fortran handles (MPI_Fint), converted inside small C wrappers, and the
// flavour is picked by a file that carries nothing but a pkg-config line:
//
//	go build -tags mpi ...            # Open MPI (pkg-config ompi)
//	go build -tags 'mpi mpich' ...    # MPICH   (pkg-config mpich)
//
// Tests and jobs run under the flavour's own launcher (Debian points
// /usr/bin/mpirun at Open MPI when both are installed):
//
//	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
//	  go test -tags mpi -exec "mpirun.openmpi -np 4 -x GOMAXPROCS=1" ./comm/mpi/...
//	go test -tags 'mpi mpich' -exec "mpirun.mpich -np 2" ./comm/mpi/...
//
// A binary started without a launcher runs as a world of size 1. Benchmarks
// must use a fixed iteration count (-benchtime=5x) so every rank runs the
// same number of collective iterations.
//
// # Lifecycle
//
//  1. [Init] on the goroutine that will also finalize: it locks that
//     goroutine to its OS thread, calls MPI_Init_thread asking for
//     MPI_THREAD_MULTIPLE and sets MPI_ERRORS_RETURN on the world.
//     [InitThread] asks for another level (the tests run the suite at
//     SERIALIZED and FUNNELED too).
//  2. Communicate through the returned world and communicators split from
//     it; Close the sub-communicators (MPI_Comm_free).
//  3. On success, [Comm.Finalize] from the Init goroutine. On any failure,
//     [Comm.Abort] instead: a rank that finalizes while its peers wait in a
//     collective hangs the whole job, whereas MPI_Abort (or exiting without
//     Finalize) makes the launcher kill the job and exit non-zero.
//
// # Runtime rules
//
//   - Errors come back as *[MPIError] carrying the call, code, class and
//     MPI's own text; truncation matches comm.ErrTruncated and the argument
//     classes comm.ErrBadArgument. Ranks out of range, unknown ops, wrong
//     buffer sizes and counts above [MaxCount] (C int) are refused in Go
//     before MPI is called; split large transfers with comm.SendChunked or
//     comm.SendrecvChunked.
//   - Concurrency: one goroutine per communicator at a time. With
//     MULTIPLE granted (Open MPI and MPICH both grant it) calls go straight
//     through. Below MULTIPLE every call goes through the funnel
//     (funnel.go): it is queued, and one goroutine at a time posts the
//     queued calls in their non-blocking form and tests them until they
//     complete, so goroutines waiting on each other never deadlock. At
//     SINGLE and FUNNELED only the thread that initialised MPI serves: the
//     Init goroutine, or the application's thread that called
//     [FromHandle]. Other goroutines' calls then wait until it makes a call
//     or waits in [Comm.Serve].
//   - Buffers: blocking calls take Go slices directly (legal under the cgo
//     pointer rules: C keeps nothing after the call); Sendrecv's
//     Isend/Recv/Wait also completes inside one C call. Isend and Irecv
//     (comm.NonBlocker) pin their buffer with runtime.Pinner when they post
//     it, since MPI keeps the pointer; the buffers are unpinned together
//     once no request is pending, so a request never completed keeps every
//     later buffer pinned too.
//   - Typed operations (comm.Reducer, comm.Gatherer, comm.NonBlocker):
//     Allreduce is MPI_Allreduce on MPI_INT64_T or MPI_DOUBLE whose first
//     call also carries a length check, so lengths that differ between
//     ranks fail on every rank instead of being undefined. Gatherv and
//     Scatterv agree on the root with one fixed-size MPI_Allreduce, gather
//     the lengths to root with MPI_Gather (8 bytes a rank), and root
//     broadcasts its verdict (24 bytes): a rank other than root receives a
//     fixed number of bytes whatever the number of ranks. Allgatherv
//     exchanges the lengths with one MPI_Allgather. They then call
//     MPI_Gatherv, MPI_Allgatherv or MPI_Scatterv, or return
//     errors.ErrUnsupported (comm's bounded fallback takes over) when the
//     total exceeds [MaxCount]; a non-blocking message above [MaxCount]
//     travels as one message of a derived datatype (blocks of MaxCount
//     bytes and the rest), matched by a receive of plain bytes or of the
//     same kind, its length read with MPI_Get_elements_x.
//   - Counts ([Comm.Counts], comm.Counter) are kept per process, over the
//     world and every communicator split from it, counted at the binding:
//     every MPI call with its payload, as comm.Counts says.
//   - Set GOMAXPROCS to the cores per rank (-x GOMAXPROCS=1 when
//     oversubscribed); avoid os/exec in ranks after Init.
//
// # API stability
//
// comm/mpi is public API, as comm is: Init, InitThread and the Comm they
// return are kept stable. Before 1.0 an incompatible change is still
// possible.
package mpi
