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

// Allreduce implements [Reducer]. The vector is cut into one slice per
// rank; each rank combines its slice of every rank's send, in rank order,
// and writes the result into every rank's recv, so the arithmetic is
// spread over the ranks and each element is still computed once, the same
// way, whichever rank does it.
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
		return args
	}, func(out any) {
		args := out.([]vecArg)
		n, es := len(args), t.Size()
		elems := len(send) / es
		lo, hi := es*(elems*p.rank/n), es*(elems*(p.rank+1)/n)
		if lo == hi {
			return
		}
		parts := make([][]byte, n)
		for i, a := range args {
			parts[i] = a.send[lo:hi]
		}
		// Rank 0's recv may be its send (in place): reduceParts reads
		// parts[0] before it writes. Each slice is read before it is
		// written, and by this rank alone.
		acc := args[0].recv[lo:hi]
		reduceParts(acc, parts, t, op)
		for _, a := range args[1:] {
			copy(a.recv[lo:hi], acc)
		}
	})
	return err
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
}

// planGatherv checks the contributions of a v-collective and returns the
// displacements. lenOf picks the length that is distributed (send for
// gathers, recv for scatter); totalOf is the buffer that must hold the
// total on rank r (or nil when it does not matter for r).
func planGatherv(name string, in []contrib, rooted bool, lenOf func(gathervArg) []byte,
	totalOf func(r int, a gathervArg) []byte, overlapOn func(r int, a gathervArg) bool) any {
	args := make([]gathervArg, len(in))
	displ := make([]int, len(in)+1)
	for i, c := range in {
		args[i] = c.v.(gathervArg)
		displ[i+1] = displ[i] + len(lenOf(args[i]))
	}
	root := args[0].root
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
		if b := totalOf(i, a); b != nil && len(b) != total {
			return fmt.Errorf("%w: %s: rank %d has a %d-byte buffer for a total of %d", ErrBadArgument, name, i, len(b), total)
		}
		if overlapOn(i, a) {
			if ov, _ := overlap(a.send, a.recv); ov {
				return fmt.Errorf("%w: %s: rank %d's send overlaps its recv", ErrBadArgument, name, i)
			}
		}
	}
	return gathervPlan{args: args, displ: displ}
}

// Gatherv implements [Gatherer]: every rank copies its own send into
// root's recv, in parallel.
func (p *proc) Gatherv(root int, send, recv []byte) error {
	_, err := p.rendezvous("Gatherv", gathervArg{root, send, recv}, func(in []contrib) any {
		return planGatherv("Gather", in, true,
			func(a gathervArg) []byte { return a.send },
			func(r int, a gathervArg) []byte {
				if r == a.root {
					return nonNil(a.recv)
				}
				return nil
			},
			func(r int, a gathervArg) bool { return r == a.root })
	}, func(out any) {
		pl := out.(gathervPlan)
		copy(pl.args[root].recv[pl.displ[p.rank]:], send)
	})
	return err
}

// Allgatherv implements [Gatherer].
func (p *proc) Allgatherv(send, recv []byte) error {
	_, err := p.rendezvous("Allgatherv", gathervArg{0, send, recv}, func(in []contrib) any {
		return planGatherv("Allgather", in, false,
			func(a gathervArg) []byte { return a.send },
			func(_ int, a gathervArg) []byte { return nonNil(a.recv) },
			func(int, gathervArg) bool { return true })
	}, func(out any) {
		pl := out.(gathervPlan)
		for r, a := range pl.args {
			copy(recv[pl.displ[r]:], a.send)
		}
	})
	return err
}

// Scatterv implements [Gatherer]: every rank copies its part out of root's
// send, in parallel.
func (p *proc) Scatterv(root int, send, recv []byte) error {
	_, err := p.rendezvous("Scatterv", gathervArg{root, send, recv}, func(in []contrib) any {
		return planGatherv("Scatter", in, true,
			func(a gathervArg) []byte { return a.recv },
			func(r int, a gathervArg) []byte {
				if r == a.root {
					return nonNil(a.send)
				}
				return nil
			},
			func(r int, a gathervArg) bool { return r == a.root })
	}, func(out any) {
		pl := out.(gathervPlan)
		copy(recv, pl.args[root].send[pl.displ[p.rank]:])
	})
	return err
}

// nonNil turns a nil slice into an empty one, so that a nil buffer on root
// still has its length checked.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
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
	} else {
		r.n, r.err = r.m.n, r.m.err
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
