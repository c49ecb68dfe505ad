package ckpt

import (
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"
)

// snapState is Snapshot's schedule. Every rank updates it identically:
// decisions are taken only at checks, from a clock value agreed with an
// Allreduce, so every rank checkpoints at the same iteration.
type snapState struct {
	started  bool
	origin   time.Time     // this rank's clock at the first call
	iter     int64         // Snapshot calls so far
	nextSync int64         // iteration of the next check
	syncIntv int64         // current iterations between checks (doubles up to max_sync_intv)
	lastSync time.Duration // agreed elapsed time at the last check
	lastIter int64         // iteration of the last check
	meanIter time.Duration // agreed mean iteration time since the last check
	// count[l] is FTI's ckptCnt of level l: level l is next due when the
	// agreed clock reaches count[l] intervals. It starts at 1 and advances
	// by one at every check at which level l is due. dcpCount[l] is the
	// same for the differential checkpoints of level l (FTI's ckptDcpCnt).
	count, dcpCount [5]int64
}

// Snapshot is called once per iteration of the solver loop. On a restart
// its first call recovers the protected variables (FTI_Snapshot).
// Otherwise it checkpoints by FTI's rule and returns the level it took (0
// when none): at each check, with t the agreed time since the first
// Snapshot call, level l (1..4, in that order) is due when its interval
// I_l (Config.Interval divided by fast_forward) is set and
// floor(t / I_l) >= n_l, where n_l starts at 1; every due level advances
// its n_l by one, and the checkpoint is taken at the highest due level.
// Each level therefore keeps its own fixed schedule (multiples of its
// interval), not reset when a higher level fires, and a level that fell
// behind (an iteration longer than its interval) fires at successive
// checks until it has caught up. The differential intervals (dcp_l1 ..
// dcp_l4, Config.DCPInterval) keep schedules of their own the same way;
// as in FTI, a differential checkpoint at level l (returned as l+4) is
// taken when l is above every due full level, and a full checkpoint at
// the same level wins over it.
//
// Checks are the iterations at which the ranks agree on the clock (the
// slowest rank's, with an Allreduce): the iteration predicted from the
// mean iteration time to be the first at or after the next level's
// deadline, every iteration while a level is behind, and at least every
// max_sync_intv iterations. So all ranks decide at the same iteration
// without a collective call in every one. Collective.
func (r *Runtime) Snapshot() (int, error) {
	if err := r.usable("Snapshot"); err != nil {
		return 0, err
	}
	if r.recovered != nil && !r.restored {
		return 0, r.Recover()
	}
	if r.cfg.Policy.Auto {
		return r.snapshotAuto()
	}
	if r.pol.stop.final {
		return 0, nil // the job should end (ShouldExit)
	}
	s := &r.snap
	if !s.started {
		// The first call starts the clock: nothing can be due at t = 0.
		*s = snapState{started: true, origin: r.now(), iter: 1, nextSync: 2, syncIntv: 1, lastIter: 1,
			count: [5]int64{1, 1, 1, 1, 1}, dcpCount: [5]int64{1, 1, 1, 1, 1}}
		return 0, nil
	}
	s.iter++
	if s.iter < s.nextSync {
		return 0, nil
	}
	// A check: agree on the elapsed time (the slowest rank's clock).
	mine := int64(r.now().Sub(s.origin))
	agreed, chk, err := r.agreeClock(mine)
	if err != nil {
		return 0, fmt.Errorf("ckpt: snapshot: %w", err)
	}
	now := time.Duration(agreed)
	if s.iter > s.lastIter && now > s.lastSync {
		s.meanIter = (now - s.lastSync) / time.Duration(s.iter-s.lastIter)
	}
	s.lastSync, s.lastIter = now, s.iter

	due := dueLevel(&s.count, r.intervals(), now)
	// FTI: a differential checkpoint (dcp_lN, level N+4) is taken when its
	// level is the highest due and the full one of that level is not.
	if dd := dueLevel(&s.dcpCount, r.dcpIntervals(), now); dd > due {
		due = dd + dcpLevelOffset
	}
	if r.c.Rank() == 0 {
		r.log.Debug("snapshot: checking whether a level is due", zap.Int64("iteration", s.iter),
			zap.Duration("clock", now), zap.Duration("mean-iteration", s.meanIter), zap.Int("ckpt-level", due))
	}
	s.nextSync = s.iter + r.pollIters(r.itersToNext(now), s.meanIter)
	if lvl, stop := r.stopLevel(chk); stop {
		if err := r.finalCheckpoint(lvl); err != nil {
			return 0, err
		}
		return lvl, nil
	}
	if due > 0 {
		id := r.lastID + 1
		lvl, diff, err := r.requestLevel(due)
		if err == nil {
			_, err = r.checkpoint(id, lvl, diff)
		}
		if err != nil {
			return 0, r.logFailed(id, due, err)
		}
	}
	return due, nil
}

// dueLevel applies FTI's rule at one check with agreed clock t: every
// level l whose interval iv[l] is set and for which floor(t/iv[l]) >=
// count[l] is due and advances count[l]; the highest due level is
// returned (0 when none).
func dueLevel(count *[5]int64, iv [5]time.Duration, t time.Duration) int {
	due := 0
	for l := 1; l <= 4; l++ {
		if iv[l] > 0 && int64(t/iv[l]) >= count[l] {
			due = l
			count[l]++
		}
	}
	return due
}

// intervals returns every level's effective interval (index 0 unused).
func (r *Runtime) intervals() [5]time.Duration {
	var iv [5]time.Duration
	for l := 1; l <= 4; l++ {
		iv[l] = r.cfg.Interval[l] / time.Duration(max(r.cfg.FastForward, 1))
	}
	return iv
}

// dcpIntervals returns every level's effective dcp_lN interval (index 0 unused).
func (r *Runtime) dcpIntervals() [5]time.Duration {
	var iv [5]time.Duration
	for l := 1; l <= 4; l++ {
		iv[l] = r.cfg.DCPInterval[l] / time.Duration(max(r.cfg.FastForward, 1))
	}
	return iv
}

// itersToNext predicts how many iterations until the next check: the
// first iteration at or after the earliest level's next deadline (the
// next one when a level is behind), or the doubling sync interval,
// whichever is sooner.
func (r *Runtime) itersToNext(now time.Duration) int64 {
	s := &r.snap
	s.syncIntv = min(s.syncIntv*2, int64(max(r.cfg.MaxSyncIntv, 1)))
	next := s.syncIntv
	if s.meanIter <= 0 {
		return next
	}
	full, dcp := r.intervals(), r.dcpIntervals()
	for k := 1; k < 2*len(full); k++ {
		l, iv, cnt := k%len(full), full[k%len(full)], s.count[k%len(full)]
		if k >= len(full) {
			iv, cnt = dcp[l], s.dcpCount[l]
		}
		if l == 0 || iv <= 0 || cnt > math.MaxInt64/int64(iv) {
			continue
		}
		left := time.Duration(cnt)*iv - now
		if left <= 0 {
			return 1
		}
		n := int64(left / s.meanIter)
		if left%s.meanIter != 0 {
			n++
		}
		next = min(next, n)
	}
	return max(next, 1)
}
