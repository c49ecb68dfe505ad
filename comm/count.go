package comm

import "sync/atomic"

// Counts is the traffic of one rank, summed over its world and every
// communicator split from it. Scale tests and benchmarks read it to
// check that a rank's share of a protocol does not grow with the number
// of ranks.
//
// Point-to-point calls count each message and its bytes. Collectives
// count their payload as the call's semantics move it, not as an
// implementation's tree does: a message is one peer's distinct piece of
// data. So a Bcast is one message received by every rank but root, and
// one sent by root. An Allgather receives Size()-1 messages. A Gatherv
// receives Size()-1 messages on root only; a Scatterv sends them from
// root. Barrier and Split count as collectives only. A capability built
// on several calls (the MPI binding's Gatherv agrees on lengths first)
// counts every call it makes.
type Counts struct {
	// Sent and Received are message counts.
	Sent, Received int64
	// BytesSent and BytesReceived are payload bytes.
	BytesSent, BytesReceived int64
	// Collectives is the number of collective calls entered.
	Collectives int64
}

// Sub returns c minus before: the traffic between two readings.
func (c Counts) Sub(before Counts) Counts {
	return Counts{
		Sent: c.Sent - before.Sent, Received: c.Received - before.Received,
		BytesSent: c.BytesSent - before.BytesSent, BytesReceived: c.BytesReceived - before.BytesReceived,
		Collectives: c.Collectives - before.Collectives,
	}
}

// Add returns c plus d.
func (c Counts) Add(d Counts) Counts {
	return Counts{
		Sent: c.Sent + d.Sent, Received: c.Received + d.Received,
		BytesSent: c.BytesSent + d.BytesSent, BytesReceived: c.BytesReceived + d.BytesReceived,
		Collectives: c.Collectives + d.Collectives,
	}
}

// Counter is the optional capability of counting a rank's traffic. The
// in-process world and comm/mpi implement it. Counts may be read from
// any goroutine, also while the rank communicates.
type Counter interface {
	Counts() Counts
}

// CountsOf returns c's counts, or zero Counts when c has no [Counter].
func CountsOf(c Comm) Counts {
	if k, ok := c.(Counter); ok {
		return k.Counts()
	}
	return Counts{}
}

// Tally accumulates a rank's [Counts]; it is safe for concurrent use. A
// Comm implementation embeds or holds one per rank and calls its methods
// from its communication calls (comm/mpi does). The zero value is ready.
type Tally struct {
	sent, recv, bsent, brecv, coll atomic.Int64
}

// Send records msgs messages of bytes bytes in all sent.
func (t *Tally) Send(msgs, bytes int64) {
	t.sent.Add(msgs)
	t.bsent.Add(bytes)
}

// Recv records msgs messages of bytes bytes in all received.
func (t *Tally) Recv(msgs, bytes int64) {
	t.recv.Add(msgs)
	t.brecv.Add(bytes)
}

// Collective records one collective call entered.
func (t *Tally) Collective() { t.coll.Add(1) }

// Counts returns the totals so far.
func (t *Tally) Counts() Counts {
	return Counts{
		Sent: t.sent.Load(), Received: t.recv.Load(),
		BytesSent: t.bsent.Load(), BytesReceived: t.brecv.Load(),
		Collectives: t.coll.Load(),
	}
}
