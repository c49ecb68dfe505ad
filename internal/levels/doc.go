// Package levels owns how one checkpoint is stored, committed, kept and
// recovered. It is ftigo's internal machinery: package ckpt is its user.
//
// # What it owns
//
//   - The [Level] interface and its implementations: [Local1] (L1),
//     [Partner2] (L2, partner copies), [RS3] (L3, Reed-Solomon parity),
//     [Global4] (L4, one SIONlib container) and [Global4H5] (L4 as one
//     HDF5 file). Optional capabilities are small interfaces beside
//     [Level], found by type assertion.
//   - The [Engine]: the commit protocol, retention by a [Policy], start-up
//     and the recovery ladder, differential chains, and restarts from a
//     checkpoint of another shape.
//   - The [Manifest] and the metadata around it: a root naming parts,
//     each part the files of a block of ranks, two copies of each, and
//     the markers (docs/format/manifest.md). An engine's manifests are
//     views: the shared fields and this rank's block, never every
//     rank's files ([Manifest.Part], [LoadFull]).
//   - The checks of every file a manifest lists ([VerifyFile]).
//
// The runtime writes each rank's data file through a [WriteFunc]. The
// engine does not choose what the file holds. It does know FTI-FF:
// it records an FTI-FF file's checksum as its digest, and verifies such
// files at recovery, in a raise and on another shape, all through
// package fileformat. It opens SIONlib containers through package sion
// and HDF5 checkpoints through package h5ckpt.
//
// The protocols are specified in docs/: the checkpoint's steps and the
// contract of a level in docs/protocol/checkpoint.md, start-up and
// recovery in docs/protocol/restart.md, background post-processing in
// docs/protocol/background.md. The map of the code is
// docs/architecture.md.
//
// # Lifecycle
//
// Every [Engine] method is collective: all ranks call it in the same
// order.
//
//  1. [NewEngine] with this rank's [Env] (its local, global and meta
//     areas, communicator and topology) and the levels in use.
//  2. [Engine.Open] puts the metadata in order. It repairs a damaged
//     manifest copy from the other and removes what a crashed run left.
//     Lost metadata is an error wrapping [ErrMetadataLost].
//  3. On a restart, [Engine.Recover] returns the newest checkpoint every
//     rank can recover, with this rank's data ([Source]). Every digest is
//     verified on the way.
//  4. [Engine.Checkpoint], as often as wanted. A failed vote returns an
//     error wrapping [ErrVoteFailed] on every rank and leaves the
//     committed checkpoints as they were.
//  5. Asynchronous post-processing: [Engine.Raise] raises a committed L1
//     checkpoint to its level, over a communicator of the caller's
//     choice. A head raises it for an application rank with
//     [Engine.RaiseFor], and that rank records the result with
//     [Engine.AdoptRaised].
//  6. At the end: [Engine.Delete], [Engine.Keep] (keep_last_ckpt),
//     [Engine.Settle] for the background removals, or [Engine.Release]
//     for a run that stops without settling.
//
// Offline use (ftigo rebuild) runs the same engine in an in-process
// world of the checkpoint's ranks, one goroutine each, with the [Env] of
// that rank's node. Nothing in a level may assume it runs inside the
// application.
//
// # Concurrency
//
// An [Engine] belongs to one rank and is used by one goroutine at a
// time. It starts goroutines of its own:
//
//   - the background removal of superseded checkpoints;
//   - the hashing of a data file during its fsync;
//   - the directory syncs beside a data file's fsync and a publication;
//   - on a part's leader, the two copies of its part and their
//     directory syncs;
//   - on rank 0, the intent marker, the two root copies and their
//     directory syncs, and the turning of superseded markers into
//     deletion markers;
//   - at a restart, the loading of the rank's image ([vfd.Load]).
//
// [Engine.Wait] waits for the background removal; every collective
// method waits first. [Engine.Release] waits for everything.
//
// Ranks of one node share the local directory. Only the node's lowest
// rank creates, cleans or removes directories there, and no two ranks
// write the same file. Levels are stateless values shared by all ranks.
//
// # API stability
//
// levels is internal: only ftigo's own packages can import it, and its
// names may change in any release. Applications use package ckpt.
package levels
