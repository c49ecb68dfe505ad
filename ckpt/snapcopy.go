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
// The L4 of ckpt_io = 5 is the one HDF5 file, which the workers write
// together over their communicator from the copies.
//
// The staging memory is one slot per variable, allocated and touched
// page by page when the variable is protected (or when it grew, at the
// next Checkpoint), and reused from one checkpoint to the next. A slot
// is never reused while being written: the next Checkpoint first waits
// for the job in flight, as with inline_lN = 0. The slots together never
// exceed snapshot_budget. A checkpoint whose data does not fit on some
// rank is taken on the solver's path (today's, with inline_lN honoured);
// rank 0 says so once per run.
//
// On the solver's path a checkpoint in this mode makes one fixed-size
// reduction: the stop check's (stop.go), with the snapshot vote folded
// in. The vote carries the same id and level on every rank, every
// rank's local checks passed, its data fits, no dataset changed, and
// whether a differential checkpoint has its parent everywhere. Anything
// else (a mismatch, an error, a dataset to check, a budget overrun)
// takes the full path, which says why.

// copyState is a rank's snapshot-mode state.
type copyState struct {
	slots  map[int][]byte // per variable id, its staging memory
	held   int64          // the slots' bytes, at most budget
	vars   []fileformat.Var
	budget int64
	warned bool // the fallback was reported once
	// waited is the wait for the previous job measured by the fast path
	// before it handed the checkpoint to the full path.
	waited time.Duration
	times  CheckpointTimes
	call   snapCall
	// copied, when set, is called once the copy that overlaps the call's
	// reduction is done, on the copying goroutine (a test hook).
	copied func()
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
	start    time.Time // the call's
	final    bool      // the final checkpoint of a stop
	bg, dur  time.Duration
	stats    levels.Stats
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
func (r *Runtime) snapFits(id int64, vars []fileformat.Var) (bool, error) {
	ok := int64(0)
	if r.scopy.room(vars) {
		ok = 1
	}
	all, err := r.c.AllreduceInt64(ok, comm.Min)
	if err != nil || all == 1 {
		return all == 1, err
	}
	if !r.scopy.warned {
		r.scopy.warned = true
		need := dataBytes(vars)
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

// dataBytes is the size of the variables' data.
func dataBytes(vars []fileformat.Var) int64 {
	var n int64
	for _, v := range vars {
		n += int64(len(v.Data))
	}
	return n
}

// pageSize is the stride at which a new slot is touched.
const pageSize = 4096

// room says whether the slots can hold vars within the budget, counting
// the slots that must grow and not those of variables no longer
// protected (freed at the copy). Local.
func (st *copyState) room(vars []fileformat.Var) bool {
	held := st.held
	for id, b := range st.slots {
		if !hasVar(vars, id) {
			held -= int64(cap(b))
		}
	}
	for _, v := range vars {
		if b := st.slots[int(v.ID)]; len(v.Data) > cap(b) {
			held += int64(len(v.Data) - cap(b))
		}
	}
	return held <= st.budget
}

// hasVar says whether vars holds variable id.
func hasVar(vars []fileformat.Var, id int) bool {
	for _, v := range vars {
		if int(v.ID) == id {
			return true
		}
	}
	return false
}

// reserve makes variable id's slot hold at least n bytes, when the
// budget allows, and reports whether it does. A new slot is touched page
// by page, so that the copies into it fault no page. Local.
func (st *copyState) reserve(id int, n int64) bool {
	old := st.slots[id]
	if int64(cap(old)) >= n {
		return true
	}
	if st.held-int64(cap(old))+n > st.budget {
		return false
	}
	if st.slots == nil {
		st.slots = map[int][]byte{}
	}
	st.drop(id) // the old slot goes before the new one comes
	b := make([]byte, n)
	for i := 0; i < len(b); i += pageSize {
		b[i] = 0
	}
	st.slots[id], st.held = b, st.held+n
	return true
}

// drop frees variable id's slot.
func (st *copyState) drop(id int) {
	st.held -= int64(cap(st.slots[id]))
	delete(st.slots, id)
}

// release frees every slot.
func (st *copyState) release() {
	st.slots, st.held, st.vars = nil, 0, nil
}

// snapReserve gives a variable just protected its staging slot in
// snapshot mode, within the budget, so that the first checkpoint copies
// into touched memory. A variable that does not fit gets its slot at a
// Checkpoint that fits; a serialized one, whose size is known only then,
// too. Local.
func (r *Runtime) snapReserve(v *variable) {
	if !r.cfg.Snapshot || v.marshals {
		return
	}
	if r.scopy.budget == 0 {
		r.scopy.budget = r.snapBudget()
	}
	if b, err := v.view(); err == nil {
		r.scopy.reserve(v.id, int64(len(b)))
	}
}

// snapCopy copies the variables' data into their slots (room said they
// fit) and returns the variables pointing into them. The list is reused
// from one checkpoint to the next, as the slots are.
func (r *Runtime) snapCopy(vars []fileformat.Var) []fileformat.Var {
	out := r.snapStage(vars)
	for i := range out {
		copy(out[i].Data, vars[i].Data)
	}
	return out
}

// snapStage gives each of vars its slot (room said they fit) without
// copying, and returns the variables pointing into their slots: an
// incremental checkpoint copies each one at its AddVarICP. The slots of
// variables no longer protected are freed first. Local.
func (r *Runtime) snapStage(vars []fileformat.Var) []fileformat.Var {
	st := &r.scopy
	for id := range st.slots {
		if !hasVar(vars, id) {
			st.drop(id)
		}
	}
	out := st.vars[:0]
	for _, v := range vars {
		st.reserve(int(v.ID), int64(len(v.Data)))
		v.Data = st.slots[int(v.ID)][:len(v.Data):len(v.Data)]
		out = append(out, v)
	}
	st.vars = out
	return out
}

// snapshotCheckpoint takes checkpoint id at lvl in snapshot mode when the
// mode is on and the data fits: it copies vars and starts the background
// job. ok is false when the checkpoint is to be taken on today's path.
// Collective. It is the full path's; [Runtime.checkpointSnap] is the
// usual one.
func (r *Runtime) snapshotCheckpoint(id int64, lvl levels.ID, diff bool, vars []fileformat.Var, waited time.Duration, callStart time.Time) (ok bool, err error) {
	if !r.snapOn() {
		return false, nil
	}
	if r.scopy.budget == 0 {
		r.scopy.budget = r.snapBudget()
	}
	fits, err := r.snapFits(id, vars)
	if err != nil || !fits {
		return false, err
	}
	w := &dcpWrite{r: r, vars: vars}
	if diff {
		if w.parent, w.par, err = r.dcpParent(lvl); err != nil {
			return true, fmt.Errorf("ckpt: checkpoint %d: %w", id, err)
		}
	}
	r.snapStart(w, id, lvl, waited, callStart)
	return true, nil
}

// Indices of snapVote's reduction (a Max; minima are negated).
const (
	svID = iota
	svNegID
	svLevel
	svNegLevel
	svSlow      // some rank must take the full path
	svNegParent // minus "this rank can build on the dCP parent"
	svLen
)

// snapOn says whether Checkpoint takes snapshot mode's call path
// (checkpointSnap), and a checkpoint at any level is taken in the mode:
// the same on every rank. The L4 of ckpt_io = 5, one HDF5 file, is
// written by the background workers over their communicator from the
// staged copies, as the container is.
func (r *Runtime) snapOn() bool {
	return r.cfg.Snapshot && r.post.c != nil
}

// snapCall is a snapshot-mode Checkpoint between its local part and
// the vote. It is reused from one call to the next.
type snapCall struct {
	vote      [svLen]int64
	lvl       levels.ID
	diff      bool
	vars      []fileformat.Var
	cand      *levels.Manifest
	par       fileformat.Parent
	waited    time.Duration
	callStart time.Time
	err       error // the previous job's failure, the same on every rank
}

// checkpointSnap is Checkpoint in snapshot mode: local checks, one
// fixed-size reduction (the stop check with snapVote folded in), the
// copy and the start of the background job. A checkpoint some rank
// cannot take so takes the full path (checkpointAt), which then reports
// what this one only voted on: mismatched arguments, a local error, a
// dataset change to check together, a checkpoint over the budget. So
// does the final checkpoint of a stop agreed at this call, at its own
// level. Collective.
func (r *Runtime) checkpointSnap(id int64, level int) error {
	callStart := r.now()
	agreed := r.stopPending() // NeedCheckpoint agreed
	sc := &r.scopy.call
	if agreed {
		r.snapPrepare(sc, id, r.pol.stop.level)
	} else {
		r.snapPrepare(sc, id, level)
	}
	sc.callStart = callStart
	// The copy needs no agreement: it runs while the reduction waits for
	// the other ranks. A checkpoint the vote sends to the full path wasted
	// it, and the staging slots are free (snapPrepare waited for the
	// previous job).
	var copied chan snapCopied
	if sc.err == nil && sc.vote[svSlow] == 0 {
		copied = make(chan snapCopied, 1)
		go func(vars []fileformat.Var) {
			start := r.now()
			staged := r.snapCopy(vars)
			if r.scopy.copied != nil {
				r.scopy.copied()
			}
			copied <- snapCopied{staged, r.now().Sub(start)}
		}(sc.vars)
	}
	lvl, final, err := r.stopAtCheckpoint(id, level, sc.vote[:])
	var cp snapCopied
	if copied != nil {
		cp = <-copied // no goroutine writes the slots past this point
	}
	if err != nil {
		*sc = snapCall{}
		return r.logFailed(id, level, err)
	}
	switch v := &sc.vote; {
	case sc.err != nil:
		err = sc.err
	case final && !agreed, v[svID] != -v[svNegID], v[svLevel] != -v[svNegLevel], v[svSlow] != 0:
		r.scopy.waited = sc.waited
		err = r.checkpointAt(id, lvl)
	default:
		w := &dcpWrite{r: r, vars: cp.vars}
		if sc.diff && v[svNegParent] == -1 {
			w.parent, w.par = sc.cand, sc.par
		}
		r.snapStarted(w, id, sc.lvl, sc.waited, cp.took, sc.callStart)
		if final {
			// The job ends after this call: the final checkpoint is
			// reported only once it is durable.
			_, err = r.awaitPost()
		}
	}
	*sc = snapCall{} // no reference to the variables or the parent stays
	err = r.logFailed(id, lvl, err)
	if final {
		r.finishStop(lvl, err)
	}
	return err
}

// snapPrepare is checkpointSnap's local part for checkpoint id at
// level: the wait for the previous job, the full path's checks and the
// dCP parent, summed up in sc's vote.
func (r *Runtime) snapPrepare(sc *snapCall, id int64, level int) {
	*sc = snapCall{}
	v := &sc.vote
	v[svID], v[svNegID], v[svLevel], v[svNegLevel] = id, -id, int64(level), -int64(level)
	v[svSlow] = 1
	if r.icp != nil || level < 1 || level > dcpLevelOffset+4 || (level > dcpLevelOffset && !r.cfg.EnableDCP) {
		return
	}
	sc.lvl, sc.diff, _ = r.requestLevel(level) // no warning: dCP is on
	if !r.snapOn() {
		return
	}
	if sc.waited, sc.err = r.awaitPost(); sc.err != nil {
		return
	}
	if r.scopy.budget == 0 {
		r.scopy.budget = r.snapBudget()
	}
	vars, slow := r.snapLocal(sc.lvl)
	if slow {
		return
	}
	sc.vars, v[svSlow] = vars, 0
	if sc.diff {
		var ok bool
		if sc.cand, sc.par, ok = r.dcpCandidate(sc.lvl); ok {
			v[svNegParent] = -1 // the Max is -1 only when every rank can build on it
		}
	}
}

// snapLocal collects the protected variables for a checkpoint at lvl
// and runs, locally, the full path's checks; slow says one failed, or
// the datasets changed, or the data does not fit the budget.
func (r *Runtime) snapLocal(lvl levels.ID) (vars []fileformat.Var, slow bool) {
	if _, err := r.eng.Level(lvl); err != nil {
		return nil, true
	}
	if (lvl == levels.L2 || lvl == levels.L3) && r.topo.Validate(int(lvl)) != nil {
		return nil, true
	}
	vars, err := r.fileVars()
	if err == nil {
		err = r.checkSubsetSizes(vars)
	}
	return vars, err != nil || r.dsVersion != r.dsChecked || !r.scopy.room(vars)
}

// snapCopied is a staging copy taken: the variables pointing into their
// slots, and the time it took.
type snapCopied struct {
	vars []fileformat.Var
	took time.Duration
}

// snapStart copies w's variables into the staging slots and starts the
// background job writing checkpoint id at lvl from them.
func (r *Runtime) snapStart(w *dcpWrite, id int64, lvl levels.ID, waited time.Duration, callStart time.Time) {
	start := r.now()
	w.vars = r.snapCopy(w.vars)
	r.snapStarted(w, id, lvl, waited, r.now().Sub(start), callStart)
}

// snapStarted starts the background job writing checkpoint id at lvl
// from w's variables, already in their staging slots (the copy took cp).
func (r *Runtime) snapStarted(w *dcpWrite, id int64, lvl levels.ID, waited, cp time.Duration, callStart time.Time) {
	w.meta = fileformat.Meta{CkptID: id, Rank: int32(r.c.Rank()), Level: uint8(lvl), Timestamp: r.now().UnixNano()}
	w.opts = r.fileDatasets()
	tm := CheckpointTimes{ID: id, Level: int(lvl), Wait: waited, Copy: cp, Blocked: r.now().Sub(callStart)}
	r.snapLaunch(w, tm, callStart, "copied")
}

// snapLaunch starts the background job writing w, whose variables are
// already in their staging slots, as checkpoint tm.ID at tm.Level.
// tm holds the wait, the copy and the blocked time on the solver's path.
// how names, in rank 0's log line, how the copy was taken.
func (r *Runtime) snapLaunch(w *dcpWrite, tm CheckpointTimes, callStart time.Time, how string) {
	id, lvl := tm.ID, levels.ID(tm.Level)
	if lvl == levels.L4 && r.cfg.CkptIO == 5 {
		// ckpt_io = 5: one HDF5 file, always whole (as on the solver's
		// path), written from the staged copies over the workers' comm.
		if w.parent != nil {
			r.warnH5Whole(id, lvl)
		}
		w.parent, w.par = nil, fileformat.Parent{}
		w.h5 = r.h5Write(r.post.c, id, int(lvl), w.vars, r.datasetView())
	}
	// A level the node's head raises is written at L1 and handed to it.
	wlvl, raiseTo := lvl, levels.ID(0)
	if r.post.node != nil && r.asyncLevel(lvl) {
		wlvl, raiseTo = levels.L1, lvl
	}
	r.lastID = id
	r.scopy.times = tm
	r.startSnap(w, id, lvl, wlvl, raiseTo, callStart)
	r.observeSnapCall()
	if r.c.Rank() == 0 {
		mib := float64(dataBytes(w.vars)) / (1 << 20)
		r.log.Info(fmt.Sprintf("Ckpt. ID %d (%v) (%.2f MiB/proc) %s in %.3f sec. (Wt %.3f, Cp %.3f), written in the background",
			id, lvl, mib, how, tm.Blocked.Seconds(), tm.Wait.Seconds(), tm.Copy.Seconds()),
			zap.Int64("ckpt-id", id), zap.Stringer("ckpt-level", lvl), zap.Float64("mib-per-rank", mib),
			zap.Duration("wall", tm.Blocked), zap.Duration("wait", tm.Wait), zap.Duration("copy", tm.Copy), zap.Bool("snapshot", true))
	}
}

// startSnap starts the background job writing w at wlvl (then raised to
// raiseTo by the head, when set).
func (r *Runtime) startSnap(w *dcpWrite, id int64, lvl, wlvl, raiseTo levels.ID, callStart time.Time) {
	ch := make(chan postResult, 1)
	r.post.running, r.post.job = ch, nil
	final := r.pol.started && r.pol.stop.agreed
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
		d := &snapDone{id: id, start: callStart, final: final}
		if err != nil {
			err = fmt.Errorf("%w: checkpoint %d at %v, written from its staging copy, failed and was not committed; the previous checkpoints stand: %w", ErrBackground, id, lvl, err)
			if p.rank == 0 {
				p.log.Warn(err.Error(), zap.Int64("ckpt-id", id), zap.Stringer("ckpt-level", lvl))
			}
			ch <- postResult{err: err, snap: d}
			return
		}
		d.l1, d.image, d.stats = m, w.image, st
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
	r.observeSnap(res.m, d.start, t.Blocked, d.dur, d.final, d.stats)
}
