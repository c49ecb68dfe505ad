package ckpt

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/h5ckpt"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// LevelH5Single is FTI's FTI_L4_H5_SINGLE: Checkpoint(id, LevelH5Single)
// writes the checkpoint as one HDF5 file (h5_single_file_enable).
const LevelH5Single = 9

// Level-9 bookkeeping in meta_dir.
//
// wire format: never change.
const (
	// vprDir is the directory of meta_dir holding one record per level-9
	// file: the record is the file's commit (a file without one is not a
	// checkpoint, whatever it holds).
	vprDir = "h5single"
	// vprMagic starts every record.
	vprMagic = "ftigo-h5single"
	// defaultVPRPrefix is FTI's default h5_single_file_prefix.
	defaultVPRPrefix = "VPR-h5"
	// maxVPRRecord bounds a record read back.
	maxVPRRecord = 64 << 10
)

// vprRecord is the commit record of one level-9 file.
type vprRecord struct {
	Magic  string `json:"magic"`
	Path   string `json:"path"`
	ID     int64  `json:"id"`
	Ranks  int    `json:"ranks"`
	Time   int64  `json:"time"`
	Size   int64  `json:"size"`
	Tables string `json:"tables_blake3"`
	// Name is the record's file name in meta_dir/h5single.
	Name string `json:"name"`
}

// vprState is what a runtime knows of the level-9 files.
type vprState struct {
	drv     vfd.Driver   // the global area's driver, which reads the files
	meta    levels.Store // meta_dir/h5single
	records []vprRecord  // committed, oldest first; identical on every rank
}

// vprDirOf returns where the level-9 files go and their name prefix.
func (c Config) vprDirOf() (dir, prefix string) {
	dir, prefix = c.H5SingleFileDir, c.H5SingleFilePrefix
	if dir == "" {
		dir = c.GlblDir
	}
	if prefix == "" {
		prefix = defaultVPRPrefix
	}
	return dir, prefix
}

// openVPR reads the level-9 records on rank 0 and gives every rank the
// valid ones, oldest first; a damaged record is warned about and left
// aside. Collective.
func (r *Runtime) openVPR(global vfd.Driver) error {
	r.vpr.drv = global
	r.vpr.meta = levels.Store{Driver: r.env.Meta.Driver, Dir: path.Join(r.cfg.MetaDir, vprDir)}
	var raw []byte
	var lerr error
	if r.c.Rank() == 0 {
		var recs []vprRecord
		recs, lerr = r.readVPRRecords()
		if lerr == nil {
			raw, lerr = json.Marshal(recs)
		}
	}
	if err := comm.Agree(r.c, lerr, "read the level-9 records in "+r.vpr.meta.Dir); err != nil {
		return fmt.Errorf("ckpt: %w", err)
	}
	raw, err := comm.BcastBytes(r.c, 0, raw)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, &r.vpr.records)
}

// readVPRRecords lists the valid records (rank 0).
func (r *Runtime) readVPRRecords() ([]vprRecord, error) {
	s := r.vpr.meta
	ents, err := s.Driver.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []vprRecord
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := vfd.ReadFileLimit(s.Driver, s.Path(e.Name()), maxVPRRecord)
		var rec vprRecord
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err == nil && (rec.Magic != vprMagic || rec.Path == "" || rec.Ranks < 1) {
			err = fmt.Errorf("not a level-9 record")
		}
		if err != nil {
			r.log.Warn("level-9 record unreadable; its HDF5 file is not used for a restart", zap.String("record", s.Path(e.Name())), zap.Error(err))
			continue
		}
		rec.Name = e.Name()
		out = append(out, rec)
	}
	slices.SortStableFunc(out, func(a, b vprRecord) int {
		return cmp.Or(cmp.Compare(a.Time, b.Time), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}

// warnH5Whole says, on rank 0, that dCP checkpoint id at lvl, the L4
// of ckpt_io = 5, is taken whole: the HDF5 file is always written whole
// (as FTI, whose dCP covers its POSIX and FTI-FF I/O only).
func (r *Runtime) warnH5Whole(id int64, lvl levels.ID) {
	if r.c.Rank() == 0 {
		r.log.Warn(fmt.Sprintf("dCP requested at %v, but ckpt_io = 5 writes L4 as one HDF5 file: checkpoint %d is taken whole", lvl, id),
			zap.Int64("ckpt-id", id))
	}
}

// h5Write returns the WriteFunc of an L4 checkpoint written as one HDF5
// file (ckpt_io = 5): every rank writes its variables and subsets with
// h5ckpt.Write into the file the level names; the digest is the file's
// tables hash. view is what the file records (the run's datasets, or
// those of the checkpoint a keep_last_ckpt flush copies). c is the
// communicator the ranks write over: the solver's, or the background
// worker's in snapshot mode (which then writes from the staged copies).
func (r *Runtime) h5Write(c comm.Comm, id int64, level int, vars []fileformat.Var, view dataset.View) levels.WriteFunc {
	return func(f vfd.File) (int64, levels.Digest, bool, error) {
		hf, ok := f.(*levels.H5File)
		if !ok {
			return 0, levels.Digest{}, false, fmt.Errorf("ckpt: ckpt_io = 5 needs the HDF5 L4 level, got a %T to write into", f)
		}
		var size int64
		for _, v := range vars {
			size += int64(len(v.Data))
		}
		var res h5ckpt.Result
		err := h5ckpt.Write(c, hf.Driver, hf.Path, h5ckpt.Meta{CkptID: id, Level: level, Run: r.run}, vars, view.Datasets, view.Subsets,
			h5ckpt.WithClock(r.now), h5ckpt.WithLogger(r.log), h5ckpt.WithResult(&res))
		return size, levels.Digest(res.TablesHash), true, err
	}
}

// checkpointH5Single writes checkpoint id as one HDF5 file in
// h5_single_file_dir (level 9, FTI_L4_H5_SINGLE) and commits it with a
// record in meta_dir; unless h5_single_file_keep, the previous level-9
// file and its record go. Collective.
func (r *Runtime) checkpointH5Single(id int64) error {
	if err := r.sameArgs(id, LevelH5Single); err != nil {
		return err
	}
	if !r.cfg.H5SingleFileEnable {
		return fmt.Errorf("ckpt: checkpoint level %d (FTI_L4_H5_SINGLE): %w: set h5_single_file_enable = 1", LevelH5Single, ErrLevelUnavailable)
	}
	vars, err := r.fileVars()
	if err == nil {
		err = r.checkSubsetSizes(vars)
	}
	if err := comm.Agree(r.c, err, "collect protected variables"); err != nil {
		return fmt.Errorf("ckpt: checkpoint %d (level 9): %w", id, err)
	}
	if err := r.checkDecomposition(); err != nil {
		return fmt.Errorf("ckpt: checkpoint %d (level 9): %w", id, err)
	}
	dir, prefix := r.cfg.vprDirOf()
	name := h5ckpt.Name(dir, prefix, id)
	var oerr error
	if r.c.Rank() == 0 {
		oerr = r.vprOwned(name)
	}
	if err := comm.Agree(r.c, oerr, "check the level-9 file's owner"); err != nil {
		return fmt.Errorf("ckpt: checkpoint %d (level 9): %w", id, err)
	}
	start := r.now()
	view := r.datasetView()
	var res h5ckpt.Result
	if err := h5ckpt.Write(r.c, r.vpr.drv, name, h5ckpt.Meta{CkptID: id, Level: LevelH5Single, Timestamp: start.UnixNano(), Run: r.run},
		vars, view.Datasets, view.Subsets, h5ckpt.WithClock(r.now), h5ckpt.WithLogger(r.log), h5ckpt.WithResult(&res)); err != nil {
		return fmt.Errorf("ckpt: checkpoint %d (level 9): %w", id, err)
	}
	rec := vprRecord{Magic: vprMagic, Path: name, ID: id, Ranks: r.c.Size(), Time: r.now().UnixNano(), Size: res.Size,
		Tables: hex.EncodeToString(res.TablesHash[:]), Name: path.Base(name) + ".json"}
	var werr error
	if r.c.Rank() == 0 {
		var b []byte
		if b, werr = json.Marshal(rec); werr == nil {
			if werr = vfd.MkdirDurable(r.vpr.meta.Driver, r.vpr.meta.Dir); werr == nil {
				werr = vfd.WriteFileAtomic(r.vpr.meta.Driver, r.vpr.meta.Path(rec.Name), b)
			}
		}
		if werr != nil {
			// The rename may have happened before the failure: a failed
			// checkpoint must not be found committed by the next run.
			d := r.vpr.meta.Driver
			rerr := d.Remove(r.vpr.meta.Path(rec.Name))
			if rerr == nil || errors.Is(rerr, fs.ErrNotExist) {
				rerr = d.SyncDir(r.vpr.meta.Dir)
			}
			if rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				werr = errors.Join(werr, fmt.Errorf("and its record could not be removed, so the next run may restart from it: %w", rerr))
			}
		}
	}
	if err := comm.Agree(r.c, werr, "commit level-9 file "+name); err != nil {
		return fmt.Errorf("ckpt: checkpoint %d (level 9): %w", id, err)
	}
	var drop []vprRecord
	keep := r.vpr.records[:0]
	for _, x := range r.vpr.records {
		switch {
		case x.Name == rec.Name: // replaced
		case !r.cfg.H5SingleFileKeep:
			drop = append(drop, x)
		default:
			keep = append(keep, x)
		}
	}
	r.vpr.records = append(keep, rec)
	r.dropVPR(drop, true)
	if r.c.Rank() == 0 {
		wall := r.now().Sub(start)
		mib := float64(res.Size) / float64(r.c.Size()) / (1 << 20)
		r.log.Info(fmt.Sprintf("Ckpt. ID %d (L9, HDF5 single file %s) (%.2f MiB/proc) taken in %.3f sec.", id, name, mib, wall.Seconds()),
			zap.Int64("ckpt-id", id), zap.String("file", name), zap.Int64("bytes", res.Size), zap.Duration("wall", wall))
	}
	return nil
}

// vprOwned checks that level-9 file name, if it exists, is this run's
// (or records no run), so that writing it overwrites none of another
// run's files. Rank 0.
func (r *Runtime) vprOwned(name string) error {
	if _, err := r.vpr.drv.Stat(name); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	hf, err := h5ckpt.Open(r.vpr.drv, name, h5ckpt.WithLogger(r.log))
	if err != nil {
		return nil // not a readable checkpoint file: replacing it is no loss
	}
	run := hf.Meta().Run
	_ = hf.Close()
	if r.foreignRun(run) {
		return r.otherRunError(name, run, "overwrite")
	}
	return nil
}

// foreignRun reports whether a file recording run was written by
// another run than this one (a file or a run without an id is nobody's).
func (r *Runtime) foreignRun(run string) bool {
	return run != "" && r.run != "" && run != r.run
}

// otherRunError is the one-line refusal to do what to file of run other.
func (r *Runtime) otherRunError(file, other, what string) error {
	return fmt.Errorf("%w: will not %s %s: it belongs to run %s, this is run %s (give each run its own h5_single_file_dir or h5_single_file_prefix)",
		ErrOtherRun, what, file, other, r.run)
}

// dropVPR removes the records of recs (rank 0) and, with files, their
// HDF5 files: the record first, so a crash in between leaves a file
// that is no checkpoint, never a record without its file. Failures are
// logged: a record left behind is verified before any use.
func (r *Runtime) dropVPR(recs []vprRecord, files bool) {
	if r.c.Rank() != 0 || len(recs) == 0 {
		return
	}
	for _, x := range recs {
		err := r.vpr.meta.Driver.Remove(r.vpr.meta.Path(x.Name))
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			err = r.vpr.meta.Driver.SyncDir(r.vpr.meta.Dir)
			if err == nil && files {
				if rerr := r.vpr.drv.Remove(x.Path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
					err = rerr
				}
			}
		}
		if err != nil {
			r.log.Warn("removing a superseded level-9 file", zap.String("file", x.Path), zap.Error(err))
		}
	}
}

// restartVPR verifies level-9 file rec (every rank checks the blocks of
// the old ranks it is home for, levels.HomeOf) and prepares the
// redistributing Recover from it. Collective; the error is the same on
// every rank.
func (r *Runtime) restartVPR(rec vprRecord) error {
	me, n := r.c.Rank(), r.c.Size()
	hf, err := h5ckpt.Open(r.vpr.drv, rec.Path, h5ckpt.WithLogger(r.log))
	if err == nil {
		th := hf.TablesHash()
		switch {
		case r.foreignRun(hf.Meta().Run):
			err = r.otherRunError(rec.Path, hf.Meta().Run, "restore from")
		case hex.EncodeToString(th[:]) != rec.Tables:
			err = fmt.Errorf("%w: %s: tables hash %x, its record %s says %s", levels.ErrDigestMismatch, rec.Path, th, r.vpr.meta.Path(rec.Name), rec.Tables)
		case hf.Ranks() != rec.Ranks:
			err = fmt.Errorf("%w: %s was written by %d ranks, its record says %d", levels.ErrDigestMismatch, rec.Path, hf.Ranks(), rec.Ranks)
		}
		for _, o := range levels.HomeRanks(hf.Ranks(), n, me) {
			if err == nil {
				err = hf.VerifyRank(o)
			}
		}
	}
	if aerr := comm.Agree(r.c, err, "verify level-9 file "+rec.Path); aerr != nil {
		if hf != nil {
			_ = hf.Close()
		}
		return aerr
	}
	// Every rank is home for, and reads, the old ranks levels.HomeOf
	// gives it: it can open the file itself.
	st := &reshapeState{what: fmt.Sprintf("level-9 HDF5 file %s (id %d, %d ranks)", rec.Path, rec.ID, rec.Ranks),
		oldRanks: rec.Ranks, h5Path: rec.Path, h5Drv: r.vpr.drv, h5: hf, closers: []io.Closer{hf}}
	mine := map[int]levels.ReshapeSource{}
	for _, o := range levels.HomeRanks(rec.Ranks, n, me) {
		mine[o] = levels.ReshapeSource{Rank: o, Node: -1, Reader: me,
			Entry: levels.File{Role: levels.RoleData, Where: levels.Global, Name: rec.Path, Size: 0, Of: o,
				Attrs: map[string]string{levels.AttrDigest: levels.DigestH5}}}
	}
	if err := r.startReshape(st, mine, mine); err != nil {
		st.close()
		r.reshape = nil
		return err
	}
	m := &levels.Manifest{ID: rec.ID, Level: levels.ID(LevelH5Single), Ranks: rec.Ranks, Time: rec.Time}
	r.closeStored()
	r.recovered, r.from, r.src, r.srcTask, r.lastID = m, m, levels.Source{}, nil, rec.ID
	r.layout = nil
	r.status = RestartVPR
	return nil
}

// finalizeVPR removes the level-9 records at Finalize (the files stay,
// as in FTI: they are the run's HDF5 output), so a finished run never
// restarts from them; with keep_last_ckpt the newest record stays.
func (r *Runtime) finalizeVPR() {
	recs := r.vpr.records
	if r.cfg.KeepLastCkpt && len(recs) > 0 {
		recs = recs[:len(recs)-1]
	}
	r.dropVPR(recs, false)
	r.vpr.records = slices.Clone(r.vpr.records[len(recs):])
}
