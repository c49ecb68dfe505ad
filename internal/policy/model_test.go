package policy

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const day = 86400.0

// The worked examples below were computed by hand (and checked with a
// calculator); the test repeats none of the code's arithmetic.
func TestYoungDaly(t *testing.T) {
	// C = 60 s, M = 1 day: sqrt(2 * 60 * 86400) = sqrt(10368000).
	assert.InDelta(t, 3219.9379, Young(60, day), 1e-3)
	// Daly: x = 60/172800; sqrt(10368000)*(1 + sqrt(x)/3 + x/9) - 60.
	assert.InDelta(t, 3180.0621, Daly(60, day), 1e-3)
	// Past c >= 2m Daly's period is m.
	assert.Equal(t, 100.0, Daly(300, 100))
}

func TestOptimizeOneLevel(t *testing.T) {
	// One level: Young's period and H = sqrt(2C/M) + R/M.
	p := Optimize([]Level{{ID: 4, Cost: 60, Recovery: 30, Rate: 1 / day}})
	require.Equal(t, []int{4}, p.Levels)
	require.Equal(t, []int{1}, p.Counts)
	assert.InDelta(t, 3219.9379, p.Work, 1e-3)
	assert.InDelta(t, 0.0376150, p.Overhead, 1e-6)
	assert.InDelta(t, 0.0376150/1.0376150, p.Waste(), 1e-6)
	assert.Equal(t, 4, p.LevelAt(1))
	assert.Equal(t, 4, p.LevelAt(7))
}

func TestOptimizeTwoLevels(t *testing.T) {
	// L1 costs 10 s, L2 100 s (90 s above L1); L1 failures 4 a day,
	// L2 failures 1 a day. Paper: n1/n2 = sqrt(l1 c2 / (l2 c1)) =
	// sqrt(4 * 90 / 10) = 6, whole. H = sqrt(2) (sqrt(l1 c1) +
	// sqrt(l2 c2)) = sqrt(2) (sqrt(40/86400) + sqrt(90/86400)) =
	// 0.0760726; W = sqrt(2 (6*10 + 90) / (l1/6 + l2)) = 3943.60 s.
	ls := []Level{
		{ID: 1, Cost: 10, Rate: 4 / day},
		{ID: 2, Cost: 100, Rate: 1 / day},
	}
	p := Optimize(ls)
	require.Equal(t, []int{1, 2}, p.Levels)
	require.Equal(t, []int{6, 1}, p.Counts)
	assert.InDelta(t, 0.0760726, p.Overhead, 1e-6)
	assert.InDelta(t, 3943.60, p.Work, 1e-2)
	assert.InDelta(t, 3943.60/6, p.Segment(), 1e-2)
	assert.InDelta(t, 3943.60/6, p.Period(1), 1e-2)
	assert.InDelta(t, 3943.60, p.Period(2), 1e-2)
	assert.True(t, math.IsInf(p.Period(3), 1))
	// The pattern: five L1 checkpoints, then L2.
	var got []int
	for i := 1; i <= 12; i++ {
		got = append(got, p.LevelAt(i))
	}
	assert.Equal(t, []int{1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 2}, got)
	// L2 alone would cost sqrt(2 * 100 * 5/86400) = 0.107583.
	only := Optimize([]Level{{ID: 2, Cost: 100, Rate: 5 / day}})
	assert.InDelta(t, 0.107583, only.Overhead, 1e-6)
	// The plan's own overhead, evaluated again, is the same.
	assert.InDelta(t, p.Overhead, Evaluate(p, ls), 1e-12)
	// At twice the period the first-order overhead is
	// 150/(2W) + (l1/6 + l2) W: (0.5 + 2)/2 = 1.25 times the optimum's
	// loss-free part; recoveries are 0 here.
	double := p
	double.Work *= 2
	assert.InDelta(t, 1.25*p.Overhead, Evaluate(double, ls), 1e-9)
}

func TestOptimizeRounds(t *testing.T) {
	// n1/n2 = sqrt(3 * 90 / 10) = 5.196: 5 and 6 are tried; 5 wins.
	// H(n) = sqrt(2 (10n + 90)(3/(n day) + 1/day)).
	ls := []Level{{ID: 1, Cost: 10, Rate: 3 / day}, {ID: 2, Cost: 100, Rate: 1 / day}}
	p := Optimize(ls)
	h := func(n float64) float64 { return math.Sqrt(2 * (10*n + 90) * (3/n + 1) / day) }
	require.Equal(t, []int{5, 1}, p.Counts)
	assert.InDelta(t, h(5), p.Overhead, 1e-9)
	assert.Less(t, h(5), h(6))
	// The rational optimum is below both.
	assert.Less(t, math.Sqrt(2)*(math.Sqrt(3*10/day)+math.Sqrt(90/day)), h(5))
}

func TestOptimizeSubsets(t *testing.T) {
	t.Run("a costly middle level is skipped", func(t *testing.T) {
		// L2 costs more than L3: never worth it, its failures go to L3.
		p := Optimize([]Level{
			{ID: 1, Cost: 1, Rate: 10 / day},
			{ID: 2, Cost: 50, Rate: 1 / day},
			{ID: 3, Cost: 40, Rate: 1 / day},
		})
		assert.Equal(t, []int{1, 3}, p.Levels)
	})
	t.Run("rare failures of a cheap level", func(t *testing.T) {
		// L1 barely cheaper than L2 and its failures rare: L2 alone.
		// {1,2}: n1/n2 = sqrt((0.01/10)/(1/1)) < 1, not nested.
		p := Optimize([]Level{{ID: 1, Cost: 10, Rate: 0.01 / day}, {ID: 2, Cost: 11, Rate: 1 / day}})
		assert.Equal(t, []int{2}, p.Levels)
		// L2 covers both: H = sqrt(2 * 11 * 1.01/day).
		assert.InDelta(t, math.Sqrt(2*11*1.01/day), p.Overhead, 1e-9)
	})
	t.Run("levels above the failures are not used", func(t *testing.T) {
		p := Optimize([]Level{{ID: 1, Cost: 1, Rate: 1 / day}, {ID: 4, Cost: 100}})
		assert.Equal(t, []int{1}, p.Levels)
	})
	t.Run("a level without a cost gives its failures above", func(t *testing.T) {
		p := Optimize([]Level{{ID: 1, Cost: 0, Rate: 1 / day}, {ID: 4, Cost: 8, Rate: 1 / day}})
		assert.Equal(t, []int{4}, p.Levels)
		assert.InDelta(t, math.Sqrt(2*8*2/day), p.Overhead, 1e-9)
	})
	t.Run("no failures: no checkpoint", func(t *testing.T) {
		p := Optimize([]Level{{ID: 1, Cost: 1}, {ID: 4, Cost: 9}})
		assert.Empty(t, p.Levels)
		assert.True(t, math.IsInf(p.Work, 1))
		assert.True(t, math.IsInf(p.Segment(), 1))
		assert.Equal(t, 0, p.LevelAt(1))
	})
	t.Run("no level covers the failures", func(t *testing.T) {
		p := Optimize([]Level{{ID: 1, Cost: 1, Rate: 1 / day}, {ID: 4, Cost: -1, Rate: 1 / day}})
		assert.Empty(t, p.Levels)
		assert.True(t, math.IsInf(p.Overhead, 1))
	})
}

func TestOptimizeFourLevelsIsBestOfAll(t *testing.T) {
	// The optimizer's pattern is no worse than any nested pattern of a
	// small exhaustive search over subsets, counts and periods.
	ls := []Level{
		{ID: 1, Cost: 2, Recovery: 1, Rate: 6 / day},
		{ID: 2, Cost: 9, Recovery: 5, Rate: 2 / day},
		{ID: 3, Cost: 20, Recovery: 15, Rate: 0.5 / day},
		{ID: 4, Cost: 120, Recovery: 100, Rate: 0.1 / day},
	}
	p := Optimize(ls)
	require.NotEmpty(t, p.Levels)
	assert.Equal(t, 4, p.Levels[len(p.Levels)-1])
	best := math.Inf(1)
	for mask := 8; mask < 16; mask++ { // subsets holding L4
		var ids []int
		for i := range 4 {
			if mask&(1<<i) != 0 {
				ids = append(ids, i+1)
			}
		}
		var walk func(j int, counts []int)
		walk = func(j int, counts []int) {
			if j < 0 {
				for w := 100.0; w < 100000; w *= 1.02 {
					best = min(best, Evaluate(Plan{Levels: ids, Counts: counts, Work: w}, ls))
				}
				return
			}
			for k := 2; k <= 12; k++ {
				c := append([]int{counts[0] * k}, counts...)
				walk(j-1, c)
			}
		}
		walk(len(ids)-2, []int{1})
	}
	assert.LessOrEqual(t, p.Overhead, best*(1+1e-4), "search found %v, Optimize %v (%+v)", best, p.Overhead, p)
}

func TestExactOverhead(t *testing.T) {
	// lambda = 1/3600, w = 600, c = 60, r = 0: (e^(660/3600) - 1)*3600/600 - 1.
	want := (math.Exp(660.0/3600)-1)*3600/600 - 1
	assert.InDelta(t, want, ExactOverhead(600, 60, 0, 1.0/3600), 1e-12)
	// Without failures only the checkpoints cost.
	assert.InDelta(t, 0.1, ExactOverhead(600, 60, 0, 0), 1e-12)
	// The exact optimum is close to Daly's for c << m, and its overhead
	// is below Young's and Daly's.
	w := ExactOptimum(10, 10, 1.0/86400)
	assert.InDelta(t, Daly(10, 86400), w, 0.01*w)
	e := ExactOverhead(w, 10, 10, 1.0/86400)
	assert.LessOrEqual(t, e, ExactOverhead(Young(10, 86400), 10, 10, 1.0/86400)*(1+1e-12))
	assert.LessOrEqual(t, e, ExactOverhead(Daly(10, 86400), 10, 10, 1.0/86400)*(1+1e-12))
}

func TestFixedOverhead(t *testing.T) {
	// L1 every 600 s, L4 every 3600 s; L1 failures 4/day, L4 1/day.
	// Cost rate: 10/600 + 100/3600; L1 failures see checkpoints every
	// 1/(1/600 + 1/3600) = 514.29 s, L4 failures every 3600 s.
	ls := []Level{{ID: 1, Cost: 10, Recovery: 5, Rate: 4 / day}, {ID: 4, Cost: 100, Recovery: 50, Rate: 1 / day}}
	got := FixedOverhead([MaxLevels]float64{600, 0, 0, 3600}, ls)
	want := 10.0/600 + 100.0/3600 + 4/day*(514.2857/2+5) + 1/day*(1800+50)
	assert.InDelta(t, want, got, 1e-6)
	assert.True(t, math.IsInf(FixedOverhead([MaxLevels]float64{600}, ls), 1), "L4 failures with no L4 checkpoint")
}

func TestCursor(t *testing.T) {
	p := Plan{Levels: []int{1, 2, 4}, Counts: []int{6, 2, 1}, Work: 600}
	c := NewCursor(p)
	var got []int
	for range 6 {
		assert.Equal(t, 0, c.Due(99))
		got = append(got, c.Due(100))
		c.Advance()
	}
	assert.Equal(t, []int{1, 1, 2, 1, 1, 4}, got)
	c.Next = 5
	c.Replan(Plan{Levels: []int{1, 4}, Counts: []int{3, 1}, Work: 300})
	assert.Equal(t, 2, c.Next)
	assert.Equal(t, 1, c.Due(100))
}

func TestFailureLevel(t *testing.T) {
	for _, tc := range []struct{ lost, skipped, want int }{
		{0, 0, 1}, {1, 0, 2}, {3, 0, 2}, {0, 1, 2}, {1, 2, 3}, {0, 3, 4}, {2, 4, 4},
	} {
		assert.Equal(t, tc.want, FailureLevel(tc.lost, tc.skipped), "%+v", tc)
	}
}
