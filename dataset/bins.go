package dataset

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Bins cuts a dataset's index space into a grid of boxes. A check or a
// plan spread over many ranks gives each rank some bins: the subsets
// that meet a bin go to its rank, which compares them there. Any two
// subsets that share an element meet in the bin holding that element.
// The zero value has no bins.
type Bins struct {
	shape []int64
	per   []int64 // bins along each dimension
}

// NewBins returns the grid of per[k] bins along dimension k of shape,
// each per[k] clamped to 1..shape[k]. Along a dimension, bin j covers
// [j*shape/per, (j+1)*shape/per).
func NewBins(shape, per []int64) Bins {
	b := Bins{shape: slices.Clone(shape), per: make([]int64, len(shape))}
	for k, s := range shape {
		p := int64(1)
		if k < len(per) {
			p = per[k]
		}
		b.per[k] = min(max(p, 1), max(s, 1))
	}
	return b
}

// BinsFor chooses the grid for subsets whose mean extent along dimension
// k is mean[k]: about one bin per subset along each dimension, and at
// most maxBins bins in all. So a subset near the mean meets at most
// three bins along each dimension, and a bin meets a few subsets.
func BinsFor(shape []int64, mean []float64, maxBins int64) Bins {
	per := make([]int64, len(shape))
	prod := 1.0
	for k, s := range shape {
		p := 1.0
		if k < len(mean) && mean[k] > 0 {
			p = math.Floor(float64(s) / mean[k])
		}
		per[k] = int64(min(max(p, 1), float64(max(s, 1))))
		prod *= float64(per[k])
	}
	maxBins = max(maxBins, 1)
	if prod > float64(maxBins) {
		// Water-filling: the dimensions with few bins keep them; the
		// others share what is left of the budget equally.
		order := make([]int, len(per))
		for k := range order {
			order[k] = k
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(per[a], per[b]) })
		budget := float64(maxBins)
		for i, k := range order {
			share := math.Pow(budget, 1/float64(len(order)-i))
			if float64(per[k]) > share {
				per[k] = max(1, int64(share))
			}
			budget /= float64(per[k])
		}
		for total(per) > maxBins { // rounding
			k := 0
			for j := range per {
				if per[j] > per[k] {
					k = j
				}
			}
			per[k]--
		}
	}
	return NewBins(shape, per)
}

// total is the product of per, saturated at MaxInt64.
func total(per []int64) int64 {
	n := int64(1)
	for _, p := range per {
		hi, lo := bits.Mul64(uint64(n), uint64(p))
		if hi != 0 || lo > math.MaxInt64 {
			return math.MaxInt64
		}
		n = int64(lo)
	}
	return n
}

// Len returns the number of bins.
func (b Bins) Len() int64 {
	if len(b.per) == 0 {
		return 0
	}
	return total(b.per)
}

// Per returns the number of bins along each dimension.
func (b Bins) Per() []int64 { return slices.Clone(b.per) }

// cut returns the start of bin j along dimension k.
func (b Bins) cut(k int, j int64) int64 {
	hi, lo := bits.Mul64(uint64(j), uint64(b.shape[k]))
	q, _ := bits.Div64(hi, lo, uint64(b.per[k]))
	return int64(q)
}

// binOf returns the bin along dimension k holding coordinate x.
func (b Bins) binOf(k int, x int64) int64 {
	// The largest j with cut(j) <= x: floor(((x+1)*per - 1) / shape).
	hi, lo := bits.Mul64(uint64(x+1), uint64(b.per[k]))
	lo, borrow := bits.Sub64(lo, 1, 0)
	hi -= borrow
	q, _ := bits.Div64(hi, lo, uint64(b.shape[k]))
	return int64(q)
}

// Box returns the offset and count of bin i (row-major over the grid).
func (b Bins) Box(i int64) (off, cnt []int64) {
	off = make([]int64, len(b.per))
	cnt = make([]int64, len(b.per))
	for k := len(b.per) - 1; k >= 0; k-- {
		j := i % b.per[k]
		i /= b.per[k]
		off[k] = b.cut(k, j)
		cnt[k] = b.cut(k, j+1) - off[k]
	}
	return off, cnt
}

// Cover returns, ascending, the bins the hyperslab (off, cnt) meets;
// none for an empty one or one of another rank.
func (b Bins) Cover(off, cnt []int64) []int64 {
	if len(off) != len(b.per) || len(cnt) != len(b.per) {
		return nil
	}
	lo := make([]int64, len(b.per))
	hi := make([]int64, len(b.per))
	for k := range b.per {
		if cnt[k] <= 0 || off[k] < 0 || off[k]+cnt[k] > b.shape[k] {
			return nil
		}
		lo[k], hi[k] = b.binOf(k, off[k]), b.binOf(k, off[k]+cnt[k]-1)
	}
	var out []int64
	idx := slices.Clone(lo)
	for {
		var i int64
		for k := range idx {
			i = i*b.per[k] + idx[k]
		}
		out = append(out, i)
		k := len(idx) - 1
		for ; k >= 0; k-- {
			if idx[k]++; idx[k] <= hi[k] {
				break
			}
			idx[k] = lo[k]
		}
		if k < 0 {
			return out
		}
	}
}

// Piece is a subset and the rank that holds it, as a check or a plan
// spread over many ranks passes it around.
type Piece struct {
	Rank   int
	Subset Subset
}

// CheckBox checks the pieces of ds that meet the box (off, cnt), such as
// one bin: no two share an element, or the error wraps [ErrOverlap] and
// names both and the elements they share (as [NewDecomposition] does).
// It returns how many elements of the box the pieces cover and, when
// that is not all, an element of the box no piece covers (nil when
// finding one would cost too much).
func CheckBox(ds Dataset, off, cnt []int64, ps []Piece) (covered int64, gap []int64, err error) {
	live := make([]piece, 0, len(ps))
	for _, p := range ps {
		if _, _, ok := intersect(p.Subset.Offset, p.Subset.Count, off, cnt); ok {
			live = append(live, piece{rank: p.Rank, sub: p.Subset})
		}
	}
	slices.SortStableFunc(live, func(a, b piece) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.sub.VarID, b.sub.VarID))
	})
	if err := findOverlap(ds, live); err != nil {
		return 0, nil, err
	}
	for _, p := range live {
		_, c, _ := intersect(p.sub.Offset, p.sub.Count, off, cnt)
		covered += product(c)
	}
	if covered < product(cnt) {
		gap = uncoveredIn(off, cnt, live)
	}
	return covered, gap, nil
}

func product(c []int64) int64 {
	n := int64(1)
	for _, x := range c {
		n *= x
	}
	return n
}

// Runs returns the copies that move the elements subset a of old rank
// src shares with subset b of new rank dst (one dataset, elements of
// elem bytes), row-major and merged: what [Plan.Copies] computes for
// one pair. Both sides of a transfer compute the same runs from the
// same subsets.
func Runs(src int, a Subset, dst int, b Subset, elem int64) []Copy {
	if len(a.Offset) != len(b.Offset) {
		return nil
	}
	return merge(appendRuns(nil, a, b, src, dst, elem))
}

// GapError builds the error of a dataset whose subsets, held by ranks
// ranks, cover covered of its elements; at is an element none covers,
// or nil. It wraps [ErrGap] and reads as [NewDecomposition]'s.
func GapError(ds Dataset, ranks int, covered int64, at []int64) error {
	msg := fmt.Sprintf("%v: dataset %v: the subsets of %d ranks cover %d of its %d elements",
		ErrGap, ds, ranks, covered, ds.Elements())
	if at != nil {
		msg += fmt.Sprintf("; element %v is in no subset", at)
	}
	return &gapError{msg: msg}
}
