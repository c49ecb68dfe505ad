// Package levels owns how one checkpoint is stored, committed, kept and
// recovered: the [Level] interface that L1 (this package), L2/L3
// (l2*.go, l3*.go: partner copies and Reed-Solomon parity) and L4
// (l4*.go: global storage) implement, the commit protocol, the
// [Manifest] (docs/format/manifest.md), the retention [Policy] and the
// recovery ladder. It does not know the checkpoint file format: the
// runtime (package ckpt) writes each rank's FTI-FF file through a
// [WriteFunc].
//
// # Storage
//
// Each rank has three areas ([Env]): Local (its node's directory under
// ckpt_dir, shared by the ranks of that node), Global (glbl_dir) and Meta
// (meta_dir). Checkpoint number seq lives in directory "ckpt%08d" of each
// area it uses; its manifest is Meta/"ckpt%08d.manifest". A checkpoint
// exists exactly when its manifest does.
//
// # Lifecycle, in call order (every Engine method is collective)
//
//  1. [NewEngine] with the [Env] of this rank and the implemented levels.
//  2. [Engine.Open]: creates the directories, rank 0 reads the manifests
//     (unreadable ones are renamed *.broken) and every rank receives the
//     same list; then each node's lowest rank removes uncommitted
//     checkpoint directories and tmp files of its node, rank 0 those of
//     the global area.
//  3. On a restart, [Engine.Recover]: newest committed checkpoint first,
//     [Level.Recover] on every rank (verify every digest, rebuild from
//     redundancy), a vote; the first checkpoint every rank can read wins,
//     otherwise the next older one, at whatever level, is tried.
//     [Engine.RecoverDeferred] first tries the newest checkpoint in place
//     without reading the data (FTI-FF files recorded by their checksum),
//     for a caller that checks every block while reading and calls
//     Recover on a mismatch.
//  4. [Engine.Checkpoint], as often as wanted:
//     a. every rank writes its data file as "<name>.tmp" and syncs it;
//     its digest is the FTI-FF checksum at L1, or a BLAKE3 of the file
//     computed through a second handle during the fsync; vote. At a
//     [DataReader] level (L2, L3), whose Protect reads the whole file
//     anyway, neither happens here: Protect hashes the file as it reads
//     it and records the digest, and the fsync runs beside Protect and is
//     voted on in b. A level
//     implementing [DataOpener] whose OpensData is true (the inline
//     [Global4], ckpt's default L4) places the data itself instead:
//     [DataOpener.OpenData] (collective) returns the file each rank
//     writes — its task of the L4 container — and the digest is the
//     FTI-FF checksum, or a BLAKE3 read back through that file; vote;
//     b. [Level.Protect] adds redundancy under tmp names, synced — or,
//     for a [DataOpener], [DataOpener.ProtectData] commits what was
//     written and marks the data entry [AttrInContainer] (or, when the
//     vote in a failed, [DataOpener.AbortData] discards it); vote;
//     c. every rank renames its files into place and syncs the
//     directories; vote;
//     d. rank 0 writes the manifest with [vfd.WriteFileAtomic] — the
//     commit point; vote;
//     e. the [Policy] names superseded checkpoints; rank 0 removes their
//     manifests first (collectively agreed), then each node's lowest rank
//     removes their node-local directories, and rank 0 the global ones,
//     in the background ([Engine.Wait]; every collective method waits).
//     A failed vote removes the new files on every rank and returns an
//     error wrapping [ErrVoteFailed] on every rank; a crash anywhere
//     leaves the previous committed set or the new one, and step 2 of the
//     next run removes the leftovers.
//  5. [Engine.Delete] removes a committed checkpoint (Finalize without
//     keep_last_ckpt).
//
// # Implementing a level
//
// [Level.Protect] runs after every data file is written and synced; it
// writes its own files under tmp names, syncs them and appends them to
// [Pending.Files] (a partner copy is held, and listed, by the receiving
// rank; a shared container by one rank). Digests are the BLAKE3 of the
// file's bytes ([FileDigest]) for every checkpoint at L2-L4; only L1 data
// files in FTI-FF record the format's own checksum ([DigestFTIFF]), and
// so does the inline L4 for its tasks, whose container entries carry
// [DigestSION] (metadata checked by the sion reader). [VerifyFile] checks
// every kind, and a data entry marked [AttrInContainer] inside its
// container ([OpenTask] reads such a task). [Level.Recover] checks the files
// of a manifest with [VerifyFile], rebuilds what it can with the commit
// protocol, and returns where this rank reads its data. Both must make
// the same collective calls on every rank whatever fails locally.
//
// A level that keeps files outside the checkpoint's directory ("ckpt%08d"
// of an area) implements [Remover] to delete them.
//
// Offline use (ftigo rebuild): run the same engine inside an in-process
// world of Manifest.Ranks ranks (comm.Run), one goroutine per rank, each
// with the Env of that rank's node; nothing in a level may assume it runs
// inside the application.
//
// # Concurrency
//
// An Engine belongs to one rank and is used by one goroutine at a time;
// its only goroutines are the background removal and the hashing of the
// data file during its fsync.
// Ranks of one node share the Local directory; only the node's lowest
// rank creates, cleans or removes directories there, and no two ranks
// write the same file. Levels are stateless values shared by all ranks.
package levels
