package policy

import (
	"math"
	"slices"
)

// Priors are the failure rates a user configured (the mtbf keys), as
// mean times between failures in seconds (0: not set).
type Priors struct {
	// Level[l-1] is the MTBF of failures that need level l.
	Level [MaxLevels]float64
	// Node is the MTBF of one node; a job of n nodes loses one every
	// Node/n seconds, a failure L2 recovers (L3 or L4 when the run has
	// no L2).
	Node float64
	// Job is the MTBF of the job, every failure counted at the top level.
	Job float64
}

// DefaultJobMTBF is the top level's prior when no MTBF is configured
// for it and the run has seen no failure of it: one failure a day.
const DefaultJobMTBF = 24 * 3600.0

// Samples is how many of the newest measurements an estimate uses.
const Samples = 9

// GuessCost is the cost assumed, in seconds, for a level when no level
// has been measured yet.
const GuessCost = 1.0

// Inputs are the model's inputs for one run, derived from its history
// and its priors.
type Inputs struct {
	// Levels are the levels the run may use, ascending.
	Levels []Level
	// Measured[l-1] says level l's cost was measured, not guessed.
	Measured [MaxLevels]bool
	// Failures[l-1] counts the failures of level l the run saw, over
	// Exposure seconds of running.
	Failures [MaxLevels]int
	Exposure float64
}

// Estimate derives the model's inputs for the levels avail (ascending
// IDs) of a run of nodes nodes from its history h and priors p:
//
//   - a level's cost is the median blocked time of its newest Samples
//     checkpoints; an unmeasured level costs twice the level below it
//     (measured or estimated), else half the measured level above it,
//     else GuessCost;
//   - its total (background work included) is the median of the same
//     checkpoints' totals, else its cost;
//   - its recovery is the median of its newest restarts' Init time,
//     else its cost;
//   - its rate is (n + a)/(T + a·M): n failures seen over T seconds of
//     running, and a = 1 pseudo-failure at the configured MTBF M (a = 0
//     without one). With no MTBF configured for the top level and no
//     failure of it seen, the top level gets DefaultJobMTBF, so every
//     plan keeps a level that survives every failure.
func Estimate(h *History, avail []int, nodes int, p Priors) Inputs {
	var in Inputs
	// The newest Samples costs and recoveries of each level.
	var costs, totals, recov [MaxLevels + 1][]float64
	for i := len(h.Checkpoints) - 1; i >= 0; i-- {
		c := h.Checkpoints[i]
		if c.Level >= 1 && c.Level <= MaxLevels && len(costs[c.Level]) < Samples {
			costs[c.Level] = append(costs[c.Level], float64(c.Blocked)/1e9)
			totals[c.Level] = append(totals[c.Level], float64(max(c.Total, c.Blocked))/1e9)
		}
	}
	exposure := h.DroppedExposure
	for l, n := range h.DroppedFailures {
		in.Failures[l] += int(n)
	}
	for i := len(h.Launches) - 1; i >= 0; i-- {
		l := h.Launches[i]
		if r := l.Restart; r != nil && r.Level >= 1 && r.Level <= MaxLevels && len(recov[r.Level]) < Samples {
			recov[r.Level] = append(recov[r.Level], float64(r.Recover)/1e9)
		}
		if l.Failure >= 1 && l.Failure <= MaxLevels {
			in.Failures[l.Failure-1]++
		}
		exposure += l.Exposure()
	}
	in.Exposure = float64(exposure) / 1e9
	for _, id := range avail {
		if id < 1 || id > MaxLevels {
			continue
		}
		lv := Level{ID: id, Cost: -1}
		if s := costs[id]; len(s) > 0 {
			lv.Cost, lv.Total = median(s), median(totals[id])
			in.Measured[id-1] = true
		}
		in.Levels = append(in.Levels, lv)
	}
	for i := range in.Levels {
		lv := &in.Levels[i]
		if lv.Cost < 0 {
			lv.Cost = guessCost(in.Levels, i)
			lv.Total = lv.Cost
		}
		lv.Recovery = lv.Cost
		if s := recov[lv.ID]; len(s) > 0 {
			lv.Recovery = median(s)
		}
	}
	prior := priorMTBF(p, avail, nodes)
	// The top level keeps a rate: a run that has seen only failures
	// below it would otherwise drop it, and its first failure there
	// would start the job again from nothing.
	if len(avail) > 0 {
		if top := avail[len(avail)-1]; prior[top-1] == 0 && in.Failures[top-1] == 0 {
			prior[top-1] = DefaultJobMTBF
		}
	}
	for i := range in.Levels {
		lv := &in.Levels[i]
		n, m := float64(in.Failures[lv.ID-1]), prior[lv.ID-1]
		// Failures of a level the run cannot use count at the next one.
		for l := lv.ID - 1; l >= 1 && (i == 0 || l > in.Levels[i-1].ID); l-- {
			n += float64(in.Failures[l-1])
			if prior[l-1] > 0 {
				m = combine(m, prior[l-1])
			}
		}
		switch {
		case m > 0:
			lv.Rate = (n + 1) / (in.Exposure + m)
		case in.Exposure > 0:
			lv.Rate = n / in.Exposure
		}
	}
	return in
}

// combine returns the MTBF of two independent failure sources.
func combine(a, b float64) float64 {
	if a <= 0 {
		return b
	}
	return 1 / (1/a + 1/b)
}

// priorMTBF turns the priors into an MTBF per level (0: none).
func priorMTBF(p Priors, avail []int, nodes int) [MaxLevels]float64 {
	out := p.Level
	if len(avail) == 0 {
		return out
	}
	top := avail[len(avail)-1]
	if p.Job > 0 {
		out[top-1] = combine(out[top-1], p.Job)
	}
	if p.Node > 0 && nodes > 0 {
		l := top
		for _, id := range avail {
			if id >= 2 {
				l = id
				break
			}
		}
		out[l-1] = combine(out[l-1], p.Node/float64(nodes))
	}
	return out
}

// guessCost estimates the cost of unmeasured level ls[i].
func guessCost(ls []Level, i int) float64 {
	for j := i - 1; j >= 0; j-- {
		if ls[j].Cost > 0 {
			return 2 * ls[j].Cost
		}
	}
	for j := i + 1; j < len(ls); j++ {
		if ls[j].Cost > 0 {
			return ls[j].Cost / 2
		}
	}
	return GuessCost
}

// median of s (s is sorted in place).
func median(c []float64) float64 {
	slices.Sort(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

// FailureLevel classifies the failure that ended a launch from what the
// next launch saw: any unclean end is at least a level-1 failure; lost
// node-local files make it level 2; a newer checkpoint that could not
// be recovered puts it above that checkpoint's level.
func FailureLevel(lostNodes, skippedLevel int) int {
	l := 1
	if lostNodes > 0 {
		l = 2
	}
	if skippedLevel > 0 {
		l = max(l, skippedLevel+1)
	}
	return min(l, MaxLevels)
}

// MTBF returns 1/rate (+Inf for 0).
func MTBF(rate float64) float64 {
	if rate <= 0 {
		return math.Inf(1)
	}
	return 1 / rate
}
