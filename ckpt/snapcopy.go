package ckpt

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
)

// Snapshot mode (ckpt_snapshot = 1, [Config].Snapshot). Checkpoint
// copies every protected variable into the rank's staging buffer and
// returns. The rank's background worker (async.go's poster, over its
// private communicator) then writes the data file from that copy,
// hashes it (BLAKE3 per chunk, dCP block hashes), protects it at the
// level and commits it, with the engine's usual votes. A level that is
// raised by the node's head (head = 1, inline_lL = 0) is written at L1
// from the copy and handed to the head, as today. Every other level,
// L4 included, is written straight at its level: no L1 file is made.
//
// The buffer is reused from one checkpoint to the next. It is never
// reused while being written: the next Checkpoint first waits for the
// job in flight, as with inline_lN = 0. Its size never exceeds
// snapshot_budget. A checkpoint whose data does not fit on some rank is
// taken on the solver's path (today's, with inline_lN honoured); rank 0
// says so once per run.

// copyState is a rank's snapshot-mode state.
type copyState struct {
	buf    []byte // the staging buffer, at most budget bytes
	budget int64
	warned bool // the fallback was reported once
	times  CheckpointTimes
}

// CheckpointTimes are the times of this rank's last checkpoint in
// snapshot mode ([Runtime.CheckpointTimes]).
type CheckpointTimes struct {
	// ID is the checkpoint's id; 0 before the first snapshot.
	ID int64
	// Level is the level it was asked at.
	Level int
	// Wait is how long Checkpoint waited for the previous background work.
	Wait time.Duration
	// Copy is the copy of the protected variables into staging memory.
	Copy time.Duration
	// Blocked is Checkpoint's whole time on the solver's path.
	Blocked time.Duration
	// Background is the background write, protection and commit; 0
	// until Durable.
	Background time.Duration
	// ToDurable is from the call to the commit at the level; 0 until
	// Durable.
	ToDurable time.Duration
	// Durable says the checkpoint is committed at its level.
	Durable bool
	// Err is the background failure, if any.
	Err error
}

// CheckpointTimes returns the times of this rank's last checkpoint taken
// in snapshot mode: the copy and the blocked time at once, the
// background and the time to durable once [Runtime.CheckpointDone] or
// [Runtime.CheckpointWait] has seen it finish. Local. A nil runtime
// returns zero times.
func (r *Runtime) CheckpointTimes() CheckpointTimes {
	if r == nil {
		return CheckpointTimes{}
	}
	return r.scopy.times
}

// snapDone is what a snapshot job hands back beyond postResult.
type snapDone struct {
	id       int64
	l1       *levels.Manifest // the commit of the write (nil on failure)
	image    fileformat.Parent
	bg, dur  time.Duration
	raiseErr error // the head's raise failed; l1 stays committed at L1
}

// snapBudget is the staging budget of a rank.
func (r *Runtime) snapBudget() int64 {
	if r.cfg.SnapshotBudget > 0 {
		return r.cfg.SnapshotBudget
	}
	return defaultSnapBudget(r.cfg.NodeSize)
}

// snapFits says whether every rank's data fits its budget. Collective
// (one reduction). Rank 0 says once per run when it does not.
func (r *Runtime) snapFits(id int64, need int64) (bool, error) {
	ok := int64(0)
	if need <= r.scopy.budget {
		ok = 1
	}
	all, err := r.c.AllreduceInt64(ok, comm.Min)
	if err != nil || all == 1 {
		return all == 1, err
	}
	if !r.scopy.warned {
		r.scopy.warned = true
		if ok == 0 {
			r.log.Warn(fmt.Sprintf("ckpt_snapshot: checkpoint %d needs %d bytes of staging memory on this rank, over snapshot_budget %d: it and every later checkpoint that does not fit are taken on the solver's path (this is said once)",
				id, need, r.scopy.budget), zap.Int64("ckpt-id", id), zap.Int64("need", need), zap.Int64("budget", r.scopy.budget))
		} else if r.c.Rank() == 0 {
			r.log.Warn(fmt.Sprintf("ckpt_snapshot: checkpoint %d does not fit snapshot_budget on some rank: it and every later checkpoint that does not fit are taken on the solver's path (this is said once)", id),
				zap.Int64("ckpt-id", id))
		}
	}
	return false, nil
}

// snapCopy copies the variables' data into the staging buffer and
// returns the variables pointing into it.
func (r *Runtime) snapCopy(vars []fileformat.Var, need int64) []fileformat.Var {
	if int64(cap(r.scopy.buf)) < need {
		r.scopy.buf = nil // the old buffer goes before the new one comes
		r.scopy.buf = make([]byte, need)
	}
	buf := r.scopy.buf[:need]
	out := make([]fileformat.Var, len(vars))
	off := 0
	for i, v := range vars {
		n := copy(buf[off:], v.Data)
		out[i] = v
		out[i].Data = buf[off : off+n : off+n]
		off += n
	}
	return out
}

// snapshotCheckpoint takes checkpoint id at lvl in snapshot mode when the
// mode is on and the data fits: it copies vars and starts the background
// job. ok is false when the checkpoint is to be taken on today's path.
// Collective.
func (r *Runtime) snapshotCheckpoint(id int64, lvl levels.ID, diff bool, vars []fileformat.Var, waited time.Duration, callStart time.Time) (ok bool, err error) {
	if !r.cfg.Snapshot || r.post.c == nil || (lvl == levels.L4 && r.cfg.CkptIO == 5) {
		return false, nil
	}
	if r.scopy.budget == 0 {
		r.scopy.budget = r.snapBudget()
	}
	var need int64
	for _, v := range vars {
		need += int64(len(v.Data))
	}
	fits, err := r.snapFits(id, need)
	if err != nil || !fits {
		return false, err
	}
	start := r.now()
	copied := r.snapCopy(vars, need)
	cp := r.now().Sub(start)
	meta := fileformat.Meta{CkptID: id, Rank: int32(r.c.Rank()), Level: uint8(lvl), Timestamp: start.UnixNano()}
	w := &dcpWrite{r: r, meta: meta, vars: copied, opts: r.fileDatasets()}
	if diff {
		if w.parent, w.par, err = r.dcpParent(lvl); err != nil {
			return true, fmt.Errorf("ckpt: checkpoint %d: %w", id, err)
		}
	}
	// A level the node's head raises is written at L1 and handed to it.
	wlvl, raiseTo := lvl, levels.ID(0)
	if r.post.node != nil && r.asyncLevel(lvl) {
		wlvl, raiseTo = levels.L1, lvl
	}
	r.lastID = id
	blocked := r.now().Sub(callStart)
	r.scopy.times = CheckpointTimes{ID: id, Level: int(lvl), Wait: waited, Copy: cp, Blocked: blocked}
	r.startSnap(w, id, lvl, wlvl, raiseTo, callStart)
	if r.c.Rank() == 0 {
		mib := float64(need) / (1 << 20)
		r.log.Info(fmt.Sprintf("Ckpt. ID %d (%v) (%.2f MiB/proc) copied in %.3f sec. (Wt %.3f, Cp %.3f), written in the background",
			id, lvl, mib, blocked.Seconds(), waited.Seconds(), cp.Seconds()),
			zap.Int64("ckpt-id", id), zap.Stringer("ckpt-level", lvl), zap.Float64("mib-per-rank", mib),
			zap.Duration("wall", blocked), zap.Duration("wait", waited), zap.Duration("copy", cp), zap.Bool("snapshot", true))
	}
	return true, nil
}

// startSnap starts the background job writing w at wlvl (then raised to
// raiseTo by the head, when set).
func (r *Runtime) startSnap(w *dcpWrite, id int64, lvl, wlvl, raiseTo levels.ID, callStart time.Time) {
	ch := make(chan postResult, 1)
	r.post.running, r.post.job = ch, nil
	p := r.poster()
	hook := r.post.hook
	go func() {
		if hook != nil {
			hook()
		}
		t := p.now()
		w.prepare(wlvl)
		opts := w.options()
		if raiseTo != 0 {
			opts = append(opts, levels.RaiseLater(raiseTo))
		}
		m, st, err := p.eng.CheckpointOver(p.pc, id, wlvl, w.write, opts...)
		d := &snapDone{id: id}
		if err != nil {
			err = fmt.Errorf("%w: checkpoint %d at %v, written from its staging copy, failed and was not committed; the previous checkpoints stand: %w", ErrBackground, id, lvl, err)
			if p.rank == 0 {
				p.log.Warn(err.Error(), zap.Int64("ckpt-id", id), zap.Stringer("ckpt-level", lvl))
			}
			ch <- postResult{err: err, snap: d}
			return
		}
		d.l1, d.image = m, w.image
		res := postResult{m: m, snap: d}
		if raiseTo != 0 {
			req, rerr := p.reqOf(m, raiseTo)
			up, err := p.headRaise(m, raiseTo, req, rerr, false)
			if err != nil {
				d.raiseErr = backgroundFailed(p.log, p.rank, m, raiseTo, err)
			} else {
				res.m = up
			}
		}
		d.bg, d.dur = p.now().Sub(t), p.now().Sub(callStart)
		if p.rank == 0 && d.raiseErr == nil {
			p.log.Info(fmt.Sprintf("Ckpt. ID %d (%v) durable from its staging copy in %.3f sec. after the call (background %.3f: Wr %.3f, Ps %.3f, Cm %.3f)",
				id, lvl, d.dur.Seconds(), d.bg.Seconds(), st.Write.Seconds(), st.Protect.Seconds(), st.Commit.Seconds()),
				zap.Int64("ckpt-id", id), zap.Stringer("ckpt-level", lvl), zap.Duration("to-durable", d.dur), zap.Duration("background", d.bg),
				zap.Duration("write", st.Write), zap.Duration("post", st.Protect), zap.Duration("commit", st.Commit))
		}
		ch <- res
	}()
}

// applySnap takes a snapshot job's result on the rank's goroutine.
func (r *Runtime) applySnap(res postResult) {
	d := res.snap
	t := &r.scopy.times
	if res.err != nil {
		r.post.err, t.Err = res.err, res.err
		return
	}
	if d.image.Layout != nil {
		r.layout = d.image.Layout
	}
	r.keepImage(d.l1, d.image)
	if res.m != d.l1 {
		r.post.adopt = res.m // the engine adopts the head's raise at the next collective call
	}
	r.setLast(res.m)
	t.Background, t.ToDurable, t.Durable = d.bg, d.dur, d.raiseErr == nil
	if d.raiseErr != nil {
		r.post.err, t.Err = d.raiseErr, d.raiseErr
	}
}
