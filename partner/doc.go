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
// # Concurrency
//
// A [Topology] is immutable and may be shared by all ranks of an in-process
// world. Transfer functions take one rank's [comm.Comm] and are called by
// every member of the group at the same time, from that rank's goroutine.
// There is no package-level mutable state.
package partner
