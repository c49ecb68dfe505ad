// Package partner owns the placement of ranks on nodes, sectors and
// groups (FTI's topology), and the group transfers built on it. It is
// ftigo's internal machinery, used by package levels for L2 and L3.
//
// # Topology
//
// Nodes are numbered by first appearance, or by the order of a saved
// table. Each holds exactly node_size ranks, numbered on the node by rank
// order. Consecutive runs of group_size nodes form a sector. A group is
// the ranks with the same node-local index across a sector's nodes, one
// per node. Within a group the ring follows node order: right is group
// rank + 1, left is group rank - 1.
//
// Lifecycle:
//
//  1. [NewTopology] (or [NewTopologyTable]) from the host name of every
//     rank. When ranks are placed on nodes in blocks of node_size,
//     [NewBlockTopology] keeps nothing per rank: the node table (made up
//     names, or given) and the order of the nodes. Every rank of a large
//     run holds one without learning every rank's host.
//  2. [Topology.Validate] with the levels in use.
//  3. On a fresh run, [NodeTable.Marshal] of [Topology.Table] into the
//     meta directory.
//  4. On a restart, [UnmarshalTable] the saved table and call
//     [Topology.Remap]. Surviving hosts keep their node index. A
//     replacement host takes a vanished host's slot, with its groups and
//     files.
//
// # Transfers
//
// Every transfer function is collective over the world communicator.
// Each rank passes its own files ([FileInfo]: a path through a vfd
// driver, with the size and BLAKE3 recorded for it).
//
//   - [CopyToPartner] (L2) streams each rank's data file to its right
//     neighbour in block_size pieces. The receiver writes and syncs the
//     copy and checks its hash.
//   - [RecoverPartner] (L2 restart) restores lost data files from their
//     copies and re-sends lost copies from their originals, in one
//     two-way transfer. Ranks whose file and copy are both lost get
//     [ErrUnrecoverable].
//   - [EncodeGroup] (L3) places parity by the group's [encode.Layout]:
//     FTI's full scheme for m = k, rotated stripes for m < k. Each
//     member writes its parity file (docs/format/parity.md).
//   - [RebuildGroup] (L3 restart) sends each member that lost a file the
//     surviving units its stripes need, and rebuilds its files. More
//     losses than the parity covers give [ErrUnrecoverable].
//   - [RebuildL2Offline] and [RebuildL3Offline] do the same for a job
//     that is not running (ftigo rebuild).
//
// Each byte is read and hashed once. A file whose recorded hash is its
// format's digest ([FileInfo.Format]) is checked by that [Format]
// instead: its preamble goes ahead, and the receiver checks every byte
// as it arrives. partner knows no format; levels supplies FTI-FF's. How
// these transfers serve a checkpoint and a restart is in
// docs/protocol/checkpoint.md and docs/protocol/restart.md.
//
// Partner copies and parity files are dropped from the page cache
// behind the write ([vfd.DropCache]): nobody reads them unless a node is
// lost. A file then holds at most 48 MiB of the cache, however large it
// is. A data file restored from its copy stays cached, since the restart
// reads it next. [Options].KeepCache keeps everything cached, as FTI
// does. The measurements are in docs/performance-archive.md.
//
// A rank that fails locally (an I/O error, a bad hash) keeps taking part
// in the exchange with empty or zero blocks. It returns its error at the
// end, so no peer hangs, and the caller's vote rejects the checkpoint.
//
// # Concurrency
//
// A [Topology] is immutable and may be shared by all ranks of an
// in-process world. Transfer functions take one rank's [comm.Comm]. Every
// member of the group calls them at the same time, each from its rank's
// goroutine. There is no package-level mutable state.
//
// # API stability
//
// partner is internal: only ftigo's own packages can import it, and its
// names may change in any release. Applications use package ckpt.
package partner
