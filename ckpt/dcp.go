package ckpt

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// Differential checkpoints (docs/format/dcp.md). FTI's level numbers:
// 1-4 are full checkpoints, 5-8 differential ones at levels 1-4 (FTI
// implements 8 only, FTI_L4_DCP, and downgrades 5-7 to 1-3). Without
// enable_dcp a differential request is taken whole, with FTI's warning.

// dcpLevelOffset is what FTI adds to a level to ask for it differential.
const dcpLevelOffset = 4

// requestLevel maps a level argument to the level and whether the
// checkpoint is to be differential.
func (r *Runtime) requestLevel(level int) (levels.ID, bool, error) {
	switch {
	case level >= 1 && level <= 4:
		return levels.ID(level), false, nil
	case level > dcpLevelOffset && level <= dcpLevelOffset+4:
		lvl := levels.ID(level - dcpLevelOffset)
		if !r.cfg.EnableDCP {
			if r.c.Rank() == 0 {
				r.log.Warn(fmt.Sprintf("L%d dCP requested, but dCP is disabled (enable_dcp = 0): the checkpoint is taken whole at %v", int(lvl), lvl),
					zap.Int("ckpt-level", level))
			}
			return lvl, false, nil
		}
		return lvl, true, nil
	}
	return 0, false, fmt.Errorf("ckpt: checkpoint level %d: %w (use 1..4, or 5..8 for differential checkpoints at levels 1..4)", level, ErrLevelUnavailable)
}

// blockSize is the dCP block size every checkpoint file is hashed with:
// dcp_block_size with enable_dcp, FTI-FF's default otherwise.
func (r *Runtime) blockSize() int {
	if r.cfg.EnableDCP {
		return r.cfg.DCPBlockSize
	}
	return fileformat.DefaultBlockSize
}

// dcpParent returns the checkpoint a differential checkpoint at lvl
// builds on, with its image, or nil when it must be full: the newest
// recoverable committed checkpoint at lvl, whose chain is shorter than
// dcp_stack_size, whose image every rank holds from this run (written or
// recovered) with the same block size, and whose layers' files every
// rank still has. Collective (one vote when there is a candidate).
func (r *Runtime) dcpParent(lvl levels.ID) (*levels.Manifest, fileformat.Parent, error) {
	cand, par, ok := r.dcpCandidate(lvl)
	if cand == nil {
		return nil, fileformat.Parent{}, nil // the same on every rank: no vote
	}
	v := int64(0)
	if ok {
		v = 1
	}
	all, err := r.c.AllreduceInt64(v, comm.Min)
	if err != nil {
		return nil, fileformat.Parent{}, err
	}
	if all == 0 {
		return nil, fileformat.Parent{}, nil
	}
	return cand, par, nil
}

// dcpCandidate is dcpParent's local part: the candidate parent at lvl
// (nil, the same on every rank, when there is none) and whether this
// rank can build on it. Local.
func (r *Runtime) dcpCandidate(lvl levels.ID) (cand *levels.Manifest, par fileformat.Parent, ok bool) {
	for _, m := range r.eng.Recoverable() {
		if m.Level == lvl {
			cand = m
		}
	}
	if cand == nil || cand.Layers() >= r.cfg.DCPStackSize {
		return nil, fileformat.Parent{}, false
	}
	par, ok = r.images[cand.Seq]
	why := ""
	switch {
	case !ok:
		why = "this run neither wrote nor recovered it"
	case par.Summary.BlockSize != uint32(r.blockSize()):
		why = fmt.Sprintf("its dCP blocks are %d bytes, dcp_block_size is %d", par.Summary.BlockSize, r.blockSize())
	default:
		if err := r.layersPresent(cand); err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		r.log.Debug("dCP: the next checkpoint is full on this rank", zap.String("parent", cand.Dir()), zap.String("why", why))
	}
	return cand, par, why == ""
}

// layersPresent checks that this rank's data files of every layer of m's
// chain exist with their recorded sizes (a stat each; the container of an
// L4 task).
func (r *Runtime) layersPresent(m *levels.Manifest) error {
	src, err := r.eng.Source(m)
	if err != nil {
		return err
	}
	for _, s := range append(append([]levels.Source(nil), src.Chain...), src) {
		p := s.Store.Path(s.Name)
		if s.Task != nil {
			if cname, _, ok := levels.ContainerPath(*s.Task); ok {
				p = s.Store.Path(cname)
			}
		}
		st, err := s.Store.Driver.Stat(p)
		switch {
		case err != nil:
			return err
		case s.Task == nil && st.Size() != s.Size:
			return fmt.Errorf("%s has %d bytes, the manifest says %d", p, st.Size(), s.Size)
		}
	}
	return nil
}

// dcpWrite is what one checkpoint writes: a full FTI-FF file or a delta
// on parent, and what it reports once written.
type dcpWrite struct {
	r      *Runtime
	meta   fileformat.Meta
	vars   []fileformat.Var
	parent *levels.Manifest // nil: full
	par    fileformat.Parent
	image  fileformat.Parent // the new image, once written
	info   levels.DeltaInfo
	// A level placing the data itself (the inline L4) is told the file's
	// size beforehand: a delta is then hashed (planned) before it opens.
	plan    *fileformat.DeltaPlan
	planErr error
	hint    int64
	readBy  bool // the level reads the whole data file and records its digest
	// opts are the caller's file options (the datasets' extension area).
	opts []fileformat.Option
	// h5, when set, writes the checkpoint instead (ckpt_io = 5 at L4).
	h5 levels.WriteFunc
}

func (w *dcpWrite) fileOptions() []fileformat.Option {
	opts := append([]fileformat.Option{fileformat.WithClock(w.r.now), fileformat.WithBlockSize(w.r.blockSize())}, w.opts...)
	if w.readBy {
		// The level's transfer hashes the delta as it reads it and
		// records that digest: no pass of the writer's own.
		opts = append(opts, fileformat.WithoutFileDigest())
	}
	return opts
}

// prepare sizes the data file beforehand when lvl places the data itself.
// A failure is reported by write, so that every rank still takes part.
func (w *dcpWrite) prepare(lvl levels.ID) {
	w.readBy = w.r.eng.ReadsData(lvl)
	if w.h5 != nil || !w.r.eng.OpensData(lvl) {
		return
	}
	if w.parent == nil {
		_, fs, err := fileformat.Plan(w.vars, w.r.layout, w.fileOptions()...)
		if err == nil {
			w.hint = fs
		}
		return
	}
	w.plan, w.planErr = fileformat.PlanDelta(w.meta, w.vars, w.par, w.fileOptions()...)
	if w.planErr == nil {
		w.hint = w.plan.Size()
	}
}

func (w *dcpWrite) write(f vfd.File) (int64, levels.Digest, bool, error) {
	if w.h5 != nil {
		return w.h5(f)
	}
	r := w.r
	opts := w.fileOptions()
	if w.planErr != nil {
		return 0, levels.Digest{}, false, w.planErr
	}
	if w.plan != nil {
		st, err := w.plan.Write(f)
		lay, sum := w.plan.Image()
		w.image = fileformat.Parent{Layout: lay, Summary: sum}
		w.info = levels.DeltaInfo{Image: levels.Digest(sum.Checksum), ImageSize: sum.FileSize, DataStats: w.deltaStats(st, sum)}
		return st.FileSize, levels.Digest(st.Digest), err == nil && !w.readBy, err
	}
	if w.parent == nil {
		// The file keeps the previous checkpoint's layout (FTI-FF's data
		// blocks): a variable that grew gets a new container for the extra
		// part only. The layout advances only once the checkpoint committed.
		lay, sum, err := fileformat.Write(f, w.meta, w.vars, r.layout, opts...)
		w.image = fileformat.Parent{Layout: lay, Summary: sum}
		w.info = levels.DeltaInfo{Image: levels.Digest(sum.Checksum), ImageSize: sum.FileSize,
			DataStats: fullStats(sum, compressing(w.vars))}
		// The digest is computed by the engine while the file is synced.
		return sum.FileSize, levels.Digest{}, false, err
	}
	lay, sum, st, err := fileformat.WriteDelta(f, w.meta, w.vars, w.par, opts...)
	w.image = fileformat.Parent{Layout: lay, Summary: sum}
	w.info = levels.DeltaInfo{Image: levels.Digest(sum.Checksum), ImageSize: sum.FileSize, DataStats: w.deltaStats(st, sum)}
	// ok=false at an L2/L3 level: the engine leaves the digest to the transfer.
	return st.FileSize, levels.Digest(st.Digest), err == nil && !w.readBy, err
}

// deltaStats are the data statistics of a delta: its dirty blocks at
// their stored precision (Logical) and at their stored size.
func (w *dcpWrite) deltaStats(st fileformat.DeltaStats, sum fileformat.Summary) levels.DataStats {
	d := levels.DataStats{Written: st.Written, Protected: sum.DataSize}
	if compressing(w.vars) {
		d.Logical, d.Stored = st.Written, st.Stored
	}
	return d
}

// options are the engine options of this write.
func (w *dcpWrite) options() []levels.CheckpointOption {
	var opts []levels.CheckpointOption
	if w.hint > 0 {
		opts = append(opts, levels.SizeHint(w.hint))
	}
	if w.parent == nil {
		return append(opts, levels.WithDataStats(func() levels.DataStats { return w.info.DataStats }))
	}
	return append(opts, levels.Differential(w.parent, w.r.blockSize(), func() levels.DeltaInfo { return w.info }))
}

// keepImage remembers the image of committed checkpoint m and forgets the
// images of checkpoints no longer committed.
func (r *Runtime) keepImage(m *levels.Manifest, img fileformat.Parent) {
	if !r.cfg.EnableDCP || img.Layout == nil {
		return
	}
	if r.images == nil {
		r.images = map[uint64]fileformat.Parent{}
	}
	r.images[m.Seq] = img
	live := map[uint64]bool{}
	for _, c := range r.eng.Committed() {
		live[c.Seq] = true
	}
	for seq := range r.images {
		if !live[seq] {
			delete(r.images, seq)
		}
	}
}

// logDCP prints FTI's dCP statistics line (rank 0): the data protected,
// the data written and their ratio, in FTI's words and units (MB of 2^20
// bytes).
func (r *Runtime) logDCP(m *levels.Manifest, st levels.Stats) {
	tot := st.TotalData
	share := 100.0
	if tot.Protected > 0 {
		share = 100 * float64(tot.Written) / float64(tot.Protected)
	}
	unit := func(n int64) (float64, string) {
		switch {
		case n > 1<<40:
			return float64(n) / (1 << 40), "TB"
		case n > 1<<30:
			return float64(n) / (1 << 30), "GB"
		}
		return float64(n) / (1 << 20), "MB"
	}
	dv, du := unit(tot.Protected)
	wv, wu := unit(tot.Written)
	r.log.Info(fmt.Sprintf("Total CP data: %.2f %s, Total dCP update: %.2f %s, dCP share: %.2f%%", dv, du, wv, wu, share),
		zap.Int64("ckpt-id", m.ID), zap.Stringer("ckpt-level", m.Level), zap.Bool("dcp", m.DCP != nil),
		zap.Int64("dcp-written", tot.Written), zap.Int64("dcp-protected", tot.Protected), zap.Float64("dcp-share", share/100))
}

// setLast makes m, just committed by this run, what Recover reads.
func (r *Runtime) setLast(m *levels.Manifest) {
	r.closeStored()
	if r.reshape != nil {
		r.reshape.close() // Recover now reads this run's own checkpoint
		r.reshape = nil
	}
	r.last, r.recovered, r.restored = m, m, true
	r.src, r.srcTask = levels.Source{}, nil
	if f, ok := m.DataFile(r.c.Rank()); ok && f.Attrs[levels.AttrDigest] == levels.DigestH5 {
		// The data lives in the L4 HDF5 file.
		r.src = levels.Source{Store: r.env.Store(f.Where), Name: f.Attrs[levels.AttrContainer], Size: f.Size, Digest: f.Digest}
		if f.Attrs[levels.AttrInContainer] != "" {
			r.src.Store, r.srcTask = r.env.Global, &f
		}
		return
	}
	src, err := r.eng.Source(m)
	if err != nil {
		r.log.Debug("source of the new checkpoint", zap.Error(err))
	}
	r.src = src
}

// flushImageL4 flushes differential checkpoint m to L4 as a full
// checkpoint: each rank writes its image, read from the chain with every
// block verified (the chain Init verified, or the one this run wrote).
func (r *Runtime) flushImageL4(m *levels.Manifest) (*levels.Manifest, error) {
	src, err := r.eng.Source(m)
	if r.from != nil && r.from.Seq == m.Seq && r.src.Name != "" {
		src, err = r.src, nil // where Init found (or rebuilt) this rank's layers
	}
	write := levels.ImageWrite(src)
	if err != nil {
		write = func(vfd.File) (int64, levels.Digest, bool, error) { return 0, levels.Digest{}, false, err }
	}
	start := r.now()
	m4, st, err := r.eng.Checkpoint(m.ID, levels.L4, write)
	if err != nil {
		return nil, fmt.Errorf("keep_last_ckpt: flush checkpoint %d (%v, differential) to L4 failed; nothing was deleted, checkpoint %d stays at %v for the next run: %w",
			m.ID, m.Level, m.ID, m.Level, err)
	}
	if r.c.Rank() == 0 {
		wall := r.now().Sub(start)
		mib := float64(m4.Bytes()) / float64(m4.Ranks) / (1 << 20)
		r.log.Info(fmt.Sprintf("Ckpt. ID %d flushed from %v (differential, %d layers) to %v at Finalize (%.2f MiB/proc) in %.3f sec. (Wr %.3f, Ps %.3f, Cm %.3f)",
			m.ID, m.Level, m.Layers(), m4.Level, mib, wall.Seconds(), st.Write.Seconds(), st.Protect.Seconds(), st.Commit.Seconds()),
			zap.Int64("ckpt-id", m.ID), zap.Stringer("ckpt-level", m4.Level), zap.Stringer("from-level", m.Level),
			zap.Float64("mib-per-rank", mib), zap.Duration("wall", wall))
	}
	return m4, nil
}
