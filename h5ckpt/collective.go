package h5ckpt

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// Collective buffering (two-phase I/O, as MPI-IO implementations do for
// interleaved access). A hyperslab that does not span whole rows of its
// dataset lies in the file as one short run per row, between other
// ranks' runs: written as it is, every run costs a system call and the
// kernel's per-write work (in a 2-D block decomposition of 4096 float64
// columns, 16 KiB each), several times the copy itself. Instead, the
// file range these slabs cover is cut into one contiguous domain per
// rank, and in rounds of one window per domain every rank sends each
// aggregator the bytes of its slabs inside the aggregator's window
// (straight from its variable: a slab's runs inside a file range are one
// range of the variable's bytes), and each aggregator writes its window,
// its own runs gathered from memory and the others' from what it
// received, with one vectored write (pwritev) per contiguous stretch,
// then starts the window's writeback. The bytes land at the same offsets
// as before; only who writes them changes. Rank 0 computes the plan from
// the layout and hands each rank the scalars and the slabs of its own
// domain: a rank learns which aggregators to send to from its own slabs'
// file ranges, so the exchange needs no negotiation.

// cbRun is the run length below which a slab is written collectively.
const cbRun = 256 << 10

// tagCB tags the messages of collective buffering.
const tagCB = 0x4843 // "HC"

// cbSlab is one rank's variable written collectively.
type cbSlab struct {
	rank int
	id   int32
	s    slab
}

// cbPlan is the collective buffering of one Write. Rank 0 computes it
// for every slab; each rank gets the same scalars and, in slabs, only
// the slabs that meet its own domain.
type cbPlan struct {
	slabs  []cbSlab          // in rank, then variable id order
	in     map[[2]int64]bool // (rank, id) of every slab, on rank 0
	lo, hi int64             // the file range the slabs cover (lo page-aligned)
	dom    int64             // domain size: rank d aggregates [lo+d*dom, lo+(d+1)*dom)
	win    int64             // window size: one round writes one window per domain
	rounds int
}

// collectivePlan returns the plan for the layout (rank 0), or nil when
// no slab has short runs.
func (w *writer) collectivePlan() *cbPlan {
	if w.o.cbOff {
		return nil
	}
	p := &cbPlan{lo: -1, in: map[[2]int64]bool{}}
	for r, d := range w.decls {
		for _, v := range d.vars {
			if v.dataset < 0 || v.size == 0 {
				continue
			}
			s := w.loc[[2]int64{int64(r), int64(v.id)}]
			if s.unit >= cbRun || s.unit >= s.size {
				continue
			}
			p.slabs = append(p.slabs, cbSlab{rank: r, id: v.id, s: s})
			p.in[[2]int64{int64(r), int64(v.id)}] = true
			a, b := s.extent()
			if p.lo < 0 || a < p.lo {
				p.lo = a
			}
			p.hi = max(p.hi, b)
		}
	}
	if len(p.slabs) == 0 {
		return nil
	}
	p.lo &^= align - 1
	n := int64(w.c.Size())
	p.dom = ((p.hi-p.lo+n-1)/n + align - 1) &^ (align - 1)
	win := w.o.cbWindow
	if win <= 0 {
		win = writebackPiece
	}
	p.win = min(p.dom, win)
	p.rounds = int((p.dom + p.win - 1) / p.win)
	return p
}

// has reports whether rank's variable id is written collectively (on
// rank 0's whole plan).
func (p *cbPlan) has(rank int, id int32) bool {
	return p != nil && p.in[[2]int64{int64(rank), int64(id)}]
}

// window returns aggregator d's file range in round k (possibly empty).
func (p *cbPlan) window(d, k int) (int64, int64) {
	start := p.lo + int64(d)*p.dom
	a := start + int64(k)*p.win
	b := min(a+p.win, start+p.dom, p.hi)
	return a, max(a, b)
}

// runOff returns the file offset of run u of the slab.
func (s slab) runOff(u int64) int64 {
	off := s.base
	for k := len(s.outer) - 1; k >= 0; k-- {
		off += (u % s.outer[k]) * s.stride[k]
		u /= s.outer[k]
	}
	return off
}

// varAt returns the offset in the variable of the first of its bytes
// stored at or after file offset x (s.size if none): the slab's runs
// ascend in the file, so the bytes inside [a, b) are the variable's
// [varAt(a), varAt(b)).
func (s slab) varAt(x int64) int64 {
	n := s.size / s.unit
	u := int64(sort.Search(int(n), func(i int) bool { return s.runOff(int64(i))+s.unit > x }))
	if u == n {
		return s.size
	}
	if o := s.runOff(u); o < x {
		return u*s.unit + x - o
	}
	return u * s.unit
}

// writeCollective runs every round of the plan on this rank: it sends its
// slabs' bytes (own: its collective variables) to the aggregators whose
// domains they meet and writes its own window. After a write error (or
// with skip set, after an earlier one) it keeps taking part in the
// exchange, so the other ranks finish, but writes nothing. A
// communication error ends it at once (the world is then broken for
// every rank).
func (w *writer) writeCollective(p *cbPlan, own []ownVar, data map[int32][]byte, skip bool) error {
	me, n := w.c.Rank(), w.c.Size()
	var werr error
	var stage []byte
	for k := 0; k < p.rounds; k++ {
		var reqs []comm.Request
		var want []int64 // bytes expected by each receive in reqs
		// Receives first (any order is safe: WaitAll completes them all).
		a, b := p.window(me, k)
		var vecs []vfd.IOVec
		if b > a {
			need := int64(0)
			for _, cs := range p.slabs {
				if cs.rank != me {
					v0, v1 := cs.s.varAt(a), cs.s.varAt(b)
					need += v1 - v0
				}
			}
			if int64(cap(stage)) < need {
				stage = make([]byte, need)
			}
			used := int64(0)
			for _, cs := range p.slabs {
				v0, v1 := cs.s.varAt(a), cs.s.varAt(b)
				if v1 <= v0 {
					continue
				}
				var src []byte
				if cs.rank == me {
					src = data[cs.id][v0:v1]
				} else {
					src = stage[used : used+v1-v0 : used+v1-v0]
					used += v1 - v0
					r, err := comm.Irecv(w.c, cs.rank, tagCB, src)
					if err != nil {
						return fmt.Errorf("collective write: receive from rank %d: %w", cs.rank, err)
					}
					reqs, want = append(reqs, r), append(want, v1-v0)
				}
				_ = cs.s.runs(v0, v1, func(fileOff, varOff, n int64) error {
					vecs = append(vecs, vfd.IOVec{Type: vfd.MemDraw, Off: fileOff, Buf: src[varOff-v0 : varOff-v0+n]})
					return nil
				})
			}
		}
		// Sends: per slab, to the aggregators whose domains it meets, so
		// every aggregator gets one rank's slabs in id order.
		for _, ov := range own {
			if !ov.collective {
				continue
			}
			d0, d1 := p.domainsOf(ov.s, n)
			for d := d0; d <= d1; d++ {
				if d == me {
					continue
				}
				da, db := p.window(d, k)
				if db <= da {
					continue
				}
				v0, v1 := ov.s.varAt(da), ov.s.varAt(db)
				if v1 <= v0 {
					continue
				}
				r, err := comm.Isend(w.c, d, tagCB, data[ov.id][v0:v1])
				if err != nil {
					return fmt.Errorf("collective write: send to rank %d: %w", d, err)
				}
				reqs = append(reqs, r)
			}
		}
		if err := comm.WaitAll(reqs...); err != nil {
			return fmt.Errorf("collective write, round %d: %w", k, err)
		}
		for i, n := range want {
			if got, _ := reqs[i].Wait(); int64(got) != n {
				return fmt.Errorf("collective write, round %d: received %d bytes, want %d", k, got, n)
			}
		}
		if skip || werr != nil || len(vecs) == 0 {
			continue
		}
		slices.SortFunc(vecs, func(x, y vfd.IOVec) int { return cmp.Compare(x.Off, y.Off) })
		if err := vfd.WriteV(w.f, vecs); err != nil {
			werr = fmt.Errorf("collective write of [%d, %d): %w", a, b, err)
			continue
		}
		_ = vfd.StartWriteback(w.f, a, b-a)
	}
	return werr
}
