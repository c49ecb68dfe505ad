package policy

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// FTITemplate is the fixed intervals of FTI's configuration template
// (ckpt_l1..ckpt_l4 = 3, 5, 7 and 11 minutes), in seconds.
var FTITemplate = [MaxLevels]float64{180, 300, 420, 660}

// CompareConfig is a simulated long run on which schedules are
// compared: the levels as they really are (costs, recoveries and the
// rates of the failures drawn), the work of each simulated job and how
// many jobs (seeds 1..Seeds, the same failures for every schedule).
type CompareConfig struct {
	Levels   []Level
	Work     float64
	Seeds    int
	Downtime float64
	// Nodes is the job's node count, for the auto schedule's priors.
	Nodes int
}

// CompareRow is one schedule's result.
type CompareRow struct {
	Name string `json:"name"`
	// Schedule says what it did: its levels and periods.
	Schedule string `json:"schedule"`
	// Waste is the share of the jobs' wall time not spent on the work
	// they kept, summed over the seeds.
	Waste       float64             `json:"waste"`
	Checkpoints [MaxLevels]int      `json:"checkpoints"`
	Failures    [MaxLevels]int      `json:"failures"`
	Intervals   *[MaxLevels]float64 `json:"fixed_intervals_s,omitempty"`
}

// CompareResult is every schedule's result.
type CompareResult struct {
	// Auto learns the failure rates from the failures it sees; AutoMTBF
	// is given them (the mtbf keys).
	Auto, AutoMTBF CompareRow
	// Optimum follows the model's plan for the true inputs (what auto
	// converges to); Young the single-level optimum at the lowest level
	// that recovers every failure, every sqrt(2CM) seconds of work.
	Optimum, Young CompareRow
	// Grid is the best FTI-style fixed intervals a grid search found
	// (simulated on the same failures); FTI the template's intervals.
	Grid, FTI CompareRow
	// GridSize counts the fixed schedules the search simulated.
	GridSize int `json:"grid_size"`
}

// Rows lists the results in the order printed.
func (r CompareResult) Rows() []CompareRow {
	return []CompareRow{r.Auto, r.AutoMTBF, r.Optimum, r.Young, r.Grid, r.FTI}
}

// simulate runs the jobs of cfg under the schedulers s makes (one per
// seed) and sums their results.
func (cfg CompareConfig) simulate(name, schedule string, s func() Scheduler) CompareRow {
	row := CompareRow{Name: name, Schedule: schedule}
	var t, work float64
	for seed := 1; seed <= max(cfg.Seeds, 1); seed++ {
		res := Simulate(SimConfig{Levels: cfg.Levels, Work: cfg.Work, Downtime: cfg.Downtime, Seed: uint64(seed)}, s())
		t += res.Time
		work += res.Work
		for i := range MaxLevels {
			row.Checkpoints[i] += res.Checkpoints[i]
			row.Failures[i] += res.Failures[i]
		}
	}
	row.Waste = 1 - work/t
	return row
}

// Compare simulates the schedules of CompareResult on cfg.
func Compare(cfg CompareConfig) CompareResult {
	var avail []int
	var pr Priors
	top, rate := 0, 0.0
	for _, l := range cfg.Levels {
		avail = append(avail, l.ID)
		if l.Rate > 0 {
			pr.Level[l.ID-1] = 1 / l.Rate
			top = max(top, l.ID)
			rate += l.Rate
		}
	}
	slices.Sort(avail)
	var res CompareResult
	res.Auto = cfg.simulate("auto", "learns the rates", func() Scheduler { return NewAutoScheduler(avail, cfg.Nodes, Priors{}) })
	res.AutoMTBF = cfg.simulate("auto, mtbf keys", "given the rates", func() Scheduler { return NewAutoScheduler(avail, cfg.Nodes, pr) })
	opt := Optimum(cfg.Levels)
	res.Optimum = cfg.simulate("model optimum", describePlan(opt), func() Scheduler { return NewPlanScheduler(opt) })
	cost := 0.0
	for _, l := range cfg.Levels {
		if l.ID == top {
			cost = l.Cost
		}
	}
	young := Plan{Levels: []int{top}, Counts: []int{1}, Work: Young(cost, 1/rate)}
	res.Young = cfg.simulate("Young", describePlan(young), func() Scheduler { return NewPlanScheduler(young) })
	var fti [MaxLevels]float64
	for _, id := range avail {
		fti[id-1] = FTITemplate[id-1]
	}
	res.FTI = cfg.fixed("FTI template", fti)
	res.Grid, res.GridSize = cfg.gridSearch(avail, top, young.Work)
	return res
}

// fixed simulates FTI's rule with intervals iv.
func (cfg CompareConfig) fixed(name string, iv [MaxLevels]float64) CompareRow {
	row := cfg.simulate(name, describeFixed(iv), func() Scheduler { return &FixedScheduler{Intervals: iv} })
	row.Intervals = &iv
	return row
}

// gridSearch looks for the fixed intervals of least simulated waste:
// first the top level alone on a log grid around start (1/8 to 8 times,
// 2^(1/4) apart), then each level in turn, top down, on the same grid
// (the lower ones also off), until a pass improves nothing (at most
// four). It returns the best and the number of schedules simulated.
func (cfg CompareConfig) gridSearch(avail []int, top int, start float64) (CompareRow, int) {
	var grid []float64
	for e := -12; e <= 12; e++ {
		grid = append(grid, start*math.Pow(2, float64(e)/4))
	}
	seen := map[[MaxLevels]float64]CompareRow{}
	var best CompareRow
	best.Waste = math.Inf(1)
	var cur [MaxLevels]float64
	try := func(iv [MaxLevels]float64) bool {
		r, ok := seen[iv]
		if !ok {
			r = cfg.fixed("grid search", iv)
			seen[iv] = r
		}
		if r.Waste < best.Waste {
			best, cur = r, iv
			return true
		}
		return false
	}
	for _, g := range grid {
		iv := [MaxLevels]float64{}
		iv[top-1] = g
		try(iv)
	}
	for range 4 {
		better := false
		for i := len(avail) - 1; i >= 0; i-- {
			id := avail[i]
			values := grid
			if id != top {
				values = append([]float64{0}, grid...)
			}
			base := cur
			for _, g := range values {
				iv := base
				iv[id-1] = g
				if try(iv) {
					better = true
				}
			}
		}
		if !better {
			break
		}
	}
	return best, len(seen)
}

func describePlan(p Plan) string {
	var parts []string
	for j, l := range p.Levels {
		parts = append(parts, fmt.Sprintf("L%d every %.1f s of work", l, p.Work/float64(p.Counts[j])))
	}
	if len(parts) == 0 {
		return "no checkpoint"
	}
	return strings.Join(parts, ", ")
}

func describeFixed(iv [MaxLevels]float64) string {
	var parts []string
	for i, v := range iv {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("L%d every %.1f s", i+1, v))
		}
	}
	if len(parts) == 0 {
		return "no checkpoint"
	}
	return strings.Join(parts, ", ")
}
