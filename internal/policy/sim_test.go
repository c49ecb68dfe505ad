package policy

import (
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

func TestSimulateFailureRollsBack(t *testing.T) {
	// Level-4 failures only, L1 checkpoints only: every failure restarts
	// from the start, so a long job never ends... within reason: with
	// work 1000 and MTBF 1e6 most seeds finish, losing everything each
	// time.
	ls := []Level{{ID: 1, Cost: 1}, {ID: 4, Cost: 5, Rate: 1e-6}}
	res := Simulate(SimConfig{Levels: ls, Work: 1000, Seed: 3}, NewPlanScheduler(Plan{Levels: []int{1}, Counts: []int{1}, Work: 10}))
	assert.Equal(t, 0, res.Failures[3], "seed 3 meets no failure in 1,100 s")
	assert.Equal(t, 99, res.Checkpoints[0])
}

func TestAutoConvergesToTheOptimum(t *testing.T) {
	// One level, MTBF 1 h, no MTBF configured: the planner starts from
	// the default prior (a day) and learns the rate from the failures.
	const c, r, m = 10.0, 20.0, 3600.0
	ls := []Level{{ID: 4, Cost: c, Recovery: r, Rate: 1 / m}}
	a := NewAutoScheduler([]int{4}, 4, Priors{})
	res := Simulate(SimConfig{Levels: ls, Work: 3e6, Seed: 11}, a)
	opt := Daly(c, m)
	got := a.P.Plan()
	assert.InDelta(t, opt, got.Work, 0.1*opt, "learned period %v, optimum %v", got.Work, opt)
	assert.InDelta(t, m, MTBF(a.P.Inputs.Levels[0].Rate), 0.1*m)
	// And the job's waste is within 10% of the optimum's.
	h := ExactOverhead(ExactOptimum(c, r, 1/m), c, r, 1/m)
	assert.InDelta(t, h/(1+h), res.Waste(), 0.1*h/(1+h))
}

func TestAutoMultiLevelConverges(t *testing.T) {
	ls := []Level{
		{ID: 1, Cost: 2, Recovery: 2, Rate: 1 / 3600.0},
		{ID: 2, Cost: 6, Recovery: 6, Rate: 1 / 7200.0},
		{ID: 3, Cost: 10, Recovery: 12, Rate: 1 / 28800.0},
		{ID: 4, Cost: 60, Recovery: 60, Rate: 1 / 86400.0},
	}
	a := NewAutoScheduler([]int{1, 2, 3, 4}, 8, Priors{})
	Simulate(SimConfig{Levels: ls, Work: 2e7, Seed: 5}, a)
	opt := Optimize(ls)
	got := a.P.Plan()
	require.NotEmpty(t, got.Levels)
	assert.Equal(t, opt.Levels, got.Levels)
	assert.InDelta(t, opt.Overhead, Evaluate(got, ls), 0.05*opt.Overhead, "learned %+v, optimum %+v", got, opt)
	for _, l := range a.P.Inputs.Levels {
		assert.InDelta(t, 1/ls[l.ID-1].Rate, MTBF(l.Rate), 0.25/ls[l.ID-1].Rate, "level %d", l.ID)
	}
	assert.False(t, math.IsInf(got.Work, 0))
}
