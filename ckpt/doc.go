// Package ckpt is ftigo's public checkpoint/restart API, with FTI's model:
// a simulation registers its state with [Protect], calls
// [Runtime.Checkpoint] or [Runtime.Snapshot] in its solver loop, and on the
// next launch learns from [Runtime.Status] that it is a restart and gets
// its data back, bit for bit, with [Runtime.Recover].
//
// It owns the API, the configuration ([Config], [LoadConfig] for FTI's
// config.fti), the node table in meta_dir, the mapping of protected
// variables onto FTI-FF files (package fileformat) and Snapshot's
// schedule. How a checkpoint is stored, committed, kept and recovered
// belongs to package levels; the topology to package partner.
//
// # Lifecycle, in call order
//
//  1. [Init] (collective): validates the configuration for the world size,
//     locks meta_dir (a second job or runtime on the same directories
//     fails with [ErrLocked]), builds the topology (a replacement node
//     takes a vanished node's place), creates ckpt_dir/node%04d, glbl_dir
//     and meta_dir, repairs the checkpoint metadata (every manifest is
//     kept twice, in meta_dir and glbl_dir/manifests: a damaged or missing
//     copy is rewritten from the other), removes what a crashed run left
//     half-written, and on a restart finds the newest checkpoint every rank
//     can read, verifying every file and rebuilding from redundancy. An
//     unrecoverable restart is an error ([ErrUnrecoverable]), and so is
//     lost metadata ([ErrMetadataLost]: files of a checkpoint whose every
//     manifest copy is gone or damaged); Init never starts fresh while a
//     checkpoint exists. A fallback to an older checkpoint is printed on
//     rank 0's standard error ([WithWarnings]) and logged.
//  2. [Protect] / [ProtectValue] (local) for every variable, on a restart
//     as on a fresh run; protecting an id again replaces it. [ProtectRaw]
//     registers memory Go does not manage (C memory behind the C API).
//     Optionally [DefineDataset] / [Runtime.DefineGlobalDataset] and
//     [Runtime.AddSubset] (local): global datasets and the hyperslab each
//     variable holds of one (see "Global datasets" below);
//     [Runtime.UpdateGlobalDataset] changes a dataset's shape and, on a
//     restart, [Runtime.StoredDataset] gives the shape the checkpoint
//     recorded (FTI_UpdateGlobalDataset, FTI_RecoverDatasetDimension).
//  3. On a restart ([Runtime.Status] is Restart, RestartKept or
//     RestartVPR): [Runtime.Recover], [Runtime.RecoverVar],
//     [Runtime.RecoverVarByName], [Runtime.StoredSize],
//     [Runtime.Realloc]. They take over the bytes Init verified and kept
//     in memory ([WithRestartImage]: in the in-process world whole pages
//     are handed over and the rest copied; under MPI everything is copied,
//     see [WithPageHandover]), or else read the files Init verified
//     and check every block's hash again as they read; after Recover,
//     Status is Fresh, as
//     FTI_Status is. On a restart of the shape that wrote the checkpoint
//     they are local: any subset of ranks may call them. On a restart
//     from data another shape wrote ([Runtime.Reshaped]) Recover,
//     RecoverVar and RecoverVarByName are collective (see below).
//  4. In the loop: [Runtime.Snapshot] every iteration, or
//     [Runtime.Checkpoint] explicitly (both collective). A checkpoint is
//     committed only when every rank wrote it; otherwise every rank gets
//     the same error and the previous checkpoint stays. Rank 0 logs one
//     info line per committed checkpoint, in FTI's manner: "Ckpt. ID 7 (L2)
//     (64.00 MiB/proc) taken in 0.412 sec., 621.4 MiB/s (Wt 0.000, Wr
//     0.301, Ps 0.090, Cm 0.021)" — size per rank, wall time, aggregate
//     bandwidth, and the time spent waiting for the previous checkpoint's
//     background post-processing (Wt, see "Asynchronous post-processing"),
//     writing the data (Wr), post-processing at the level on the solver's
//     path (Ps: partner copy, parity, container) and committing (Cm); the
//     same values are fields.
//     With enable_dcp the line ends with the dCP share (", dCP on
//     ckpt00000006, layer 3, share 10.00%" for a differential checkpoint)
//     and FTI's dCP statistics line follows.
//     Recover, RecoverVar and StoredSize then refer to the newest
//     checkpoint the run committed, as in FTI.
//  5. [Runtime.Finalize] (collective): applies keep_last_ckpt (the last
//     checkpoint of the run — the newest it committed, or else the one it
//     restarted from, never one Init found unrecoverable — is flushed to
//     L4 unless it is at L4 already, and that L4 checkpoint is kept for
//     the next run, status RestartKept), deletes the rest oldest first
//     (a job killed in the middle restarts from its newest checkpoint,
//     never an older one), and releases meta_dir. A failed flush deletes
//     nothing.
//
// A job that ends without Finalize (every committed checkpoint stays for
// the next run, as after a kill) calls [Runtime.Close]: it waits for the
// background deletion of superseded checkpoints and releases meta_dir's
// lock (a killed process releases it too).
//
// [RebuildOffline] runs step 1 (verification and rebuild) for a job that
// is not running (ftigo rebuild), in an in-process world shaped like the
// newest checkpoint, under the same lock.
//
// # Global datasets and restarts on another shape
//
// A global dataset (FTI_DefineGlobalDataset) is an array of 1 to 32
// dimensions with an id, a name (its path in an HDF5 file) and an element
// type; [Runtime.AddSubset] (FTI_AddSubset) maps a protected variable
// onto the hyperslab (offset, count) it holds, its elements in row-major
// order. Every checkpoint file records the rank's datasets and subsets
// (FTI-FF version 2, docs/format/ftiff.md). At each checkpoint the
// declarations of all ranks are checked together when any rank changed
// its own: one id defined differently, one name used twice, two subsets
// sharing an element or, unless the dataset is Sparse, an element no
// subset covers is an error wrapping [ErrDataset] and the dataset
// package's sentinel, naming the ranks, variables and elements, and
// nothing is written. A variable whose length is not its subset's fails
// the checkpoint the same way.
//
// A restart is redistributing ([Runtime.Reshaped]) when the checkpoint
// was written by another number of ranks, by the same number placed
// otherwise on the nodes (ranks that moved between hosts, another
// node_size or group_size), or is a level-9 HDF5 file. Init recovers such
// a checkpoint like any other, newest first, with a verification pass of
// its own (package levels, reshape.go): the lowest rank of each node of
// this run lists the checkpoint's files in every old node directory it
// can see (ckpt_dir/node%04d; under MPI with node-local disks, those on
// its own disk), each old rank's data is found in its data file, its L2
// partner copy, its task of the L4 container or the L4 HDF5 file, and
// every such source is verified completely by one rank that sees it, the
// work spread by bytes; a source that fails gives way to the next. At L3
// a rank that sees every surviving node directory rebuilds the lost files
// first (the old groups decoded in-process, as ftigo rebuild does). The
// old ranks' variables, datasets and subsets are then known on every
// rank. A checkpoint no rank can read completely is passed over for an
// older one, as always.
//
// Recover then redistributes: every rank declares its datasets and
// subsets (the same datasets as the checkpoint's: another shape, element
// type or name is an error wrapping dataset.ErrMismatch), the new
// decomposition is checked as a checkpoint would check it, and each rank
// gets its hyperslabs from whichever old ranks' data holds those
// elements, in merged row-major runs, every block hash checked; elements
// of a Sparse dataset no old rank held read as zero. A rank reads the
// sources it can see itself; the rank that verified a source sends the
// runs of it the others need over the communicator (pairwise rounds of
// messages of at most 8 MiB). A variable that belongs to no dataset is
// restored from one old rank when one rank count divides the other: new
// rank q of M takes old rank floor(q·N/M)'s copy of N (the same rank when
// M = N; the first of the k old ranks it replaces when N = kM; the old
// rank each group of k new ranks comes from when M = kN); otherwise it is
// an error naming the variable: map it onto a dataset. A value every rank
// shares, such as an iteration counter, is one element of a dataset that
// rank 0 maps (the others map zero elements) and is broadcast after
// Recover, or stays outside the datasets when the counts divide (as
// heat2d does). A variable that was part of a dataset in the checkpoint
// must be mapped again with AddSubset. [Runtime.StoredSize],
// [Runtime.Realloc] and [Runtime.IDByName] stay local: they answer from
// the metadata Init gathered. [Runtime.OldRanks] says how many ranks wrote
// the data. Once the run commits a checkpoint of its own, Recover reads
// that one, locally, as in FTI.
//
// A restart of the same shape with a changed decomposition is not
// redistributed (a local Recover cannot fetch other ranks' data): a
// variable whose subset differs from the stored one fails with
// [ErrVarMismatch] naming both.
//
// # HDF5 checkpoints: ckpt_io = 5 and level 9
//
// With ckpt_io = 5, L4 checkpoints are one HDF5 file, l4.h5 in the
// checkpoint's global directory (package h5ckpt, docs/format/h5ckpt.md):
// every rank writes its subsets straight into the global datasets and its
// other variables into datasets of its own, in parallel; the manifest
// records the file's tables hash (covering every block hash) as the
// digest. h5py and h5dump read each global dataset whole under its name.
// A restart of the same shape reads its rank's part of the file; any
// other restart redistributes from it.
//
// With h5_single_file_enable = 1, [Runtime.Checkpoint] at level 9
// ([LevelH5Single], FTI_L4_H5_SINGLE) writes the checkpoint as the HDF5
// file h5_single_file_dir/h5_single_file_prefix-ID<id, 8 digits>.h5
// (defaults: glbl_dir and "VPR-h5", FTI's), outside the rotation of
// levels 1-4: it supersedes none of them and none supersedes it; unless
// h5_single_file_keep = 1 it replaces the previous level-9 file. A level-9
// file is committed by a record in meta_dir/h5single written after it, so
// a crash leaves either the previous state or the new file recorded. A
// restart considers the level-9 files beside the committed checkpoints:
// one newer than every committed checkpoint is tried first, older ones
// only when no committed checkpoint is recoverable; its blocks are
// verified at Init (each rank a share of the old ranks), the status is
// RestartVPR, [Runtime.Recovered] describes the file (level 9, no files),
// and Recover redistributes from it on any number of ranks. Finalize
// removes the records (with keep_last_ckpt, all but the newest) and
// leaves the files, the run's HDF5 output; a finished run never restarts
// from them. Level 9 without h5_single_file_enable is an error wrapping
// [ErrLevelUnavailable]. h5_single_file_inline = 0 (writing by head
// ranks) is warned about: ftigo writes the file inline.
//
// # Where ftigo differs from FTI
//
// Deliberately, to be safer:
//   - Init verifies every byte of the checkpoint it restarts from before
//     the run goes on (a damaged file falls back to a redundant copy or an
//     older checkpoint, with a warning): corruption is reported, never
//     restored. Each rank's data is read from storage once: Init hashes it
//     as it reads it into memory, and Recover hands the verified bytes
//     over to the variables (their memory pages, where they line up, in
//     the in-process world; copied under MPI: [WithPageHandover])
//     ([WithRestartImage]: by default up to 1 GiB per rank and a quarter of
//     the node's memory for all its ranks; the memory is
//     held from Init until the data is restored). Above the limit, for a
//     differential chain or an L4 HDF5 file, Recover reads the files again
//     and re-checks every block's hash while reading. Verifying at Init
//     and copying at Recover (rather than checking only metadata at Init
//     and hashing while Recover copies) is deliberate: Recover is local,
//     so a bad block found there could neither be rebuilt from redundancy
//     (collective at L3) nor send the run to an older checkpoint without
//     Status having promised another one.
//   - An L4 restart reads each rank's task straight from the container in
//     the global area (FTI copies the checkpoint files to local storage
//     first); nothing is written locally.
//   - An unrecoverable restart is an error, never a fresh start; lost
//     checkpoint metadata is an error naming the files; a fallback to an
//     older checkpoint is printed on standard error. FTI keeps its restart
//     state in the configuration file and one metadata copy.
//   - Init locks meta_dir; FTI lets two jobs share directories.
//   - Init with a nil communicator and every method of a nil *Runtime
//     return errors ([ErrNilArgument]).
//   - Recover, RecoverVar and RecoverVarByName are collective on a
//     redistributing restart (FTI's are local, except its variate
//     processor restart, which is collective through parallel HDF5 as
//     well); ftigo redistributes from any level, FTI only from its HDF5
//     single file, and decides by itself (FTI needs failure = 3).
//   - Subsets of one dataset must not overlap, nor leave gaps unless the
//     dataset is Sparse (FTI lets ranks write the same elements, the last
//     writer winning, and leaves gaps unwritten).
//   - A level-9 file is committed by a record in meta_dir, so a file cut
//     short by a crash is never restarted from.
//   - Differential checkpoints never rewrite a file a committed checkpoint
//     depends on (FTI's FTI-FF dCP rewrites one file per rank in place,
//     its POSIX dCP appends to one): each is a new delta file committed by
//     the protocol, at every level, not only L4; BLAKE3 per block instead
//     of MD5 or CRC32.
//
// # Asynchronous post-processing and incremental checkpoints
//
// With inline_l2, inline_l3 or inline_l4 = 0 ([Config].Async) a
// Checkpoint (or Snapshot) at that level writes each rank's FTI-FF file
// locally and commits the checkpoint at L1 — an ordinary L1 checkpoint,
// voted and with both manifest copies — and returns; the line ends with
// "committed at L1, L2 in the background". A goroutine of the rank (the
// poster) then makes the partner copy, the parity or the L4 container
// from the committed file, checking the file against its L1 digest as it
// reads it (a file damaged since its L1 commit is never raised: the
// upgrade fails with levels.ErrDigestMismatch on its rank), votes again
// over a private communicator split from the rank's at Init (its
// messages never mix with the solver's), and rewrites both manifest
// copies at the level (levels.Engine.Raise);
// only then does retention drop the older checkpoints the new level
// supersedes, so the last checkpoint committed at a level stays until
// the new one is committed there, and a crash at any point leaves the L1
// commit or the upgraded one. Rank 0 logs "Ckpt. ID 7 (L1 -> L2)
// post-processed in the background in T sec. (Ps, Cm, Cl)".
//
// At most one post-processing is in flight per rank (FTI's rule): the
// next Checkpoint, Snapshot or BeginICP waits for it (Checkpoint and
// Snapshot report the wait as Wt). [Runtime.CheckpointDone] asks without blocking whether it has
// finished (and yields the processor while it has not, so that a solver
// polling it lets the poster run), [Runtime.CheckpointWait] waits for it; [Runtime.Wait],
// Finalize and Close wait too. A failure in the background (a partner
// gone, ENOSPC on glbl_dir) leaves the checkpoint committed at L1 and the
// previous one at its level; it is returned, wrapping [ErrBackground] and
// naming the checkpoint, the level, the ranks and why, by CheckpointDone
// and CheckpointWait (without clearing it) and once by the next
// Checkpoint (which then takes nothing) or Finalize. Differential
// checkpoints work the same way: the L1 delta builds on the newest
// checkpoint at the target level and the upgrade keeps its chain. The L4
// HDF5 file of ckpt_io = 5 is always written synchronously.
//
// Where this differs from FTI: FTI needs head = 1 for inline_lL = 0;
// ftigo does not: without heads it post-processes in a goroutine of every
// application rank, so all ranks stay application ranks. Under MPI this
// needs MPI_THREAD_MULTIPLE (comm/mpi asks for it); with a lower thread
// level the keys are ignored with a warning. FTI reports a head's failure
// as a failed next checkpoint too, but has no query for it.
//
// Incremental checkpoints (FTI's iCP): [Runtime.BeginICP] opens a
// checkpoint and lays out its file for the variables protected then,
// [Runtime.AddVarICP] writes one variable as soon as the solver is done
// with it (any order; the solver may change it right after), and
// [Runtime.FinalizeICP] completes and commits the file as an ordinary
// checkpoint at its level (L4 and asynchronous levels commit at L1 first
// and are raised; with ckpt_io = 5 the ranks write the L4 HDF5 file from
// the committed L1 file, in FinalizeICP). A variable not added on some
// rank fails FinalizeICP everywhere and commits nothing ([ErrICP]);
// BeginICP(id, level, false) makes all three calls do nothing, as in
// FTI. An iCP is never differential (FTI's FTI-FF iCP is not either).
//
// Staging (FTI_SendFile, enable_staging = 1): [Runtime.StageDir] is the
// node's ckpt_dir/node%04d/stage, [Runtime.SendFile] queues a copy of a
// node-local file to global storage and returns a request id,
// [Runtime.StageStatus] (FTI's FTI_SI_* values) and [Runtime.StageWait]
// follow it. A goroutine of the rank copies the requests one at a time in
// queue order, to a tmp name, synced, renamed and its directory synced:
// the destination is absent or complete, never partial. Finalize and
// Close wait for the queue; Finalize removes the staging directory, as
// FTI does. FTI copies in the head rank, or synchronously without one;
// ftigo copies in the application rank with or without heads.
//
// # Heads
//
// With head = 1 ([Config].Head; node_size must be at least 2, and every
// node must hold node_size ranks) the lowest rank of each node of the
// communicator given to Init is a head, as in FTI. The application ranks
// get a Runtime whose [Runtime.Comm] is the communicator without the
// heads (FTI's FTI_COMM_WORLD): the application must use it for its own
// messages, and the job they form has node_size-1 ranks per node (its
// topology, groups and file names are those of such a job: a restart
// without heads on the application ranks alone reads its checkpoints).
// Init on a head returns only when every application rank has called
// Finalize (or Close), with an error matching [ErrHead]: the rank was a
// head and the job is over for it, so the caller returns. FTI's heads
// never return unless keep_heads_alive = 1, and then return FTI_HEAD;
// a Go library cannot end the process, so ftigo's always return
// ([Config].KeepHeadsAlive only matters to the C API, whose FTI_Init
// then returns FTI_HEAD, and otherwise ends the process as FTI does).
//
// A checkpoint at a level with inline_lL = 0 commits at L1 on the
// application ranks as described above; then each rank's poster sends its
// head a request (the level, the L1 manifest, the topology) and waits for
// the reply, instead of post-processing itself. Once every application
// rank of the node has asked, the head raises the checkpoint for each of
// them (levels.Engine.RaiseFor) in one goroutine per application rank, the
// goroutines of all heads forming a virtual world over the heads'
// communicator ([comm.Mux]) in which each has the rank of the application
// rank it serves: the partner copies, the parity and the L4 container are
// made by the heads from the node-local L1 files, voted among the heads,
// and both manifest copies rewritten, as an upgrade does. The application
// ranks take the upgraded manifest from the reply and adopt it, with
// retention of the checkpoints it supersedes, at their next collective
// call (Checkpoint, BeginICP, Finalize); the wait and failure rules above
// are unchanged, and an incremental checkpoint at such a level is raised
// by the heads the same way once FinalizeICP committed it at L1. A job
// that ends with Close (which is local) or is killed before that call
// leaves the checkpoint the raised one superseded on storage; the next
// run removes it when it adopts its own first raised checkpoint. Levels
// with inline_lL = 1 are post-processed by the application ranks, as FTI
// does, and the heads just wait. Staging copies and the level-9 HDF5
// file stay with the application ranks. head = 1 under MPI needs
// MPI_THREAD_MULTIPLE, and is refused with a lower thread level. A head that dies (killed, or its node lost) ends the job as any
// dead MPI process does: Open MPI's and MPICH's launchers end every
// process with an error naming it (tested in CI), so the application
// never waits forever for its head; the relaunch restarts from the newest
// checkpoint committed at some level.
//
// # Configuration
//
// [LoadConfig] reads FTI's config.fti with FTI's INI syntax (that of the
// iniparser FTI bundles): [section] headers and key = value lines,
// case-insensitive; a comment line starts with ; or #; a value in "..."
// or '...' keeps ; and # (ckpt_dir = "/tmp/a b;c" is that path), a bare
// value ends at the first ; or #; white space around keys and values is
// stripped; a line ending with a backslash continues on the next. Keys
// keep FTI's meanings and units (intervals in minutes, block_size in KiB,
// transfer_size in MiB). ftigo is stricter than FTI where FTI would
// silently read something else: a malformed value, a number with a
// leading 0 (octal to FTI), a value out of its range or beyond 64 bits
// (ckpt_l1 = 200000000 minutes does not fit in 292 years) is an error
// naming the file, line, key, value and the allowed range, and so is a
// file without any FTI key (empty, only comments, keys before any
// section). The file must be a regular file of at most [MaxConfigSize]:
// a FIFO, a device such as /dev/zero or a huge file is refused without
// being read.
//
// Values asking for an FTI feature ftigo does not have are accepted with
// a warning naming the key and value ([Config].Warnings, logged by Init on
// rank 0): ckpt_io = 2 (MPI-IO) or 6 (IME), enable_staging,
// h5_single_file_inline = 0 (the level-9 file is written by the
// application ranks, with or without heads), and failure = 1, 2 or 3 (ftigo keeps the
// restart state in meta_dir, never in the config file, and needs no
// request for a variate processor restart). Their harmless values
// (failure = 0, inline_lN = 1, head = 0) load silently, as do ckpt_io =
// 1, 3 and 4 (ftigo writes FTI-FF files at L1-L3 and one SIONlib
// container at L4) and ckpt_io = 5 (L4 as one HDF5 file, always whole:
// differential L4 checkpoints are taken whole with it); the
// h5_single_file_* keys configure level 9; a dcp_lN interval without
// enable_dcp is warned about (FTI takes those checkpoints whole).
// [FormatConfig] writes a Config back as config.fti text.
//
// ftigo extensions: intervals as Go durations (ckpt_l1 = 30s), fractional
// minutes, keep_last_n (keep the newest n checkpoints) and l3_parity in
// [basic], the Reed-Solomon parity count m of L3 groups. l3_parity = 0 (or
// absent, or group_size) is FTI's scheme: each member of a group of k
// nodes holds a parity file as large as the group's largest data file,
// and the group survives the loss of any k of its 2k files (up to half
// its nodes). 1 <= m < group_size rotates the parity over stripes as SCR
// does: each parity file is about m/(k-m) of a data file and the group
// survives the loss of any m of its nodes with all their files (e.g.
// group_size = 8, l3_parity = 2: overhead 1/3, any 2 nodes).
//
// # Differential checkpoints
//
// With enable_dcp = 1 (docs/format/dcp.md), Checkpoint at levels 5..8
// takes a differential checkpoint at level 1..4: FTI's FTI_L4_DCP is 8,
// and FTI downgrades 5..7 to full L1..L3 checkpoints, which ftigo makes
// differential too. Snapshot's dcp_l4 interval (FTI) and dcp_l1..dcp_l3
// (ftigo) schedule them, FTI's way (see below). Every checkpoint file is
// hashed in dcp_block_size blocks (512..65535 bytes, FTI's default 16384)
// with BLAKE3-256; dcp_mode (FTI's MD5 or CRC32) is accepted, and Init
// says once on rank 0 that BLAKE3 is used whatever it says. A differential
// checkpoint builds on the newest recoverable checkpoint at its level
// whose image this run wrote or recovered, when every rank still has
// that checkpoint's chain and the chain has fewer than dcp_stack_size
// layers (1..10, default 5); otherwise it is full (the first one, one
// after a restart from another level, one after its parent was lost or
// superseded, and the one that would exceed the stack, which compacts
// the chain). Each rank then writes a delta file: only the dCP blocks
// whose hash differs from the parent's block at the same variable and
// offset, and the complete metadata of its state; variables that grow,
// shrink, change type, appear or disappear are handled by the FTI-FF
// layout (new blocks written, dropped ones forgotten). At L2 the partner
// receives only the delta, at L3 the group encodes parity of the deltas
// alone, at L4 the deltas are the tasks of the checkpoint's own container.
// A differential checkpoint is committed exactly like a full one; Recover
// reads its image through the chain, every block verified; retention
// never deletes a checkpoint a kept one depends on, and keep_last_ckpt
// flushes a differential L1-L3 checkpoint to L4 as a full file. Rank 0
// logs FTI's statistics line after each checkpoint: "Total CP data: 256.00
// MB, Total dCP update: 25.60 MB, dCP share: 10.00%" (MB of 2^20 bytes, as
// FTI's), with the values as fields (dcp-written, dcp-protected,
// dcp-share); the checkpoint's own line names its parent and layer.
//
// # Snapshot's schedule
//
// [Runtime.Snapshot] chooses the level over time by FTI's rule
// (FTI_Snapshot): at each check, for level i = 1, 2, 3, 4 in turn, level
// i is due when its interval ckpt_li is set and minuteCnt /
// (ckptCnt[i] * ckpt_li) >= 1 in integer division, where ckptCnt[i]
// starts at 1; every due level advances its ckptCnt[i] by one, and the
// checkpoint is taken at the highest due level. Each level thus fires on
// its own fixed schedule, at the multiples of its interval, whether or
// not a higher level fired in between (L1 every 2 and L2 every 3 minutes:
// L1 at 2, L2 at 3, L1 at 4, L2 at 6, L1 at 8, L2 at 9, ...), and a level
// whose interval passed several times during one long iteration fires at
// successive checks until it has caught up. ftigo applies the rule to
// durations: minuteCnt is the elapsed time since the first Snapshot call
// (the slowest rank's, agreed by an Allreduce), ckpt_li its interval
// divided by fast_forward, so intervals below a minute work. FTI checks
// once per "minute", an iteration count estimated from the mean iteration
// time, and counts minutes by checks (by the clock only when an iteration
// takes longer than a minute), so its schedule drifts when iterations
// speed up or slow down; ftigo reads the agreed clock at every check. It
// checks at the iteration predicted from the mean iteration time to be
// the first at or after the next level's deadline, at every iteration
// while a level is behind, and at least every max_sync_intv iterations,
// so every rank decides at the same iteration without a collective call
// in every one. The differential intervals dcp_l1..dcp_l4 have schedules
// of their own, counted the same way; as in FTI, a checkpoint at level l
// is differential (Snapshot returns l+4) when its differential interval is
// due and its full interval is not, and the highest level due wins.
//
// # Concurrency
//
// A [Runtime] belongs to one rank and is used from that rank's goroutine
// only; ranks of an in-process world each have their own. Collective calls
// (Init, Checkpoint, Snapshot, Finalize) must be made by every rank in the
// same order with the same arguments; Protect, DefineDataset, AddSubset,
// StoredSize, Realloc and Close are local, and so are Recover, RecoverVar
// and RecoverVarByName except on a redistributing restart, where every
// rank calls them in the same order (each with the variable it wants).
// Protected memory must not change while Checkpoint or Snapshot runs: it
// is written in place, without a copy (background post-processing reads
// the committed file, not the memory). The poster goroutine of
// asynchronous post-processing owns the runtime's engine while it runs;
// every method that needs it waits for it first. Restart state lives in meta_dir;
// the configuration file is only read.
//
// # API stability
//
// ckpt is ftigo's public API: its exported names and their behaviour (FTI's
// semantics, with the differences documented above) are kept stable. Before
// 1.0 an incompatible change is still possible. Applications use ckpt, comm
// (and comm/mpi), vfd and the format packages (fileformat, sion, gsd, dhdf,
// dhdf/h5, h5ckpt); levels, partner, encode and dataset are ftigo's
// machinery. The types ckpt shows from levels and partner (in WithLevels,
// WithPolicy, WithBuffers, Recovered, Topology) belong to that machinery and
// may change.
package ckpt
