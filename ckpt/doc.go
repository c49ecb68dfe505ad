// Package ckpt is ftigo's public checkpoint/restart API, with FTI's model.
// A simulation registers its state with [Protect] and calls
// [Runtime.Checkpoint] or [Runtime.Snapshot] in its solver loop. On the
// next launch it learns from [Runtime.Status] that it is a restart, and
// gets its data back, bit for bit, with [Runtime.Recover].
//
// # What it owns
//
// The API, the configuration ([Config]; [LoadConfig] reads FTI's
// config.fti), the node table in meta_dir, Snapshot's schedule, and the
// mapping of protected variables onto FTI-FF files (package fileformat).
// Global datasets map variables onto hyperslabs of global arrays, for
// restarts on another number of ranks (package dataset). Beside the
// solver ckpt runs background post-processing, FTI's heads, incremental
// checkpoints and staging. How a checkpoint is stored, committed, kept
// and recovered belongs to ftigo's internal packages.
//
// The behaviour is specified in docs/protocol/: checkpoint.md (the
// commit, Finalize), restart.md (Init, Recover, other shapes),
// background.md (post-processing, heads, iCP, staging), config.md
// (config.fti, Snapshot, dCP, HDF5 checkpoints) and fti.md (where ftigo
// differs from FTI, and why).
//
// # Lifecycle, in call order
//
//  1. [Init] (collective) validates the configuration, locks meta_dir
//     and finds the job's run (below; [ErrLocked] for a second job,
//     naming the one that holds it). It repairs the checkpoint metadata
//     and removes what a crashed run left. On a restart it verifies every
//     byte of the newest checkpoint every rank can read, rebuilding from
//     redundancy. Init never starts fresh while a checkpoint exists:
//     an unrecoverable restart wraps [ErrUnrecoverable], lost metadata
//     [ErrMetadataLost]. A fallback to an older checkpoint is logged as
//     a warning, with what was skipped and why.
//  2. [Protect], [ProtectValue] or [ProtectRaw] (local) for every
//     variable, on a restart as on a fresh run. Optionally
//     [DefineDataset] and [Runtime.AddSubset] (local) for global
//     datasets.
//  3. On a restart ([Runtime.Status] is Restart, RestartKept or
//     RestartVPR): [Runtime.Recover], [Runtime.RecoverVar],
//     [Runtime.RecoverVarByName], [Runtime.StoredSize]. They are local,
//     except on a restart from another shape ([Runtime.Reshaped]), where
//     the three Recover calls are collective. Afterwards Status is Fresh.
//  4. In the loop: [Runtime.Snapshot] every iteration, or
//     [Runtime.Checkpoint] (both collective). A checkpoint is committed
//     only when every rank wrote it. Otherwise every rank gets the same
//     error and the previous checkpoint stays.
//  5. [Runtime.Finalize] (collective) applies keep_last_ckpt, deletes
//     the other checkpoints and releases meta_dir. A job that stops
//     early and keeps its checkpoints calls [Runtime.Close] instead.
//
// # Messages
//
// Without [WithLogger] the runtime prints as FTI does, at the
// configuration's verbosity (1 debug, 2 info, 3 warnings, 4 errors):
// rank 0's information lines on stdout, every rank's warnings and
// errors on stderr, with FTI's prefixes ([NewFTILogger]; [WithOutput]
// redirects them). The C API prints the same lines. WithLogger takes
// any zap logger instead; WithLogger(zap.NewNop()) silences the runtime.
// Every line carries "rank" (the rank in Init's communicator) and, with
// head = 1, "app-rank" (the application rank); a checkpoint's level is
// "ckpt-level". Logged: the configuration's warnings, downgraded
// requests and fallbacks, a failed checkpoint with its error (error
// level, rank 0), the restart and Recover with their durations, and at
// verbosity 2 one line per committed checkpoint:
//
//	Ckpt. ID 7 (L2) (64.00 MiB/proc) taken in 0.412 sec., 621.4 MiB/s (Wt 0.000, Wr 0.301, Ps 0.090, Cm 0.021)
//
// That is the size per rank, the wall time and the aggregate bandwidth.
// Then come the wait for the previous background post-processing (Wt),
// writing the data (Wr), post-processing on the solver's path (Ps) and
// the commit (Cm). The same values are log fields. With enable_dcp the
// line ends with the dCP share, and FTI's dCP statistics line follows.
// When some variable is compressed ([Runtime.SetCompression], [basic]
// compression), the line ends with the ratio ("compressed 3.1x"): the
// variable bytes written over the bytes they took, summed over the ranks
// and recorded in the manifest.
//
// # Compression and HDF5
//
// Compression applies to FTI-FF files: L1-L4, their partner copies,
// parity and SIONlib containers. HDF5 checkpoints (ckpt_io = 5 at L4,
// level 9) are written uncompressed and exact, whatever the variables'
// settings: h5ckpt writes each variable's values from memory, with no
// filter and no lossy reduction. This is a deliberate difference: such
// files are meant for h5py, h5dump and libhdf5 as they are. Their
// checkpoints carry no ratio in the manifest.
//
// An error is one line: "ckpt: ", what failed, then the details. It
// names each path once, and the ranks that failed (the first few and
// how many).
//
// [RebuildOffline] verifies and rebuilds the newest recoverable
// checkpoint of a job that is not running, under the same lock;
// [RebuildCheckpointsOffline] (ftigo rebuild) every committed one, or the
// one named.
//
// # Runs
//
// A run is a job and its relaunches: FTI's execution, named by its
// exec_id ([Runtime.Run]). The id has FTI's form, the start time and a
// random part. The run owns glbl_dir/<run> and ckpt_dir/node%04d/<run>.
// Its meta_dir names it in a file (ftigo.run), and every manifest
// records it. So jobs that share glbl_dir and ckpt_dir, each with its
// own meta_dir, never restore, adopt or delete each other's files, even
// at the same time. Two jobs on one meta_dir are one too many: the
// second gets [ErrLocked], "in use by" the holder's program, pid, host
// and start time.
//
// ftigo differs from FTI on purpose in where the id is kept. FTI writes
// it back into config.fti ([restart] exec_id, with failure = 1) for the
// relaunch. ftigo keeps it in meta_dir and never writes the user's
// configuration. [Config.Run] ([restart] exec_id with failure = 1 or 2,
// as FTI reads it) names a run explicitly. On the run's own meta_dir that
// is a plain relaunch. A meta_dir that names no run takes the run over
// from its directories in glbl_dir, but only once the meta_dir that held
// it is lost: a run has one meta_dir. Finalize without a kept checkpoint
// ends the run, so the next start begins a new one, as FTI's next
// execution gets a new exec_id.
//
// A meta_dir written before runs existed holds checkpoints and no run
// file. It keeps the flat directories, glbl_dir and ckpt_dir/node%04d,
// and its manifests record no run, until it has no checkpoint left
// (docs/format/manifest.md#runs).
//
// # Concurrency
//
// A [Runtime] belongs to one rank and is used from that rank's
// goroutine. Ranks of an in-process world each have their own. Every
// rank makes the collective calls (Init, Checkpoint, Snapshot, Finalize)
// in the same order with the same arguments. Protect, DefineDataset,
// AddSubset, StoredSize, Realloc and Close are local.
//
// Protected memory must not change while Checkpoint or Snapshot runs: it
// is written in place, without a copy. Background post-processing reads
// the committed file, not the memory. In snapshot mode (ckpt_snapshot =
// 1) Checkpoint and AddVarICP copy it into staging memory, and the
// background work reads the copy: the solver may change it on return. Its goroutine owns the runtime's
// engine while it runs, and every method that needs the engine waits for
// it. The restart state lives in meta_dir; the configuration file is
// only read.
//
// # API stability
//
// ckpt is public API: its exported names and their behaviour (FTI's
// semantics, with the documented differences) are kept stable. Before
// 1.0 an incompatible change is still possible. Applications use ckpt,
// comm (and comm/mpi), vfd, dataset and the format packages.
package ckpt
