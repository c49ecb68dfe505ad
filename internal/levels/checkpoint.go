package levels

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// The checkpoint path: the data write, the level's protection, the
// publication of its files and the abort of a failed checkpoint. The
// commit itself is in commit.go.

// WriteFunc writes this rank's data file into f (an empty, writable file)
// and returns its size and digest. The engine syncs and closes f. A
// WriteFunc that cannot compute the digest while writing returns ok=false
// and the engine re-reads the file.
type WriteFunc func(f vfd.File) (size int64, d Digest, ok bool, err error)

// Checkpoint writes, protects and commits a checkpoint at level lvl with
// the application's id. Collective. On success the manifest is durable and
// superseded checkpoints are deleted; on failure no rank's files remain and
// the previous committed checkpoints are untouched.
//
// With [Differential] the checkpoint is a differential one: the manifest
// records the chain it depends on (docs/format/dcp.md).
func (e *Engine) Checkpoint(id int64, lvl ID, write WriteFunc, opts ...CheckpointOption) (*Manifest, Stats, error) {
	e.Wait()
	env := e.env
	start := env.Now()
	var st Stats
	level, err := e.Level(lvl)
	if err != nil {
		return nil, st, err
	}
	co := buildCheckpointOptions(opts)
	chain, err := e.checkParent(&co, lvl)
	if err != nil {
		return nil, st, err
	}
	p := &Pending{Seq: e.nextSeq, ID: id, Level: lvl, Dir: CheckpointDir(e.nextSeq), chain: chain, opts: &co}
	e.nextSeq++

	// 0. The intent marker, durable before any file of the checkpoint is
	// published: files without a manifest are then known to be
	// uncommitted, not a committed checkpoint whose metadata was lost.
	// Normally rank 0 made it durable in the background after the last
	// commit (or Open), and the data file is written under its final name
	// at once. Otherwise rank 0 writes it while the data is written under
	// its tmp name, which the commit renames.
	ahead, err := e.takeIntent(p.Seq)
	if err != nil {
		return nil, st, err
	}
	p.ahead = ahead
	var marked chan error
	if env.Rank == 0 && !ahead {
		marked = make(chan error, 1)
		nodes := e.numNodes()
		go func() { marked <- writePending(env.Meta, p.Seq, nodes) }()
	}

	// 1. Data file under its final name (its tmp name without a marker
	// written ahead), synced; or, for a level that places the data
	// itself, the level's file.
	area := level.DataArea()
	opener, direct := opensData(level)
	var held vfd.File // non-nil on every rank or on none
	var werr error
	var syncData func() error // the data file's fsync, left to run beside Protect
	if direct {
		held, werr = e.writeDirect(p, opener, area, write, &st)
	} else {
		syncData, werr = e.writeData(p, area, write, &st, readsData(level), co.prewritten, ahead)
	}
	st.Write = env.Now().Sub(start)
	if werr == nil {
		markDelta(p, &co)
		st.Data = co.dataStats()
		p.stats = st.Data
	}
	if marked != nil {
		werr = errors.Join(werr, <-marked)
	}
	if err := e.agree(werr, "write checkpoint data"); err != nil {
		if held != nil {
			err = errors.Join(err, opener.AbortData(env, p, held))
		}
		if syncData != nil {
			err = errors.Join(err, syncData())
		}
		return nil, st, e.abort(p, fmt.Errorf("%w: %w", ErrVoteFailed, err))
	}

	// 2. Redundancy. A DataReader's Protect reads the data file from the
	// page cache while the file's fsync runs; both are voted on together.
	t := env.Now()
	var synced chan error
	if syncData != nil {
		synced = make(chan error, 1)
		go func() { synced <- syncData() }()
	}
	var perr error
	if direct {
		perr = opener.ProtectData(env, p, held)
	} else {
		perr = level.Protect(env, p)
	}
	if synced != nil {
		perr = errors.Join(perr, <-synced)
	}
	if perr == nil && p.DigestPending {
		perr = fmt.Errorf("%w (level %v)", ErrDigestNotRecorded, lvl)
	}
	if perr == nil {
		perr = p.unlisted()
	}
	st.Protect = env.Now().Sub(t)
	if err := e.agree(perr, "protect checkpoint at "+lvl.String()); err != nil {
		return nil, st, e.abort(p, fmt.Errorf("%w: %w", ErrVoteFailed, err))
	}

	// 3. Renames and directory syncs of what is under tmp names, if
	// anything; 4. the manifest copies, the commit, with the superseded
	// markers of what retention drops (commit.go).
	t = env.Now()
	m, drops, err := e.commit(p)
	st.Commit = env.Now().Sub(t)
	st.TotalData = p.total
	if err != nil {
		return nil, st, e.abort(p, err)
	}
	e.committed = append(e.committed, m)

	// 5. Retention: the checkpoints m's commit dropped (its superseded
	// markers) go, in the background.
	t = env.Now()
	e.retainMarked(drops)
	st.Clean = env.Now().Sub(t)
	st.Total = env.Now().Sub(start)
	return m, st, nil
}

// writeData writes the data file and records it. With ahead (the intent
// marker is durable already) the file is written under its final name
// and the checkpoint directory's entries (its own in the area, the
// file's in it) are synced beside the file's fsync, so that the commit
// has nothing to rename ([Pending.Published] counts the file); otherwise
// it is written under its tmp name. The file is synced and its digest
// known on return, except with readBy (the level's Protect reads the
// whole file, see [DataReader]): then the returned function syncs and
// closes the file (and the directories), to be run beside Protect, and
// when the write gave no digest it is left pending for Protect.
func (e *Engine) writeData(p *Pending, area Where, write WriteFunc, st *Stats, readBy, prewritten, ahead bool) (func() error, error) {
	s := e.env.Store(area)
	if err := s.Driver.MkdirAll(s.Path(p.Dir), 0o755); err != nil {
		return nil, fmt.Errorf("create checkpoint dir: %w", err)
	}
	name := RankFileName(p.Dir, RoleData, e.env.Rank)
	full := s.Path(name) + TmpSuffix
	if ahead {
		if prewritten {
			if err := s.Driver.Rename(full, s.Path(name)); err != nil {
				return nil, fmt.Errorf("rename the data file into place: %w", err)
			}
		}
		full = s.Path(name)
	}
	var f vfd.File
	var err error
	if prewritten {
		f, err = s.Driver.Open(full, vfd.ReadWrite)
	} else {
		f, err = vfd.CreateTrunc(s.Driver, full)
	}
	if err != nil {
		return nil, fmt.Errorf("create data file: %w", err)
	}
	if ahead && area == Local {
		if err := e.prename(p); err != nil {
			return nil, errors.Join(err, f.Close())
		}
	}
	// The directory syncs that make the file's name durable, beside its
	// fsync (concurrent syncs on one file system share journal commits),
	// and those of the names created for the level's files.
	var dirs []func() error
	if ahead {
		dirs = []func() error{
			func() error { return s.Driver.SyncDir(s.Path(p.Dir)) },
			func() error { return s.Driver.SyncDir(s.Dir) },
		}
		p.dirSynced = map[Where]bool{area: true}
	}
	record := func(f File) {
		p.Files = append(p.Files, f)
		if ahead {
			p.Published = len(p.Files)
		}
	}
	size, d, ok, err := write(f)
	var attrs map[string]string
	if level := e.levels[p.Level]; err == nil && !ok && area == Local && recordsFTIFF(level) {
		// A level that checks the checksum sends the preamble ahead.
		d, attrs, p.preamble, ok = ffDigestPreamble(f, checksFTIFF(level))
	}
	if err == nil && readBy {
		// The fsync (and the directories') beside Protect, which reads the
		// whole file next: its digest is the FTI-FF checksum (checked by
		// L2's receivers), the digest the write gave, or left to the level,
		// which hashes the file as it reads it.
		st.Bytes = size
		record(File{Role: RoleData, Where: area, Name: name, Size: size, Digest: d, Of: e.env.Rank, Attrs: attrs})
		p.DigestPending = !ok
		return func() error {
			err := runAll(append([]func() error{func() error { return errors.Join(f.Sync(), f.Close()) }}, dirs...))
			if err != nil {
				return vfd.WrapPath(err, "sync", full)
			}
			return nil
		}, nil
	}
	if err == nil {
		if ok {
			err = runAll(append([]func() error{f.Sync}, dirs...))
		} else {
			// Hash through a second handle while the data goes to disk:
			// the CPU work hides behind the fsync.
			hash := func() error {
				rf, err := s.Driver.Open(full, vfd.ReadOnly)
				if err != nil {
					return err
				}
				d, err = FileDigest(rf)
				return errors.Join(err, rf.Close())
			}
			err = runAll(append([]func() error{f.Sync, hash}, dirs...))
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, vfd.WrapPath(err, "write", full)
	}
	st.Bytes = size
	record(File{Role: RoleData, Where: area, Name: name, Size: size, Digest: d, Of: e.env.Rank, Attrs: attrs})
	return nil, nil
}

// prename creates, empty and under their final names, the files the
// level of p writes in this rank's checkpoint directory of the Local area
// ([Prenamer]), for the directory syncs beside the data file's fsync to
// make their names durable as well; the level's Protect then writes them
// in place. Only once the intent marker is durable: start-up removes the
// directory of a checkpoint that did not commit, whatever names it holds.
func (e *Engine) prename(p *Pending) error {
	s := e.env.Local
	for _, name := range prenames(e.levels[p.Level], e.env, p) {
		if path.Dir(name) != p.Dir {
			continue // not in the checkpoint's directory: written under its tmp name
		}
		p.WroteFinal(Local, name) // removed by abort, even when not created
		if err := createEmpty(s.Driver, s.Path(name)); err != nil {
			return vfd.WrapPath(err, "create", s.Path(name))
		}
	}
	return nil
}

// unlisted returns an error naming the files written under their final
// names ([Pending.WroteFinal], [Prenamer]) that p.Files does not list: a
// level that named a file it did not write would leave it in a committed
// checkpoint's directory, so the checkpoint fails (and the file goes).
func (p *Pending) unlisted() error {
	var missing []string
	for k := range p.final {
		if !slices.ContainsFunc(p.Files, func(f File) bool { return f.Where == k.w && f.Name == k.name }) {
			missing = append(missing, k.name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("levels: level %v named %s under final names but did not list them", p.Level, strings.Join(missing, ", "))
}

// ffDigest returns the file checksum of f when f is an FTI-FF file that
// carries a BLAKE3 hash of every block, with the attributes that mark the
// digest as such, so that the data need not be read back and hashed again.
// ok is false for any other file.
func ffDigest(f vfd.File) (d Digest, attrs map[string]string, ok bool) {
	d, attrs, _, ok = ffDigestPreamble(f, false)
	return d, attrs, ok
}

// ffDigestPreamble is ffDigest that also returns the file's preamble
// when asked (for a partner copy that sends it, [ftiffFormat]).
func ffDigestPreamble(f vfd.File, preamble bool) (d Digest, attrs map[string]string, pre []byte, ok bool) {
	rd, err := fileformat.Open(f)
	if err != nil || !rd.Hashed() {
		return Digest{}, nil, nil, false
	}
	if preamble {
		if pre, err = rd.Preamble(); err != nil {
			return Digest{}, nil, nil, false
		}
	}
	return Digest(rd.Summary().Checksum), map[string]string{AttrDigest: DigestFTIFF}, pre, true
}

// writeDirect writes this rank's data through the level's DataOpener. The
// returned file is non-nil whenever OpenData succeeded, even on error.
func (e *Engine) writeDirect(p *Pending, opener DataOpener, area Where, write WriteFunc, st *Stats) (vfd.File, error) {
	var hint int64
	if n := len(e.committed); n > 0 {
		if f, ok := e.committed[n-1].DataFile(e.env.Rank); ok {
			hint = f.Size
		}
	}
	if p.opts != nil && p.opts.sizeHint > 0 {
		hint = p.opts.sizeHint
	}
	f, err := opener.OpenData(e.env, p, hint)
	if err != nil {
		return nil, fmt.Errorf("open data: %w", err)
	}
	size, d, ok, err := write(f)
	var attrs map[string]string
	if err == nil && !ok {
		d, attrs, ok = ffDigest(f)
	}
	if err == nil && !ok {
		d, err = FileDigest(f)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return f, vfd.WrapPath(err, "write", f.Name())
	}
	st.Bytes = size
	p.Files = append(p.Files, File{Role: RoleData, Where: area, Name: RankFileName(p.Dir, RoleData, e.env.Rank),
		Size: size, Digest: d, Of: e.env.Rank, Attrs: attrs})
	return f, nil
}

// publish renames this rank's files into place and syncs their directories.
func (e *Engine) publish(p *Pending) error {
	dirs := map[Where]map[string]bool{}
	for _, f := range p.Files[p.Published:] {
		if p.inPlace(f) {
			continue // under its final name already, or no file of its own
		}
		s := e.env.Store(f.Where)
		if err := s.Driver.Rename(s.Path(f.Name)+TmpSuffix, s.Path(f.Name)); err != nil {
			return fmt.Errorf("rename into place: %w", err)
		}
		if dirs[f.Where] == nil {
			dirs[f.Where] = map[string]bool{}
		}
		dirs[f.Where][path.Dir(f.Name)] = true
	}
	// Every directory at once: concurrent syncs of one file system share
	// its journal commits, where one after the other each waits for its own.
	var syncs []func() error
	for w, ds := range dirs {
		s := e.env.Store(w)
		for d := range ds {
			syncs = append(syncs, func() error {
				if err := s.Driver.SyncDir(s.Path(d)); err != nil {
					return fmt.Errorf("sync checkpoint dir: %w", err)
				}
				return nil
			})
		}
		if p.dirSynced[w] {
			continue // synced with the data file
		}
		// The checkpoint directory's own entry in the area.
		syncs = append(syncs, func() error {
			if err := s.Driver.SyncDir(s.Dir); err != nil {
				return fmt.Errorf("sync area dir: %w", err)
			}
			return nil
		})
	}
	return runAll(syncs)
}

// abort removes every file and directory of the failed checkpoint p
// (tmp or renamed) on every rank, then rank 0 its intent marker, and
// returns err. Collective. Whatever cannot be removed keeps the marker,
// and the next Open removes it.
func (e *Engine) abort(p *Pending, err error) error {
	env := e.env
	var errs []error
	for _, f := range p.Files {
		s := env.Store(f.Where)
		errs = append(errs, removeIfExists(s.Driver, s.Path(f.Name)+TmpSuffix), removeIfExists(s.Driver, s.Path(f.Name)))
	}
	// A failed data write may have left a file (tmp, or under its final
	// name when the intent marker was written ahead) not yet in p.Files,
	// and a failed Protect the names created for it.
	for _, w := range []Where{Local, Global} {
		s := env.Store(w)
		name := s.Path(RankFileName(p.Dir, RoleData, env.Rank))
		errs = append(errs, removeIfExists(s.Driver, name+TmpSuffix), removeIfExists(s.Driver, name))
	}
	for k := range p.final {
		s := env.Store(k.w)
		errs = append(errs, removeIfExists(s.Driver, s.Path(k.name)))
	}
	cerr := errors.Join(errs...)
	if comm.Agree(env.Comm, cerr, "remove the files of a failed checkpoint") == nil {
		// Every rank is done with its files: the directories go.
		cerr = nil
		if e.nodeLeader() {
			cerr = removeDir(env.Local, p.Dir)
		}
		if env.Rank == 0 {
			cerr = errors.Join(cerr, removeDir(env.Global, p.Dir), removePartsDirs(env, p.Seq))
		}
		if comm.Agree(env.Comm, cerr, "remove the directories of a failed checkpoint") == nil && env.Rank == 0 {
			cerr = removeIfExists(env.Meta.Driver, env.Meta.Path(PendingName(p.Seq)))
		}
	}
	if cerr != nil {
		env.Logger.Warn("cleanup after failed checkpoint; the next start-up finishes it", zap.Uint64("seq", p.Seq), zap.Error(cerr))
	}
	return err
}
