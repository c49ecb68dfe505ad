// Package comm owns communication between the ranks of a parallel job.
//
// # What it owns
//
//   - The [Comm] interface every other ftigo package codes against.
//   - The in-process world of goroutine ranks ([Run], [NewWorld]): the
//     default, and the test vehicle.
//   - Helpers built on the interface alone: [AllgatherBytes],
//     [BcastBytes], [SendChunked] and [RecvChunked], [SendrecvChunked],
//     [NodeMap], [SplitNode].
//   - Typed operations for a solver's own halo exchange and convergence
//     checks: [Allreduce], [AllreduceValue], [Gather], [Allgather],
//     [Scatter], [Isend], [Irecv], [WaitAll].
//   - Rooted collectives for protocols at scale: [GathervBytes],
//     [ScattervBytes], [Reduce], [AllreduceInt64s], and [Agree].
//   - Traffic counters: the [Counter] capability and [CountsOf].
//   - Virtual worlds ([NewMux]): several goroutine ranks in each process
//     of a real communicator. ckpt's head ranks use it.
//
// The MPI implementation is comm/mpi (build tag mpi). Both pass the
// conformance suite in comm/commtest.
//
// # Lifecycle
//
//  1. Make a world. [Run](n, fn, opts...) starts n goroutine ranks and
//     returns the first cause of failure once all have returned.
//     [NewWorld](n, opts...) hands out the n Comms to callers that start
//     the goroutines themselves (and call Abort when one fails). Under
//     MPI, mpi.Init returns the process's Comm.
//  2. Communicate: point to point (Send, Recv, Sendrecv) and collectives
//     (Barrier, Bcast, Allgather, AllreduceInt64, Split). Every rank of a
//     communicator calls its collectives in the same order.
//  3. Close the sub-communicators Split made. Closing the world does
//     nothing.
//
// # The in-process world
//
// Send is synchronous, like MPI_Ssend: it returns once the receiver
// holds the bytes. So a protocol that only works with MPI's eager
// buffering deadlocks in tests, and [WithTimeout]'s watchdog turns that
// into [ErrTimeout]. Messages match on (source, tag) in posting order. A
// message costs one copy, from the sender's buffer into the receiver's.
//
// Collectives meet on one rendezvous per communicator. The last rank to
// arrive computes the result and wakes the others. No rank returns while
// another may still read its buffer. Ranks calling different
// collectives, or disagreeing on lengths or root, all get
// [ErrBadArgument].
//
// Failure never hangs. A rank that returns an error, panics (a
// *[PanicError]), calls Abort or trips the watchdog aborts the whole
// world. Every call blocked or made later, in any communicator derived
// from it, then returns an error matching [ErrAborted]. [WithLogger]
// records the cause once.
//
// Simulated nodes: rank r sits on node "node<r/k>", with k set by
// [WithNodeSize] (default 1). In-process Comms expose it as [NodeIDer].
//
// # Scale
//
// A rank's share of a collective protocol must not grow with the number
// of ranks. Agreement is a fixed-size reduction ([Agree],
// [AllreduceInt64s]). Metadata that one rank writes is gathered to it
// ([GathervBytes]), and each rank gets back only its own part
// ([ScattervBytes]) or a fixed-size [Comm.Bcast]. [SplitNode] finds a
// rank's node without the names of the others. [AllgatherBytes] and
// [NodeMap] hand every rank every rank's bytes: O(Size()) per rank, for
// small jobs and tests only.
//
// [Counter] makes this measurable. The in-process world and comm/mpi
// count, per rank, the messages and bytes it sent and received and the
// collectives it entered, over its world and every sub-communicator
// ([Counts] says how a collective counts). CountsOf returns zero Counts
// for a Comm without the capability. A test or benchmark reads it
// before and after a step; [Counts.Sub] gives the difference.
//
// The in-process world's collectives cost O(Size()) in all, not per
// rank. Each rank hands in its part in O(1). The last to arrive does the
// O(Size()) checks and combination once, and every rank copies out only
// what its result holds.
//
// # The typed operations
//
// They move typed slices ([Elem]: bytes, int32, uint32, int64, uint64,
// float32, float64 and types defined on them), sent as their bytes in the
// machine's order. They follow io/fs: each uses an optional capability of
// the Comm when it has one ([Reducer], [Gatherer], [NonBlocker]). The
// in-process world and comm/mpi implement all three. Otherwise each
// falls back to the byte operations, in rounds of at most 16 MiB. A
// wrapper that embeds a Comm hides its capabilities unless it forwards
// them. Without [NonBlocker], complete an exchange with one [WaitAll]:
// its schedule cannot deadlock.
//
// Mistakes that only some ranks make are an error matching
// [ErrBadArgument] on every rank, never a hang. The ranks agree on their
// lengths before any data moves. A peer out of range, or an unknown op,
// is refused before anything is posted.
//
// In-process reductions combine in rank order, so a float sum is the
// same on every rank and from run to run. Under MPI the order is MPI's.
// Messages above MPI's int count limit ([MaxCount] bytes) go in several
// calls, or as one message of a derived datatype.
//
// # Concurrency
//
// One goroutine per rank talks to a Comm at a time. Different ranks, and
// their sub-communicators, run concurrently. The buffer of a pending
// [Request] belongs to the communicator until it completes. A chunked
// transfer that fails part-way leaves the peer mid-protocol: treat any
// error as fatal for the job. [NewMux] needs a real communicator that
// several goroutines may use at once (MPI_THREAD_MULTIPLE under MPI).
//
// # API stability
//
// comm is public API: the Comm interface, Run and the typed collectives
// are kept stable. Before 1.0 an incompatible change is still possible.
package comm
