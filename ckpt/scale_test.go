package ckpt

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
)

// The counted-work tests: thousands of in-process ranks with a small
// share each. They count what a rank receives over the communicator
// (comm.CountsOf) in the collective calls this package spreads over the
// ranks, and fail when the largest share grows with the number of
// ranks beyond the O(log P) rounds of the tree and the routed exchange.

// jitteredCuts cuts n into g parts near n/g each, every cut moved at
// random by up to a quarter of a part: uneven, but a part never more
// than 1.5 times the mean, whatever g.
func jitteredCuts(rng *rand.Rand, n int64, g int) []int64 {
	cuts := []int64{0}
	jit := n / int64(4*g)
	for j := 1; j < g; j++ {
		x := int64(j)*n/int64(g) + rng.Int64N(2*jit+1) - jit
		cuts = append(cuts, min(max(x, cuts[j-1]), n))
	}
	return append(cuts, n)
}

// scaleShape is the global array of the scale tests for n writing ranks:
// 8 x 8 elements (512 bytes) per rank on average.
func scaleShape(n int) []int64 {
	g, _ := dataset.Dims(n, 2)
	return []int64{int64(8 * g[0]), int64(8 * g[1])}
}

// scaleOldBlock is rank q's block of the writers' decomposition of n
// ranks: a grid of jittered cuts, the same on every rank.
func scaleOldBlock(shape []int64, n, q int) (off, cnt []int64) {
	g, _ := dataset.Dims(n, 2)
	rng := rand.New(rand.NewPCG(uint64(n), 77))
	rows, cols := jitteredCuts(rng, shape[0], g[0]), jitteredCuts(rng, shape[1], g[1])
	i, j := q/g[1], q%g[1]
	return []int64{rows[i], cols[j]}, []int64{rows[i+1] - rows[i], cols[j+1] - cols[j]}
}

// scaleWorld runs fn on n ranks of a fresh runtime over cfg and returns
// the largest counts a rank had in fn's measured part.
func scaleWorld(t *testing.T, n int, cfg Config, fn func(r *Runtime, measure func(func() error) error) error) comm.Counts {
	t.Helper()
	var mu sync.Mutex
	var worst comm.Counts
	require.NoError(t, comm.Run(n, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithLogger(zap.NewNop()), WithWarnings(nil))
		if err != nil {
			return err
		}
		defer r.Close()
		return fn(r, func(step func() error) error {
			before := comm.CountsOf(c)
			err := step()
			d := comm.CountsOf(c).Sub(before)
			mu.Lock()
			worst = comm.Counts{Received: max(worst.Received, d.Received), BytesReceived: max(worst.BytesReceived, d.BytesReceived),
				Collectives: max(worst.Collectives, d.Collectives)}
			mu.Unlock()
			return err
		})
	}, comm.WithTimeout(10*time.Minute)))
	return worst
}

// scaleRun checkpoints the field at n ranks, restarts on m, and returns
// the largest counts of the decomposition check and of the
// redistributing Recover. Every element comes back bit for bit.
func scaleRun(t *testing.T, n, m int) (check, recover comm.Counts) {
	check, recover, _ = scaleRunLearned(t, n, m)
	return check, recover
}

// scaleRunLearned is scaleRun, and it also returns the most old ranks
// whose sources one new rank learned.
func scaleRunLearned(t *testing.T, n, m int) (check, recover comm.Counts, learned int) {
	var mu sync.Mutex
	cfg := testConfig(t.TempDir(), 1)
	shape := scaleShape(n)
	check = scaleWorld(t, n, cfg, func(r *Runtime, measure func(func() error) error) error {
		off, cnt := scaleOldBlock(shape, n, r.c.Rank())
		field := slabValues(shape, off, cnt)
		if err := errors.Join(Protect(r, 1, &field, "field"), DefineDataset[float64](r, 10, "field", shape), r.AddSubset(1, 10, off, cnt)); err != nil {
			return err
		}
		if err := measure(r.checkDecomposition); err != nil {
			return err
		}
		return r.Checkpoint(1, 1)
	})
	recover = scaleWorld(t, m, cfg, func(r *Runtime, measure func(func() error) error) error {
		g, _ := dataset.Dims(m, 2)
		off, cnt, err := dataset.Block(shape, g, r.c.Rank())
		if err != nil {
			return err
		}
		var field []float64
		if err := errors.Join(Protect(r, 1, &field, "field"), DefineDataset[float64](r, 10, "field", shape), r.AddSubset(1, 10, off, cnt)); err != nil {
			return err
		}
		if !r.Reshaped() || r.OldRanks() != n {
			return fmt.Errorf("rank %d: reshaped %v, old ranks %d", r.c.Rank(), r.Reshaped(), r.OldRanks())
		}
		if err := measure(r.Recover); err != nil {
			return err
		}
		mu.Lock()
		learned = max(learned, len(r.reshape.sources))
		mu.Unlock()
		want := slabValues(shape, off, cnt)
		for i := range want {
			if math.Float64bits(field[i]) != math.Float64bits(want[i]) {
				return fmt.Errorf("rank %d: element %d is %v, want %v", r.c.Rank(), i, field[i], want[i])
			}
		}
		return nil
	})
	return check, recover, learned
}

// TestScaleReshapeSmall: the scale test's path on a handful of ranks
// (4 -> 3, 3 -> 7, 6 -> 1): bit for bit. At 64 -> 48 a new rank learns
// where the data of a few old ranks is (those its block meets, its
// homes', those it verified), not of all 64.
func TestScaleReshapeSmall(t *testing.T) {
	for _, p := range [][2]int{{4, 3}, {3, 7}, {6, 1}} {
		scaleRun(t, p[0], p[1])
	}
	_, _, learned := scaleRunLearned(t, 64, 48)
	t.Logf("64 -> 48: a new rank learned the sources of at most %d old ranks", learned)
	assert.LessOrEqual(t, learned, 16)
}

// TestScaleCountedWork: at 2,048 -> 1,536 ranks a rank receives, in the
// check of the global datasets at a checkpoint and in the redistributing
// Recover, what it receives at 256 -> 192, within the growth of log2 P
// (8 to 11): never the 8-fold of the ranks.
func TestScaleCountedWork(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("thousands of in-process ranks")
	}
	c1, r1 := scaleRun(t, 256, 192)
	c2, r2 := scaleRun(t, 2048, 1536)
	t.Logf("check of the datasets, most one rank received: %d bytes in %d messages at 256 ranks, %d bytes in %d messages at 2048",
		c1.BytesReceived, c1.Received, c2.BytesReceived, c2.Received)
	t.Logf("redistributing Recover, most one rank received: %d bytes in %d messages at 256 -> 192, %d bytes in %d messages at 2048 -> 1536",
		r1.BytesReceived, r1.Received, r2.BytesReceived, r2.Received)
	const bound = 11.0 / 8 * 1.3 // log2 P from 8 to 11, and a margin
	for _, x := range []struct {
		what   string
		lo, hi int64
	}{
		{"bytes received in the check", c1.BytesReceived, c2.BytesReceived},
		{"messages received in the check", c1.Received, c2.Received},
		{"bytes received in Recover", r1.BytesReceived, r2.BytesReceived},
		{"messages received in Recover", r1.Received, r2.Received},
	} {
		assert.LessOrEqual(t, float64(x.hi), bound*float64(x.lo), "%s grow with the ranks: %d at the small scale, %d at 8 times the ranks", x.what, x.lo, x.hi)
	}
}
