package h5ckpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ftigo/ftigo/dataset"
)

// Rank 0 alone combines every rank's declaration and lays out the file
// (it writes the headers anyway). It then hands each rank its part: where
// each of its variables goes, and its share of collective buffering. A
// rank other than 0 never sees another rank's declaration. A part is one
// kind byte, then:
//
//	partInvalid: the sentinels the error matches (a bit set), its text
//	partNoLayout: nothing (rank 0 failed to create or lay out the file)
//	partLayout:   nvars, per variable (own, id order): id, collective, slab
//	              collective (0/1); if 1: lo, hi, dom, win, rounds, nagg,
//	              per slab of the aggregator's domain: rank, id, slab
//
// a slab being size, unit, base, nouter, outer..., stride..., every
// number an unsigned varint.
const (
	partInvalid byte = iota
	partNoLayout
	partLayout
)

// invalidSentinels are the errors an invalid input may match besides
// ErrInvalid; their bits travel with the text.
var invalidSentinels = []error{dataset.ErrInvalid, dataset.ErrDuplicate, dataset.ErrOverlap, dataset.ErrGap,
	dataset.ErrUnknown, dataset.ErrMismatch, dataset.ErrBuffer}

// remoteError is an error rank 0 met, as every rank returns it: the
// same text, matching the same sentinels.
type remoteError struct {
	msg string
	is  []error
}

func (e *remoteError) Error() string { return e.msg }

func (e *remoteError) Is(target error) bool { return slices.Contains(e.is, target) }

func invalidPart(err error) []byte {
	var bits uint64
	for i, s := range invalidSentinels {
		if errors.Is(err, s) {
			bits |= 1 << i
		}
	}
	b := binary.AppendUvarint([]byte{partInvalid}, bits)
	return append(b, err.Error()...)
}

// rankView is one rank's share of the layout.
type rankView struct {
	vars []ownVar
	cb   *cbPlan // nil without collective buffering
}

// ownVar is where one of the rank's variables goes.
type ownVar struct {
	id         int32
	collective bool
	s          slab
}

// viewOf returns rank r's share of the layout and of the collective plan p
// (nil: none); aggs[r] lists the slabs of r's domain.
func (w *writer) viewOf(r int, p *cbPlan, aggs [][]cbSlab) rankView {
	var v rankView
	for _, x := range w.decls[r].vars {
		v.vars = append(v.vars, ownVar{id: x.id, collective: p.has(r, x.id), s: w.loc[[2]int64{int64(r), int64(x.id)}]})
	}
	if p != nil {
		v.cb = &cbPlan{lo: p.lo, hi: p.hi, dom: p.dom, win: p.win, rounds: p.rounds, slabs: aggs[r]}
	}
	return v
}

// domains returns, for every rank, the slabs of plan p whose file range
// meets the rank's domain, in p's order (rank, then variable id).
func (p *cbPlan) domains(n int) [][]cbSlab {
	aggs := make([][]cbSlab, n)
	for _, cs := range p.slabs {
		d0, d1 := p.domainsOf(cs.s, n)
		for d := d0; d <= d1; d++ {
			aggs[d] = append(aggs[d], cs)
		}
	}
	return aggs
}

// domainsOf returns the first and last domain that slab s's file range
// meets (of n; d1 < d0 when none).
func (p *cbPlan) domainsOf(s slab, n int) (d0, d1 int) {
	a, b := s.extent()
	d0 = int(max(0, (a-p.lo)/p.dom))
	d1 = int(min(int64(n-1), (b-1-p.lo)/p.dom))
	return d0, d1
}

// extent returns the file range [a, b) the slab's runs span.
func (s slab) extent() (a, b int64) {
	return s.base, s.runOff(s.size/s.unit-1) + s.unit
}

func appendSlab(b []byte, s slab) []byte {
	for _, v := range []int64{s.size, s.unit, s.base, int64(len(s.outer))} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	for _, v := range s.outer {
		b = binary.AppendUvarint(b, uint64(v))
	}
	for _, v := range s.stride {
		b = binary.AppendUvarint(b, uint64(v))
	}
	return b
}

func encodeView(v rankView) []byte {
	b := binary.AppendUvarint([]byte{partLayout}, uint64(len(v.vars)))
	for _, x := range v.vars {
		b = binary.AppendUvarint(b, uint64(x.id))
		b = append(b, boolByte(x.collective))
		b = appendSlab(b, x.s)
	}
	if v.cb == nil {
		return append(b, 0)
	}
	p := v.cb
	b = append(b, 1)
	for _, x := range []int64{p.lo, p.hi, p.dom, p.win, int64(p.rounds), int64(len(p.slabs))} {
		b = binary.AppendUvarint(b, uint64(x))
	}
	for _, cs := range p.slabs {
		b = binary.AppendUvarint(b, uint64(cs.rank))
		b = binary.AppendUvarint(b, uint64(cs.id))
		b = appendSlab(b, cs.s)
	}
	return b
}

// partReader reads a part with bounds checks: a malformed part (only a
// broken transport makes one) sets err instead of panicking.
type partReader struct {
	b   []byte
	err error
}

const maxField = 1<<62 - 1 // no field of a layout is larger

func (r *partReader) num(limit uint64) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > limit {
		r.err = errors.New("malformed layout from rank 0")
		return 0
	}
	r.b = r.b[n:]
	return int64(v)
}

func (r *partReader) flag() bool { return r.num(1) == 1 }

func (r *partReader) slab() slab {
	s := slab{size: r.num(maxField), unit: r.num(maxField), base: r.num(maxField)}
	nd := r.num(32)
	for range nd {
		s.outer = append(s.outer, r.num(maxField))
	}
	for range nd {
		s.stride = append(s.stride, r.num(maxField))
	}
	if r.err == nil && (s.unit == 0 && s.size != 0 || s.unit != 0 && s.size%s.unit != 0) {
		r.err = fmt.Errorf("malformed slab of %d bytes in units of %d from rank 0", s.size, s.unit)
	}
	return s
}

// decodePart reads this rank's part of a layout of a world of n ranks.
// An invalid input comes back as the error rank 0 met (ok false, err
// set); no layout as ok false and a nil error.
func decodePart(b []byte, n int) (v rankView, ok bool, err error) {
	if len(b) == 0 {
		return v, false, errors.New("empty layout from rank 0")
	}
	r := &partReader{b: b[1:]}
	switch b[0] {
	case partInvalid:
		bits := r.num(1<<len(invalidSentinels) - 1)
		if r.err != nil {
			return v, false, r.err
		}
		e := &remoteError{msg: string(r.b)}
		for i, s := range invalidSentinels {
			if bits&(1<<i) != 0 {
				e.is = append(e.is, s)
			}
		}
		return v, false, e
	case partNoLayout:
		return v, false, nil
	case partLayout:
	default:
		return v, false, fmt.Errorf("layout kind %d from rank 0", b[0])
	}
	nv := r.num(uint64(len(b)))
	for i := int64(0); i < nv && r.err == nil; i++ {
		v.vars = append(v.vars, ownVar{id: int32(r.num(1<<31 - 1)), collective: r.flag(), s: r.slab()})
	}
	if r.flag() {
		p := &cbPlan{lo: r.num(maxField), hi: r.num(maxField), dom: r.num(maxField), win: r.num(maxField), rounds: int(r.num(1 << 40))}
		na := r.num(uint64(len(b)))
		for i := int64(0); i < na && r.err == nil; i++ {
			p.slabs = append(p.slabs, cbSlab{rank: int(r.num(uint64(n - 1))), id: int32(r.num(1<<31 - 1)), s: r.slab()})
		}
		if r.err == nil && (p.dom <= 0 || p.win <= 0) {
			r.err = errors.New("collective plan without domains from rank 0")
		}
		v.cb = p
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errors.New("stray bytes after the layout from rank 0")
	}
	if r.err != nil {
		return rankView{}, false, r.err
	}
	return v, true, nil
}
