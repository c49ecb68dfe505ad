// Package comm owns communication between the ranks of a parallel job: the
// [Comm] interface every other ftigo package codes against, the in-process
// world of goroutine ranks ([Run], [NewWorld]) that is the default and the
// test vehicle, helpers built on the interface alone ([AllgatherBytes],
// [BcastBytes], [SendChunked]/[RecvChunked], [SendrecvChunked], [NodeMap]),
// and the typed operations a solver needs for its own halo exchange and
// convergence checks ([Allreduce], [AllreduceValue], [Gather], [Allgather],
// [Scatter], [Isend], [Irecv], [WaitAll]). The MPI implementation lives in
// comm/mpi (build tag mpi); the conformance suite both pass is
// comm/commtest.
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
// # Operations for solvers
//
// [Comm] moves bytes; the package functions below move typed slices
// ([Elem]: bytes, int32, uint32, int64, uint64, float32, float64 and types
// defined on them, sent as their bytes in the machine's order), so a solver
// needs no conversions:
//
//   - [Allreduce] combines int64 or float64 vectors element by element with
//     Min, Max or Sum, and returns the result on every rank (recv may be
//     send: in place); [AllreduceValue] does one value, the convergence
//     check AllreduceValue(c, localChange, Max).
//   - [Gather], [Allgather] and [Scatter] move typed slices whose lengths
//     may differ from rank to rank (bands of rows), concatenated or split in
//     rank order.
//   - [Isend] and [Irecv] post a send or a receive and return a [Request];
//     its Wait (or Test, or [WaitAll] over several) completes it. The buffer
//     of a request belongs to the communicator until then: do not read or
//     write it, even a send's. A halo exchange that posts its receives and
//     sends and then waits for all of them cannot deadlock, whatever order
//     each rank posts in.
//
// They follow io/fs: each uses an optional capability of the Comm when it
// has one ([Reducer], [Gatherer], [NonBlocker]: the in-process world and
// comm/mpi implement all three natively, the latter with MPI_Allreduce on
// MPI_INT64_T/MPI_DOUBLE, MPI_Gatherv/Allgatherv/Scatterv and
// MPI_Isend/Irecv/Wait/Test) and otherwise falls back to the byte
// operations: Allgather rounds for reductions and gathers, Bcast rounds for
// Scatter (each round at most 16 MiB over all ranks, so memory stays
// bounded and no call nears MPI's count limit), and, for requests, running
// them when they are waited on. Without [NonBlocker], complete an exchange
// with one WaitAll: it runs its requests per peer in increasing rank order,
// pairing sends and receives into Sendrecv calls, a schedule that cannot
// deadlock. A wrapper that embeds a Comm hides its capabilities (it gets
// the fallbacks) unless it forwards them.
//
// Mistakes that only some ranks make (lengths that differ between ranks
// or do not add up, send and recv overlapping, ranks disagreeing on root)
// are an error matching [ErrBadArgument] on every rank, never a hang: the
// ranks agree on their lengths before any data moves (in-process inside the
// collective's rendezvous, under MPI in the same first call for a
// reduction, in one Allgather of lengths for the v-collectives). A peer
// out of range for Isend or Irecv, or an unknown op, is refused at once,
// before anything is posted (every rank passing the same unknown op gets
// the same error). On an aborted world every call, and every Wait on a
// pending request, returns [ErrAborted].
//
// Order of reduction: the in-process world (and the fallback) combines in
// rank order, ((v0 op v1) op v2) ..., computing each element once for all
// ranks, so a float sum is the same on every rank and from run to run for
// a given number of ranks. Under MPI the order is MPI's; Open MPI and
// MPICH give every rank the same result, but not necessarily the rank-order
// sum. In-process Min and Max follow Go's min and max (a NaN wins, -0 is
// less than +0); MPI's treatment of NaN and signed zeros may differ.
//
// Messages above MPI's int count limit ([MaxCount] bytes): reductions go in
// calls of at most that many bytes, a non-blocking message
// travels as one message of a derived datatype (so it still matches one
// receive), and a gather whose total exceeds it takes the fallback.
//
// # Concurrency
//
// One goroutine per rank talks to a Comm at a time; different ranks (and
// their sub-communicators) run concurrently. A chunked transfer that fails
// part-way leaves the peer mid-protocol: treat any error as fatal for the
// job (return it from the rank, or Abort).
//
// # Virtual worlds
//
// [NewMux] hosts several goroutine ranks in each process of a real
// communicator: a virtual world whose Comms (one per hosted rank) pass
// the conformance suite like any other. ckpt's head ranks use it to run
// the post-processing of each application rank of their node as a
// goroutine that talks to the others as that rank would. It needs a real
// communicator that several goroutines of a process may use at once on
// different sub-communicators (MPI_THREAD_MULTIPLE under MPI).
//
// # API stability
//
// comm is public API: the Comm interface, Run and the typed collectives are
// kept stable. Before 1.0 an incompatible change is still possible.
// Applications use ckpt, comm (and comm/mpi), vfd and the format packages
// (fileformat, sion, gsd, dhdf, dhdf/h5, h5ckpt); levels, partner, encode
// and dataset are ftigo's machinery.
package comm
