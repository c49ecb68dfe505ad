package dataset

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/fileformat"
)

// TestBinsCoverExact: the bins a hyperslab meets are exactly those whose
// box it intersects, and the boxes partition the dataset.
func TestBinsCoverExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		d := 1 + rng.IntN(3)
		shape := make([]int64, d)
		per := make([]int64, d)
		for k := range shape {
			shape[k] = 1 + rng.Int64N(40)
			per[k] = rng.Int64N(shape[k] + 3) // 0 and more than shape are clamped
		}
		b := NewBins(shape, per)
		var vol int64
		for i := range b.Len() {
			_, cnt := b.Box(i)
			vol += product(cnt)
		}
		require.Equal(t, product(shape), vol, "trial %d: the boxes partition %v (%v bins)", trial, shape, b.Per())
		off := make([]int64, d)
		cnt := make([]int64, d)
		for k := range shape {
			off[k] = rng.Int64N(shape[k])
			cnt[k] = 1 + rng.Int64N(shape[k]-off[k])
		}
		var want []int64
		for i := range b.Len() {
			bo, bc := b.Box(i)
			if overlaps(off, cnt, bo, bc) {
				want = append(want, i)
			}
		}
		assert.Equal(t, want, b.Cover(off, cnt), "trial %d: %v+%v over %v bins of %v", trial, off, cnt, b.Per(), shape)
	}
	b := NewBins([]int64{10}, []int64{3})
	assert.Nil(t, b.Cover([]int64{9}, []int64{2}), "outside the dataset")
	assert.Nil(t, b.Cover([]int64{3}, []int64{0}), "empty")
	assert.Nil(t, b.Cover([]int64{3, 0}, []int64{1, 1}), "another rank")
	assert.Zero(t, Bins{}.Len())
}

// TestBinsFor: about one bin per subset along each dimension, never more
// than the budget, at least one.
func TestBinsFor(t *testing.T) {
	for _, tc := range []struct {
		shape []int64
		mean  []float64
		max   int64
		want  []int64
	}{
		{[]int64{1000}, []float64{10}, 1 << 20, []int64{100}},
		{[]int64{1000}, []float64{10}, 7, []int64{7}},
		{[]int64{100, 100}, []float64{10, 50}, 1 << 20, []int64{10, 2}},
		{[]int64{100, 100}, []float64{1, 1}, 64, []int64{8, 8}},
		{[]int64{5}, []float64{0}, 9, []int64{1}},
		{[]int64{3, 1 << 40}, []float64{1, 1}, 1 << 10, []int64{3, 341}},
	} {
		b := BinsFor(tc.shape, tc.mean, tc.max)
		assert.Equal(t, tc.want, b.Per(), "%v with mean %v, at most %d", tc.shape, tc.mean, tc.max)
		assert.LessOrEqual(t, b.Len(), max(tc.max, 1))
	}
}

// checkByBins runs the check a spread-out run makes: every bin checks
// the pieces that meet it; the volumes add up.
func checkByBins(ds Dataset, ps []Piece, b Bins) (covered int64, gap []int64, overlap error) {
	for i := range b.Len() {
		off, cnt := b.Box(i)
		var in []Piece
		for _, p := range ps {
			if slices.Contains(b.Cover(p.Subset.Offset, p.Subset.Count), i) {
				in = append(in, p)
			}
		}
		c, g, err := CheckBox(ds, off, cnt, in)
		if err != nil && overlap == nil {
			overlap = err
		}
		covered += c
		if g != nil && gap == nil {
			gap = g
		}
	}
	return covered, gap, overlap
}

// TestCheckBoxAgrees: on random decompositions, some with a box dropped
// and some with a box grown into its neighbour, the check by bins finds
// an overlap exactly when NewDecomposition does, covers exactly the
// dataset when it is complete, and otherwise names an element no subset
// covers.
func TestCheckBoxAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 300 {
		d := 1 + rng.IntN(3)
		shape := make([]int64, d)
		for k := range shape {
			shape[k] = 2 + rng.Int64N(30)
		}
		ds := Dataset{ID: 1, Name: "u", Shape: shape, Type: fileformat.Float64}
		ranks := 1 + rng.IntN(12)
		var boxes [][]int64
		if trial%2 == 0 {
			boxes = gridDecomp(rng, shape, ranks)
		} else {
			boxes = bisectDecomp(rng, shape, ranks)
		}
		switch trial % 3 {
		case 1: // a box dropped
			boxes = slices.Delete(boxes, 0, 1)
		case 2: // a box grown by one along a dimension where it can
			b := boxes[rng.IntN(len(boxes))]
			k := rng.IntN(d)
			if b[k] > 0 {
				b[k]--
				b[d+k]++
			} else if b[k]+b[d+k] < shape[k] {
				b[d+k]++
			}
		}
		var ps []Piece
		var v View
		v.Datasets = []Dataset{ds}
		var sum, mean = int64(0), make([]float64, d)
		for r, b := range boxes {
			s := Subset{VarID: int32(r), Dataset: 1, Offset: b[:d], Count: b[d:]}
			ps = append(ps, Piece{Rank: r, Subset: s})
			v.Subsets = append(v.Subsets, s)
			sum += s.Elements()
			for k := range mean {
				mean[k] += float64(b[d+k]) / float64(len(boxes))
			}
		}
		_, want := NewDecomposition([]View{v})
		bins := BinsFor(shape, mean, int64(1+rng.IntN(16)))
		covered, gap, overlap := checkByBins(ds, ps, bins)
		if errors.Is(want, ErrOverlap) {
			require.ErrorIs(t, overlap, ErrOverlap, "trial %d: %v", trial, want)
			continue
		}
		require.NoError(t, overlap, "trial %d", trial)
		assert.Equal(t, sum, covered, "trial %d: the bins' volumes add up to the subsets'", trial)
		if want == nil {
			assert.Nil(t, gap, "trial %d", trial)
			continue
		}
		require.ErrorIs(t, want, ErrGap, "trial %d", trial)
		require.NotNil(t, gap, "trial %d: a gap is found", trial)
		for _, p := range ps {
			assert.False(t, overlaps(gap, ones(d), p.Subset.Offset, p.Subset.Count), "trial %d: %v is covered by %v", trial, gap, p)
		}
	}
}

// TestCheckBoxMessages: the errors read as NewDecomposition's.
func TestCheckBoxMessages(t *testing.T) {
	ds := Dataset{ID: 5, Name: "a", Shape: []int64{10}, Type: fileformat.Float64}
	ps := []Piece{{Rank: 1, Subset: sub(1, 5, []int64{4}, []int64{6})}, {Rank: 0, Subset: sub(1, 5, []int64{0}, []int64{6})}}
	_, _, err := CheckBox(ds, []int64{0}, []int64{5}, ps)
	require.ErrorIs(t, err, ErrOverlap)
	assert.Equal(t, `dataset: overlapping subsets: dataset 5 "a": rank 0 variable 1 (offset [0] count [6]) and rank 1 variable 1 (offset [4] count [6]) share the elements at offset [4] count [2]`, err.Error())
	ps = []Piece{{Rank: 0, Subset: sub(1, 5, []int64{0}, []int64{4})}, {Rank: 1, Subset: sub(1, 5, []int64{5}, []int64{4})}}
	covered, gap, err := CheckBox(ds, []int64{0}, []int64{5}, ps)
	require.NoError(t, err)
	assert.Equal(t, int64(4), covered)
	assert.Equal(t, []int64{4}, gap)
	err = GapError(ds, 2, 8, gap)
	require.ErrorIs(t, err, ErrGap)
	assert.Equal(t, `dataset: gap in the subsets: dataset 5 "a" [10] float64: the subsets of 2 ranks cover 8 of its 10 elements; element [4] is in no subset`, err.Error())
}

// TestRunsArePlanCopies: Runs of every pair gives the plan's copies.
func TestRunsArePlanCopies(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 50 {
		shape := []int64{3 + rng.Int64N(20), 3 + rng.Int64N(20), 1 + rng.Int64N(5)}
		ds := Dataset{ID: 2, Name: "f", Shape: shape, Type: fileformat.Float64}
		ob, nb := bisectDecomp(rng, shape, 1+rng.IntN(7)), gridDecomp(rng, shape, 1+rng.IntN(7))
		ov, nv := views([]Dataset{ds}, [][][]int64{ob}, 0), views([]Dataset{ds}, [][][]int64{nb}, 100)
		od, err := NewDecomposition(ov)
		require.NoError(t, err)
		nd, err := NewDecomposition(nv)
		require.NoError(t, err)
		plan, err := NewPlan(od, nd)
		require.NoError(t, err)
		for q := range nv {
			var got []Copy
			for o := range ov {
				got = append(got, Runs(o, ov[o].Subsets[0], q, nv[q].Subsets[0], 8)...)
			}
			assert.Equal(t, fmt.Sprint(plan.Copies(q)), fmt.Sprint(got), "trial %d, new rank %d", trial, q)
		}
	}
}
