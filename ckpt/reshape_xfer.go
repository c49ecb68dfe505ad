package ckpt

import (
	"errors"
	"fmt"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/internal/exchange"
)

// sendBatch bounds the bytes of the messages a rank has in flight before
// it waits for them.
const sendBatch = 64 << 20

// piece is a copy (or part of one) placed in a message at off.
type piece struct {
	c   dataset.Copy
	off int64
}

// messages splits the stream of copies into messages of at most
// xchgChunk bytes, splitting copies larger than that.
func messages(cs []dataset.Copy) [][]piece {
	var out [][]piece
	var cur []piece
	fill := int64(0)
	for _, c := range cs {
		for c.Len > 0 {
			n := min(c.Len, xchgChunk-fill)
			p := c
			p.Len = n
			cur = append(cur, piece{c: p, off: fill})
			fill += n
			c.DstOff += n
			c.SrcOff += n
			c.Len -= n
			if fill == xchgChunk {
				out = append(out, cur)
				cur, fill = nil, 0
			}
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func msgLen(ps []piece) int64 {
	if len(ps) == 0 {
		return 0
	}
	l := ps[len(ps)-1]
	return l.off + l.c.Len
}

// landing is a message this rank receives: into buf, which is the
// destination itself when direct.
type landing struct {
	buf    []byte
	ps     []piece
	direct bool
	req    comm.Request
	from   int
}

// transfer asks the readers of the remote sources for their runs, and
// sends the runs other ranks ask this rank for. Both sides compute the
// copies from the same pull. The bytes move in messages of at most
// xchgChunk: every rank posts its receives before it sends anything. A
// rank whose reads fail sends zeros and reports the error afterwards, so
// no rank waits forever. skipRecv: this rank has no destination memory
// (received bytes are dropped). Collective.
func (r *Runtime) transfer(st *reshapeState, remote map[int]*pull, bufs map[int32][]byte, skipRecv bool) error {
	me := r.c.Rank()
	var errs []error
	out := map[int][]byte{}
	for _, o := range sortedKeys(remote) {
		src, ok := st.sources[o]
		if !ok {
			errs = append(errs, fmt.Errorf("no rank is known to hold the data of old rank %d", o))
			continue
		}
		appendJSON(out, src.Reader, remote[o])
	}
	in, err := exchange.Sparse(r.c, tagPull, exchange.ByPeer(out))
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("ask for the old ranks' runs: %w", err))...)
	}
	var lands []*landing
	for _, o := range sortedKeys(remote) {
		src, ok := st.sources[o]
		if !ok {
			continue
		}
		for _, ps := range messages(remote[o].copies(me)) {
			l := &landing{ps: ps, from: src.Reader}
			if len(ps) == 1 && !skipRecv {
				c := ps[0].c
				l.buf, l.direct = bufs[c.DstVar][c.DstOff:c.DstOff+c.Len], true
			} else {
				l.buf = make([]byte, msgLen(ps))
			}
			if l.req, err = comm.Irecv(r.c, src.Reader, xchgTag, l.buf); err != nil {
				return errors.Join(append(errs, fmt.Errorf("post a receive from rank %d: %w", src.Reader, err))...)
			}
			lands = append(lands, l)
		}
	}
	errs = append(errs, r.serve(in)...)
	for _, l := range lands {
		n, err := l.req.Wait()
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("receive from rank %d: %w", l.from, err))...)
		}
		st.received += int64(n)
		if n != len(l.buf) {
			errs = append(errs, fmt.Errorf("rank %d sent %d bytes, want %d", l.from, n, len(l.buf)))
			continue
		}
		if !l.direct && !skipRecv {
			for _, p := range l.ps {
				copy(bufs[p.c.DstVar][p.c.DstOff:p.c.DstOff+p.c.Len], l.buf[p.off:p.off+p.c.Len])
			}
		}
	}
	return errors.Join(errs...)
}

// serve sends the runs the pulls in asks for, read from the sources
// this rank verified, in batches of at most sendBatch bytes in flight.
// It returns the read errors; a failed send ends it.
func (r *Runtime) serve(in []exchange.Msg) []error {
	st := r.reshape
	var errs []error
	var batch []comm.Request
	inFlight := 0
	flush := func() error {
		err := comm.WaitAll(batch...)
		batch, inFlight = nil, 0
		return err
	}
	for _, m := range in {
		var pulls []pull
		if err := eachJSON(m.Data, func(p pull) { pulls = append(pulls, p) }); err != nil {
			// The asker waits for bytes this rank cannot compute: the
			// world must end.
			return append(errs, fmt.Errorf("decode rank %d's request: %w", m.Peer, err))
		}
		for _, p := range pulls {
			for _, ps := range messages(p.copies(m.Peer)) {
				send := make([]byte, msgLen(ps))
				cs := make([]dataset.Copy, len(ps))
				for j, x := range ps {
					c := x.c
					c.DstVar, c.DstOff = 0, x.off
					cs[j] = c
				}
				if err := dataset.Apply(cs, oldSource{r}, map[int32][]byte{0: send}); err != nil {
					clear(send)
					errs = append(errs, fmt.Errorf("read for rank %d: %w", m.Peer, err))
				}
				req, err := comm.Isend(r.c, m.Peer, xchgTag, send)
				if err != nil {
					return append(errs, fmt.Errorf("send to rank %d: %w", m.Peer, err))
				}
				st.sent += int64(len(send))
				batch = append(batch, req)
				if inFlight += len(send); inFlight >= sendBatch {
					if err := flush(); err != nil {
						return append(errs, fmt.Errorf("send: %w", err))
					}
				}
			}
		}
	}
	if err := flush(); err != nil {
		errs = append(errs, fmt.Errorf("send: %w", err))
	}
	return errs
}
