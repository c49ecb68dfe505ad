package ckpt

import (
	"fmt"
	"time"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/levels"
)

// snapState is Snapshot's schedule. Every rank updates it identically:
// decisions are taken only at sync points, from a clock value agreed with
// an Allreduce, so every rank checkpoints at the same iteration.
type snapState struct {
	started  bool
	start    time.Duration // agreed elapsed time at the first call (0)
	origin   time.Time     // this rank's clock at the first call
	iter     int64         // Snapshot calls so far
	nextSync int64         // iteration of the next agreement
	syncIntv int64         // current iterations between agreements (doubles up to max_sync_intv)
	lastSync time.Duration // agreed elapsed time at the last sync
	lastIter int64         // iteration of the last sync
	meanIter time.Duration // agreed mean iteration time
	last     [5]time.Duration
}

// Snapshot is called once per iteration of the solver loop. On a restart
// its first call recovers the protected variables (FTI_Snapshot).
// Otherwise it takes a checkpoint when a level's interval (Config.Interval,
// divided by fast_forward) has elapsed, at the highest level due, and
// returns that level (0 when none). The clock is agreed over all ranks
// every few iterations (at most max_sync_intv), and the iteration of the
// next checkpoint is predicted from the mean iteration time, so all ranks
// decide at the same iteration without a collective call in every one.
// Collective.
func (r *Runtime) Snapshot() (int, error) {
	if err := r.usable("Snapshot"); err != nil {
		return 0, err
	}
	if r.recovered != nil && !r.restored {
		return 0, r.Recover()
	}
	s := &r.snap
	if !s.started {
		s.started = true
		s.origin = r.now()
		s.nextSync = 1
		s.syncIntv = 1
		for l := range s.last {
			s.last[l] = 0
		}
	}
	s.iter++
	if s.iter < s.nextSync {
		return 0, nil
	}
	// A sync point: agree on the elapsed time (the slowest rank's clock).
	mine := int64(r.now().Sub(s.origin))
	agreed, err := r.c.AllreduceInt64(mine, comm.Max)
	if err != nil {
		return 0, fmt.Errorf("ckpt: snapshot: %w", err)
	}
	now := time.Duration(agreed)
	if s.iter > s.lastIter {
		s.meanIter = (now - s.lastSync) / time.Duration(s.iter-s.lastIter)
	}
	s.lastSync, s.lastIter = now, s.iter

	// Highest level due (half an iteration early counts as due: the next
	// chance is a whole iteration away).
	due := 0
	for l := 4; l >= 1; l-- {
		iv := r.interval(l)
		if iv > 0 && now+s.meanIter/2 >= s.last[l]+iv {
			due = l
			break
		}
	}
	if due > 0 {
		id := r.lastID + 1
		if _, err := r.checkpoint(id, levels.ID(due)); err != nil {
			return 0, err
		}
		for l := 1; l <= due; l++ {
			s.last[l] = now
		}
	}
	s.nextSync = s.iter + r.itersToNext(now)
	return due, nil
}

// interval returns level l's effective interval.
func (r *Runtime) interval(l int) time.Duration {
	return r.cfg.Interval[l] / time.Duration(max(r.cfg.FastForward, 1))
}

// itersToNext predicts how many iterations until the next sync point: the
// earliest due level, or the doubling sync interval, whichever is sooner.
func (r *Runtime) itersToNext(now time.Duration) int64 {
	s := &r.snap
	s.syncIntv = min(s.syncIntv*2, int64(max(r.cfg.MaxSyncIntv, 1)))
	next := s.syncIntv
	if s.meanIter > 0 {
		for l := 1; l <= 4; l++ {
			iv := r.interval(l)
			if iv <= 0 {
				continue
			}
			left := s.last[l] + iv - now
			n := int64((left + s.meanIter/2) / s.meanIter)
			next = min(next, max(n, 1))
		}
	}
	return max(next, 1)
}
