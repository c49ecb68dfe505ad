package ckpt

import (
	"fmt"
	"math"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/policy"
)

// The online interval (ckpt_interval = auto) and the run's history.
// Rank 0 keeps the history and makes the plan; every rank receives the
// plan, the cost estimates and the stop flags in one fixed-size
// reduction at each check (agree), and decides from those alone. So
// every rank checkpoints at the same call, at the same level.

// policyState is a rank's interval and stop state.
type policyState struct {
	started bool
	// avail are the levels this run can checkpoint at, ascending.
	avail []int
	// hist and planner are rank 0's.
	hist    *historyKeeper
	planner *policy.Planner
	// cur is the plan agreed at the last check and the position in its
	// pattern (the same on every rank).
	cur policy.Cursor
	// blocked and total are rank 0's cost estimates per level, agreed
	// at the last check.
	blocked, total [5]time.Duration
	// lastEnd is when this rank's last checkpoint ended (zero: none
	// yet); start is when Init started.
	lastEnd, start time.Time
	// lastNow is rank 0's clock at the last check (Unix ns, 0: none),
	// gap the time between the last two checks.
	lastNow int64
	gap     time.Duration
	// seen is when rank 0 last recorded the launch alive.
	seen time.Time
	// bgStart holds, on rank 0, the start of the checkpoints whose
	// post-processing runs in the background.
	bgStart map[uint64]time.Time
	// lostNodes counts the nodes whose local files of the newest
	// checkpoint were gone at the restart (restart).
	lostNodes int
	// logged is the plan rank 0 logged last.
	logged policy.Plan
	// auto and need are the check cadences of Snapshot (auto) and
	// NeedCheckpoint.
	auto   autoState
	need   autoState
	stop   stopState
	getenv func(string) string
	vec    []int64
}

// autoState is Snapshot's check cadence with ckpt_interval = auto.
type autoState struct {
	started  bool
	origin   time.Time
	iter     int64
	next     int64
	syncIntv int64
	lastIter int64
	lastSync time.Duration
	meanIter time.Duration
}

// heartbeat is how often rank 0 records the launch alive at checks, so
// the work a failure loses is known to that precision.
const heartbeat = 10 * time.Second

// pollEvery is the longest time between two checks of Snapshot: a stop
// is noticed within it (and within one iteration).
const pollEvery = time.Second

// The slots of the check vector, reduced with Max. Slots marked (0)
// carry rank 0's values; the other ranks put math.MinInt64 there.
const (
	vElapsed  = iota // the rank's time since its first Snapshot
	vSince           // the rank's time since its last checkpoint ended
	vSignal          // a stop signal arrived on the rank: its number (stopState.signum)
	vDeadline        // minus the earliest deadline (Unix ns), MinInt64: none
	vHalt            // (0) 1: halt now, 2: halt by the deadline
	vNow             // (0) rank 0's clock, Unix ns
	vPlanMask        // (0) bit l-1 set: level l in the plan
	vPlanCnt         // (0) 4 slots: the counts, in level order
	vPlanWork = vPlanCnt + 4
	vBlocked  = vPlanWork + 1 // (0) 4 slots: blocked cost per level, ns (-1: none)
	vTotal    = vBlocked + 4  // (0) 4 slots: total cost per level, ns
	vWaste    = vTotal + 4    // (0) the plan's expected waste, in 1e-12
	vLen      = vWaste + 1
)

// check is what the ranks agreed at one check.
type check struct {
	elapsed, since time.Duration
	signal         bool
	signum         int64 // the largest signal number seen (sigUnnamed: one without)
	deadline       int64 // Unix ns, 0: none
	halt           int64
	now            int64
}

// startPolicy starts the interval and stop machinery at the end of Init:
// the levels the run can use, the stop signals, the time limit and, on
// rank 0, the history with this launch (and the failure that ended the
// previous one) recorded. Local.
func (r *Runtime) startPolicy(o options, start time.Time) {
	p := &r.pol
	p.started, p.start, p.getenv = true, start, o.getenv
	p.bgStart = map[uint64]time.Time{}
	for l := levels.L1; l <= levels.L4; l++ {
		if _, err := r.eng.Level(l); err != nil {
			continue
		}
		if (l == levels.L2 || l == levels.L3) && r.topo.Validate(int(l)) != nil {
			continue
		}
		p.avail = append(p.avail, int(l))
	}
	r.startStop(o, start)
	if r.c.Rank() != 0 {
		return
	}
	p.hist = openHistory(r.env.Meta.Driver, r.env.Meta.Dir, r.log)
	// A history without a run id (written before run ids) is adopted.
	if h := p.hist.h; h.Run != "" && h.Run != r.run {
		if len(h.Launches) > 0 {
			r.log.Info(fmt.Sprintf("run history of run %q left for run %q: starting a new one", h.Run, r.run))
		}
		p.hist.h = &policy.History{}
	}
	p.hist.h.Run = r.run
	p.planner = &policy.Planner{Avail: p.avail, Nodes: r.topo.NumNodes(), Priors: r.priors(), Hist: p.hist.h}
	r.recordLaunch(start)
	r.replan()
}

// priors are the configured MTBFs.
func (r *Runtime) priors() policy.Priors {
	var pr policy.Priors
	for l := 1; l <= 4; l++ {
		pr.Level[l-1] = r.cfg.Policy.MTBF[l].Seconds()
	}
	pr.Job, pr.Node = r.cfg.Policy.MTBF[0].Seconds(), r.cfg.Policy.MTBFNode.Seconds()
	return pr
}

// recordLaunch adds this launch to the history (rank 0): how it
// restarted and, when the previous launch died, its failure and the
// work it lost. A fresh run after one that finalized starts a new
// history.
func (r *Runtime) recordLaunch(start time.Time) {
	k := r.pol.hist
	prev := k.h.Current()
	if prev != nil && prev.Ending == policy.EndFinalize && r.status == Fresh {
		k.h = &policy.History{}
		r.pol.planner.Hist = k.h
		prev = nil
	}
	now := r.now()
	l := policy.Launch{Start: start.UnixNano(), Seen: now.UnixNano(), Ranks: r.c.Size(), Nodes: r.topo.NumNodes()}
	skippedLevel, skipped := 0, 0
	for _, s := range r.eng.Skipped() {
		skipped++
		skippedLevel = max(skippedLevel, int(s.Manifest.Level))
	}
	if m := r.from; m != nil && m.Level.Valid() {
		l.Restart = &policy.Restart{Level: int(m.Level), ID: m.ID, Seq: m.Seq, Written: m.Time, Recover: now.Sub(start).Nanoseconds(),
			LostNodes: r.pol.lostNodes, Skipped: skipped, SkippedLevel: skippedLevel}
	}
	if prev != nil && prev.End == 0 {
		l.Failure = policy.FailureLevel(r.pol.lostNodes, skippedLevel)
		from := prev.Start
		if l.Restart != nil {
			from = l.Restart.Written
		}
		l.LostWork = max(prev.Seen-from, 0)
	}
	k.h.AddLaunch(l)
	r.pol.seen = now
	k.save()
	if l.Failure > 0 {
		r.log.Info(fmt.Sprintf("run history: the previous launch ended without Finalize or Close, a level-%d failure (%d lost nodes, %d unrecoverable checkpoints skipped); about %.1f s of work lost",
			l.Failure, r.pol.lostNodes, skipped, float64(l.LostWork)/1e9),
			zap.Int("failure-level", l.Failure), zap.Int("lost-nodes", r.pol.lostNodes), zap.Duration("lost-work", time.Duration(l.LostWork)))
	}
}

// replan makes rank 0's plan from the history, and logs it when it
// changed.
func (r *Runtime) replan() {
	p := &r.pol
	plan := p.planner.Replan()
	if !r.cfg.Policy.Auto || samePlan(plan, p.logged) {
		return
	}
	p.logged = plan
	r.log.Info("ckpt_interval = auto: "+describePlan(plan, p.planner.Inputs),
		zap.Ints("plan-levels", plan.Levels), zap.Ints("plan-counts", plan.Counts),
		zap.Float64("plan-segment-s", plan.Segment()), zap.Float64("expected-waste", plan.Waste()))
}

// samePlan reports whether two plans have the same levels and counts and
// segments within 10% of each other.
func samePlan(a, b policy.Plan) bool {
	if len(a.Counts) != len(b.Counts) {
		return false
	}
	for i := range a.Counts {
		if a.Counts[i] != b.Counts[i] || a.Levels[i] != b.Levels[i] {
			return false
		}
	}
	sa, sb := a.Segment(), b.Segment()
	return math.Abs(sa-sb) <= 0.1*math.Max(sa, sb)
}

// describePlan says a plan in words.
func describePlan(p policy.Plan, in policy.Inputs) string {
	if len(p.Levels) == 0 {
		return "no failure expected, no checkpoint planned"
	}
	var parts []string
	for j, l := range p.Levels {
		parts = append(parts, fmt.Sprintf("L%d every %v", l, seconds(p.Work/float64(p.Counts[j]))))
	}
	var costs []string
	for _, l := range in.Levels {
		how := "measured"
		if !in.Measured[l.ID-1] {
			how = "guessed"
		}
		costs = append(costs, fmt.Sprintf("L%d %s %v, MTBF %v", l.ID, how, seconds(l.Cost), seconds(policy.MTBF(l.Rate))))
	}
	return fmt.Sprintf("%s of computation, expected waste %.2f%% (%s)", strings.Join(parts, ", "), 100*p.Waste(), strings.Join(costs, "; "))
}

// seconds rounds s seconds to a readable duration.
func seconds(s float64) time.Duration {
	if math.IsInf(s, 0) || s > float64(math.MaxInt64)/1e9 {
		return time.Duration(math.MaxInt64)
	}
	d := time.Duration(s * 1e9)
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

// agree is one check: every rank's clock, signals and deadline, and rank
// 0's halt file, clock, plan and cost estimates, in one reduction of
// vLen int64s. Every rank leaves with the same check, plan and
// estimates. Collective.
func (r *Runtime) agree(elapsed time.Duration) (check, error) {
	return r.agreeWith(elapsed, nil)
}

// agreeWith is agree with extra, a caller's vector reduced with Max in
// the same reduction and left holding the result (snapshot mode's vote
// rides on Checkpoint's stop check). Collective.
func (r *Runtime) agreeWith(elapsed time.Duration, extra []int64) (check, error) {
	p := &r.pol
	n := vLen + len(extra)
	if cap(p.vec) < n {
		p.vec = make([]int64, n)
	}
	v := p.vec[:n]
	for i := range v[:vLen] {
		v[i] = math.MinInt64
	}
	copy(v[vLen:], extra)
	now := r.now()
	v[vElapsed] = int64(elapsed)
	since := now.Sub(p.start)
	if !p.lastEnd.IsZero() {
		since = now.Sub(p.lastEnd)
	}
	v[vSince] = int64(since)
	v[vSignal] = 0
	if r.pollSignal() {
		v[vSignal] = r.pol.stop.signum
	}
	if d := p.stop.deadline; !d.IsZero() {
		v[vDeadline] = -d.UnixNano()
	}
	if r.c.Rank() == 0 {
		r.rank0Slots(v, now)
	}
	if err := comm.AllreduceInt64s(r.c, v, comm.Max); err != nil {
		return check{}, err // the caller names the call
	}
	copy(extra, v[vLen:])
	c := check{elapsed: time.Duration(v[vElapsed]), since: time.Duration(v[vSince]), signal: v[vSignal] > 0, signum: v[vSignal], halt: v[vHalt], now: v[vNow]}
	if v[vDeadline] != math.MinInt64 {
		c.deadline = -v[vDeadline]
	}
	plan := policy.Plan{Work: math.Inf(1)}
	for l := 1; l <= 4; l++ {
		if v[vPlanMask]&(1<<(l-1)) != 0 {
			plan.Levels = append(plan.Levels, l)
			plan.Counts = append(plan.Counts, int(v[vPlanCnt+len(plan.Counts)]))
		}
		p.blocked[l], p.total[l] = time.Duration(v[vBlocked+l-1]), time.Duration(v[vTotal+l-1])
	}
	if len(plan.Levels) > 0 {
		plan.Work = float64(v[vPlanWork]) / 1e9
		w := float64(v[vWaste]) / 1e12
		plan.Overhead = w / (1 - w)
	}
	p.cur.Replan(plan)
	if p.lastNow != 0 {
		p.gap = time.Duration(c.now - p.lastNow)
	}
	p.lastNow = c.now
	return c, nil
}

// rank0Slots fills rank 0's part of the check vector.
func (r *Runtime) rank0Slots(v []int64, now time.Time) {
	p := &r.pol
	v[vNow] = now.UnixNano()
	v[vHalt] = 0
	if h, ok := r.pollHalt(now); ok {
		v[vHalt] = 1
		if !h.Deadline.IsZero() {
			v[vHalt] = 2
			v[vDeadline] = max(v[vDeadline], -h.Deadline.UnixNano())
		}
	}
	v[vPlanMask] = 0
	if r.cfg.Policy.Auto {
		plan := p.planner.Plan()
		for j, l := range plan.Levels {
			v[vPlanMask] |= 1 << (l - 1)
			v[vPlanCnt+j] = int64(plan.Counts[j])
		}
		v[vPlanWork] = int64(min(plan.Work*1e9, math.MaxInt64/2))
		v[vWaste] = int64(min(plan.Waste(), 1) * 1e12)
	}
	for l := 1; l <= 4; l++ {
		v[vBlocked+l-1], v[vTotal+l-1] = -1, -1
	}
	for _, l := range p.planner.Inputs.Levels {
		v[vBlocked+l.ID-1] = int64(l.Cost * 1e9)
		v[vTotal+l.ID-1] = int64(max(l.Total, l.Cost) * 1e9)
	}
	if now.Sub(p.seen) >= heartbeat {
		if l := p.hist.h.Current(); l != nil {
			l.Seen = now.UnixNano()
			p.seen = now
			p.hist.save()
		}
	}
}

// observeCheckpoint records committed checkpoint m, taken at lvl in wall
// (the solver's wait; with async its background work is still to come).
func (r *Runtime) observeCheckpoint(m *levels.Manifest, lvl levels.ID, async bool, wall time.Duration, st levels.Stats) {
	p := &r.pol
	if !p.started {
		return
	}
	now := r.now()
	p.lastEnd = now
	if r.c.Rank() != 0 {
		return
	}
	c := policy.Checkpoint{Seq: m.Seq, ID: m.ID, Level: int(lvl), Time: now.Add(-wall).UnixNano(), Blocked: wall.Nanoseconds(), Total: wall.Nanoseconds(),
		Bytes: m.Bytes(), DCP: m.DCP != nil, Async: async, Final: p.stop.agreed}
	if async {
		// Recorded at L1 until the background raise reports.
		c.Level = int(m.Level)
		p.bgStart[m.Seq] = now.Add(-wall)
	}
	r.recordCheckpoint(c, st, now)
}

// recordCheckpoint adds c, with the dCP bytes of st, to the run's
// history at now, and replans (rank 0).
func (r *Runtime) recordCheckpoint(c policy.Checkpoint, st levels.Stats, now time.Time) {
	p := &r.pol
	if r.cfg.EnableDCP {
		c.Written, c.Protected = st.TotalData.Written, st.TotalData.Protected
	}
	p.hist.h.AddCheckpoint(c)
	if l := p.hist.h.Current(); l != nil {
		l.Seen = now.UnixNano()
		p.seen = now
	}
	r.replan()
	p.hist.save()
}

// observeSnap records committed checkpoint m of snapshot mode (rank 0):
// the call started at start, blocked the solver for blocked (the copy)
// and the checkpoint was durable total after it. The interval counts
// from the call's return ([Runtime.observeSnapCall]).
func (r *Runtime) observeSnap(m *levels.Manifest, start time.Time, blocked, total time.Duration, final bool, st levels.Stats) {
	p := &r.pol
	if !p.started || m == nil || r.c.Rank() != 0 {
		return
	}
	c := policy.Checkpoint{Seq: m.Seq, ID: m.ID, Level: int(m.Level), Time: start.UnixNano(),
		Blocked: blocked.Nanoseconds(), Total: max(total, blocked).Nanoseconds(),
		Bytes: m.Bytes(), DCP: m.DCP != nil, Async: true, Final: final}
	r.recordCheckpoint(c, st, r.now())
}

// observeSnapCall notes the return of a snapshot-mode Checkpoint: the
// solver runs again from here, so the interval to the next checkpoint
// counts from here.
func (r *Runtime) observeSnapCall() {
	if r.pol.started {
		r.pol.lastEnd = r.now()
	}
}

// observePost records the end of checkpoint job's background work (rank 0).
func (r *Runtime) observePost(job *levels.Manifest, res postResult) {
	p := &r.pol
	if !p.started || r.c.Rank() != 0 || job == nil {
		return
	}
	start, ok := p.bgStart[job.Seq]
	if !ok {
		return
	}
	delete(p.bgStart, job.Seq)
	if res.err != nil || res.done.IsZero() {
		return
	}
	level := int(job.Level)
	if res.m != nil && res.m.Seq == job.Seq {
		level = int(res.m.Level)
	}
	p.hist.h.SetTotal(job.Seq, level, res.done.Sub(start).Nanoseconds())
	r.replan()
	p.hist.save()
}

// endPolicy ends the launch: stop signals released, and on rank 0 the
// launch's end recorded and the history written. Local.
func (r *Runtime) endPolicy(ending string) {
	p := &r.pol
	if !p.started {
		return
	}
	p.started = false
	r.stopSignals()
	if p.hist == nil {
		return
	}
	if l := p.hist.h.Current(); l != nil {
		now := r.now().UnixNano()
		l.End, l.Seen, l.Ending = now, now, ending
		if p.stop.final {
			l.Ending, l.StopReason = policy.EndStop, p.stop.reason
		}
	}
	p.hist.save()
	p.hist.close()
}

// snapshotAuto is Snapshot with ckpt_interval = auto: at each check the
// ranks agree (agree), and the level due is the plan's next one once its
// segment of computation has passed since the last checkpoint. Checks
// come at the iteration predicted to end the segment, at least every
// pollEvery and every max_sync_intv iterations. Collective.
func (r *Runtime) snapshotAuto() (int, error) {
	a := &r.pol.auto
	if !a.started {
		*a = autoState{started: true, origin: r.now(), iter: 1, next: 2, syncIntv: 1, lastIter: 1}
		return 0, nil
	}
	if r.pol.stop.final {
		return 0, nil
	}
	a.iter++
	if a.iter < a.next {
		return 0, nil
	}
	c, err := r.agree(r.now().Sub(a.origin))
	if err != nil {
		return 0, fmt.Errorf("ckpt: snapshot: %w", err)
	}
	if a.iter > a.lastIter && c.elapsed > a.lastSync {
		a.meanIter = (c.elapsed - a.lastSync) / time.Duration(a.iter-a.lastIter)
	}
	a.lastSync, a.lastIter = c.elapsed, a.iter
	lvl, final := r.stopLevel(c)
	if !final {
		lvl = r.pol.cur.Due(c.since.Seconds())
	}
	a.next = a.iter + r.autoItersToNext(c)
	if lvl == 0 {
		return 0, nil
	}
	id := r.lastID + 1
	_, err = r.checkpoint(id, levels.ID(lvl), false)
	if final {
		r.finishStop(lvl, err)
	}
	if err != nil {
		return 0, r.logFailed(id, lvl, err)
	}
	if !final {
		r.pol.cur.Advance()
	}
	return lvl, nil
}

// autoItersToNext predicts the iterations until the next check: the end
// of the plan's segment, within pollEvery, within the doubling sync
// interval up to max_sync_intv.
func (r *Runtime) autoItersToNext(c check) int64 {
	a := &r.pol.auto
	a.syncIntv = min(a.syncIntv*2, int64(max(r.cfg.MaxSyncIntv, 1)))
	next := a.syncIntv
	if a.meanIter <= 0 {
		return 1
	}
	next = min(next, iterationsIn(pollEvery, a.meanIter))
	if seg := r.pol.cur.Plan.Segment(); !math.IsInf(seg, 1) {
		left := time.Duration(seg*1e9) - c.since
		if left <= 0 {
			return 1
		}
		next = min(next, iterationsIn(left, a.meanIter))
	}
	return max(next, 1)
}

// iterationsIn is the number of iterations of mean length it until d
// has passed (at least 1).
func iterationsIn(d, it time.Duration) int64 {
	if it <= 0 {
		return 1
	}
	n := int64(d / it)
	if d%it != 0 {
		n++
	}
	return max(n, 1)
}

// IntervalPlan is the plan ckpt_interval = auto follows.
type IntervalPlan struct {
	// Levels are the levels used, ascending; Periods[j] the computation
	// between two checkpoints at Levels[j] or above.
	Levels  []int
	Periods []time.Duration
	// Waste is the expected fraction of the time lost to checkpoints,
	// re-executed work and restarts.
	Waste float64
}

// Interval returns the plan the last check agreed on (empty before the
// first check, and with FTI's intervals). Local.
func (r *Runtime) Interval() IntervalPlan {
	if r == nil {
		return IntervalPlan{}
	}
	p := r.pol.cur.Plan
	out := IntervalPlan{Levels: append([]int(nil), p.Levels...), Waste: p.Waste()}
	for j := range p.Levels {
		out.Periods = append(out.Periods, seconds(p.Work/float64(p.Counts[j])))
	}
	return out
}

// countLostNodes counts, before a restart's recovery, the nodes whose
// node-local data files of the newest checkpoint that has some are gone:
// each rank looks for its own file, and the sum over the ranks, in
// nodes of node_size ranks, is the count. Collective (one reduction).
func (r *Runtime) countLostNodes(committed []*levels.Manifest) {
	missing := int64(0)
	for i := len(committed) - 1; i >= 0; i-- {
		m := committed[i]
		if m.Ranks != r.c.Size() {
			break // another shape: its files are not this rank's
		}
		f, ok := m.DataFile(r.c.Rank())
		if !ok || f.Where != levels.Local {
			continue
		}
		st := r.env.Store(f.Where)
		if _, err := st.Driver.Stat(st.Path(f.Name)); err != nil {
			missing = 1
		}
		break
	}
	n, err := r.c.AllreduceInt64(missing, comm.Sum)
	if err != nil {
		return // the recovery that follows meets the same failure
	}
	ns := int64(max(r.cfg.NodeSize, 1))
	r.pol.lostNodes = int((n + ns - 1) / ns)
}
