package ckpt

import (
	"errors"
	"fmt"
	"path"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// Incremental checkpoints (FTI's iCP): BeginICP opens checkpoint id and
// lays out its FTI-FF file for the protected variables, AddVarICP writes
// one variable into it as soon as the solver is done with it, and
// FinalizeICP completes the file and commits it with the ordinary commit
// protocol. The data file is written in place, under the tmp name the
// engine's next checkpoint uses (levels.Engine.NextDataFile); a crash
// before FinalizeICP leaves only a tmp file of an uncommitted checkpoint,
// which the next start-up removes.
//
// In snapshot mode (snapcopy.go) an iCP whose data fits the staging
// budget on every rank opens no file: BeginICP gives each variable its
// staging slot, AddVarICP copies the variable into it, and FinalizeICP
// starts the background job that writes, hashes, protects and commits
// the checkpoint from the copies, as a snapshot-mode Checkpoint does.

// icpState is the incremental checkpoint open on this rank.
type icpState struct {
	id    int64
	lvl   levels.ID
	f     vfd.File
	path  string // the data file's tmp path
	inc   *fileformat.Incremental
	vars  map[int32]int // protected id -> index in the file's variables
	meta  fileformat.Meta
	err   error // the first write failure, reported by FinalizeICP
	start time.Time
	write time.Duration // time spent in AddVarICP
	// snap: snapshot mode, the variables staged in their slots, no file.
	snap    bool
	staged  []fileformat.Var // the variables, Data in their slots
	added   []bool           // per staged variable, copied by AddVarICP
	opts    []fileformat.Option
	waited  time.Duration // BeginICP's wait for the previous job
	copy    time.Duration // the copies in AddVarICP
	blocked time.Duration // BeginICP's and AddVarICP's time
}

// BeginICP opens incremental checkpoint id at level (1..4; 5..8 are
// taken whole at 1..4, an incremental checkpoint is never differential)
// for every variable protected now. With activate false it does nothing
// and returns nil, as FTI_InitICP does, and so do the AddVarICP and
// FinalizeICP calls that follow, so that the calls can stay in the code
// of a run that does not checkpoint at this iteration.
// Collective; a background post-processing in flight is waited for (and
// its failure reported) first. No other checkpoint may be taken until
// FinalizeICP. In snapshot mode one more reduction decides whether every
// rank's data fits the staging budget: then no file is opened, and the
// checkpoint is written from the copies AddVarICP makes. Once a stop was
// agreed ([Runtime.NeedCheckpoint] returned true) the checkpoint is the
// stop's final one, taken at the level the stop chose, as by Checkpoint.
func (r *Runtime) BeginICP(id int64, level int, activate bool) error {
	callStart := r.now()
	if err := r.usable("BeginICP"); err != nil {
		return err
	}
	if r.icp != nil {
		return fmt.Errorf("%w: BeginICP(%d) while checkpoint %d is open", ErrICP, id, r.icp.id)
	}
	r.icpInactive = !activate
	if !activate {
		return nil
	}
	waited, err := r.awaitPost()
	if err != nil {
		return err
	}
	if r.stopPending() {
		// The final checkpoint of a stop agreed earlier (NeedCheckpoint)
		// is taken at the level the stop chose, as by Checkpoint.
		level = r.pol.stop.level
	}
	if err := r.sameArgs(id, int64(level)); err != nil {
		return err
	}
	lvl, diff, err := r.requestLevel(level)
	if err != nil {
		return err
	}
	if diff && r.c.Rank() == 0 {
		r.log.Warn(fmt.Sprintf("dCP requested for incremental checkpoint %d: it is taken whole at %v", id, lvl), zap.Int64("ckpt-id", id))
	}
	if _, err := r.eng.Level(lvl); err != nil {
		return fmt.Errorf("ckpt: checkpoint at %v: %w", lvl, err)
	}
	if lvl == levels.L2 || lvl == levels.L3 {
		if err := r.topo.Validate(int(lvl)); err != nil {
			return fmt.Errorf("ckpt: checkpoint at %v: %w: %w", lvl, ErrLevelUnavailable, err)
		}
	}
	vars, err := r.fileVars()
	if err == nil {
		err = r.checkSubsetSizes(vars)
	}
	if err := comm.Agree(r.c, err, "collect protected variables"); err != nil {
		return fmt.Errorf("ckpt: incremental checkpoint %d: %w", id, err)
	}
	if err := r.checkDecomposition(); err != nil {
		return fmt.Errorf("ckpt: incremental checkpoint %d: %w", id, err)
	}
	st := &icpState{id: id, lvl: lvl, vars: map[int32]int{}, start: callStart}
	st.meta = fileformat.Meta{CkptID: id, Rank: int32(r.c.Rank()), Level: uint8(lvl), Timestamp: r.now().UnixNano()}
	for i, v := range vars {
		st.vars[v.ID] = i
	}
	w := &dcpWrite{r: r, opts: r.fileDatasets()}
	if r.snapOn() {
		if r.scopy.budget == 0 {
			r.scopy.budget = r.snapBudget()
		}
		fits, err := r.snapFits(id, vars)
		if err != nil {
			return fmt.Errorf("ckpt: incremental checkpoint %d: %w", id, err)
		}
		if fits {
			st.snap, st.staged, st.added = true, r.snapStage(vars), make([]bool, len(vars))
			st.opts, st.waited = w.opts, waited
			st.blocked = r.now().Sub(callStart)
			r.icp = st
			return nil
		}
	}
	store, name := r.eng.NextDataFile(levels.Local)
	full := store.Path(name)
	st.path = full
	cerr := store.Driver.MkdirAll(path.Dir(full), 0o755)
	if cerr == nil {
		st.f, cerr = vfd.CreateTrunc(store.Driver, full)
	}
	if cerr == nil {
		st.inc, cerr = fileformat.NewIncremental(st.f, st.meta, vars, r.layout, w.fileOptions()...)
	}
	if err := comm.Agree(r.c, cerr, "open incremental checkpoint file"); err != nil {
		if st.f != nil {
			_ = st.f.Close()
			_ = store.Driver.Remove(full)
		}
		return fmt.Errorf("ckpt: incremental checkpoint %d: %w", id, err)
	}
	r.icp = st
	return nil
}

// AddVarICP writes protected variable id into the open incremental
// checkpoint now, with the data it holds at this call; the solver may
// change it afterwards. Variables are added in any order, each once (a
// second add rewrites it). The variable must have been protected when
// BeginICP ran, with the same size. Local; without an open incremental
// checkpoint it returns an error wrapping [ErrICP]. A write failure is
// returned here and again, on every rank, by FinalizeICP. In snapshot
// mode it copies the variable into its staging slot instead of writing
// it: the checkpoint holds the bytes of this call.
func (r *Runtime) AddVarICP(id int) error {
	callStart := r.now()
	if err := r.usable("AddVarICP"); err != nil {
		return err
	}
	st := r.icp
	if st == nil && r.icpInactive {
		return nil
	}
	if st == nil {
		return fmt.Errorf("%w: AddVarICP(%d) without BeginICP", ErrICP, id)
	}
	v, ok := r.vars[id]
	if !ok {
		return fmt.Errorf("%w: AddVarICP(%d)", ErrNotProtected, id)
	}
	if _, ok := st.vars[int32(id)]; !ok {
		return fmt.Errorf("%w: variable %d was protected after BeginICP(%d)", ErrICP, id, st.id)
	}
	b, err := v.view()
	switch {
	case err == nil && st.snap:
		err = st.stage(int32(id), b, r.now)
		st.blocked += r.now().Sub(callStart)
	case err == nil:
		t := r.now()
		err = st.inc.Add(int32(id), b)
		st.write += r.now().Sub(t)
	}
	if err != nil {
		err = fmt.Errorf("ckpt: incremental checkpoint %d: variable %d: %w", st.id, id, err)
		if st.err == nil {
			st.err = err
		}
	}
	return err
}

// FinalizeICP completes the open incremental checkpoint and commits it
// as an ordinary checkpoint at its level: every variable protected at
// BeginICP must have been added. A missing variable or a failed write on
// any rank fails it on every rank (the error names the ranks and the
// variables, wrapping [ErrICP] on the ranks that missed some) and nothing
// is committed. With the level asynchronous the post-processing runs in
// the background as for Checkpoint; an L4 checkpoint is written locally
// and copied to global storage after its L1 commit (with ckpt_io = 5 the
// L4 HDF5 file is written from the committed L1 file, as a checkpoint
// of the same id that supersedes it). In snapshot mode, when BeginICP
// staged the variables, it starts the background job that writes and
// commits the staged copies and returns, as a snapshot-mode Checkpoint
// does; a failure is reported as on the file path. The final checkpoint
// of an agreed stop ends the stop as Checkpoint's does:
// [Runtime.ShouldExit] is true afterwards, even when it failed; in
// snapshot mode FinalizeICP then returns only once the checkpoint is
// durable. Collective.
func (r *Runtime) FinalizeICP() error {
	if err := r.usable("FinalizeICP"); err != nil {
		return err
	}
	st := r.icp
	if st == nil && r.icpInactive {
		r.icpInactive = false
		return nil
	}
	if st == nil {
		return fmt.Errorf("%w: FinalizeICP without BeginICP", ErrICP)
	}
	r.icp = nil
	final := r.stopPending()
	var err error
	if st.snap {
		err = r.finalizeSnapICP(st, final)
	} else {
		err = r.finalizeFileICP(st)
	}
	if final {
		r.pol.stop.level = int(st.lvl) // the stop may have been agreed after BeginICP
		r.finishStop(int(st.lvl), err)
	}
	return err
}

// finalizeFileICP is FinalizeICP on the file path: it completes the
// file and commits it at st's level. Collective.
func (r *Runtime) finalizeFileICP(st *icpState) error {
	var img fileformat.Parent
	var data levels.DataStats
	write := func(vfd.File) (int64, levels.Digest, bool, error) {
		defer st.f.Close()
		if st.err != nil {
			return 0, levels.Digest{}, false, st.err
		}
		if m := st.inc.Missing(); len(m) > 0 {
			return 0, levels.Digest{}, false, fmt.Errorf("%w: checkpoint %d: protected variables %v were not added", ErrICP, st.id, m)
		}
		lay, sum, err := st.inc.Finish()
		if err != nil {
			return 0, levels.Digest{}, false, err
		}
		img = fileformat.Parent{Layout: lay, Summary: sum}
		data = fullStats(sum, sum.Stored != sum.Logical)
		return sum.FileSize, levels.Digest{}, false, nil
	}
	// The inline L4 places the data itself: an incremental L4 is written
	// locally, committed at L1 and raised to L4 (in the background when
	// L4 is asynchronous; the HDF5 L4 of ckpt_io = 5 is written from the
	// L1 file, synchronously).
	async := r.asyncLevel(st.lvl)
	wlvl := st.lvl
	if async || (st.lvl == levels.L4 && r.eng.OpensData(levels.L4)) {
		wlvl = levels.L1
	}
	opts := []levels.CheckpointOption{levels.Prewritten(), levels.WithDataStats(func() levels.DataStats { return data })}
	if wlvl != st.lvl {
		opts = append(opts, levels.RaiseLater(st.lvl))
	}
	t := r.now()
	m, cst, err := r.eng.Checkpoint(st.id, wlvl, write, opts...)
	if err != nil {
		return r.logFailed(st.id, int(st.lvl), fmt.Errorf("ckpt: incremental checkpoint %d at %v: %w", st.id, st.lvl, err))
	}
	r.lastID = st.id
	r.layout = img.Layout
	r.keepImage(m, img)
	r.setLast(m)
	var upErr error
	switch {
	case async:
		r.startPost(m, st.lvl, false)
	case st.lvl == levels.L4 && r.cfg.CkptIO == 5:
		// ckpt_io = 5: the L4 is one HDF5 file, which no raise makes:
		// the ranks write it from the committed L1 file (the solver may
		// have changed the variables since AddVarICP), as a new
		// checkpoint with the same id, which supersedes the L1 one.
		up, _, err := r.copyL4(m)
		if err != nil {
			upErr = fmt.Errorf("ckpt: incremental checkpoint %d is committed at L1, writing its L4 HDF5 file failed: %w", st.id, err)
		} else {
			r.setLast(up)
			m = up
		}
	case wlvl != st.lvl:
		up, _, err := r.eng.Raise(m, st.lvl, nil)
		if err != nil {
			upErr = fmt.Errorf("ckpt: incremental checkpoint %d is committed at L1, its copy to %v failed: %w", st.id, st.lvl, err)
		} else {
			r.keepImage(up, img)
			r.setLast(up)
			m = up
		}
	}
	if r.c.Rank() == 0 {
		wall := r.now().Sub(st.start)
		mib := float64(m.Bytes()) / float64(m.Ranks) / (1 << 20)
		r.log.Info(fmt.Sprintf("Ckpt. ID %d (%v) (%.2f MiB/proc) taken incrementally in %.3f sec. since BeginICP (Wr %.3f in AddVarICP on rank 0; at FinalizeICP: Wr %.3f, Ps %.3f, Cm %.3f, %.3f sec.)%s",
			st.id, st.lvl, mib, wall.Seconds(), st.write.Seconds(), cst.Write.Seconds(), cst.Protect.Seconds(), cst.Commit.Seconds(), r.now().Sub(t).Seconds(),
			compressionNote(m)),
			zap.Int64("ckpt-id", st.id), zap.Stringer("ckpt-level", st.lvl), zap.Bool("icp", true), zap.Bool("async", async))
	}
	// The run's history records it as Checkpoint's: blocked for the
	// writes in AddVarICP and FinalizeICP's time, at the level it holds.
	olvl := st.lvl
	if upErr != nil {
		olvl = m.Level
	}
	r.observeCheckpoint(m, olvl, async, st.write+r.now().Sub(t), cst)
	return r.logFailed(st.id, int(st.lvl), upErr)
}

// abortICP drops an incremental checkpoint left open (Finalize, Close):
// its tmp file goes now, or with the next start-up.
func (r *Runtime) abortICP() {
	st := r.icp
	if st == nil {
		return
	}
	r.icp = nil
	if st.snap {
		return // nothing but the staging slots, reused by the next checkpoint
	}
	err := errors.Join(st.f.Close(), r.env.Local.Driver.Remove(st.path))
	if err != nil {
		r.log.Debug("removing the file of an unfinished incremental checkpoint", zap.String("path", st.path), zap.Error(err))
	}
}

// stage copies b, variable id's bytes at AddVarICP, into its staging
// slot (snapshot mode), timing the copy with now. Local.
func (st *icpState) stage(id int32, b []byte, now func() time.Time) error {
	i := st.vars[id]
	dst := st.staged[i].Data
	if len(b) != len(dst) {
		return fmt.Errorf("%w: variable %d has %d bytes, BeginICP(%d) staged %d", ErrICP, id, len(b), st.id, len(dst))
	}
	t := now()
	copy(dst, b)
	st.copy += now().Sub(t)
	st.added[i] = true
	return nil
}

// finalizeSnapICP is FinalizeICP in snapshot mode: every rank agrees
// that each of its variables was staged, then the background job writes
// the checkpoint from the staged copies. A failure on any rank fails it
// on every rank, and nothing is committed; as on the file path the
// error wraps [ErrICP] only on the ranks that missed a variable (or
// staged one of another size). The final checkpoint of a stop (final)
// returns only once it is durable, as Checkpoint's does. Collective.
func (r *Runtime) finalizeSnapICP(st *icpState, final bool) error {
	callStart := r.now()
	err := st.err
	if err == nil {
		var miss []int32
		for i, ok := range st.added {
			if !ok {
				miss = append(miss, st.staged[i].ID)
			}
		}
		if len(miss) > 0 {
			err = fmt.Errorf("%w: checkpoint %d: protected variables %v were not added", ErrICP, st.id, miss)
		}
	}
	if err := comm.Agree(r.c, err, "incremental checkpoint"); err != nil {
		err = fmt.Errorf("ckpt: incremental checkpoint %d at %v, staged in snapshot mode, is not committed: %w", st.id, st.lvl, err)
		return r.logFailed(st.id, int(st.lvl), err)
	}
	w := &dcpWrite{r: r, meta: st.meta, vars: st.staged, opts: st.opts}
	blocked := st.blocked + r.now().Sub(callStart)
	tm := CheckpointTimes{ID: st.id, Level: int(st.lvl), Wait: st.waited, Copy: st.copy, Blocked: blocked}
	r.snapLaunch(w, tm, st.start, "copied incrementally")
	if !final {
		return nil
	}
	// The job ends after this call: the final checkpoint is reported
	// only once it is durable.
	_, err = r.awaitPost()
	return r.logFailed(st.id, int(st.lvl), err)
}
