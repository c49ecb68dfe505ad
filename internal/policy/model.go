package policy

import (
	"math"
	"slices"
)

// MaxLevels is the number of checkpoint levels the model knows (1..4).
const MaxLevels = 4

// Level is what the model knows of one checkpoint level. Times are in
// seconds, rates in failures per second.
type Level struct {
	// ID is the level, 1..MaxLevels.
	ID int
	// Cost is the time a checkpoint at this level takes from the solver.
	// It includes the level's own write: an L3 checkpoint's cost is its
	// data file and its parity.
	Cost float64
	// Total is the time until a checkpoint at this level is complete,
	// its background post-processing included (Cost for a synchronous
	// level). The final checkpoint of a stop must fit in the time left.
	Total float64
	// Recovery is the time a restart from this level takes.
	Recovery float64
	// Rate is the rate of failures that need this level: they destroy
	// every checkpoint below it and none at or above it.
	Rate float64
}

// Plan is a periodic pattern of checkpoints. The pattern is Work
// seconds of computation cut into Counts[0] equal segments. A
// checkpoint ends each segment. Segment i (1-based) ends with the
// highest level Levels[j] for which i is a multiple of
// Counts[0]/Counts[j]. So Counts[j] is the number of checkpoints at
// Levels[j] or above in a pattern. The last count is 1: the pattern
// ends with the top level.
type Plan struct {
	Levels []int
	Counts []int
	// Work is the computation per pattern, in seconds (+Inf: never).
	Work float64
	// Overhead is the expected time lost per second of work, to first
	// order: checkpoints, re-executed work and restarts.
	Overhead float64
}

// Segment is the computation between two checkpoints, in seconds.
func (p Plan) Segment() float64 {
	if len(p.Counts) == 0 {
		return math.Inf(1)
	}
	return p.Work / float64(p.Counts[0])
}

// Waste is the expected fraction of the time not spent on work:
// Overhead/(1+Overhead).
func (p Plan) Waste() float64 { return p.Overhead / (1 + p.Overhead) }

// Period returns the computation between two checkpoints at level l
// or above (+Inf above the plan's top level).
func (p Plan) Period(l int) float64 {
	for j, id := range p.Levels {
		if id >= l {
			return p.Work / float64(p.Counts[j])
		}
	}
	return math.Inf(1)
}

// LevelAt returns the level that ends segment i (1-based, cyclic).
func (p Plan) LevelAt(i int) int {
	if len(p.Counts) == 0 {
		return 0
	}
	n := p.Counts[0]
	i = (i-1)%n + 1
	for j := len(p.Levels) - 1; j > 0; j-- {
		if i%(n/p.Counts[j]) == 0 {
			return p.Levels[j]
		}
	}
	return p.Levels[0]
}

// Young is Young's first-order optimal computation between two
// checkpoints of cost c under failures of mean time between them m:
// sqrt(2cm).
func Young(c, m float64) float64 { return math.Sqrt(2 * c * m) }

// Daly is Daly's higher-order estimate of the same period (2006):
// sqrt(2cm)(1 + sqrt(c/2m)/3 + c/18m) - c when c < 2m, else m.
func Daly(c, m float64) float64 {
	if c >= 2*m {
		return m
	}
	x := c / (2 * m)
	return math.Sqrt(2*c*m)*(1+math.Sqrt(x)/3+x/9) - c
}

// ExactOverhead is the expected time lost per second of work by a
// single-level periodic schedule under exponential failures of rate
// lambda that strike at any moment, restarts included. Each period
// computes w seconds and checkpoints for c; a failure costs r to
// restart and loses what was not checkpointed. The expected time of a
// period is e^(lambda r)(e^(lambda(w+c)) - 1)/lambda.
func ExactOverhead(w, c, r, lambda float64) float64 {
	if lambda <= 0 {
		return c / w
	}
	return math.Exp(lambda*r)*math.Expm1(lambda*(w+c))/(lambda*w) - 1
}

// ExactOptimum minimises ExactOverhead over w and returns the best w.
// The function is unimodal in w, so a golden-section search finds it.
func ExactOptimum(c, r, lambda float64) float64 {
	if lambda <= 0 {
		return math.Inf(1)
	}
	lo, hi := math.Log(c/1000+1e-9), math.Log(100/lambda)
	f := func(x float64) float64 { return ExactOverhead(math.Exp(x), c, r, lambda) }
	g := (math.Sqrt(5) - 1) / 2
	a, b := hi-g*(hi-lo), lo+g*(hi-lo)
	fa, fb := f(a), f(b)
	for range 200 {
		if fa < fb {
			hi, b, fb = b, a, fa
			a = hi - g*(hi-lo)
			fa = f(a)
		} else {
			lo, a, fa = a, b, fb
			b = lo + g*(hi-lo)
			fb = f(b)
		}
	}
	return math.Exp((lo + hi) / 2)
}

// band is one used level of a subset: its cost above the used level
// below, its rate (its own and that of the unused levels below it,
// down to the used one), and its recovery.
type band struct {
	level          int
	cost, rate, re float64
}

// bands maps the subset s of ls (indices, ascending) onto the model's
// levels. ok is false when the subset is dominated: a used level costs
// no more than the one below it, or a level's band has no failures.
func bands(ls []Level, s []int) ([]band, bool) {
	out := make([]band, len(s))
	prevCost, from := 0.0, 0
	for j, idx := range s {
		b := band{level: ls[idx].ID, cost: ls[idx].Cost - prevCost, re: ls[idx].Recovery}
		for i := from; i <= idx; i++ {
			b.rate += ls[i].Rate
		}
		if b.cost <= 0 || b.rate <= 0 {
			return nil, false
		}
		out[j] = b
		prevCost, from = ls[idx].Cost, idx+1
	}
	return out, true
}

// overhead is the first-order expected overhead of counts n over bands
// bs, with the best work per pattern:
// H = sqrt(2 (sum n_j c_j)(sum r_j/n_j)) + sum r_j R_j, at
// W = sqrt(2 (sum n_j c_j)/(sum r_j/n_j)).
func overhead(bs []band, n []int) (h, w float64) {
	var cost, loss, restart float64
	for j, b := range bs {
		cost += float64(n[j]) * b.cost
		loss += b.rate / float64(n[j])
		restart += b.rate * b.re
	}
	return math.Sqrt(2*cost*loss) + restart, math.Sqrt(2 * cost / loss)
}

// Optimize returns the plan of least expected overhead for levels ls
// (any order; a level without a positive cost is not used). This is
// the multi-level model of Benoit, Cavelan, Le Fèvre, Robert and Sun
// (IEEE TC 66(7), 2017), adapted to costs measured per level:
//
//   - A subset of the levels is used. Failures of an unused level are
//     recovered by the next used level above it. The top used level
//     must cover the highest level with failures.
//   - A checkpoint at a used level costs what it was measured to cost.
//     In the paper's terms the cost of band j is the difference to the
//     used level below it.
//   - For a subset, the rational optimum has n_j ∝ sqrt(rate_j/cost_j)
//     (Cauchy-Schwarz), giving H = sqrt(2) sum sqrt(rate_j cost_j) plus
//     the restarts. A subset whose optimum breaks n_j > n_j+1 is one
//     level too many: the smaller subset gives the same pattern.
//   - The ratios n_j/n_j+1 must be whole: each is rounded down or up,
//     and the best of these patterns is kept.
//
// Every subset is tried: with at most MaxLevels levels that is 15.
// With no failures at all the plan is empty (no checkpoint).
func Optimize(ls []Level) Plan {
	var cand []Level
	for _, l := range ls {
		if l.Cost > 0 && l.Rate >= 0 && !math.IsInf(l.Cost, 0) && !math.IsNaN(l.Cost) {
			cand = append(cand, l)
		}
	}
	slices.SortFunc(cand, func(a, b Level) int { return a.ID - b.ID })
	hi := -1
	for _, l := range ls {
		if l.Rate > 0 {
			hi = max(hi, l.ID)
		}
	}
	best := Plan{Work: math.Inf(1)}
	if hi < 0 {
		return best
	}
	// Failures of levels without a usable cost are recovered above.
	for i := range cand {
		cand[i].Rate = 0
	}
	for _, l := range ls {
		if l.Rate <= 0 {
			continue
		}
		for i := range cand {
			if cand[i].ID >= l.ID {
				cand[i].Rate += l.Rate
				break
			}
		}
	}
	best.Overhead = math.Inf(1)
	for mask := 1; mask < 1<<len(cand); mask++ {
		var s []int
		for i := range cand {
			if mask&(1<<i) != 0 {
				s = append(s, i)
			}
		}
		if cand[s[len(s)-1]].ID < hi {
			continue
		}
		bs, ok := bands(cand, s)
		if !ok {
			continue
		}
		if p, ok := bestCounts(bs); ok && p.Overhead < best.Overhead {
			best = p
		}
	}
	return best
}

// bestCounts rounds the rational optimum of bands bs to whole ratios and
// returns the best pattern; ok is false when the rational optimum is
// not strictly nested.
func bestCounts(bs []band) (Plan, bool) {
	m := len(bs)
	ratio := make([]float64, m-1) // n_j / n_j+1
	for j := 0; j+1 < m; j++ {
		ratio[j] = math.Sqrt(bs[j].rate/bs[j].cost) / math.Sqrt(bs[j+1].rate/bs[j+1].cost)
		if ratio[j] <= 1 {
			return Plan{}, false
		}
	}
	best := Plan{Overhead: math.Inf(1)}
	n := make([]int, m)
	for combo := 0; combo < 1<<(m-1); combo++ {
		n[m-1] = 1
		for j := m - 2; j >= 0; j-- {
			k := math.Floor(ratio[j])
			if combo&(1<<j) != 0 {
				k = math.Ceil(ratio[j])
			}
			k = max(k, 1)
			if float64(n[j+1])*k > 1<<30 {
				k = math.Floor(float64(1<<30) / float64(n[j+1]))
			}
			n[j] = n[j+1] * int(k)
		}
		h, w := overhead(bs, n)
		if h < best.Overhead {
			best = Plan{Counts: slices.Clone(n), Work: w, Overhead: h}
		}
	}
	best.Levels = make([]int, m)
	for j, b := range bs {
		best.Levels[j] = b.level
	}
	// Ratios rounded down to 1 merge two levels: the lower one is then
	// never the highest of a segment, so it is dropped from the plan.
	for j := m - 2; j >= 0; j-- {
		if best.Counts[j] == best.Counts[j+1] {
			best.Levels = slices.Delete(best.Levels, j, j+1)
			best.Counts = slices.Delete(best.Counts, j, j+1)
		}
	}
	return best, true
}

// Evaluate returns the first-order overhead of plan p under levels ls
// (the costs and rates that hold, perhaps not those p was made for).
// Failures of levels p does not use are recovered by the next level
// above that it uses; failures above its top level lose everything,
// which the model counts as +Inf.
func Evaluate(p Plan, ls []Level) float64 {
	if len(p.Levels) == 0 || math.IsInf(p.Work, 1) {
		for _, l := range ls {
			if l.Rate > 0 {
				return math.Inf(1)
			}
		}
		return 0
	}
	byID := map[int]Level{}
	for _, l := range ls {
		byID[l.ID] = l
	}
	var cost, h float64
	prev := 0.0
	for j, id := range p.Levels {
		c := byID[id].Cost
		cost += float64(p.Counts[j]) * (c - prev)
		prev = c
	}
	h = cost / p.Work
	for _, l := range ls {
		if l.Rate <= 0 {
			continue
		}
		j := slices.IndexFunc(p.Levels, func(id int) bool { return id >= l.ID })
		if j < 0 {
			return math.Inf(1)
		}
		h += l.Rate * (p.Work/(2*float64(p.Counts[j])) + byID[p.Levels[j]].Recovery)
	}
	return h
}
