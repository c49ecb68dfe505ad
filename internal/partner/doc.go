// Package partner owns the placement of ranks on nodes, sectors and groups
// (FTI's topology) and the group transfers built on it: the L2 partner copy
// (every rank's file streamed to its right neighbour in the group ring) and
// the L3 distributed Reed-Solomon encoding of a group's files, with the
// matching recovery and an offline rebuild that needs no running job.
//
// # Topology
//
// Lifecycle: [NewTopology] (or [NewTopologyTable]) from the host name of every
// rank; [Topology.Validate] with the levels in use; [NodeTable.Marshal] of
// [Topology.Table] into the meta directory on a fresh run. On a restart,
// [UnmarshalTable] the saved table and call [Topology.Remap] so surviving
// hosts keep their node index and each replacement host takes a vanished
// host's slot (and with it that host's groups and files).
//
// Placement: nodes are numbered (first appearance or table order); each holds
// exactly node_size ranks, numbered on the node by rank order; consecutive
// runs of group_size nodes form a sector; a group is the ranks with the same
// node-local index across a sector's nodes, one per node; within a group the
// ring order is node order, right = group rank + 1, left = group rank - 1.
//
// # Transfers
//
// Every transfer function is collective over the world communicator: all
// ranks call it together, each with its own files ([FileInfo]: a path
// through a vfd driver, with the size and BLAKE3 recorded for it).
//
//   - L2 checkpoint: [CopyToPartner] streams each rank's data file to its
//     right neighbour in block_size pieces (Sendrecv around the ring, a
//     read-ahead and a write-behind goroutine, a few blocks in memory);
//     the receiver writes the copy under the name it is given (levels
//     gives a tmp name, or the final name once the checkpoint's intent
//     marker makes that safe), syncs it and checks
//     its hash against the sender's recorded one; the sender hashes what
//     it reads as well (unless [Options].SkipSourceHash). A file whose
//     recorded hash is its format's digest ([FileInfo.Format]: levels'
//     FTI-FF checksum) is not hashed by the sender: its preamble (for
//     FTI-FF the header, metadata and file block) goes ahead of the bytes
//     and the receiver's [Checker] checks every byte against it as it
//     arrives, one pass in all; the copy records the same digest
//     ([Copy.Formatted]). partner knows no format: the caller supplies
//     the [Format].
//   - L2 recovery: [RecoverPartner] tells both neighbours which of its
//     data file and held copy are there, restores missing originals from
//     their copies (checked by the receiver as they arrive, not read
//     beforehand) while it re-sends missing copies from their originals
//     (one two-way transfer; an original is checked as it is read to be
//     sent, and the copy again as it arrives), and checks every other
//     file in the background; a second
//     round of flags repairs what failed its check (tmp, sync, hash
//     check, rename each time), and reports ranks whose file and copy are
//     both lost with [ErrUnrecoverable]. Each byte is read and hashed once.
//     Files with a [FileInfo.Format] are checked by it, at rest and as
//     they arrive (their preamble sent ahead); a holder that cannot read
//     its file's preamble sends its reason instead, which the receiver
//     reports (naming the damaged file and offset). A file whose own
//     entry records another kind of hash than the sender's (a manifest
//     mixing format digests and BLAKE3) is checked against the
//     receiver's entry once received.
//   - L3 checkpoint: [EncodeGroup] splits the world into group
//     communicators and places parity by the group's [encode.Layout]:
//     FTI's full scheme for m = k (member j holds parity shard j of the
//     whole files) or SCR-style rotated stripes for m < k (every member
//     holds m/(k-m) of a file of parity and any m members may be lost).
//     Row by row, in k shifts of a pairwise exchange, every data unit
//     reaches the members holding parity of its stripe, which keep the
//     row's units and combine them into their parity units in one pass
//     ([encode.Row.Combine]); each member writes its parity file with its
//     header trailer (docs/format/parity.md).
//     A data file with a [FileInfo.Format] is read without being hashed;
//     the parity is hashed as it is written.
//   - L3 recovery: [RebuildGroup] gathers erasure flags over the group and,
//     if no stripe lost more shards than it has parity, sends each member
//     that lost a file just the surviving units its stripes need, and
//     rebuilds its files, verified against the recorded hashes (a data
//     file with a [FileInfo.Format] by the format, from the rebuilt image
//     when [Options].ImageLimit kept one, else read back); otherwise
//     every member returns [ErrUnrecoverable].
//   - Offline: [RebuildL2Offline] does the L2 restores from one process
//     that sees every node's files; [RebuildL3Offline] runs [RebuildGroup]
//     for every rank in an in-process world.
//
// Page cache: the partner copies and parity files a checkpoint writes,
// and the copies re-sent at recovery, are dropped from the page cache
// behind the write: the writer starts the writeback of every 16 MiB (4
// MiB for a parity file, whose final sync ends the checkpoint: less is
// left for it to wait for) and drops each piece once 32 MiB follow it
// ([vfd.DropCache]), then the rest after the final sync, so a file holds
// at most 48 MiB of the cache (a parity file 36 MiB) however large it is. Nobody reads these files unless a node is lost,
// and a writer that reuses its own pages spends far less kernel time
// than one that takes fresh memory for every byte (docs/performance.md,
// "Partner and parity writes"). A data file restored from its copy stays
// cached, since the restart reads it next; [Options].KeepCache keeps
// everything cached, as FTI does.
//
// A rank that fails locally (I/O error, bad hash) keeps taking part in the
// exchange with empty or zero blocks and returns its error at the end, so
// no peer hangs; the caller's commit vote then rejects the checkpoint.
//
// # Concurrency
//
// A [Topology] is immutable and may be shared by all ranks of an in-process
// world. Transfer functions take one rank's [comm.Comm] and are called by
// every member of the group at the same time, from that rank's goroutine.
// There is no package-level mutable state.
//
// # API stability
//
// partner is ftigo's machinery, not public API: it is exported for ckpt,
// cmd/ftigo and the tests, and its exported names may change in any release,
// before or after 1.0. Applications use package ckpt (and comm, vfd and the
// format packages).
package partner
