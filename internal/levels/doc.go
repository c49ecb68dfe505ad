// Package levels owns how one checkpoint is stored, committed, kept and
// recovered: the [Level] interface that L1 (this package), L2/L3
// (l2*.go, l3*.go: partner copies and Reed-Solomon parity) and L4
// (l4*.go: global storage) implement, the commit protocol, the
// [Manifest] and its redundant metadata (docs/format/manifest.md), the
// retention [Policy] and the recovery ladder. It does not know the checkpoint file format: the
// runtime (package ckpt) writes each rank's FTI-FF file through a
// [WriteFunc].
//
// # Storage
//
// Each rank has three areas ([Env]): Local (its node's directory under
// ckpt_dir, shared by the ranks of that node), Global (glbl_dir) and Meta
// (meta_dir). Checkpoint number seq lives in directory "ckpt%08d" of each
// area it uses.
//
// # Metadata, and when a checkpoint exists
//
// The manifest of checkpoint seq is kept twice: the primary
// Meta/"ckpt%08d.manifest" and the replica Global/[ReplicaDir]/
// "ckpt%08d.manifest" (a subdirectory, so meta_dir may be glbl_dir). A
// copy is valid when it parses, its hash checks and it holds the seq of
// its name ([CopyState]). Three markers in Meta record intent: the intent
// marker "ckpt%08d.pending", durable before any file of the checkpoint
// has a published name and removed once both copies are durable; the
// deletion marker "ckpt%08d.deleting" (the primary renamed), durable
// before the last copy goes and removed once every file has; and the
// superseded marker "ckpt%08d.superseded-%08d", durable with the newer
// checkpoint's primary, which makes the older checkpoint a deletion
// exactly when the newer one is committed or being deleted. A checkpoint
// is committed when a valid copy exists and neither a deletion marker
// nor such a superseded marker does. Start-up
// ([Engine.Open], with [ScanCheckpoints] and [SeqScan.State]) then
// knows, for every checkpoint number with anything left on disk:
//
//   - a deletion marker, or a superseded marker naming a committed or
//     deleting checkpoint: the deletion is finished (a superseded
//     marker naming anything else is stale and goes);
//   - a valid copy: committed; a missing, damaged or foreign (swapped)
//     copy is rewritten from the valid one, the damaged bytes kept as
//     *.broken, with a warning naming the file and why; an intent marker
//     beside it goes. Two valid copies that describe different
//     checkpoints (one is another run's) are both kept: [Engine.Recover]
//     tries the other when the chosen one does not recover, then
//     rewrites the one it did not use. While it tries either, no level
//     removes or replaces a file that does not match the copy tried (it
//     may be the other copy's);
//   - an intent marker and no valid copy, or nothing but tmp files and
//     empty directories: never committed, removed;
//   - published files or damaged copies, no valid copy, no marker: the
//     metadata was lost. Open changes nothing and returns, on every rank,
//     an error wrapping [ErrMetadataLost] naming the checkpoint, its
//     copies and its surviving files: start-up never guesses, so a run
//     never starts fresh, nor silently falls back, while the files of a
//     committed checkpoint exist.
//
// Meta also holds [LockName], the lock the runtime takes (package ckpt).
//
// # Lifecycle, in call order (every Engine method is collective)
//
//  1. [NewEngine] with the [Env] of this rank and the implemented levels.
//  2. [Engine.Open]: creates the directories; each node's lowest rank
//     lists its node's checkpoint directories for rank 0, which reads the
//     metadata, classifies every checkpoint number as above and repairs;
//     every rank receives the committed list; then each node's lowest rank
//     removes uncommitted checkpoint directories and tmp files of its node,
//     rank 0 those of the global area and, last, the markers; finally the
//     directories are synced, all the way up, and with the meta directory
//     the first checkpoint's intent marker, written ahead.
//  3. On a restart, [Engine.Recover]: newest committed checkpoint first,
//     [Level.Recover] on every rank (verify every digest, rebuild from
//     redundancy; see "Reading the data once" below), a vote — or, for a checkpoint of another shape, the
//     verification pass described below; the first checkpoint every rank can read wins,
//     otherwise the next older one, at whatever level, is tried. The
//     checkpoints passed over are remembered ([Engine.Skipped]); retention
//     drops them once a newer one commits, and [Engine.Recoverable] leaves
//     them out, so none is ever taken for the newest.
//  4. [Engine.Checkpoint], as often as wanted:
//     a. every rank votes that rank 0 made the intent marker durable
//     ahead (at Open, or after the previous commit); then every rank
//     writes its data file under its final name and syncs it beside the
//     syncs of the checkpoint directory and of the area directory; a
//     [Prenamer] level's files (L2's partner copy the rank receives,
//     L3's parity file) are created empty under their final names beside
//     the data file before those syncs, so that their names are durable
//     too. When the marker was not written ahead (after a failed
//     checkpoint), rank 0 writes it while the data is written as
//     "<name>.tmp", renamed in c, and nothing is created ahead. The
//     digest is the FTI-FF checksum at L1-L3, or a BLAKE3 of the file
//     computed through a second handle during the fsync; vote. At a
//     [DataReader] level (L2, L3), whose Protect reads the whole file
//     anyway, the fsyncs run beside Protect and are voted on in b, and no
//     BLAKE3 is computed here: an FTI-FF file's checksum is recorded (L2's
//     partner copy is checked against it as it arrives, L3's encoder
//     checks the bytes it reads against it), another file's digest is left to Protect, which
//     hashes the file as it reads it and records it. A level implementing
//     [DataOpener] whose OpensData is true (the inline [Global4], ckpt's
//     default L4) places the data itself instead: [DataOpener.OpenData]
//     (collective) returns the file each rank writes — its task of the L4
//     container — and the digest is the FTI-FF checksum, or a BLAKE3 read
//     back through that file; vote;
//     b. [Level.Protect] adds redundancy, synced: in place into the
//     files created in a, under tmp names otherwise — or,
//     for a [DataOpener], [DataOpener.ProtectData] commits what was
//     written and marks the data entry [AttrInContainer] (or, when the
//     vote in a failed, [DataOpener.AbortData] discards it); vote;
//     c. every rank's file list is gathered on every rank; when some rank
//     has files under tmp names, every rank renames its files into place
//     and syncs their directories (all at once); vote (nothing to do at
//     L1, L2 and L3 when the marker was written ahead);
//     d. rank 0 creates the superseded markers of the checkpoints the
//     [Policy] drops once this one commits, then writes both manifest
//     copies under their final names and syncs each beside its directory,
//     all at once — the commit point is the first copy durable; vote;
//     then rank 0, in the background, removes the intent marker and
//     writes the next checkpoint's (and removes the deletion markers of
//     checkpoints every rank has finished removing);
//     e. the dropped checkpoints stop being committed on every rank; in
//     the background rank 0 turns their superseded markers into deletion
//     markers (primaries renamed, synced, replicas removed) while each
//     node's lowest rank removes their node-local directories, and rank 0
//     the global ones ([Engine.Wait]; every collective method waits).
//     A failed vote removes the new files and directories on every rank,
//     then the intent marker, and returns an error wrapping
//     [ErrVoteFailed] on every rank; a crash anywhere leaves the previous
//     committed set or the new one, and step 2 of the next run removes
//     the leftovers (an uncommitted checkpoint's directories whole,
//     whatever names they hold: a sequence number is never reused over
//     a committed checkpoint's files). On the critical path of an L1, L2
//     or L3 checkpoint this is two rounds of device flushes (a with b at
//     L2 and L3, then d), as for a raw write, fsync and directory fsync;
//     so does the inline L4 (its container's data and metadata synced
//     together in b, under the final names when the marker was written
//     ahead, [Pending.Final]; then d).
//  5. [Engine.Delete] removes a committed checkpoint (Finalize);
//     [Engine.Keep] rewrites both copies marked Kept (keep_last_ckpt);
//     [Engine.Raise] raises a committed L1 checkpoint to L2-L4 (the
//     level's Protect on the published data files, a vote; then the
//     renames and their directory syncs while rank 0 writes and syncs
//     both copies at the level under tmp names, one vote on both, and
//     the copies renamed over the L1 ones, primary first, each followed
//     by its directory's sync; then retention
//     at the level, whose removal runs in the background as after
//     Checkpoint), over a communicator of the caller's choice
//     (asynchronous post-processing). The data file is checked against
//     its L1 digest in the level's own read pass, so it is read once:
//     the partner copy, the encoder and the L4 copy show every byte they
//     read to a tap ([partner.FileInfo.Tap]) that verifies an FTI-FF file
//     as it streams past ([fileformat.Verifier]: block hashes, structure,
//     checksum) or hashes a BLAKE3-digested one; a file damaged since its
//     L1 commit fails the vote ([ErrDigestMismatch] on its rank) and is
//     never raised. At L2 an FTI-FF file needs no tap: each partner copy
//     is checked against the L1 checksum as it arrives, and the sender
//     reads the file's metadata against it. The manifest records the data
//     file's L1 digest unchanged, as a synchronous checkpoint at the level
//     does (an earlier version recorded the BLAKE3 at L2 and L3 and kept
//     the checksum under [AttrL1Digest], which start-up still reads); [Engine.RaiseFor] does the same
//     without retention for an engine that does not hold the checkpoint
//     (a head rank raising it on behalf of an application rank), and
//     [Engine.AdoptRaised] records the result with retention on the ranks that
//     committed it;
//     [Engine.Settle] waits for the background removal on every rank and
//     removes the deletion markers.
//
// # Differential checkpoints
//
// [Engine.Checkpoint] with [Differential] commits a differential
// checkpoint (docs/format/dcp.md): each rank's data file is a delta file
// (fileformat's WriteDelta, marked [FormatDelta] with its image's checksum
// under [AttrImage]) built on a parent, a recoverable committed
// checkpoint at the same level. Levels protect it as any data file (the
// partner copy, the parity, the container hold the delta only). The
// manifest (version 2) records the chain, every checkpoint it depends on
// ([DCP]): retention removes from what the [Policy] drops every
// checkpoint a remaining one depends on and uncommits the rest newest
// first, so a crash never leaves a committed checkpoint whose chain is
// gone; [Engine.Delete] refuses a checkpoint in use ([ErrInUse]).
// Recovery of a differential checkpoint recovers every layer with its own
// level, oldest first, then checks the chain's links ([OpenSource] opens
// the image: fileformat.OpenImage); any layer unrecoverable makes the
// checkpoint unrecoverable. [ImageWrite] and [Engine.Compact] write a
// chain's image as a new full checkpoint (compaction; the keep_last_ckpt
// flush of a differential checkpoint).
//
// # Reading the data once
//
// A restart must verify every byte before the run goes on, and must
// still be able to fall back (to a redundant copy, collectively at L3, or
// to an older checkpoint) when a byte is bad; [Level.Recover] is where
// both are possible, since the runtime's Recover is local. So the
// verification stays in Level.Recover, and under [Env.ImageLimit] it
// keeps what it read: the rank's data file (or its L4 task, read straight
// from the container) is loaded into memory by a background reader
// ([vfd.Load]) while the verifier hashes each piece as it arrives (the
// FTI-FF checksum and block hashes, or the BLAKE3 of the bytes), and the
// verified bytes come back in [Source.Image] (placed so that the data
// after the FTI-FF header starts a memory page, [vfd.LoadAligned]);
// [OpenSource] serves them, and the runtime restores the variables from
// them without hashing again (fileformat.WithVerifiedData), taking over
// their memory pages rather than copying them (fileformat.WithMoveOut),
// then lets go of them. [Engine.Open] starts the device reading each
// rank's data file of the newest committed checkpoint
// ([vfd.StartReadahead]) while the collective start-up goes on; when
// that checkpoint is an L1 one whose data file (of at most 128 MiB)
// becomes an image, Open
// instead starts its whole verification in the background as soon as the
// start-up plan is known (the reading, page faults and hashing then
// overlap with the cleaning and directory syncs), and [Local1.Recover]
// takes the verified image only for the same checkpoint and file; when
// that verification failed, Recover verifies the file again itself, so
// errors and fallbacks are unchanged. [Engine.Wait] (every collective
// method, Release) drops an image not taken. The
// image is read in pieces of at most 4 MiB, the verifier's segment. Each
// byte is read from storage once. A file that fails never becomes an image: the level
// rebuilds it or the engine moves to an older checkpoint as before. At
// L2 a data file whose partner lost its copy is read once, into the
// image, checked as it is sent to that partner (its trailer says whether
// it checked out), and a lost data file is restored from its partner copy
// as soon as the ranks know which files are there: the receiver checks
// the copy as it arrives (the copy is not read beforehand), and it is
// kept as the image, while the other files are checked beside that
// transfer (partner.RecoverPartner); at L3 the image feeds the rebuild, and a rebuilt data
// file written in order (always with m = k) is hashed, and kept as the
// image, as it is written, so it is not read back. A file above the
// limit (restored from its L2 copy, rebuilt or intact), a rebuilt L3 data
// file not written in order, and the layers of a differential chain are
// read from storage by the runtime, which checks every block again. The alternative, checking only metadata at
// recovery and hashing while the runtime copies, reads each byte once
// without holding memory, but finds a bad block only where nothing can
// be rebuilt or fallen back to; the limit bounds the memory instead.
//
// # Implementing a level
//
// [Level.Protect] runs after every data file is written (and, but for a
// [DataReader], synced); it writes its own files under tmp names — in
// place for the names a [Prenamer] gave and the engine created
// ([Pending.FileSuffix]) — syncs them and appends them to
// [Pending.Files] (a partner copy is held, and listed, by the receiving
// rank; a shared container by one rank). Files written into a committed
// checkpoint's directories ([Engine.Raise], [Level.Recover]) always
// go under tmp names, renamed once synced: no intent marker covers them.
// A level that places its files itself writes them under their final
// names when [Pending.Final] allows and records them with
// [Pending.WroteFinal] (the L4 container). Digests are the BLAKE3 of the
// file's bytes ([FileDigest]) for every checkpoint at L2-L4, except that
// L1-L3 data files in FTI-FF record the format's own checksum
// ([DigestFTIFF]), as do L2 partner copies of them (checked as they
// arrive against the block hashes, the file's preamble sent ahead: a
// [partner.Format]; an L3 data file rebuilt from parity is checked by
// the same format), and so does the inline L4 for its tasks, whose container entries carry
// [DigestSION] (metadata checked by the sion reader). [VerifyFile] checks
// every kind, and a data entry marked [AttrInContainer] inside its
// container ([OpenTask] reads such a task). [Level.Recover] checks the files
// of a manifest with [VerifyFile] (the rank's own data under
// [Env.ImageLimit] into memory, returned in [Source.Image]), rebuilds what
// it can with the commit protocol, and returns where this rank reads its
// data. Both must make
// the same collective calls on every rank whatever fails locally.
//
// A level that keeps files outside the checkpoint's directory ("ckpt%08d"
// of an area) implements [Remover] to delete them.
//
// [Global4H5] is an L4 written as one HDF5 file (package h5ckpt): a
// [DataOpener] whose OpenData hands every rank an [H5File] naming the
// file, which the runtime's WriteFunc writes collectively; its entries
// carry digest kind [DigestH5] (the file's tables hash).
//
// # Checkpoints of another shape
//
// With [Config].NodeStore (the local area of any node n, as this rank
// sees it), [Engine.Recover] also recovers a checkpoint written by
// another number of ranks, or by ranks placed otherwise ([Engine.OtherShape]:
// node size, group size, node table, or ranks moved between nodes; for
// the same rank count only after the level's own recovery failed): a
// verification pass (reshape.go) in which the lowest rank of each node
// lists the checkpoint's files in the old node directories it sees, and
// every old rank's data — its data file, an L2 partner copy, its L4 task
// or the L4 HDF5 file — is verified completely by one rank that sees it,
// the next source tried when one fails; at L2/L3 a rank that sees every
// surviving node directory first rebuilds lost files with the level's
// [OfflineRebuilder]. [Engine.Reshaped] then says, per old rank, where
// its data is, which rank verified it and which ranks can read it
// themselves; the runtime redistributes the bytes. Under [Env.ImageLimit]
// (the budget of all the files a rank verifies) the verifying rank reads
// a file into memory as it verifies it ([ReshapeSource.Image]) and is
// then the only rank that reads it: the others get their bytes from it,
// so each byte is read from storage once. Nothing is rebuilt for
// redundancy's sake, and the checkpoint's directories in node directories
// this run does not have are removed with it when it is superseded.
//
// Offline use (ftigo rebuild): run the same engine inside an in-process
// world of Manifest.Ranks ranks (comm.Run), one goroutine per rank, each
// with the Env of that rank's node; nothing in a level may assume it runs
// inside the application.
//
// # Concurrency
//
// An Engine belongs to one rank and is used by one goroutine at a time;
// its only goroutines are the background removal, the hashing of the
// data file during its fsync, the directory syncs beside the data file's
// fsync and of a publish and, on rank 0, the writing of the intent marker
// (ahead, in the background, or beside the data), of the manifest copies
// beside each other and their directories' syncs, and the turning of
// superseded markers into deletion markers; a restart's
// image is loaded by a goroutine of [vfd.Load] while the verifier hashes.
// [Engine.Release] waits for them and removes the intent marker written
// ahead, for a run that ends without [Engine.Settle].
// Ranks of one node share the Local directory; only the node's lowest
// rank creates, cleans or removes directories there, and no two ranks
// write the same file. Levels are stateless values shared by all ranks.
//
// # API stability
//
// levels is ftigo's machinery, not public API: it is exported for ckpt,
// cmd/ftigo and the tests, and its exported names may change in any release,
// before or after 1.0. Applications use package ckpt (and comm, vfd and the
// format packages).
package levels
