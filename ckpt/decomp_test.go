package ckpt

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
)

// randomViews cuts shape into a grid of p ranks' subsets with cut
// points moved at random by up to a quarter of a part; each rank maps variable 1 onto its box of dataset 7.
func randomViews(rng *rand.Rand, ds Dataset, p int) []dataset.View {
	dims, _ := dataset.Dims(p, len(ds.Shape))
	cuts := make([][]int64, len(ds.Shape))
	for k, s := range ds.Shape {
		// Cut j near j*s/g, moved by up to a quarter of a part.
		g := int64(dims[k])
		cuts[k] = []int64{0}
		for j := int64(1); j < g; j++ {
			jit := s / (4 * g)
			x := j*s/g + rng.Int64N(2*jit+1) - jit
			cuts[k] = append(cuts[k], min(max(x, cuts[k][j-1]), s))
		}
		cuts[k] = append(cuts[k], s)
	}
	views := make([]dataset.View, p)
	for r := range p {
		off, cnt := make([]int64, len(ds.Shape)), make([]int64, len(ds.Shape))
		x := r
		for k := len(ds.Shape) - 1; k >= 0; k-- {
			j := x % dims[k]
			x /= dims[k]
			off[k], cnt[k] = cuts[k][j], cuts[k][j+1]-cuts[k][j]
		}
		views[r] = dataset.View{Datasets: []Dataset{ds.Clone()}, Subsets: []fileformat.Subset{{VarID: 1, Dataset: ds.ID, Offset: off, Count: cnt}}}
	}
	return views
}

// spreadOn runs checkSpread over p in-process ranks with views[r] on
// rank r and returns every rank's error.
func spreadOn(t *testing.T, views []dataset.View, complete bool) []error {
	t.Helper()
	errs := make([]error, len(views))
	require.NoError(t, comm.Run(len(views), func(c comm.Comm) error {
		_, errs[c.Rank()] = checkSpread(c, []rankView{{rank: c.Rank(), view: views[c.Rank()]}}, complete)
		return nil
	}, comm.WithTimeout(60*time.Second)))
	return errs
}

// TestCheckSpreadAgrees: on random decompositions, whole, with a subset
// dropped, grown into a neighbour, or a definition changed, the check
// spread over the ranks finds what dataset.NewDecomposition finds (the
// same sentinel, the same message where only one answer is right), and
// every rank returns the same error.
func TestCheckSpreadAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 60 {
		p := 1 + rng.IntN(17)
		d := 1 + rng.IntN(3)
		shape := make([]int64, d)
		for k := range shape {
			shape[k] = 3 + rng.Int64N(25)
		}
		ds := Dataset{ID: 7, Name: "f", Shape: shape, Type: fileformat.Float64, ElemSize: 8}
		views := randomViews(rng, ds, p)
		what := []string{"whole", "dropped", "grown", "redefined", "renamed", "sparse gap"}[trial%6]
		q := rng.IntN(p)
		switch what {
		case "dropped":
			views[q].Subsets = nil
		case "grown":
			s := &views[q].Subsets[0]
			k := rng.IntN(d)
			if s.Offset[k] > 0 {
				s.Offset[k]--
				s.Count[k]++
			} else if s.Offset[k]+s.Count[k] < shape[k] {
				s.Count[k]++
			}
		case "redefined":
			views[q].Datasets[0].Shape = append([]int64{1}, shape...)
		case "renamed":
			views[q].Datasets = append(views[q].Datasets, Dataset{ID: 8, Name: "f", Shape: []int64{3}, Type: fileformat.Int32})
		case "sparse gap":
			for i := range views {
				views[i].Datasets[0].Sparse = true
			}
			views[q].Subsets = nil
		}
		_, want := dataset.NewDecomposition(views)
		errs := spreadOn(t, views, true)
		for r, err := range errs {
			require.Equal(t, fmt.Sprint(errs[0]), fmt.Sprint(err), "trial %d (%s): rank %d and rank 0 disagree", trial, what, r)
		}
		got := errs[0]
		if want == nil {
			require.NoError(t, got, "trial %d (%s, %d ranks, %v)", trial, what, p, shape)
			continue
		}
		require.Error(t, got, "trial %d (%s): want %v", trial, what, want)
		for _, k := range []error{dataset.ErrOverlap, dataset.ErrGap, dataset.ErrDuplicate, dataset.ErrInvalid, dataset.ErrUnknown} {
			assert.Equal(t, errors.Is(want, k), errors.Is(got, k), "trial %d (%s): %v against %v", trial, what, got, want)
		}
		if what == "redefined" || what == "renamed" {
			assert.Equal(t, want.Error(), got.Error(), "trial %d", trial)
		}
	}
}

// decompCost checks a p-rank grid decomposition of a 2-D dataset and
// returns the largest number of bytes and messages a rank received.
func decompCost(t *testing.T, p int) (bytes, msgs int64) {
	views := randomViews(rand.New(rand.NewPCG(uint64(p), 3)), Dataset{ID: 7, Name: "f", Shape: []int64{int64(4 * p), 977}, Type: fileformat.Float64, ElemSize: 8}, p)
	var mu sync.Mutex
	require.NoError(t, comm.Run(p, func(c comm.Comm) error {
		before := comm.CountsOf(c)
		_, err := checkSpread(c, []rankView{{rank: c.Rank(), view: views[c.Rank()]}}, true)
		d := comm.CountsOf(c).Sub(before)
		mu.Lock()
		bytes, msgs = max(bytes, d.BytesReceived), max(msgs, d.Received)
		mu.Unlock()
		return err
	}, comm.WithTimeout(5*time.Minute)))
	return bytes, msgs
}

// TestCheckSpreadCostPerRank: checking the decomposition costs a rank
// the same bytes and messages received at 2,048 ranks as at 128, but for
// the O(log P) rounds of the tree and of the routed exchange.
func TestCheckSpreadCostPerRank(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of in-process ranks")
	}
	b1, m1 := decompCost(t, 128)
	b2, m2 := decompCost(t, 2048)
	t.Logf("most received by one rank: 128 ranks %d bytes in %d messages, 2048 ranks %d bytes in %d messages", b1, m1, b2, m2)
	// log2 grows from 7 to 11: allow that, not the 16-fold of the ranks.
	assert.LessOrEqual(t, float64(b2), 11.0/7*float64(b1)*1.3, "bytes received per rank grow with the ranks")
	assert.LessOrEqual(t, float64(m2), 11.0/7*float64(m1)*1.3, "messages received per rank grow with the ranks")
}
