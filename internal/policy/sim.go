package policy

import (
	"math"
	"math/rand/v2"
)

// SimConfig is a simulated job: its work, its levels as they really
// are (costs, recoveries, failure rates) and its failures' seed.
type SimConfig struct {
	Levels []Level
	// Work is the computation the job must do, in seconds.
	Work float64
	// Iteration, when set, is the solver's iteration: a checkpoint can
	// only start at the end of one, so waits are rounded up to it.
	Iteration float64
	// Downtime is the time between a failure and the relaunch's start.
	Downtime float64
	Seed     uint64
}

// Scheduler decides when a simulated job checkpoints.
type Scheduler interface {
	// Launch is called when a launch starts computing (after its
	// restart), at simulated time now.
	Launch(now float64)
	// Next returns how much more computation to do before the next
	// checkpoint, and its level (0: none). wall is the time since the
	// launch started, since the computation since the last checkpoint.
	Next(wall, since float64) (wait float64, level int)
	// Committed reports a checkpoint at level that took cost seconds.
	Committed(now float64, level int, cost float64)
	// Failed reports a failure of level at now; recovered says which
	// level the relaunch restarts from (0: from the start) and restart
	// how long that took.
	Failed(now float64, level, recovered int, restart float64)
}

// SimResult is what a simulated job did.
type SimResult struct {
	// Time is the job's wall time; Work its computation.
	Time, Work float64
	// Failures[l-1] and Checkpoints[l-1] count per level.
	Failures    [MaxLevels]int
	Checkpoints [MaxLevels]int
	// Lost is the computation failures undid.
	Lost float64
}

// Waste is the fraction of the time not spent on useful work.
func (r SimResult) Waste() float64 { return 1 - r.Work/r.Time }

// failures draws the job's failures: a Poisson process in wall time of
// the total rate, each failure's level drawn by its rate. It does not
// depend on the schedule, so every schedule of one seed meets the same
// failures.
type failures struct {
	rng   *rand.Rand
	rates []float64
	total float64
	next  float64
	level int
}

func newFailures(ls []Level, seed uint64) *failures {
	f := &failures{rng: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))}
	f.rates = make([]float64, MaxLevels)
	for _, l := range ls {
		if l.ID >= 1 && l.ID <= MaxLevels && l.Rate > 0 {
			f.rates[l.ID-1] += l.Rate
			f.total += l.Rate
		}
	}
	f.next = math.Inf(1)
	f.draw(0)
	return f
}

// draw sets the next failure after time t.
func (f *failures) draw(t float64) {
	if f.total <= 0 {
		return
	}
	f.next = t + f.rng.ExpFloat64()/f.total
	x := f.rng.Float64() * f.total
	for i, r := range f.rates {
		if x < r || i == len(f.rates)-1 {
			f.level = i + 1
			break
		}
		x -= r
	}
}

// Simulate runs the job under s until its work is done. A failure may
// strike while the job computes, checkpoints or restarts. A failure of
// level l destroys every checkpoint below l; the relaunch restarts from
// the newest checkpoint left at level l or above, or from the start.
// A checkpoint at level l supersedes the older ones at levels up to l,
// as FTI's do. The job ends when its work is done, without a last
// checkpoint.
func Simulate(cfg SimConfig, s Scheduler) SimResult {
	cost := map[int]float64{}
	recov := map[int]float64{}
	for _, l := range cfg.Levels {
		cost[l.ID], recov[l.ID] = l.Cost, l.Recovery
	}
	fail := newFailures(cfg.Levels, cfg.Seed)
	var res SimResult
	var saved [MaxLevels + 1]float64 // progress of the newest checkpoint per level, -1: none
	for i := range saved {
		saved[i] = -1
	}
	t, progress, lastCkpt, launch := 0.0, 0.0, 0.0, 0.0
	s.Launch(0)
	// failed handles the failure due at fail.next and the relaunch.
	failed := func() {
		worst := 0
		for {
			t = fail.next
			lvl := fail.level
			worst = max(worst, lvl)
			res.Failures[lvl-1]++
			for l := 1; l < lvl; l++ {
				saved[l] = -1
			}
			from, best := 0, 0.0
			for l := lvl; l <= MaxLevels; l++ {
				if saved[l] >= 0 && (from == 0 || saved[l] > best) {
					from, best = l, saved[l]
				}
			}
			res.Lost += progress - best
			progress, lastCkpt = best, best
			fail.draw(t)
			r := recov[from]
			if t+cfg.Downtime+r > fail.next {
				continue // another failure before the restart is done
			}
			t += cfg.Downtime + r
			s.Failed(t, worst, from, r)
			launch = t
			s.Launch(t)
			return
		}
	}
	for progress < cfg.Work {
		wait, lvl := s.Next(t-launch, progress-lastCkpt)
		if lvl == 0 || progress+wait >= cfg.Work {
			wait, lvl = cfg.Work-progress, 0
		} else if it := cfg.Iteration; it > 0 {
			// A check ends an iteration, and one runs between two.
			wait = max(math.Ceil(wait/it-1e-9), 1) * it
			wait = min(wait, cfg.Work-progress)
		}
		if t+wait > fail.next {
			progress += fail.next - t
			failed()
			continue
		}
		t += wait
		progress += wait
		if lvl == 0 || progress >= cfg.Work {
			continue
		}
		c := cost[lvl]
		if t+c > fail.next {
			failed()
			continue
		}
		t += c
		for l := 1; l <= lvl; l++ {
			saved[l] = -1
		}
		saved[lvl] = progress
		lastCkpt = progress
		res.Checkpoints[lvl-1]++
		s.Committed(t, lvl, c)
	}
	res.Time, res.Work = t, cfg.Work
	return res
}

// PlanScheduler follows a fixed plan; each launch starts its pattern
// again.
type PlanScheduler struct {
	cur Cursor
}

// NewPlanScheduler follows p.
func NewPlanScheduler(p Plan) *PlanScheduler { return &PlanScheduler{cur: *NewCursor(p)} }

func (s *PlanScheduler) Launch(float64) { s.cur.Next = 1 }
func (s *PlanScheduler) Next(_, since float64) (float64, int) {
	if len(s.cur.Plan.Counts) == 0 {
		return 0, 0
	}
	return max(s.cur.Plan.Segment()-since, 0), s.cur.Plan.LevelAt(s.cur.Next)
}
func (s *PlanScheduler) Committed(float64, int, float64)   { s.cur.Advance() }
func (s *PlanScheduler) Failed(float64, int, int, float64) {}

// FixedScheduler is FTI's rule: level l every Intervals[l-1] seconds of
// the launch's wall time (0: off); when several are due, the highest is
// taken and every due level counts one more period.
type FixedScheduler struct {
	Intervals [MaxLevels]float64
	count     [MaxLevels]int64
}

func (s *FixedScheduler) Launch(float64) {
	for i := range s.count {
		s.count[i] = 1
	}
}

func (s *FixedScheduler) Next(wall, _ float64) (float64, int) {
	next := math.Inf(1)
	for i, iv := range s.Intervals {
		if iv > 0 {
			next = min(next, float64(s.count[i])*iv)
		}
	}
	if math.IsInf(next, 1) {
		return 0, 0
	}
	// The check happens at the deadline: every level due then counts
	// one period more, and the highest is taken.
	at, lvl := max(next, wall), 0
	for i, iv := range s.Intervals {
		if iv > 0 && math.Floor(at/iv+1e-9) >= float64(s.count[i]) {
			lvl = i + 1
			s.count[i]++
		}
	}
	return max(next-wall, 0), lvl
}

func (s *FixedScheduler) Committed(float64, int, float64) {}

func (s *FixedScheduler) Failed(float64, int, int, float64) {}

// AutoScheduler is ckpt_interval = auto: a Planner learning from the
// simulated job's history (checkpoint costs, failures, exposure).
type AutoScheduler struct {
	P Planner
	// Downtime is the simulated job's (SimConfig.Downtime): the time
	// between a failure and the restart, not part of the exposure.
	Downtime float64
	began    bool
}

// NewAutoScheduler plans over avail with priors p (the costs come from
// the checkpoints the job takes).
func NewAutoScheduler(avail []int, nodes int, p Priors) *AutoScheduler {
	a := &AutoScheduler{P: Planner{Avail: avail, Nodes: nodes, Priors: p, Hist: &History{}}}
	return a
}

func (a *AutoScheduler) Launch(now float64) {
	if !a.began {
		a.P.Hist.AddLaunch(Launch{Start: ns(now), Seen: ns(now)})
		a.began = true
	}
	a.P.Restart()
	a.P.Replan()
}

func (a *AutoScheduler) Next(_, since float64) (float64, int) {
	plan := a.P.Plan()
	if len(plan.Counts) == 0 {
		return 0, 0
	}
	return a.P.Wait(since), plan.LevelAt(a.P.Next())
}

func (a *AutoScheduler) Committed(now float64, level int, cost float64) {
	a.P.Hist.AddCheckpoint(Checkpoint{Level: level, Time: ns(now), Blocked: ns(cost), Total: ns(cost)})
	if l := a.P.Hist.Current(); l != nil {
		l.Seen = ns(now)
	}
	a.P.Advance()
	a.P.Replan()
}

func (a *AutoScheduler) Failed(now float64, level, recovered int, restart float64) {
	if l := a.P.Hist.Current(); l != nil {
		l.Seen = ns(now - restart - a.Downtime)
	}
	var r *Restart
	if recovered > 0 {
		r = &Restart{Level: recovered, Recover: ns(restart)}
	}
	a.P.Hist.AddLaunch(Launch{Start: ns(now), Seen: ns(now), Failure: level, Restart: r})
}

func ns(s float64) int64 { return int64(math.Round(s * 1e9)) }
