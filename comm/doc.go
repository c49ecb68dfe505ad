// Package comm owns communication between the ranks of a parallel job: the
// [Comm] interface every other ftigo package codes against, the in-process
// world of goroutine ranks ([Run], [NewWorld]) that is the default and the
// test vehicle, and helpers built on the interface alone ([AllgatherBytes],
// [BcastBytes], [SendChunked]/[RecvChunked], [SendrecvChunked], [NodeMap]).
// The MPI implementation lives in comm/mpi (build tag mpi); the conformance
// suite both pass is comm/commtest.
//
// # Lifecycle
//
//  1. Make a world: [Run](n, fn, opts...) starts n goroutine ranks and
//     returns the first cause of failure once all have returned; or
//     [NewWorld](n, opts...) hands out the n Comms for callers that start the
//     goroutines themselves (and call Abort when one fails). Under MPI,
//     mpi.Init returns the process's Comm.
//  2. Communicate: point to point (Send, Recv, Sendrecv) and collectives
//     (Barrier, Bcast, Allgather, AllreduceInt64, Split). Collectives are
//     called by every rank of the communicator in the same order.
//  3. Close sub-communicators made by Split; closing the world is a no-op.
//
// # Semantics of the in-process world
//
// Send is synchronous (like MPI_Ssend): it returns once the receiver holds
// the bytes, so a protocol that only works with MPI's eager buffering
// deadlocks in tests, where [WithTimeout]'s watchdog turns it into
// [ErrTimeout]. Messages are matched on (source, tag) in posting order and
// cost one copy, from the sender's buffer straight into the receiver's.
// Collectives meet on one rendezvous per communicator: the last rank to
// arrive computes the result (and, for Split, builds the sub-communicators)
// and wakes the others; Bcast and Allgather then copy in parallel straight
// from the other ranks' buffers, and no rank returns while another may still
// read its buffer (a rank that gives up on an aborted world cancels the
// round first). Ranks calling different collectives, or disagreeing on
// lengths or root, all get [ErrBadArgument].
//
// Failure never hangs: a rank returning an error, panicking (recovered into
// a *[PanicError]), calling Abort or tripping the watchdog aborts the whole
// world, and every call blocked or made later, in any communicator derived
// from it, returns an error matching [ErrAborted] (and the cause).
// [WithLogger] records the cause once.
//
// Simulated nodes: rank r of the world sits on node "node<r/k>" with k set
// by [WithNodeSize] (default 1); in-process Comms expose it as [NodeIDer],
// which [NodeMap] uses when no node-id function is given.
//
// # Concurrency
//
// One goroutine per rank talks to a Comm at a time; different ranks (and
// their sub-communicators) run concurrently. A chunked transfer that fails
// part-way leaves the peer mid-protocol: treat any error as fatal for the
// job (return it from the rank, or Abort).
package comm
