package policy

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The simulator is the exact model of ExactOverhead for one level:
// failures strike at any moment, a restart may fail too.
func TestSimulateMatchesExactModel(t *testing.T) {
	const c, r, m = 10.0, 20.0, 3600.0
	ls := []Level{{ID: 4, Cost: c, Recovery: r, Rate: 1 / m}}
	for _, w := range []float64{100, Young(c, m), 1500} {
		res := Simulate(SimConfig{Levels: ls, Work: 2e7, Seed: 7},
			NewPlanScheduler(Plan{Levels: []int{4}, Counts: []int{1}, Work: w}))
		h := ExactOverhead(w, c, r, 1/m)
		assert.InDelta(t, h/(1+h), res.Waste(), 0.03*h/(1+h), "w = %v", w)
		assert.Greater(t, res.Failures[3], 4000)
		assert.InDelta(t, res.Work/w, float64(res.Checkpoints[3]), res.Work/w*0.01+float64(res.Failures[3]))
	}
}

func TestSimulateFixedIsFTIsRule(t *testing.T) {
	// L1 every 100 s and L4 every 300 s of wall time, no failures:
	// checkpoints at 100 (L1), 200 (L1), 300 (L4), ... as FTI's rule.
	ls := []Level{{ID: 1, Cost: 1}, {ID: 4, Cost: 5}}
	f := &FixedScheduler{Intervals: [MaxLevels]float64{100, 0, 0, 300}}
	rec := &recorder{Scheduler: f}
	res := Simulate(SimConfig{Levels: ls, Work: 1000}, rec)
	// At wall time 1000 the job has computed 1000 - 6*1 - 3*5 = 979 s:
	// one more L1 checkpoint before it ends.
	assert.Equal(t, []float64{100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}, rec.at)
	assert.Equal(t, []int{1, 1, 4, 1, 1, 4, 1, 1, 4, 1}, rec.levels)
	assert.Equal(t, [MaxLevels]int{7, 0, 0, 3}, res.Checkpoints)
	assert.InDelta(t, 1000+7*1+3*5, res.Time, 1e-9)
}

// recorder notes when each checkpoint ended.
type recorder struct {
	Scheduler
	at     []float64
	levels []int
}

func (r *recorder) Committed(now float64, level int, cost float64) {
	r.at = append(r.at, now-cost)
	r.levels = append(r.levels, level)
	r.Scheduler.Committed(now, level, cost)
}

// A failure of level l restarts from the newest checkpoint at l or
// above, or from the start; the work since it is lost.
func TestSimulateFailureRollsBack(t *testing.T) {
	// Level-4 failures only (MTBF 500 s), 10 s of work between
	// checkpoints, costs 1 s (L1) and 5 s (L4), no downtime.
	ls := []Level{{ID: 1, Cost: 1}, {ID: 4, Cost: 5, Recovery: 3, Rate: 1 / 500.0}}
	for _, tc := range []struct {
		plan Plan
		from int
	}{
		{Plan{Levels: []int{1}, Counts: []int{1}, Work: 10}, 0},
		{Plan{Levels: []int{4}, Counts: []int{1}, Work: 10}, 4},
	} {
		rec := &failRecorder{Scheduler: NewPlanScheduler(tc.plan)}
		res := Simulate(SimConfig{Levels: ls, Work: 1000, Seed: 3}, rec)
		require.NotEmpty(t, rec.from, "seed 3 meets failures")
		// A failure during a restart makes one relaunch of two failures.
		require.LessOrEqual(t, len(rec.from), res.Failures[3])
		for _, f := range rec.from {
			assert.Equal(t, tc.from, f, "plan %v", tc.plan.Levels)
		}
		if tc.from == 0 {
			// From the start each time: the job's time is its last launch,
			// plus every failed launch's time.
			assert.InDelta(t, res.Work+99*1, res.Time-rec.last, 1e-6)
			assert.Greater(t, res.Lost, 0.0)
		} else {
			// From L4 each time: at most 10 s of work lost per failure.
			assert.LessOrEqual(t, res.Lost, 10*float64(res.Failures[3])+1e-9)
			assert.InDelta(t, float64(len(rec.from))*3, rec.restart, 1e-9, "each restart took R4")
		}
	}
}

// failRecorder notes the level each relaunch restarted from, and the
// time of the last relaunch and the time restarts took.
type failRecorder struct {
	Scheduler
	from          []int
	last, restart float64
}

func (r *failRecorder) Launch(now float64) { r.last = now; r.Scheduler.Launch(now) }
func (r *failRecorder) Failed(now float64, level, recovered int, restart float64) {
	r.from = append(r.from, recovered)
	r.restart += restart
	r.Scheduler.Failed(now, level, recovered, restart)
}

// converged says why a one-level job's period and waste are not within
// 10% of the optimum's ("" when they are).
func converged(period float64, res SimResult, c, r, m float64) string {
	if opt := Daly(c, m); math.Abs(period-opt) > 0.1*opt {
		return fmt.Sprintf("period %.1f s, optimum %.1f s", period, opt)
	}
	h := ExactOverhead(ExactOptimum(c, r, 1/m), c, r, 1/m)
	if w := h / (1 + h); math.Abs(res.Waste()-w) > 0.1*w {
		return fmt.Sprintf("waste %.4f, optimum's %.4f", res.Waste(), w)
	}
	return ""
}

func TestAutoConvergesToTheOptimum(t *testing.T) {
	// One level, MTBF 1 h, no MTBF configured: the planner starts from
	// the default prior (a day) and learns the rate from the failures.
	const c, r, m = 10.0, 20.0, 3600.0
	ls := []Level{{ID: 4, Cost: c, Recovery: r, Rate: 1 / m}}
	a := NewAutoScheduler([]int{4}, 4, Priors{})
	res := Simulate(SimConfig{Levels: ls, Work: 3e6, Seed: 11}, a)
	assert.Greater(t, res.Failures[3], 700, "about 900 failures in the job's wall time")
	assert.Empty(t, converged(a.P.Plan().Work, res, c, r, m))
	assert.InDelta(t, m, MTBF(a.P.Inputs.Levels[0].Rate), 0.1*m)
	assert.Equal(t, [MaxLevels]float64{}, a.P.Priors.Level, "no MTBF given: the rate is learnt")

	// The check can fail: the same job at a wrong fixed period fails it,
	// by its period (20% off: the waste curve is flat there) or by its
	// waste too (half or twice the optimum: 25% more waste).
	for _, f := range []float64{0.5, 0.8, 1.2, 2} {
		w := f * Daly(c, m)
		res := Simulate(SimConfig{Levels: ls, Work: 3e6, Seed: 11}, NewPlanScheduler(Plan{Levels: []int{4}, Counts: []int{1}, Work: w}))
		assert.NotEmpty(t, converged(w, res, c, r, m), "factor %v", f)
		if f == 0.5 || f == 2 {
			assert.Contains(t, converged(Daly(c, m), res, c, r, m), "waste", "factor %v", f)
		}
	}
}

func TestAutoMultiLevelConverges(t *testing.T) {
	ls := []Level{
		{ID: 1, Cost: 2, Recovery: 2, Rate: 1 / 3600.0},
		{ID: 2, Cost: 6, Recovery: 6, Rate: 1 / 7200.0},
		{ID: 3, Cost: 10, Recovery: 12, Rate: 1 / 28800.0},
		{ID: 4, Cost: 60, Recovery: 60, Rate: 1 / 86400.0},
	}
	a := NewAutoScheduler([]int{1, 2, 3, 4}, 8, Priors{})
	res := Simulate(SimConfig{Levels: ls, Work: 2e7, Seed: 5}, a)
	opt := Optimize(ls)
	// The job's waste is within 10% of the optimum plan's, simulated
	// with the same failures; plans three times too long or short are
	// not, so the check can fail.
	simWaste := func(p Plan) float64 {
		return Simulate(SimConfig{Levels: ls, Work: 2e7, Seed: 5}, NewPlanScheduler(p)).Waste()
	}
	best := simWaste(opt)
	assert.InDelta(t, best, res.Waste(), 0.1*best, "auto's waste %v, the optimum's %v", res.Waste(), best)
	for _, f := range []float64{1 / 3.0, 3} {
		wrong := opt
		wrong.Work *= f
		assert.Greater(t, math.Abs(simWaste(wrong)-best), 0.1*best, "a plan %v times the optimum's", f)
	}
	got := a.P.Plan()
	require.NotEmpty(t, got.Levels)
	assert.Equal(t, opt.Levels, got.Levels)
	assert.InDelta(t, opt.Overhead, Evaluate(got, ls), 0.05*opt.Overhead, "learned %+v, optimum %+v", got, opt)
	for _, l := range a.P.Inputs.Levels {
		assert.InDelta(t, 1/ls[l.ID-1].Rate, MTBF(l.Rate), 0.25/ls[l.ID-1].Rate, "level %d", l.ID)
	}
	assert.False(t, math.IsInf(got.Work, 0))
}
