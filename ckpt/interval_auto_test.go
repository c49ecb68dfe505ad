package ckpt

import (
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/policy"
	"github.com/ftigo/ftigo/vfd"
)

// costDriver advances its rank's fake clock by d at every file it
// creates: a checkpoint then costs, on that clock, a fixed time per file
// it writes, which the runtime measures as its cost.
type costDriver struct {
	vfd.Driver
	clk *fakeClock
	d   time.Duration
}

func (c costDriver) Open(name string, f vfd.Flag) (vfd.File, error) {
	if f&vfd.OCreate != 0 {
		c.clk.Advance(c.d)
	}
	return c.Driver.Open(name, f)
}

// seedFailures writes a run history of one ended launch that ran
// exposure and saw fails[l-1] failures of level l, as records dropped
// from a long history. Its rates are fails/exposure, and the test run
// adds too little running to move them.
func seedFailures(t *testing.T, metaDir string, exposure time.Duration, fails [4]int64) {
	t.Helper()
	h := &policy.History{DroppedExposure: exposure.Nanoseconds(), DroppedFailures: fails}
	h.AddLaunch(policy.Launch{Start: 1, Seen: 2, End: 2, Ending: policy.EndClose, Ranks: 2, Nodes: 1})
	raw, err := h.Marshal()
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(metaDir, 0o755))
	require.NoError(t, os.WriteFile(historyPath(metaDir), raw, 0o644))
}

// autoRun runs 2 ranks on one node (levels 1 and 4) through iters
// iterations of step each, calling Snapshot with ckpt_interval = auto.
// L1 files cost local per file created, L4's global. It returns rank
// 0's final plan (as Interval reports it, and unrounded) and the run's
// history.
func autoRun(t *testing.T, cfg Config, iters int, step, local, global time.Duration) (IntervalPlan, policy.Plan, *policy.History) {
	t.Helper()
	var plan IntervalPlan
	var exact policy.Plan
	var mu sync.Mutex
	err := comm.Run(2, func(c comm.Comm) error {
		clk := &fakeClock{t: time.Unix(1_000_000, 0)}
		sec := vfd.Sec2{}
		r, err := Init(cfg, c, WithLogger(zaptest.NewLogger(t)), WithWarnings(tbWriter{t}), WithClock(clk.Now),
			WithSignals(make(chan os.Signal, 1)),
			WithDrivers(costDriver{sec, clk, local}, costDriver{sec, clk, global}, sec))
		if err != nil {
			return err
		}
		defer r.Close()
		x := make([]float64, 64)
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		for it := 1; it <= iters; it++ {
			x[0] = float64(it)
			clk.Advance(step)
			if _, err := r.Snapshot(); err != nil {
				return err
			}
		}
		if c.Rank() == 0 {
			mu.Lock()
			plan, exact = r.Interval(), r.pol.cur.Plan
			mu.Unlock()
		}
		return nil
	}, comm.WithTimeout(120*time.Second))
	require.NoError(t, err)
	return plan, exact, readHistory(t, cfg.MetaDir)
}

// measured is the estimate's cost of level l: the median blocked time of
// its newest policy.Samples checkpoints in h, in seconds.
func measured(t *testing.T, h *policy.History, l int) float64 {
	t.Helper()
	var s []float64
	for i := len(h.Checkpoints) - 1; i >= 0 && len(s) < policy.Samples; i-- {
		if c := h.Checkpoints[i]; c.Level == l {
			s = append(s, float64(c.Blocked)/1e9)
		}
	}
	require.NotEmpty(t, s, "no L%d checkpoint measured", l)
	slices.Sort(s)
	assert.Equal(t, s[0], s[len(s)-1], "L%d costs the same each time on the fake clock", l)
	return s[len(s)/2]
}

// exposure is the running the history has seen, in seconds.
func exposure(h *policy.History) float64 {
	e := h.DroppedExposure
	for _, l := range h.Launches {
		e += l.Exposure()
	}
	return float64(e) / 1e9
}

// gaps are the computation between the starts of consecutive
// checkpoints of the last launch, less the earlier one's cost, in
// seconds, with the levels of the later ones.
func gaps(h *policy.History) ([]float64, []int) {
	start := h.Launches[len(h.Launches)-1].Start
	var g []float64
	var lv []int
	var prev *policy.Checkpoint
	for i := range h.Checkpoints {
		c := &h.Checkpoints[i]
		if c.Time < start {
			continue
		}
		if prev != nil {
			g = append(g, float64(c.Time-prev.Time-prev.Blocked)/1e9)
			lv = append(lv, c.Level)
		}
		prev = c
	}
	return g, lv
}

// One level with failures: ckpt_interval = auto checkpoints at L4 (the
// only level that recovers them, the top one) every Daly's period for the measured cost C and the history's MTBF M,
// sqrt(2CM)(1 + sqrt(C/2M)/3 + C/18M) - C, within one iteration; that
// is Young's sqrt(2CM) less about 2C/3.
func TestAutoIntervalOneLevel(t *testing.T) {
	cfg := testConfig(t.TempDir(), 2)
	cfg.Policy.Auto = true
	// 1,000 L4 failures in 1,000 hours: an MTBF of one hour.
	seedFailures(t, cfg.MetaDir, 1000*time.Hour, [4]int64{0, 0, 0, 1000})
	step := time.Second
	plan, exact, h := autoRun(t, cfg, 2000, step, 500*time.Millisecond, 3*time.Second)

	c := measured(t, h, 4)
	m := exposure(h) / 1000
	young := math.Sqrt(2 * c * m)
	x := c / (2 * m)
	daly := young*(1+math.Sqrt(x)/3+x/9) - c
	t.Logf("L4 cost %.3f s, MTBF %.1f s: Young %.2f s, Daly %.2f s; plan %+v", c, m, young, daly, plan)
	require.Equal(t, []int{4}, plan.Levels, "one level: no failure L1 alone recovers")
	// The plan was made at the last checkpoint: the run's last seconds
	// of exposure move M by under 0.1%.
	assert.InDelta(t, daly, exact.Segment(), 0.001*daly)
	assert.InDelta(t, daly, plan.Periods[0].Seconds(), 0.5, "Interval rounds to the second")
	assert.InDelta(t, young, daly, c, "Daly's period is Young's less about 2C/3")

	g, lv := gaps(h)
	require.GreaterOrEqual(t, len(g), 5, "a checkpoint every %.0f s in 2,000 s", daly)
	for i, gi := range g[1:] { // the first gap starts at Init
		assert.Equal(t, 4, lv[i+1])
		assert.GreaterOrEqual(t, gi, daly-1e-9, "gap %d", i+1)
		assert.Less(t, gi, daly+step.Seconds()+1e-9, "gap %d: within one iteration of the period", i+1)
	}
}

// Two levels with failures of each: the plan is the multi-level optimum
// of the model in internal/policy, computed here from its formulas for
// the measured costs C1 < C4 and rates r1, r4. With L1 and L4 used, band
// costs are c1 = C1 and c4 = C4 - C1; n1 checkpoints (n1 a multiple of
// n4 = 1) in a pattern of W seconds of work cost sum n c and lose
// sum r W/(2n); the best W is sqrt(2 sum n c / sum r/n) and the rational
// best ratio n1/n4 is sqrt(r1/c1)/sqrt(r4/c4), rounded down or up. L4
// alone costs C4 for every failure's period. The cheaper of the two is
// the plan.
func TestAutoIntervalTwoLevels(t *testing.T) {
	cfg := testConfig(t.TempDir(), 2)
	cfg.Policy.Auto = true
	// L1 failures every 10 minutes, L4 failures every 10 hours.
	seedFailures(t, cfg.MetaDir, 1000*time.Hour, [4]int64{6000, 0, 0, 100})
	step := time.Second
	plan, exact, h := autoRun(t, cfg, 3000, step, 250*time.Millisecond, 2*time.Second)

	c1, c4 := measured(t, h, 1), measured(t, h, 4)
	require.Greater(t, c4, c1)
	e := exposure(h)
	r1, r4 := 6000/e, 100/e
	// The recovery of a level never restarted from is its cost.
	overhead := func(n1 int) (h, w float64) {
		cost := float64(n1)*c1 + (c4 - c1)
		loss := r1/float64(n1) + r4
		return math.Sqrt(2*cost*loss) + r1*c1 + r4*c4, math.Sqrt(2 * cost / loss)
	}
	ratio := math.Sqrt(r1/c1) / math.Sqrt(r4/(c4-c1))
	bestN, bestH, bestW := 0, math.Inf(1), 0.0
	for _, n := range []int{int(math.Floor(ratio)), int(math.Ceil(ratio))} {
		if h, w := overhead(n); n > 1 && h < bestH {
			bestN, bestH, bestW = n, h, w
		}
	}
	alone := math.Sqrt(2*c4*(r1+r4)) + (r1+r4)*c4
	t.Logf("C1 %.3f s, C4 %.3f s, r1 1/%.0f s, r4 1/%.0f s: ratio %.2f, n1 %d, W %.1f s, H %.4f (L4 alone %.4f); plan %+v",
		c1, c4, 1/r1, 1/r4, ratio, bestN, bestW, bestH, alone, plan)
	require.Less(t, bestH, alone, "the test's costs make two levels the better plan")
	require.Equal(t, []int{1, 4}, plan.Levels)
	seg := bestW / float64(bestN)
	assert.Equal(t, []int{bestN, 1}, exact.Counts)
	assert.InDelta(t, seg, exact.Segment(), 0.001*seg, "L1 (or above) every W/n1")
	assert.InDelta(t, bestW, exact.Work, 0.001*bestW, "L4 every W")
	assert.InDelta(t, bestH, exact.Overhead, 0.001*bestH)
	assert.InDelta(t, bestH/(1+bestH), plan.Waste, 0.001*bestH)
	assert.InDelta(t, bestW, plan.Periods[1].Seconds(), 0.5, "Interval rounds to the second")

	// The checkpoints follow the pattern: every n1-th is L4, each after
	// one segment of computation (within one iteration).
	g, lv := gaps(h)
	require.GreaterOrEqual(t, len(g), 2*bestN, "two patterns")
	first := slices.Index(lv, 4)
	require.GreaterOrEqual(t, first, 0)
	for i := first; i < len(lv); i++ {
		want := 1
		if (i-first)%bestN == 0 {
			want = 4
		}
		assert.Equal(t, want, lv[i], "checkpoint %d after the first L4", i-first)
		assert.GreaterOrEqual(t, g[i], seg-1e-9, "gap %d", i)
		assert.Less(t, g[i], seg+step.Seconds()+1e-9, "gap %d", i)
	}
}
