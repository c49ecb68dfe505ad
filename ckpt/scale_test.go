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
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
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

// scaleCounts holds the largest counts a rank had in each measured step.
type scaleCounts struct {
	mu    sync.Mutex
	worst map[string]comm.Counts
	// decoded is the most metadata bytes a rank's engine decoded in Init.
	decoded map[string]int64
}

// addDecoded keeps, for step what, the largest of n and those so far.
func (s *scaleCounts) addDecoded(what string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.decoded == nil {
		s.decoded = map[string]int64{}
	}
	s.decoded[what] = max(s.decoded[what], n)
}

// add keeps, for step what, the largest of each count so far and d's.
func (s *scaleCounts) add(what string, d comm.Counts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.worst == nil {
		s.worst = map[string]comm.Counts{}
	}
	w := s.worst[what]
	s.worst[what] = comm.Counts{Received: max(w.Received, d.Received), BytesReceived: max(w.BytesReceived, d.BytesReceived),
		Collectives: max(w.Collectives, d.Collectives)}
}

// scaleWorld runs fn on n ranks of a fresh runtime over cfg. It counts
// Init under the step named init (rank 0's under init+[rootSuffix]: it
// holds the manifest's root), and each step fn measures under its name,
// into counts.
func scaleWorld(t *testing.T, n int, cfg Config, counts *scaleCounts, init string, opts []Option,
	fn func(r *Runtime, measure func(what string, step func() error) error) error) {
	t.Helper()
	opts = append([]Option{WithLogger(zap.NewNop()), WithWarnings(nil)}, opts...)
	require.NoError(t, comm.Run(n, func(c comm.Comm) error {
		before := comm.CountsOf(c)
		r, err := Init(cfg, c, opts...)
		step := init
		if c.Rank() == 0 {
			step += rootSuffix
		}
		counts.add(step, comm.CountsOf(c).Sub(before))
		if err != nil {
			return err
		}
		counts.addDecoded(step, r.eng.Work().Decoded)
		defer r.Close()
		return fn(r, func(what string, step func() error) error {
			before := comm.CountsOf(c)
			err := step()
			counts.add(what, comm.CountsOf(c).Sub(before))
			return err
		})
	}, comm.WithTimeout(10*time.Minute)))
}

// The steps the scale tests count. Init and the restart's Init are
// counted whole, levels.Engine.Open included, rank 0 apart.
const (
	rootSuffix    = ", rank 0"
	stepInit      = "Init"
	stepTopology  = "the topology"
	stepNamed     = "the topology of named nodes, ranks but 0"
	stepNamedRoot = "the topology of named nodes, rank 0"
	stepSameArgs  = "the same-arguments check"
	stepCheck     = "the dataset check"
	stepReinit    = "Init of the restart"
	stepRecover   = "the redistributing Recover"
)

// scaleRun checkpoints the field at n ranks, restarts on m, and returns
// the largest counts of each step: Init, the topology (again),
// the same-arguments check, the
// decomposition check, the restart's Init and the redistributing
// Recover. Every element comes back bit for bit. It also returns the
// most old ranks whose sources one new rank learned.
func scaleRun(t *testing.T, n, m int) (counts map[string]comm.Counts, learned int) {
	sc, learned := scaleRunCounts(t, n, m)
	return sc.worst, learned
}

// scaleRunCounts is [scaleRun] returning every count.
func scaleRunCounts(t *testing.T, n, m int) (sc *scaleCounts, learned int) {
	var mu sync.Mutex
	sc = &scaleCounts{}
	cfg := testConfig(t.TempDir(), 1)
	shape := scaleShape(n)
	scaleWorld(t, n, cfg, sc, stepInit, nil, func(r *Runtime, measure func(string, func() error) error) error {
		off, cnt := scaleOldBlock(shape, n, r.c.Rank())
		field := slabValues(shape, off, cnt)
		if err := errors.Join(Protect(r, 1, &field, "field"), DefineDataset[float64](r, 10, "field", shape), r.AddSubset(1, 10, off, cnt)); err != nil {
			return err
		}
		if err := measure(stepTopology, func() error {
			_, err := r.buildTopology(options{meta: vfd.Sec2{}})
			return err
		}); err != nil {
			return err
		}
		if err := measure(stepSameArgs, func() error { return r.sameArgs(1, 1) }); err != nil {
			return err
		}
		if err := measure(stepCheck, r.checkDecomposition); err != nil {
			return err
		}
		return r.Checkpoint(1, 1)
	})
	scaleWorld(t, m, cfg, sc, stepReinit, nil, func(r *Runtime, measure func(string, func() error) error) error {
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
		if err := measure(stepRecover, r.Recover); err != nil {
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
	return sc, learned
}

// TestScaleReshapeSmall: the scale test's path on a handful of ranks
// (4 -> 3, 3 -> 7, 6 -> 1): bit for bit. At 64 -> 48 a new rank learns
// where the data of a few old ranks is (those its block meets, its
// homes', those it verified), not of all 64.
func TestScaleReshapeSmall(t *testing.T) {
	for _, p := range [][2]int{{4, 3}, {3, 7}, {6, 1}} {
		scaleRun(t, p[0], p[1])
	}
	_, learned := scaleRun(t, 64, 48)
	t.Logf("64 -> 48: a new rank learned the sources of at most %d old ranks", learned)
	assert.LessOrEqual(t, learned, 16)
}

// TestScaleCountedWork: at 2,048 -> 1,536 ranks a rank receives, in
// Init, the topology, the same-arguments check, the check of the global
// datasets at a checkpoint, the restart's Init (which reads the old
// manifest's root and parts) and the redistributing Recover, what it
// receives at 64 -> 48, within the growth of log2 P (6 to 11): never
// the 32-fold of the ranks. Rank 0's Init rows are only reported: it
// gathers the listing's summaries and holds the roots.
func TestScaleCountedWork(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("thousands of in-process ranks")
	}
	smallRun, _ := scaleRunCounts(t, 64, 48)
	largeRun, _ := scaleRunCounts(t, 2048, 1536)
	small, large := smallRun.worst, largeRun.worst
	const bound = 11.0 / 6 * 1.3 // log2 P from 6 to 11, and a margin
	// The metadata an engine decodes in the restart's Init: at 64 ranks
	// the old manifest is one part of 64 ranks, which a rank reads. At
	// 2,048 a rank other than 0 reads the parts of the old ranks and
	// nodes it handles (its node directories, their partner holders, its
	// homes), a few of the 32: never all of them.
	const partsRead = 8
	for _, step := range []string{stepInit, stepInit + rootSuffix, stepReinit, stepReinit + rootSuffix} {
		lo, hi := smallRun.decoded[step], largeRun.decoded[step]
		t.Logf("%s, most one rank decoded: %d bytes at 64 ranks, %d at 2048", step, lo, hi)
		if step == stepReinit {
			require.NotZero(t, lo, "%s: nothing decoded", step)
			assert.LessOrEqual(t, hi, partsRead*lo,
				"metadata decoded in %s grows with the ranks: %d bytes at 64 ranks, %d at 2048", step, lo, hi)
		}
	}
	for _, step := range []string{stepInit, stepInit + rootSuffix, stepTopology, stepSameArgs, stepCheck,
		stepReinit, stepReinit + rootSuffix, stepRecover} {
		lo, hi := small[step], large[step]
		t.Logf("%s, most one rank received: %d bytes in %d messages at 64 ranks, %d bytes in %d messages at 2048",
			step, lo.BytesReceived, lo.Received, hi.BytesReceived, hi.Received)
		if step == stepInit+rootSuffix || step == stepReinit+rootSuffix {
			continue
		}
		require.NotZero(t, lo.Received, "%s: nothing counted", step)
		assert.LessOrEqual(t, float64(hi.BytesReceived), bound*float64(lo.BytesReceived),
			"bytes received in %s grow with the ranks: %d at 64 ranks, %d at 2048", step, lo.BytesReceived, hi.BytesReceived)
		assert.LessOrEqual(t, float64(hi.Received), bound*float64(lo.Received),
			"messages received in %s grow with the ranks: %d at 64 ranks, %d at 2048", step, lo.Received, hi.Received)
	}
}

// scaleNamedTopology builds the topology of n ranks on n named nodes,
// found by a node split, and returns the largest counts of rank 0 and
// of the other ranks.
func scaleNamedTopology(t *testing.T, n int) (root, others comm.Counts) {
	var sc scaleCounts
	named := testConfig(t.TempDir(), 1)
	named.LocalTest = false
	named = named.withDefaults()
	host := func(rank int) string { return fmt.Sprintf("host-%05d", rank) }
	require.NoError(t, comm.Run(n, func(c comm.Comm) error {
		r := &Runtime{cfg: named, c: c, log: zap.NewNop()}
		before := comm.CountsOf(c)
		topo, err := r.buildTopology(options{meta: vfd.Sec2{}, nodeID: host})
		step := stepNamed
		if c.Rank() == 0 {
			step = stepNamedRoot
		}
		sc.add(step, comm.CountsOf(c).Sub(before))
		if err == nil && (topo.NodeOf(c.Rank()) != c.Rank() || topo.NumNodes() != n) {
			err = fmt.Errorf("rank %d: on node %d of %d", c.Rank(), topo.NodeOf(c.Rank()), topo.NumNodes())
		}
		return err
	}, comm.WithTimeout(10*time.Minute)))
	return sc.worst[stepNamedRoot], sc.worst[stepNamed]
}

// TestScaleTopologyNamed: with nodes named by the launcher, at 2,048
// ranks on as many nodes a rank other than 0 receives in the topology
// what it receives at 64 in messages, and in bytes beyond the node
// table, within the growth of log2 P. Every rank still receives the
// table (a name per node), and rank 0 gathers it to save it: both are
// reported, and left to spread with the manifest's parts.
func TestScaleTopologyNamed(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("thousands of in-process ranks")
	}
	tableSize := func(n int) int64 {
		hosts := make(partner.NodeTable, n)
		for i := range hosts {
			hosts[i] = fmt.Sprintf("host-%05d", i)
		}
		b, err := hosts.Marshal()
		require.NoError(t, err)
		return int64(len(b))
	}
	root1, lo := scaleNamedTopology(t, 64)
	root2, hi := scaleNamedTopology(t, 2048)
	t1, t2 := tableSize(64), tableSize(2048)
	t.Logf("rank 0 received %d bytes in %d messages at 64 ranks, %d bytes in %d messages at 2048",
		root1.BytesReceived, root1.Received, root2.BytesReceived, root2.Received)
	t.Logf("another rank received at most %d bytes in %d messages at 64 ranks, %d bytes in %d messages at 2048; the node table is %d and %d bytes",
		lo.BytesReceived, lo.Received, hi.BytesReceived, hi.Received, t1, t2)
	const bound = 11.0 / 6 * 1.3
	require.NotZero(t, lo.Received)
	require.GreaterOrEqual(t, lo.BytesReceived, t1, "a rank gets the node table")
	assert.LessOrEqual(t, float64(hi.BytesReceived-t2), bound*float64(lo.BytesReceived-t1), "bytes beyond the node table grow with the ranks")
	assert.LessOrEqual(t, float64(hi.Received), bound*float64(lo.Received), "messages received grow with the ranks")
}
