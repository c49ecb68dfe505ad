package dataset

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/fileformat"
)

func sub(v, d int32, off, cnt []int64) Subset {
	return Subset{VarID: v, Dataset: d, Offset: off, Count: cnt}
}

func TestDecompositionErrors(t *testing.T) {
	u := Dataset{ID: 1, Name: "u", Shape: []int64{4, 6}, Type: fileformat.Float64}
	w := Dataset{ID: 2, Name: "w", Shape: []int64{10}, Type: fileformat.Int32, Sparse: true}
	halves := func() []View {
		return []View{
			{Datasets: []Dataset{u, w}, Subsets: []Subset{sub(0, 1, []int64{0, 0}, []int64{2, 6})}},
			{Datasets: []Dataset{u, w}, Subsets: []Subset{sub(0, 1, []int64{2, 0}, []int64{2, 6})}},
		}
	}
	_, err := NewDecomposition(halves())
	require.NoError(t, err)

	tests := []struct {
		name   string
		views  func() []View
		target error
		msg    string
	}{
		{"overlap", func() []View {
			v := halves()
			v[1].Subsets[0].Offset = []int64{1, 0}
			v[1].Subsets[0].Count = []int64{3, 6}
			return v
		}, ErrOverlap, `dataset 1 "u": rank 0 variable 0 (offset [0 0] count [2 6]) and rank 1 variable 0 (offset [1 0] count [3 6]) share the elements at offset [1 0] count [1 6]`},
		{"overlap same rank", func() []View {
			v := halves()
			v[0].Subsets = append(v[0].Subsets, sub(5, 1, []int64{1, 5}, []int64{1, 1}))
			return v
		}, ErrOverlap, "rank 0 variable 5"},
		{"gap", func() []View {
			v := halves()
			v[1].Subsets[0].Count = []int64{2, 5}
			return v
		}, ErrGap, `dataset 1 "u" [4 6] float64: the subsets of 2 ranks cover 22 of its 24 elements; element [2 5] is in no subset`},
		{"gap no subsets", func() []View {
			v := halves()
			v[0].Subsets, v[1].Subsets = nil, nil
			return v
		}, ErrGap, "cover 0 of its 24 elements; element [0 0]"},
		{"id twice on a rank", func() []View {
			v := halves()
			v[0].Datasets = append(v[0].Datasets, u)
			return v
		}, ErrDuplicate, "rank 0 defines dataset 1 twice"},
		{"id twice across ranks", func() []View {
			v := halves()
			u2 := u
			u2.Shape = []int64{4, 7}
			v[1].Datasets = []Dataset{u2, w}
			return v
		}, ErrDuplicate, `dataset id 1 is 1 "u" [4 6] float64 on rank 0 but 1 "u" [4 7] float64 on rank 1`},
		{"name twice", func() []View {
			v := halves()
			x := w
			x.ID = 3
			v[1].Datasets = append(v[1].Datasets, x)
			return v
		}, ErrDuplicate, `datasets 2 and 3 are both named "w"`},
		{"var twice", func() []View {
			v := halves()
			v[0].Subsets = append(v[0].Subsets, sub(0, 2, []int64{0}, []int64{3}))
			return v
		}, ErrDuplicate, "rank 0 maps variable 0 onto two subsets"},
		{"unknown dataset", func() []View {
			v := halves()
			v[0].Subsets = append(v[0].Subsets, sub(1, 9, []int64{0}, []int64{3}))
			return v
		}, ErrUnknown, "dataset 9, which no rank defines"},
		{"outside", func() []View {
			v := halves()
			v[1].Subsets[0].Count = []int64{3, 6}
			return v
		}, ErrInvalid, "outside dataset 1"},
		{"bad definition", func() []View {
			v := halves()
			bad := w
			bad.Shape = []int64{-1}
			v[0].Datasets = []Dataset{u, bad}
			return v
		}, ErrInvalid, "rank 0: dataset 2 \"w\": extent -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewDecomposition(tc.views())
			require.ErrorIs(t, err, tc.target)
			assert.Contains(t, err.Error(), tc.msg)
			_, err = Partial(tc.views())
			if tc.target == ErrGap {
				assert.NoError(t, err, "Partial allows gaps")
			} else {
				assert.ErrorIs(t, err, tc.target, "Partial keeps every other rule")
			}
		})
	}
}

func TestPlanMismatch(t *testing.T) {
	u := Dataset{ID: 1, Name: "u", Shape: []int64{8}, Type: fileformat.Float64}
	whole := func(d Dataset) *Decomposition {
		dec, err := NewDecomposition([]View{{Datasets: []Dataset{d}, Subsets: []Subset{sub(0, d.ID, []int64{0}, d.Shape)}}})
		require.NoError(t, err)
		return dec
	}
	old := whole(u)
	for name, d := range map[string]Dataset{
		"shape": {ID: 1, Name: "u", Shape: []int64{9}, Type: fileformat.Float64},
		"type":  {ID: 1, Name: "u", Shape: []int64{8}, Type: fileformat.Int64},
		"name":  {ID: 1, Name: "v", Shape: []int64{8}, Type: fileformat.Float64},
	} {
		_, err := NewPlan(old, whole(d))
		assert.ErrorIs(t, err, ErrMismatch, name)
		assert.Contains(t, err.Error(), `dataset 1 is 1 "u" [8] float64 in the checkpoint but`, name)
	}
	_, err := NewPlan(old, whole(Dataset{ID: 2, Name: "x", Shape: []int64{8}, Type: fileformat.Float64}))
	assert.ErrorIs(t, err, ErrUnknown)
	assert.Contains(t, err.Error(), `dataset 2 "x" [8] float64 is not in the checkpoint (it holds 1 "u" [8] float64)`)
	// A dataset defined at restart but not used is no error.
	d, err := NewDecomposition([]View{{Datasets: []Dataset{u, {ID: 7, Name: "unused", Shape: []int64{1}, Type: fileformat.Uint8, Sparse: true}},
		Subsets: []Subset{sub(0, 1, []int64{0}, []int64{8})}}})
	require.NoError(t, err)
	_, err = NewPlan(old, d)
	assert.NoError(t, err)
}

// TestGapExampleRandom removes one random box of a random decomposition
// and checks that the element the gap error names is really uncovered.
func TestGapExampleRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 200; trial++ {
		d := 1 + rng.IntN(3)
		shape := make([]int64, d)
		for k := range shape {
			shape[k] = 1 + rng.Int64N(9)
		}
		ds := Dataset{ID: 0, Name: "g", Shape: shape, Type: fileformat.Uint8}
		boxes := bisectDecomp(rng, shape, 2+rng.IntN(6))
		drop := -1
		for i, b := range boxes {
			n := int64(1)
			for _, c := range b[d:] {
				n *= c
			}
			if n > 0 {
				drop = i
				break
			}
		}
		var v View
		v.Datasets = []Dataset{ds}
		for i, b := range boxes {
			if i != drop {
				v.Subsets = append(v.Subsets, sub(int32(i), 0, b[:d], b[d:]))
			}
		}
		dec, err := NewDecomposition([]View{v})
		require.ErrorIs(t, err, ErrGap, "trial %d", trial)
		require.Nil(t, dec)
		b := boxes[drop]
		pieces := make([]piece, len(v.Subsets))
		for i, s := range v.Subsets {
			pieces[i] = piece{sub: s}
		}
		pt := uncovered(ds, pieces)
		require.NotNil(t, pt)
		assert.True(t, overlaps(pt, ones(d), b[:d], b[d:]), "trial %d: %v not in the dropped box %v", trial, pt, b)
	}
}

func ones(d int) []int64 {
	o := make([]int64, d)
	for i := range o {
		o[i] = 1
	}
	return o
}

func TestDims(t *testing.T) {
	for _, tc := range []struct {
		n, d int
		want []int
	}{{1, 1, []int{1}}, {12, 2, []int{4, 3}}, {16, 2, []int{4, 4}}, {16, 3, []int{4, 2, 2}}, {7, 2, []int{7, 1}},
		{30, 3, []int{5, 3, 2}}, {8, 3, []int{2, 2, 2}}, {6, 4, []int{3, 2, 1, 1}}} {
		got, err := Dims(tc.n, tc.d)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "Dims(%d, %d)", tc.n, tc.d)
	}
	_, err := Dims(0, 2)
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestBlock(t *testing.T) {
	// 10 x 7 over a 3 x 2 grid: rows 4,3,3; columns 4,3.
	want := [][2][]int64{
		{{0, 0}, {4, 4}}, {{0, 4}, {4, 3}},
		{{4, 0}, {3, 4}}, {{4, 4}, {3, 3}},
		{{7, 0}, {3, 4}}, {{7, 4}, {3, 3}},
	}
	var views []View
	ds := Dataset{ID: 0, Name: "b", Shape: []int64{10, 7}, Type: fileformat.Uint8}
	for r, w := range want {
		off, cnt, err := Block(ds.Shape, []int{3, 2}, r)
		require.NoError(t, err)
		assert.Equal(t, w[0], off, "rank %d", r)
		assert.Equal(t, w[1], cnt, "rank %d", r)
		views = append(views, View{Datasets: []Dataset{ds}, Subsets: []Subset{sub(0, 0, off, cnt)}})
	}
	_, err := NewDecomposition(views)
	assert.NoError(t, err, "a block decomposition is complete")
	_, _, err = Block(ds.Shape, []int{3, 2}, 6)
	assert.ErrorIs(t, err, ErrInvalid)
	_, _, err = Block(ds.Shape, []int{3}, 0)
	assert.ErrorIs(t, err, ErrInvalid)
}

// FuzzRedistribute builds random decompositions from the input and checks
// that every element arrives exactly once, bit for bit.
func FuzzRedistribute(f *testing.F) {
	f.Add(uint64(1), uint8(4), uint8(3), uint8(2))
	f.Add(uint64(2), uint8(16), uint8(5), uint8(3))
	f.Add(uint64(3), uint8(3), uint8(7), uint8(1))
	f.Fuzz(func(t *testing.T, seed uint64, n, m, d uint8) {
		rng := rand.New(rand.NewPCG(seed, 99))
		nd := 1 + int(d)%4
		shape := make([]int64, nd)
		for k := range shape {
			shape[k] = 1 + rng.Int64N(12)
		}
		ds := []Dataset{{ID: 3, Name: "f", Shape: shape, Type: fileformat.Int16}}
		nr, mr := 1+int(n)%20, 1+int(m)%20
		oldB := [][][]int64{bisectDecomp(rng, shape, nr)}
		newB := [][][]int64{gridDecomp(rng, shape, mr)}
		if seed%2 == 0 {
			oldB[0], newB[0] = gridDecomp(rng, shape, nr), bisectDecomp(rng, shape, mr)
		}
		checkRedistribution(t, ds, views(ds, oldB, 0), views(ds, newB, 50))
	})
}
