// Package exchange holds the collectives whose cost per rank does not
// grow with the number of ranks. ftigo's protocols use them where a
// plain Allgather would hand every rank every rank's data. It is
// ftigo's internal machinery, on package comm alone.
//
// # What it owns
//
//   - [Sparse]: personalised messages to any ranks. The receivers need
//     not know who sends to them. The messages are routed in
//     ceil(log2 P) rounds of pairwise transfers: in round j a rank passes
//     on the messages whose remaining distance has bit j set. A rank
//     moves its own messages and those routed through it, each at most
//     log2 P times.
//   - [Merge]: a reduction of variable-size values up a binomial tree,
//     its result broadcast. The caller's merge function combines two
//     values, the lower ranks' first. A value that stays small (a set
//     of definitions, the first few errors) costs each rank O(log P)
//     steps of that size.
//   - [ExScan]: the exclusive prefix sum of one integer per rank, by
//     recursive doubling.
//
// Every function is collective over its communicator: every rank calls
// it, with the same tag. Errors come from the communicator only; they
// end the operation on the rank that saw them.
//
// # Concurrency
//
// One goroutine per rank calls a function at a time, as for comm.Comm.
//
// # API stability
//
// Internal: the API may change in any release.
package exchange
