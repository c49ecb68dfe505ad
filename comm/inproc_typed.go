package comm

import (
	"fmt"
)

// The in-process world implements the typed capabilities natively: each
// collective is one rendezvous, and a non-blocking request is a posted
// mailbox entry.

var (
	_ Reducer    = (*proc)(nil)
	_ Gatherer   = (*proc)(nil)
	_ NonBlocker = (*proc)(nil)
)

type vecArg struct {
	send, recv []byte
	t          Datatype
	op         Op
	local      string // what is wrong with this rank's own arguments
}

// serialBytes is the size up to which one goroutine (the last to arrive)
// does all the copying and arithmetic of a typed collective; above it, the
// ranks share the work and then wait for each other once more.
const serialBytes = 32 << 10

// reducePlan is the result of an Allreduce rendezvous.
type reducePlan struct {
	args []vecArg
	done bool // compute did all the work
}

func (r reducePlan) finished() bool { return r.done }

// reduceRange combines bytes [lo, hi) of every rank's send, in rank order,
// into rank 0's recv and copies the result to every other rank's recv.
// Rank 0's recv may be its send (in place): reduceParts reads part 0
// before it writes; each range is read before it is written, and by one
// goroutine alone.
func reduceRange(args []vecArg, lo, hi int) {
	if lo == hi {
		return
	}
	acc := args[0].recv[lo:hi]
	reduceParts(acc, len(args), func(i int) []byte { return args[i].send[lo:hi] }, args[0].t, args[0].op)
	for _, a := range args[1:] {
		copy(a.recv[lo:hi], acc)
	}
}

// Allreduce implements [Reducer]. A vector up to serialBytes is combined
// by the last rank to arrive; a longer one is cut into one range per rank,
// and each rank combines its range of every rank's send and writes the
// result into every rank's recv, so the arithmetic is spread over the
// ranks. Either way each element is computed once, in rank order, for all.
func (p *proc) Allreduce(send, recv []byte, t Datatype, op Op) error {
	if t.Size() == 0 || !validOp(op) {
		return fmt.Errorf("%w: Allreduce: %v with %v", ErrBadArgument, t, op)
	}
	_, err := p.rendezvous("Allreduce", vecArg{send: send, recv: recv, t: t, op: op, local: checkReduceArgs(send, recv, t)}, func(in []contrib) any {
		a0 := in[0].v.(vecArg)
		args := make([]vecArg, len(in))
		for i, c := range in {
			a := c.v.(vecArg)
			switch {
			case a.local != "":
				return fmt.Errorf("%w: Allreduce: rank %d: %s", ErrBadArgument, i, a.local)
			case len(a.send) != len(a0.send):
				return fmt.Errorf("%w: Allreduce: rank %d has %d bytes, rank 0 has %d", ErrBadArgument, i, len(a.send), len(a0.send))
			case a.t != a0.t || a.op != a0.op:
				return fmt.Errorf("%w: Allreduce: rank %d uses %v of %v, rank 0 %v of %v", ErrBadArgument, i, a.op, a.t, a0.op, a0.t)
			}
			args[i] = a
		}
		if len(a0.send) <= serialBytes {
			reduceRange(args, 0, len(a0.send))
			return reducePlan{args: args, done: true}
		}
		return reducePlan{args: args}
	}, func(out any) {
		args := out.(reducePlan).args
		n, es := len(args), t.Size()
		elems := len(send) / es
		reduceRange(args, es*(elems*p.rank/n), es*(elems*(p.rank+1)/n))
	})
	if err != nil {
		return err
	}
	p.tally().Send(1, int64(len(send)))
	p.tally().Recv(1, int64(len(recv)))
	return nil
}

type gathervArg struct {
	root       int
	send, recv []byte
}

// gathervPlan is the result of a Gatherv/Allgatherv/Scatterv rendezvous:
// every rank's arguments and displacements.
type gathervPlan struct {
	args  []gathervArg
	displ []int
	done  bool // compute did all the copies
}

func (g gathervPlan) finished() bool { return g.done }

// vKind tells planGatherv which v-collective it plans.
type vKind int

const (
	vGather vKind = iota
	vAllgather
	vScatter
)

// copyPart does rank r's copies of a v-collective.
func (pl gathervPlan) copyPart(w *world, kind vKind, r int) {
	a := pl.args[r]
	switch kind {
	case vGather:
		copy(pl.args[a.root].recv[pl.displ[r]:], a.send)
	case vAllgather:
		w.scans.Add(int64(len(pl.args)))
		for q, b := range pl.args {
			copy(a.recv[pl.displ[q]:], b.send)
		}
	case vScatter:
		copy(a.recv, pl.args[a.root].send[pl.displ[r]:])
	}
}

// planGatherv checks the contributions of a v-collective, the same way
// for every rank, and computes the displacements of the distributed
// lengths (sends for gathers, recvs for scatter). Up to serialBytes in all,
// it also does every rank's copies.
func planGatherv(w *world, kind vKind, in []contrib) any {
	name := [...]string{"Gather", "Allgather", "Scatter"}[kind]
	args := make([]gathervArg, len(in))
	displ := make([]int, len(in)+1)
	for i, c := range in {
		args[i] = c.v.(gathervArg)
		d := args[i].send
		if kind == vScatter {
			d = args[i].recv
		}
		displ[i+1] = displ[i] + len(d)
	}
	root, rooted := args[0].root, kind != vAllgather
	for i, a := range args {
		if rooted && a.root != root {
			return fmt.Errorf("%w: %s: rank %d has root %d, rank 0 has %d", ErrBadArgument, name, i, a.root, root)
		}
	}
	if rooted && (root < 0 || root >= len(in)) {
		return fmt.Errorf("%w: %s: root %d out of range [0,%d)", ErrBadArgument, name, root, len(in))
	}
	total := displ[len(in)]
	for i, a := range args {
		if rooted && i != root {
			continue
		}
		// The buffer that holds the total: recv for gathers, send for scatter.
		b := a.recv
		if kind == vScatter {
			b = a.send
		}
		if len(b) != total {
			return fmt.Errorf("%w: %s: rank %d has a %d-byte buffer for a total of %d", ErrBadArgument, name, i, len(b), total)
		}
		if ov, _ := overlap(a.send, a.recv); ov {
			return fmt.Errorf("%w: %s: rank %d's send overlaps its recv", ErrBadArgument, name, i)
		}
	}
	pl := gathervPlan{args: args, displ: displ}
	if total <= serialBytes {
		for r := range args {
			pl.copyPart(w, kind, r)
		}
		pl.done = true
	}
	return pl
}

// Gatherv implements [Gatherer]: every rank copies its own send into
// root's recv, in parallel (or the last rank to arrive does all, when
// small).
func (p *proc) Gatherv(root int, send, recv []byte) error {
	return p.vCollective("Gatherv", vGather, gathervArg{root, send, recv})
}

// Allgatherv implements [Gatherer].
func (p *proc) Allgatherv(send, recv []byte) error {
	return p.vCollective("Allgatherv", vAllgather, gathervArg{0, send, recv})
}

// Scatterv implements [Gatherer]: every rank copies its part out of root's
// send.
func (p *proc) Scatterv(root int, send, recv []byte) error {
	return p.vCollective("Scatterv", vScatter, gathervArg{root, send, recv})
}

func (p *proc) vCollective(op string, kind vKind, a gathervArg) error {
	out, err := p.rendezvous(op, a, func(in []contrib) any {
		return planGatherv(p.g.w, kind, in)
	}, func(out any) {
		out.(gathervPlan).copyPart(p.g.w, kind, p.rank)
	})
	if err != nil {
		return err
	}
	total := int64(out.(gathervPlan).displ[p.Size()])
	others := int64(p.Size() - 1)
	t := p.tally()
	switch {
	case kind == vAllgather:
		t.Send(1, int64(len(a.send)))
		t.Recv(others, total-int64(len(a.send)))
	case kind == vGather && p.rank == a.root:
		t.Recv(others, total-int64(len(a.send)))
	case kind == vGather:
		t.Send(1, int64(len(a.send)))
	case p.rank == a.root: // scatter
		t.Send(others, total-int64(len(a.recv)))
	default:
		t.Recv(1, int64(len(a.recv)))
	}
	return nil
}

// ---- non-blocking point to point ----

// inprocRequest is a posted send or receive of the in-process world.
type inprocRequest struct {
	p        *proc
	box      *mailbox
	m        *msg
	send     bool
	finished bool
	n        int
	err      error
}

// Isend implements [NonBlocker]: the send is posted to dst's mailbox (or
// delivered at once to a receive already posted there) and completes when
// the receiver has copied it, as a synchronous MPI_Issend.
func (p *proc) Isend(dst, tag int, buf []byte) (Request, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if err := p.checkRank("Isend: destination", dst); err != nil {
		return nil, err
	}
	s, box := p.post(dst, tag, buf)
	return &inprocRequest{p: p, box: box, m: s, send: true}, nil
}

// Irecv implements [NonBlocker]: a matching send already posted is copied
// at once, otherwise the receive waits in this rank's mailbox.
func (p *proc) Irecv(src, tag int, buf []byte) (Request, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if err := p.checkRank("Irecv: source", src); err != nil {
		return nil, err
	}
	box := p.g.boxes[p.rank]
	r := &msg{peer: src, tag: tag, buf: buf, done: make(chan struct{})}
	box.mu.Lock()
	if s := take(&box.sends, src, tag); s != nil {
		box.mu.Unlock()
		deliver(s, r, src, tag)
		close(s.done)
		r.matched = true
		close(r.done)
	} else {
		box.recvs = append(box.recvs, r)
		box.mu.Unlock()
	}
	return &inprocRequest{p: p, box: box, m: r}, nil
}

// Wait blocks until the request is complete, the world aborts (ErrAborted)
// or the watchdog fires (ErrTimeout); on failure an unmatched request is
// withdrawn, so its buffer is free in every case.
func (r *inprocRequest) Wait() (int, error) {
	if r.finished {
		return r.n, r.err
	}
	r.finished = true
	if err := r.p.finish(r.box, r.m, r.send); err != nil {
		r.err = err
		return 0, err
	}
	if r.send {
		r.n = len(r.m.buf)
		r.p.tally().Send(1, int64(r.n))
	} else {
		r.n, r.err = r.m.n, r.m.err
		if r.err == nil {
			r.p.tally().Recv(1, int64(r.n))
		}
	}
	return r.n, r.err
}

// Test completes the request when it is done or the world has aborted,
// and otherwise reports false at once.
func (r *inprocRequest) Test() (bool, int, error) {
	if !r.finished {
		select {
		case <-r.m.done:
		case <-r.p.g.w.aborted:
		default:
			return false, 0, nil
		}
	}
	n, err := r.Wait()
	return true, n, err
}
