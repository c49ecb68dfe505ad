// Command capi is FTI's C API implemented by ftigo: built with
// -buildmode=c-shared it is libftigo.so, and include/fti.h declares FTI
// 1.6's public interface with FTI's names, types, constants and return
// codes, so C, C++ (and, through their C bindings, Fortran) codes written
// for FTI switch to ftigo by compiling against fti.h and linking -lftigo.
//
// # Building and linking
//
// MPI_Comm is an int in MPICH and a pointer in Open MPI, so the library is
// built for the MPI the application uses, with the build tags of comm/mpi:
//
//	go build -buildmode=c-shared -tags mpi         -o lib/openmpi/libftigo.so ./capi
//	go build -buildmode=c-shared -tags 'mpi mpich' -o lib/mpich/libftigo.so   ./capi
//
//	mpicc prog.c -I capi/include -L lib/openmpi -lftigo -Wl,-rpath,$PWD/lib/openmpi
//
// (the go build also writes libftigo.h, cgo's own header, which
// applications do not need). The application calls MPI_Init, then
// FTI_Init(config, MPI_COMM_WORLD or any intra-communicator) and, at the
// end, FTI_Finalize before MPI_Finalize.
//
// # How it maps onto ftigo
//
//   - FTI_Init reads the config.fti as FTI reads it (ckpt.LoadConfig: the
//     same keys and meanings; [restart] is ignored) and runs ckpt.Init on a
//     private duplicate of the communicator, so ftigo's messages never meet
//     the application's. FTI_COMM_WORLD is another duplicate, for the
//     application; it stays valid after FTI_Finalize. On a restart FTI_Init
//     finds, verifies and rebuilds the newest checkpoint every rank can read.
//     The restart state lives in meta_dir: the configuration file is never
//     written.
//   - Memory protected with FTI_Protect is registered with ckpt.ProtectRaw:
//     every checkpoint reads it in place (no copy) and FTI_Recover writes it
//     in place. FTI_Realloc resizes it with C's realloc, through the
//     registration's resize function.
//   - Types: FTI_CHAR, FTI_SHRT, FTI_INTG, FTI_LONG, their unsigned forms,
//     FTI_SFLT and FTI_DBLE are recorded with their element type, so a Go
//     program reads them as []int8, []int16, []int32, []int64, []uint8 ...
//     []float32, []float64. FTI_LDBE, FTI_InitType's opaque types and
//     composite types are recorded as opaque elements of their size (as FTI
//     does for every format but HDF5); composite fields are checked to lie
//     inside the type and kept in memory only.
//   - Every collective call (FTI_Init, FTI_Checkpoint, FTI_Snapshot,
//     FTI_Recover, FTI_Finalize) returns the same code on every rank; a
//     level that differs between ranks is refused on all of them.
//   - Messages go to stdout in FTI's manner ("[ FTI Warning 000003 ] : ..."),
//     errors to stderr, filtered by the configuration's verbosity; every
//     refused call logs why.
//
// # Where ftigo differs from FTI, deliberately
//
//   - FTI_Init on a restart that cannot recover returns FTI_NREC as FTI does,
//     but the session then refuses every call until FTI_Finalize instead of
//     continuing as a fresh run, and nothing is deleted: a restart never
//     starts afresh while a checkpoint exists.
//   - FTI_Recover also refuses a variable whose element type differs from the
//     stored one (FTI checks only sizes), and checks every variable before
//     writing any memory. FTI_RecoverVar refuses a size that differs from the
//     stored one instead of writing past the buffer.
//   - FTI_Protect refuses negative counts and NULL with a non-zero count;
//     FTI_AddScalarField and FTI_AddVectorField refuse fields that do not fit
//     in the type (FTI leaves that undefined).
//   - FTI_setIDFromString gives a new name the smallest id that is neither
//     protected, named nor stored (FTI takes the number of variables, which
//     may collide with an id chosen by hand). Names are stored with the
//     variables, so FTI_getIDFromString finds them after a restart. Names are
//     at most 255 bytes (FTI truncates longer ones).
//   - FTI_RecoverVar works without FTI_RecoverVarInit.
//   - A checkpoint taken on a restart before FTI_Recover supersedes the
//     restart data: FTI_Status then returns 0 and FTI_Snapshot checkpoints
//     (FTI keeps the status at 1 and re-reads the new checkpoint).
//   - head = 1 works as in FTI (see package ckpt, "Heads"): node-local rank 0
//     of each node is a head, FTI_COMM_WORLD is a duplicate of the
//     application ranks' communicator without the heads, the heads
//     post-process the levels with inline_lN = 0, and FTI_Init on a head
//     returns when the application has finalized: FTI_HEAD with
//     keep_heads_alive = 1, otherwise it calls MPI_Finalize and exit(0), as
//     FTI's heads do. head = 1 needs node_size >= 2 and MPI_THREAD_MULTIPLE
//     (MPI_Init_thread): after a plain MPI_Init, FTI_Init refuses it on every
//     rank, where FTI would accept it.
//   - Without local_test, ranks are placed on nodes by host name, as in FTI.
//
// # Global datasets and restarts on another number of ranks
//
// FTI_DefineGlobalDataset, FTI_AddSubset and the rest are ckpt's global
// datasets (see package ckpt): every checkpoint records each rank's
// datasets and subsets, and a restart on another number of ranks (or
// another placement, or from a level-9 file) redistributes them from any
// level, not only from FTI's HDF5 file. Such a restart goes as in FTI's
// VPR: FTI_Init, FTI_Protect, FTI_DefineGlobalDataset (with any shape,
// then FTI_RecoverDatasetDimension and FTI_GetDatasetSpan for the stored
// one), FTI_AddSubset, then FTI_Recover, or FTI_RecoverVar on every rank in
// the same order: they are collective there. A variable must be protected
// with its subset's count, or resized with FTI_GetStoredSize and
// FTI_Realloc first. FTI_Status returns 1 (3 from a level-9 file). A
// dataset's path is its group's (FTI_InitGroup) joined with its name,
// "fields/temperature"; h5dump and h5py read the level-9 file's
// datasets under those paths (datasets.go and datasets_cgo.go implement
// these calls; testdata/global.c restarts on other rank counts). Where
// ftigo differs:
//
//   - Declarations are checked together at each FTI_Checkpoint: one id
//     defined differently on two ranks, two subsets sharing an element, an
//     element no subset covers, or a variable whose count is not its
//     subset's fail the checkpoint on every rank, naming them (FTI lets
//     the last writer win and leaves gaps unwritten).
//   - FTI_RenameGroup refuses a group that holds a global dataset: the
//     dataset's path was fixed when it was defined.
//   - ftigo keeps one name per variable: FTI_setIDFromString's,
//     FTI_DefineDataset's or FTI_SetAttribute's (the first wins, with a
//     warning for a later different one; FTI keeps an id name apart from
//     the HDF5 name). FTI_DefineDataset's shape is checked, not stored:
//     variables outside global datasets are stored 1-D.
//   - FTI_RecoverDatasetDimension works on any restart not yet recovered
//     (FTI: only on its VPR, status 3).
//   - A level-9 checkpoint stands outside the rotation of levels 1-4: on a
//     restart it does not supersede the restart data (FTI_Status keeps its
//     value), and FTI_GetStoredSize keeps answering for the checkpoint
//     FTI_Recover reads.
//
// # State of every function
//
//	function                       state
//	FTI_Init                       implemented (FTI_SCES, FTI_NSCS, FTI_NREC, FTI_HEAD)
//	FTI_Status                     implemented: 0 fresh (or recovered), 1 restart, 2 restart from the keep_last_ckpt copy, 3 restart from a level-9 file (VPR)
//	FTI_Finalize                   implemented (keep_last_ckpt, keep_l4_ckpt as in ckpt)
//	FTI_COMM_WORLD                 implemented: a duplicate of FTI_Init's communicator (without the heads with head = 1)
//	FTI_CHAR ... FTI_LDBE          implemented: handles 0..10, set by FTI_Init
//	FTI_InitType                   implemented: opaque elements of the size
//	FTI_InitCompositeType          implemented: opaque elements of the size; the HDF5 group is ignored
//	FTI_AddScalarField             implemented (layout checked, not stored)
//	FTI_AddVectorField             implemented (layout checked, not stored)
//	FTI_InitComplexType            implemented (FTI before 1.4.1; FTIT_type is fti_id_t)
//	FTI_AddSimpleField             implemented (FTI before 1.4.1)
//	FTI_AddComplexField            implemented (FTI before 1.4.1)
//	FTI_Protect                    implemented: C memory, read and restored in place; re-protect replaces
//	FTI_setIDFromString            implemented
//	FTI_getIDFromString            implemented
//	FTI_Checkpoint                 levels 1-4; 5-7 downgraded to 1-3 with a warning (as FTI); 8 (FTI_L4_DCP) differential with enable_dcp; 9 (FTI_L4_H5_SINGLE) the HDF5 single file with h5_single_file_enable
//	FTI_Snapshot                   implemented: recovers on a restart, else ckpt's interval schedule
//	FTI_Recover                    implemented (count, size and type checked first); collective on a restart of another shape
//	FTI_RecoverVarInit             implemented
//	FTI_RecoverVar                 implemented (every block's hash checked); collective on a restart of another shape
//	FTI_RecoverVarFinalize         implemented
//	FTI_GetStoredSize              implemented (restart checkpoint, else the newest one this run took; 0 if none)
//	FTI_Realloc                    implemented: C's realloc to the stored size
//	FTI_GetConfig                  implemented for the fields fti.h declares (configuration, topology, intervals, restart)
//	FTI_Print                      implemented (FTI_DBUG, FTI_INFO on rank 0, FTI_WARN, FTI_EROR, FTI_IDCP)
//	FTI_InitICP                    implemented (ckpt's BeginICP); activate = false makes it and the next AddVarICP/FinalizeICP no-ops (as FTI)
//	FTI_AddVarICP, FTI_FinalizeICP implemented (FinalizeICP: FTI_NSCS on every rank, nothing committed, when a protected variable was not added)
//	FTI_GetStageDir                implemented with enable_staging = 1 (ckpt_dir/node%04d/stage); FTI_NSCS otherwise
//	FTI_SendFile                   implemented with enable_staging = 1: a background copy (atomic at its destination), returns the request id
//	FTI_GetStageStatus             implemented with enable_staging = 1: FTI_SI_NINI .. FTI_SI_FAIL
//	FTI_InitGroup                  implemented: the group's path prefixes the global datasets defined in it
//	FTI_RenameGroup                implemented, until a global dataset is defined in the group (FTI_NSCS after)
//	FTI_SetAttribute               FTI_ATTRIBUTE_NAME implemented (the variable's name); FTI_ATTRIBUTE_DIM FTI_NSCS
//	FTI_DefineDataset              implemented: shape checked against the count, name stored; the group is checked
//	FTI_DefineGlobalDataset        implemented (ckpt.DefineGlobalDataset; element type of the handle)
//	FTI_AddSubset                  implemented (ckpt.AddSubset)
//	FTI_UpdateGlobalDataset        implemented (new shape, and rank)
//	FTI_UpdateSubset               implemented (the variable must be a subset of that dataset)
//	FTI_GetDatasetRank             implemented
//	FTI_GetDatasetSpan             implemented: a static array, as in FTI; NULL on error
//	FTI_RecoverDatasetDimension    implemented on any restart not yet recovered (FTI: VPR only)
//	FTI_BitFlip                    not implemented (fault injection): FTI_NSCS
//
// Every function called before FTI_Init, after FTI_Finalize or after a
// failed FTI_Init returns FTI_NSCS (FTI_Recover FTI_NREC, FTI_Status 0,
// FTI_GetStoredSize 0, FTI_Realloc its argument, FTI_GetDatasetSpan
// NULL) and logs why; FTI_Init and the collective calls also refuse to
// run before MPI_Init or after MPI_Finalize.
//
// # Files
//
// api.go holds the semantics over any comm.Comm (tested in-process),
// capi.go the cgo exports, fti.c FTI's C entry points and globals, types.go
// the type table, log.go FTI-style logging. testdata/ holds the C and C++
// programs the tests build with mpicc and run under mpirun, for Open MPI
// and MPICH, and gobench, the Go twin of the heat solver for
// BenchmarkCheckpointCvsGo.
//
// # API stability
//
// The interface is FTI 1.6's C API as capi/include/fti.h declares it, and
// it follows FTI's; the Go code is package main and has no Go API.
package main
