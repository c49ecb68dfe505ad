package ckpt

import (
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/policy"
	"github.com/ftigo/ftigo/vfd"
)

// Checkpoint writes every protected variable as checkpoint id at level
// (1 local, 2 partner copy, 3 Reed-Solomon, 4 global) and commits it when
// every rank succeeded. Levels 5..8 ask for a differential checkpoint at
// level 1..4 (FTI's FTI_L4_DCP is 8): with enable_dcp only the dCP
// blocks that changed since the newest checkpoint at that level are
// written (docs/format/dcp.md); without it the checkpoint is taken whole,
// with a warning, as FTI does. Collective: every rank must call it with
// the same id and level. A level without an implementation returns an
// error wrapping [ErrLevelUnavailable]; a failure on any rank returns the
// same error on every rank and leaves the previous checkpoints untouched.
//
// With the level asynchronous (inline_lL = 0, [Config].Async) Checkpoint
// returns once the checkpoint is committed at L1 and its post-processing
// runs in the background ([Runtime.CheckpointDone]). Checkpoint first
// waits for the previous one's; if that failed, Checkpoint returns its
// error (wrapping [ErrBackground]) and takes nothing: call it again.
// With a background worker, a differential checkpoint that completes a
// chain of dcp_stack_size layers is followed, in the background, by the
// chain's compaction into a full checkpoint (compact.go).
func (r *Runtime) Checkpoint(id int64, level int) error {
	if err := r.usable("Checkpoint"); err != nil {
		return err
	}
	if r.snapOn() {
		return r.checkpointSnap(id, level)
	}
	level, final, err := r.stopAtCheckpoint(id, level, nil)
	if err != nil {
		return r.logFailed(id, level, err)
	}
	err = r.logFailed(id, level, r.checkpointAt(id, level))
	if final {
		r.finishStop(level, err)
	}
	return err
}

// checkpointAt is Checkpoint on a usable runtime.
func (r *Runtime) checkpointAt(id int64, level int) error {
	if level == LevelH5Single {
		if _, err := r.awaitPost(); err != nil {
			return err
		}
		return r.checkpointH5Single(id)
	}
	if err := r.sameArgs(id, int64(level)); err != nil {
		return fmt.Errorf("ckpt: checkpoint %d: %w", id, err)
	}
	lvl, diff, err := r.requestLevel(level)
	if err != nil {
		return err
	}
	_, err = r.checkpoint(id, lvl, diff)
	return err
}

// logFailed logs a failed checkpoint on rank 0 (the error is the same
// on every rank) and returns err.
func (r *Runtime) logFailed(id int64, level int, err error) error {
	if err != nil && r.c.Rank() == 0 {
		r.log.Error(fmt.Sprintf("Ckpt. ID %d (level %d) failed", id, level),
			zap.Int64("ckpt-id", id), zap.Int("ckpt-level", level), zap.Error(err))
	}
	return err
}

// checkpoint takes checkpoint id at lvl, differential when diff asks for
// it and a parent allows it. The arguments are the same on every rank.
func (r *Runtime) checkpoint(id int64, lvl levels.ID, diff bool) (*levels.Manifest, error) {
	if r.icp != nil {
		return nil, fmt.Errorf("%w: checkpoint %d while incremental checkpoint %d is open (FinalizeICP first)", ErrICP, id, r.icp.id)
	}
	callStart := r.now()
	waited, err := r.awaitPost()
	waited, r.scopy.waited = waited+r.scopy.waited, 0 // the fast path's (snapcopy.go)
	if err != nil {
		return nil, err
	}
	if !lvl.Valid() {
		return nil, fmt.Errorf("ckpt: checkpoint level %d: %w (use 1..4)", int(lvl), ErrLevelUnavailable)
	}
	if _, err := r.eng.Level(lvl); err != nil {
		return nil, fmt.Errorf("ckpt: checkpoint at %v: %w", lvl, err)
	}
	if lvl == levels.L2 || lvl == levels.L3 {
		if err := r.topo.Validate(int(lvl)); err != nil {
			return nil, fmt.Errorf("ckpt: checkpoint at %v: %w: %w", lvl, ErrLevelUnavailable, err)
		}
	}
	vars, err := r.fileVars()
	if err == nil {
		err = r.checkSubsetSizes(vars)
	}
	if err := comm.Agree(r.c, err, "collect protected variables"); err != nil {
		return nil, fmt.Errorf("ckpt: checkpoint %d: %w", id, err)
	}
	if err := r.checkDecomposition(); err != nil {
		return nil, fmt.Errorf("ckpt: checkpoint %d: %w", id, err)
	}
	if ok, err := r.snapshotCheckpoint(id, lvl, diff, vars, waited, callStart); ok || err != nil {
		return nil, err
	}
	meta := fileformat.Meta{CkptID: id, Rank: int32(r.c.Rank()), Level: uint8(lvl), Timestamp: r.now().UnixNano()}
	start := r.now()
	// With asynchronous post-processing at lvl the checkpoint is written
	// and committed at L1 (wlvl), then raised to lvl in the background.
	async := r.asyncLevel(lvl)
	wlvl := lvl
	if async {
		wlvl = levels.L1
	}
	w := &dcpWrite{r: r, meta: meta, vars: vars, opts: r.fileDatasets()}
	if lvl == levels.L4 && r.cfg.CkptIO == 5 {
		// ckpt_io = 5: one HDF5 file, always whole (as FTI, whose dCP
		// covers its POSIX and FTI-FF I/O only).
		w.h5 = r.h5Write(r.c, id, int(lvl), vars, r.datasetView())
		if diff {
			r.warnH5Whole(id, lvl)
		}
		diff = false
	}
	if diff {
		var err error
		if w.parent, w.par, err = r.dcpParent(lvl); err != nil {
			return nil, fmt.Errorf("ckpt: checkpoint %d: %w", id, err)
		}
	}
	w.prepare(wlvl)
	opts := w.options()
	if async {
		opts = append(opts, levels.RaiseLater(lvl))
	}
	m, st, err := r.eng.Checkpoint(id, wlvl, w.write, opts...)
	if err != nil {
		return nil, fmt.Errorf("ckpt: checkpoint %d at %v: %w", id, wlvl, err)
	}
	r.lastID = id
	if w.image.Layout != nil {
		r.layout = w.image.Layout
	}
	r.keepImage(m, w.image)
	// Recover now reads this checkpoint (as FTI's does after a
	// checkpoint); the one the run restarted from may be superseded.
	r.setLast(m)
	var raiseTo levels.ID
	if async {
		raiseTo = lvl
	}
	if compact := r.compactLater(m); async || compact {
		r.startPost(m, raiseTo, compact)
	}
	wall := r.now().Sub(start) + waited
	if r.c.Rank() == 0 {
		// One line per checkpoint, in FTI's manner: size per rank, wall
		// time (the wait included), aggregate bandwidth, and the split
		// between waiting for the previous background post-processing
		// (Wt), writing the data (Wr), the level's post-processing on the
		// solver's path (Ps) and the commit (Cm).
		mib := float64(m.Bytes()) / float64(m.Ranks) / (1 << 20)
		bw := float64(m.Bytes()) / (1 << 20) / max(wall.Seconds(), 1e-9)
		fields := []zap.Field{zap.Int64("ckpt-id", id), zap.Stringer("ckpt-level", lvl), zap.Int64("bytes", m.Bytes()), zap.Float64("mib-per-rank", mib),
			zap.Duration("wall", wall), zap.Float64("mib-per-s", bw), zap.Duration("wait", waited),
			zap.Duration("write", st.Write), zap.Duration("post", st.Protect), zap.Duration("commit", st.Commit),
			zap.Duration("clean", st.Clean)}
		kind := ""
		if async {
			kind = fmt.Sprintf(", committed at L1, %v in the background", lvl)
			fields = append(fields, zap.Bool("async", true))
		}
		if r.cfg.EnableDCP {
			share := 1.0
			if st.TotalData.Protected > 0 {
				share = float64(st.TotalData.Written) / float64(st.TotalData.Protected)
			}
			if m.DCP != nil {
				p, _ := m.Parent()
				kind += fmt.Sprintf(", dCP on %s, layer %d, share %.2f%%", levels.CheckpointDir(p), m.Layers(), 100*share)
			} else {
				kind += fmt.Sprintf(", dCP share %.2f%%", 100*share)
			}
			fields = append(fields, zap.Bool("dcp", m.DCP != nil), zap.Float64("dcp-share", share), zap.Int("dcp-layers", m.Layers()),
				zap.Int64("dcp-written", st.TotalData.Written), zap.Int64("dcp-protected", st.TotalData.Protected))
		}
		if c := m.Compressed; c != nil {
			kind += compressionNote(m)
			fields = append(fields, zap.Int64("logical-bytes", c.Logical), zap.Int64("stored-bytes", c.Stored), zap.Float64("compression-ratio", c.Ratio()))
		}
		r.log.Info(fmt.Sprintf("Ckpt. ID %d (%v) (%.2f MiB/proc) taken in %.3f sec., %.1f MiB/s (Wt %.3f, Wr %.3f, Ps %.3f, Cm %.3f)%s",
			id, lvl, mib, wall.Seconds(), bw, waited.Seconds(), st.Write.Seconds(), st.Protect.Seconds(), st.Commit.Seconds(), kind), fields...)
		if r.cfg.EnableDCP {
			r.logDCP(m, st)
		}
	}
	r.observeCheckpoint(m, lvl, async, wall, st)
	return m, nil
}

// sameArgs checks that every rank passed the same values: one
// reduction of fixed size (the minimum of each value and of its
// complement, whose minimum gives the maximum). Only on a mismatch are
// the messages of the ranks that differ from the minimum gathered.
func (r *Runtime) sameArgs(vals ...int64) error {
	red := make([]int64, 0, 2*len(vals))
	for _, v := range vals {
		red = append(red, v, ^v)
	}
	red, err := allreduceInts(r.c, red, comm.Min)
	if err != nil {
		return err
	}
	lo := make([]int64, len(vals))
	differ := -1
	for i := range vals {
		lo[i] = red[2*i]
		if hi := ^red[2*i+1]; lo[i] != hi && differ < 0 {
			differ = i
		}
	}
	if differ < 0 {
		return nil
	}
	var local error
	if !slices.Equal(vals, lo) {
		local = fmt.Errorf("passed %v", vals)
	}
	agreed := comm.Agree(r.c, local, fmt.Sprintf("compare the arguments with their minimum %v", lo))
	return fmt.Errorf("%w: value %d is %d..%d across ranks: %v", ErrMismatchedCall, differ, lo[differ], ^red[2*differ+1], agreed)
}

// fileVars builds the file's variable list in protect order.
func (r *Runtime) fileVars() ([]fileformat.Var, error) {
	out := make([]fileformat.Var, 0, len(r.order))
	for _, id := range r.order {
		v := r.vars[id]
		b, err := v.view()
		if err != nil {
			return nil, fmt.Errorf("variable %d: %w", id, err)
		}
		es := uint32(0)
		if v.typ == fileformat.Struct {
			es = uint32(v.elemSize)
		}
		c := r.compression(id)
		out = append(out, fileformat.Var{ID: int32(id), Name: v.name, Type: v.typ, ElemSize: es, Data: b, Codec: c.Codec, Lossy: c.Lossy})
	}
	return out, nil
}

// Finalize ends the run. With keep_last_ckpt the last recoverable
// checkpoint of the run — the newest one this run committed, or else the
// one it restarted from (never a newer one Init found unrecoverable) — is
// flushed to L4 (as FTI does; unless it is an L4 checkpoint already), and
// that L4 checkpoint is kept and marked so the next run restarts from it,
// status RestartKept, even when every node-local directory is gone; the
// other checkpoints are deleted. If the flush fails, Finalize returns
// the error and deletes nothing: storage stays as it was and the next run
// restarts as after a kill. (If marking the flushed copy kept fails, it
// stays committed, the error is returned and nothing else is deleted.) Without keep_last_ckpt
// every checkpoint is deleted (L4 ones are kept under keep_l4_ckpt).
// Deletion goes oldest first (the layers of a differential chain after
// the checkpoints building on them), so a job killed in the middle of
// Finalize restarts from its newest checkpoint, never an older one.
// Finalize releases meta_dir's lock. Collective. The runtime is unusable
// afterwards.
//
// With asynchronous post-processing Finalize first waits for the
// checkpoint in flight; a background failure not reported yet is
// returned (wrapping [ErrBackground]) after the rest of Finalize ran on
// what is committed.
func (r *Runtime) Finalize() error {
	if err := r.usable("Finalize"); err != nil {
		return err
	}
	r.abortICP()
	r.closePost()
	r.adoptPost()
	r.drainStaging()
	bgErr := r.takePostError()
	err := r.finalize()
	if bgErr != nil {
		return errors.Join(fmt.Errorf("ckpt: finalize: %w", bgErr), err)
	}
	return err
}

// finalize is Finalize once the background post-processing is drained.
func (r *Runtime) finalize() error {
	r.finalized = true
	defer r.releaseLock()
	defer r.endPolicy(policy.EndFinalize)
	r.dropImage()
	r.closeStored()
	if r.reshape != nil {
		r.reshape.close()
	}
	r.eng.Wait()
	r.finalizeVPR()
	var keep *levels.Manifest
	if r.cfg.KeepLastCkpt {
		keep = r.keepCandidate()
		if keep != nil && keep.Level != levels.L4 && r.eng.OtherShape(keep) {
			// Written by another shape and never superseded: this run
			// cannot copy it rank by rank; it is kept where it is.
			if r.c.Rank() == 0 {
				r.log.Warn(fmt.Sprintf("keep_last_ckpt: checkpoint %d (%v) was written by %d ranks on another layout and is kept at %v, not flushed to L4",
					keep.ID, keep.Level, keep.Ranks, keep.Level))
			}
		} else if keep != nil && keep.Level != levels.L4 {
			m4, err := r.flushL4(keep)
			if err != nil {
				return fmt.Errorf("ckpt: finalize: %w", err)
			}
			keep = m4
		}
		if keep != nil && !keep.Kept {
			k, err := r.eng.Keep(keep)
			if err != nil {
				return fmt.Errorf("ckpt: finalize: keep_last_ckpt: marking checkpoint %d (%v) kept failed; it stays committed for the next run, and no other checkpoint was deleted by Finalize: %w",
					keep.ID, keep.Level, err)
			}
			keep = k
		}
		if keep != nil && r.c.Rank() == 0 {
			r.log.Info(fmt.Sprintf("Ckpt. ID %d (%v) kept for the next run", keep.ID, keep.Level),
				zap.Int64("ckpt-id", keep.ID), zap.Stringer("ckpt-level", keep.Level), zap.String("dir", keep.Dir()))
		}
	}
	var errs []error
	// What a kept checkpoint depends on is spared (newest first, so a
	// spared differential checkpoint spares its whole chain).
	committed := r.eng.Committed()
	spared := map[uint64]bool{}
	for i := len(committed) - 1; i >= 0; i-- {
		m := committed[i]
		switch {
		case keep != nil && m.Seq == keep.Seq, r.cfg.KeepL4Ckpt && m.Level == levels.L4, spared[m.Seq]:
			spared[m.Seq] = true
			if m.DCP != nil {
				for _, s := range m.DCP.Chain {
					spared[s] = true
				}
			}
		}
	}
	// The rest goes oldest first, so that a job killed in the middle of
	// Finalize restarts from its newest checkpoint, not from an older
	// one; a layer of a differential chain waits until the checkpoints
	// building on it are gone (Delete refuses it with ErrInUse, the same
	// on every rank, before doing anything).
	var todo []*levels.Manifest
	for _, m := range committed {
		if !spared[m.Seq] {
			todo = append(todo, m)
		}
	}
	for len(todo) > 0 {
		var later []*levels.Manifest
		for _, m := range todo {
			err := r.eng.Delete(m)
			switch {
			case errors.Is(err, levels.ErrInUse):
				later = append(later, m)
			case err != nil:
				errs = append(errs, err)
			}
		}
		if len(later) == len(todo) {
			for _, m := range later {
				errs = append(errs, fmt.Errorf("checkpoint %d (%v) stays: %w", m.ID, m.Level, levels.ErrInUse))
			}
			break
		}
		todo = later
	}
	if err := r.eng.Settle(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ckpt: finalize: %w", err)
	}
	if err := r.c.Barrier(); err != nil { // every rank is done with its areas
		return fmt.Errorf("ckpt: finalize: %w", err)
	}
	r.cleanStageDir()
	if err := r.retireRun(); err != nil {
		return fmt.Errorf("ckpt: finalize: %w", err)
	}
	if r.c.Rank() == 0 {
		r.log.Debug("finalized", zap.Bool("kept-last", r.cfg.KeepLastCkpt))
	}
	return r.c.Barrier()
}

// keepCandidate returns the checkpoint keep_last_ckpt keeps: the newest
// one this run committed, or else the one it restarted from, as long as
// it is still committed; nil when the run has neither.
func (r *Runtime) keepCandidate() *levels.Manifest {
	committed := r.eng.Committed()
	for _, want := range []*levels.Manifest{r.last, r.from} {
		if want == nil {
			continue
		}
		for _, m := range committed {
			if m.Seq == want.Seq {
				return m
			}
		}
	}
	return nil
}

// flushL4 copies committed checkpoint m to L4 as a new checkpoint with the
// same id (keep_last_ckpt at Finalize) and returns it. Every rank copies
// its own data file, which this run wrote or Init verified (and rebuilt)
// in place; the copy is verified against m's digest. On failure nothing
// is left of the new checkpoint and nothing else changed. Collective.
func (r *Runtime) flushL4(m *levels.Manifest) (*levels.Manifest, error) {
	if m.DCP != nil {
		return r.flushImageL4(m)
	}
	start := r.now()
	m4, st, err := r.copyL4(m)
	if err != nil {
		return nil, fmt.Errorf("keep_last_ckpt: flush checkpoint %d (%v) to L4 failed; nothing was deleted, checkpoint %d stays at %v for the next run: %w",
			m.ID, m.Level, m.ID, m.Level, err)
	}
	if r.c.Rank() == 0 {
		wall := r.now().Sub(start)
		mib := float64(m4.Bytes()) / float64(m4.Ranks) / (1 << 20)
		r.log.Info(fmt.Sprintf("Ckpt. ID %d flushed from %v to %v at Finalize (%.2f MiB/proc) in %.3f sec. (Wr %.3f, Ps %.3f, Cm %.3f)",
			m.ID, m.Level, m4.Level, mib, wall.Seconds(), st.Write.Seconds(), st.Protect.Seconds(), st.Commit.Seconds()),
			zap.Int64("ckpt-id", m.ID), zap.Stringer("ckpt-level", m4.Level), zap.Stringer("from-level", m.Level),
			zap.Float64("mib-per-rank", mib), zap.Duration("wall", wall))
	}
	return m4, nil
}

// copyL4 commits a copy of committed (full) checkpoint m at L4, as a new
// checkpoint with the same id, and returns it: every rank copies its own
// data file, verified against m's digest, or with ckpt_io = 5 writes the
// variables of its file (read back whole, every block checked) into the
// L4 HDF5 file. On failure nothing is left of the new checkpoint.
// Collective.
func (r *Runtime) copyL4(m *levels.Manifest) (*levels.Manifest, levels.Stats, error) {
	var src levels.Source
	var ftiff bool
	f, ok := m.DataFile(r.c.Rank())
	if ok {
		src = levels.Source{Store: r.env.Store(f.Where), Name: f.Name, Size: f.Size, Digest: f.Digest}
		ftiff = f.Attrs[levels.AttrDigest] == levels.DigestFTIFF
	}
	if r.from != nil && r.from.Seq == m.Seq && r.src.Name != "" {
		src = r.src // where Init found (or rebuilt) this rank's data
	}
	write := func(out vfd.File) (int64, levels.Digest, bool, error) {
		if !ok && src.Name == "" {
			return 0, levels.Digest{}, false, fmt.Errorf("%w: checkpoint %d lists no data file for rank %d", levels.ErrMissingFile, m.ID, r.c.Rank())
		}
		if !ftiff {
			return levels.CopyWrite(src)(out)
		}
		return copyFTIFF(src, out, r.cfg.TransferSize)
	}
	if r.cfg.CkptIO == 5 {
		// The L4 is an HDF5 file: every rank writes the variables of its
		// file (read back whole, every block checked) with h5ckpt.
		vars, view, rerr := readAllVars(src)
		write = r.h5Write(r.c, m.ID, int(levels.L4), vars, view)
		if rerr != nil {
			write = func(vfd.File) (int64, levels.Digest, bool, error) { return 0, levels.Digest{}, false, rerr }
		}
	}
	return r.eng.Checkpoint(m.ID, levels.L4, write)
}

// copyFTIFF copies the FTI-FF data file src into out, hashing the bytes
// written, and verifies the copy with fileformat (every chunk hash) and
// its file checksum against src.Digest (an FTI-FF checksum, as the L1
// engine records it).
func copyFTIFF(src levels.Source, out vfd.File, piece int) (int64, levels.Digest, bool, error) {
	p := src.Store.Path(src.Name)
	in, err := vfd.OpenRead(src.Store.Driver, p)
	if err != nil {
		return 0, levels.Digest{}, false, vfd.WrapPath(err, "open", p)
	}
	defer in.Close()
	hw := levels.NewHashingWriter(out)
	buf := make([]byte, min(int64(max(piece, 1<<20)), max(src.Size, 1)))
	for off := int64(0); off < src.Size; {
		n := min(int64(len(buf)), src.Size-off)
		if err := vfd.ReadFull(in, buf[:n], off); err != nil {
			return off, levels.Digest{}, false, vfd.WrapPathAt(err, "read", p, off)
		}
		if _, err := hw.WriteAt(buf[:n], off); err != nil {
			return off, levels.Digest{}, false, err
		}
		off += n
	}
	rd, err := fileformat.Open(out)
	if err == nil {
		err = rd.Verify()
	}
	if err == nil && levels.Digest(rd.Summary().Checksum) != src.Digest {
		err = &levels.CorruptionError{Path: p, Rank: -1, Err: fmt.Errorf("%w: copy has FTI-FF checksum %s, manifest says %s",
			levels.ErrDigestMismatch, levels.Digest(rd.Summary().Checksum), src.Digest)}
	}
	if err != nil {
		return src.Size, levels.Digest{}, false, vfd.WrapPath(err, "copy of", p)
	}
	d, seq := hw.Sum()
	return src.Size, d, seq, nil
}

// readAllVars reads every variable of the FTI-FF data file src into
// memory (every block checked) with the datasets and subsets it records.
func readAllVars(src levels.Source) ([]fileformat.Var, dataset.View, error) {
	p := src.Store.Path(src.Name)
	f, err := vfd.OpenRead(src.Store.Driver, p)
	if err != nil {
		return nil, dataset.View{}, vfd.WrapPath(err, "open", p)
	}
	defer f.Close()
	rd, err := fileformat.Open(f)
	if err != nil {
		return nil, dataset.View{}, err
	}
	var vars []fileformat.Var
	for _, vi := range rd.Vars() {
		b := make([]byte, vi.Size)
		if err := rd.ReadVar(vi.ID, b); err != nil {
			return nil, dataset.View{}, err
		}
		es := uint32(0)
		if vi.Type == fileformat.Struct {
			es = vi.ElemSize
		}
		vars = append(vars, fileformat.Var{ID: vi.ID, Name: vi.Name, Type: vi.Type, ElemSize: es, Data: b, Codec: vi.Codec, Lossy: vi.Lossy})
	}
	return vars, dataset.View{Datasets: rd.Datasets(), Subsets: rd.Subsets()}, nil
}
