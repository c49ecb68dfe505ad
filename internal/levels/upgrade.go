package levels

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// ErrNotUpgradable is returned by [Engine.Upgrade] for a checkpoint that
// is not committed at L1, or a target level that cannot be reached by
// post-processing a committed L1 checkpoint.
var ErrNotUpgradable = errors.New("levels: checkpoint cannot be upgraded")

// Upgrade raises committed L1 checkpoint m to level lvl (2, 3 or 4) by
// running that level's post-processing on m's published data files:
// [Level.Protect] with [Pending.Published] set (the L2 partner copy, the
// L3 parity, the L4 container), a vote, the renames of the new files and
// their directory syncs while rank 0 writes and syncs both manifest
// copies with the new level and files under tmp names, a vote on both,
// and the copies renamed over the L1 ones (the primary first, each
// followed by its directory's sync, so that a crash between the two
// leaves the primary, which start-up prefers, at the new level). The
// differential information (chain, totals) and the commit time stay as
// they were. Retention then runs as for a checkpoint committed at lvl.
//
// This is how asynchronous post-processing (FTI's inline_lN = 0) commits
// a checkpoint twice: at L1 on the solver's path, at its level in the
// background. c, when not nil, replaces the environment's communicator for
// every collective call of the upgrade: a private communicator whose
// messages never mix with the solver's. While Upgrade runs, no other
// method of the engine may be called. As after [Engine.Checkpoint], the
// files of the checkpoints retention dropped may still be being removed
// in the background when Upgrade returns (the checkpoint is committed at
// lvl by then): the engine's next call waits for them, as does
// [Engine.Wait].
//
// On failure (the same error on every rank, wrapping [ErrVoteFailed] when
// some rank failed) the new files are removed and m stays committed at
// L1, untouched. Collective over c.
func (e *Engine) Upgrade(m *Manifest, lvl ID, c comm.Comm) (*Manifest, Stats, error) {
	e.Wait()
	if c != nil {
		// The background removal retention starts holds the environment
		// it started with: the communicator can be put back at once.
		defer e.useComm(c)()
	}
	env := e.env
	start := env.Now()
	cur := e.committedSeq(m.Seq)
	if cur == nil {
		return nil, Stats{}, fmt.Errorf("%w: checkpoint %s is not committed", ErrNotUpgradable, m.Dir())
	}
	up, st, err := e.raise(cur, lvl)
	if err != nil {
		return nil, st, err
	}
	e.replaceCommitted(up)
	t := env.Now()
	e.retain(up)
	st.Clean = env.Now().Sub(t)
	st.Total = env.Now().Sub(start)
	return up, st, nil
}

// Raise is [Engine.Upgrade] for an engine that does not hold the
// checkpoint: m, committed at L1 by the application ranks, is raised to
// lvl (post-processing, vote, publication, both manifest copies
// rewritten) and the upgraded manifest returned, but nothing is retained
// or dropped: the application ranks' engines take the result with
// [Engine.Adopt]. FTI's head ranks post-process this way on behalf of
// their node's application ranks (ckpt runs one engine per application
// rank in the head, over a [comm.Mux] virtual world). No Open is needed.
// Collective over c (or the environment's communicator when c is nil).
func (e *Engine) Raise(m *Manifest, lvl ID, c comm.Comm) (*Manifest, Stats, error) {
	e.Wait()
	if c != nil {
		defer e.useComm(c)()
	}
	start := e.env.Now()
	up, st, err := e.raise(m, lvl)
	st.Total = e.env.Now().Sub(start)
	return up, st, err
}

// useComm makes c the communicator of the engine's environment (a copy
// of it) and returns the function that puts the previous one back.
func (e *Engine) useComm(c comm.Comm) (restore func()) {
	saved := e.env
	env := *saved
	env.Comm = c
	e.env = &env
	return func() { e.env = saved }
}

// Adopt records up, a checkpoint raised by [Engine.Raise] elsewhere, in
// place of its L1 commit, and retains as [Engine.Upgrade] would have: the
// checkpoints up supersedes are dropped (their files removed in the
// background, see [Engine.Wait]). Collective: every rank adopts the same
// manifest at the same point.
func (e *Engine) Adopt(up *Manifest) error {
	e.Wait()
	if e.committedSeq(up.Seq) == nil {
		return fmt.Errorf("%w: checkpoint %s is not committed here", ErrNotUpgradable, up.Dir())
	}
	e.replaceCommitted(up)
	e.retain(up)
	return nil
}

// replaceCommitted puts up in the place of the committed checkpoint of
// the same sequence number.
func (e *Engine) replaceCommitted(up *Manifest) {
	for i, x := range e.committed {
		if x.Seq == up.Seq {
			e.committed[i] = up
		}
	}
}

// raise runs the post-processing of committed L1 checkpoint cur at lvl
// and rewrites its manifest copies. Collective.
func (e *Engine) raise(cur *Manifest, lvl ID) (*Manifest, Stats, error) {
	env := e.env
	var st Stats
	m := cur
	switch {
	case cur.Level != L1:
		return nil, st, fmt.Errorf("%w: checkpoint %s is at %v, not L1", ErrNotUpgradable, m.Dir(), cur.Level)
	case lvl <= L1 || !lvl.Valid():
		return nil, st, fmt.Errorf("%w: to level %d (want 2..4)", ErrNotUpgradable, int(lvl))
	case cur.Ranks != env.Comm.Size():
		return nil, st, fmt.Errorf("%w: checkpoint %s was written by %d ranks, this run has %d", ErrNotUpgradable, m.Dir(), cur.Ranks, env.Comm.Size())
	}
	level, err := e.Level(lvl)
	if err != nil {
		return nil, st, err
	}
	if _, h5 := level.(Global4H5); h5 {
		return nil, st, fmt.Errorf("%w: the HDF5 L4 is written by the ranks themselves", ErrNotUpgradable)
	}
	// This rank's published files, data first; Protect appends its own.
	var files []File
	d, hasData := cur.DataFile(env.Rank)
	if hasData {
		files = append(files, cloneFile(d))
	}
	for _, f := range cur.Files[env.Rank] {
		if !(f.Role == RoleData && f.Of == env.Rank) {
			files = append(files, cloneFile(f))
		}
	}
	p := &Pending{Seq: cur.Seq, ID: cur.ID, Level: lvl, Dir: cur.Dir(), Files: files, Published: len(files)}
	var perr error
	if !hasData { // files[0] must be this rank's data: never another entry in its place
		perr = fmt.Errorf("%w: checkpoint %s lists no data file for rank %d", ErrMissingFile, cur.Dir(), env.Rank)
		// Every rank makes the same collective calls: a rank without its
		// data file votes no before Protect.
	}
	t := env.Now()
	if err := e.agree(perr, "find the data files of "+cur.Dir()); err != nil {
		return nil, st, fmt.Errorf("%w: %w", ErrVoteFailed, err)
	}
	// The data file is checked against its L1 digest in the read pass of
	// the level's post-processing (the bytes sent, encoded or copied are
	// the bytes checked): a failed check fails the vote below, and
	// nothing damaged is raised.
	reader, opener := readsData(level), opensData(level)
	_, l4 := level.(Global4)
	kind := files[0].Attrs[AttrDigest]
	var (
		tap      *dataTap
		checkErr error
		verified chan error
	)
	// A level that records the FTI-FF checksum (L2, L3) keeps the entry
	// as it is. L2's transfer checks the bytes it sends against the
	// file's block hashes and that checksum ([ftiffFormat]): no tap
	// needed. L3's encoder does not: the tap verifies the file.
	keepFTIFF := kind == DigestFTIFF && recordsFTIFF(level)
	p.upgrade = true
	_, l2 := level.(Partner2)
	switch {
	case keepFTIFF && l2:
	case (reader || opener || l4) && (kind == DigestFTIFF || (kind == "" && !reader)):
		// An FTI-FF file is verified as it streams past; a file with a
		// BLAKE3 digest is hashed, unless the level's transfer checks
		// that digest itself (L2, L3).
		if tap, checkErr = newDataTap(env.Store(files[0].Where), files[0]); tap != nil {
			p.tap = tap
		}
	case kind != "":
		// Another kind, or a level that shows no tap what it reads:
		// checked on its own beside the post-processing.
		verified = make(chan error, 1)
		go func(f File) { verified <- VerifyFile(env.Store(f.Where), f) }(cloneFile(files[0]))
	}
	if reader && kind != "" && !keepFTIFF {
		// The transfer records the BLAKE3 of the bytes it sends, as for
		// a synchronous checkpoint.
		delete(files[0].Attrs, AttrDigest)
		if kind == DigestFTIFF {
			files[0].Attrs[AttrL1Digest] = files[0].Digest.String()
		}
		p.DigestPending = true
	}
	if opener {
		perr = e.upgradeDirect(level.(DataOpener), p)
	} else {
		perr = level.Protect(env, p)
	}
	if keepFTIFF && l2 && errors.Is(perr, partner.ErrHashMismatch) {
		// The copy a receiver refused, or the file the sender found
		// changed, is a data file that no longer matches its L1 digest.
		perr = fmt.Errorf("%w: a data file changed since its L1 commit (its partner copy does not match its FTI-FF checksum): %w", ErrDigestMismatch, perr)
	}
	if tap != nil {
		checkErr = tap.verdict(perr)
	}
	if verified != nil {
		checkErr = <-verified
	}
	if checkErr != nil {
		perr = errors.Join(perr, fmt.Errorf("the data file changed since its L1 commit: %w", checkErr))
	}
	if perr == nil && p.DigestPending {
		perr = fmt.Errorf("%w (level %v)", ErrDigestNotRecorded, lvl)
	}
	st.Protect = env.Now().Sub(t)
	st.Bytes = files[0].Size
	if err := e.agree(perr, "post-process checkpoint "+cur.Dir()+" to "+lvl.String()); err != nil {
		return nil, st, e.abortUpgrade(p, fmt.Errorf("%w: %w", ErrVoteFailed, err))
	}
	t = env.Now()
	// Every rank's files are known now (their final names): rank 0 builds
	// the upgraded manifest and writes both copies under tmp names and
	// syncs them while every rank renames its new files into place and
	// syncs their directories; one vote on both, then the copies are
	// renamed over the L1 ones. The copies' flush overlaps the files'.
	up, werr := e.gatherUpgraded(cur, p)
	var staged *stagedCopies
	if env.Rank == 0 && werr == nil {
		var serr error
		err := runAll([]func() error{
			func() error { return e.publish(p) },
			func() error { staged, serr = e.stageUpgraded(cur, up); return nil },
		})
		werr = errors.Join(err, serr)
	} else {
		werr = errors.Join(werr, e.publish(p))
	}
	if err := e.agree(werr, "publish the "+lvl.String()+" files of "+cur.Dir()); err != nil {
		staged.discard()
		return nil, st, e.abortUpgrade(p, fmt.Errorf("%w: %w", ErrVoteFailed, err))
	}
	werr = nil
	if env.Rank == 0 {
		werr = staged.install()
	}
	st.Commit = env.Now().Sub(t)
	if err := e.agree(werr, "rewrite the manifest of "+cur.Dir()+" at "+lvl.String()); err != nil {
		// The new files are published: they stay, unlisted, until the
		// checkpoint's directories go (a copy that could not be restored
		// lists them).
		return nil, st, fmt.Errorf("%w: %w", ErrVoteFailed, err)
	}
	return up, st, nil
}

// upgradeDirect post-processes p for a level that places the data itself
// (the inline L4): each rank copies its published data file into its
// task of the container the level opens, as the inline L4 writes it, so
// that nothing is read back; the local file stays, as the local copy the
// non-inline L4 keeps. Collective.
func (e *Engine) upgradeDirect(o DataOpener, p *Pending) error {
	env := e.env
	data := p.Files[0]
	f, err := o.OpenData(env, p, data.Size)
	if err != nil {
		return err
	}
	s := env.Store(data.Where)
	cerr := copyFileInto(f, s.Driver, s.Path(data.Name), data.Size, transfer(env), p.tap)
	if cerr == nil {
		cerr = f.Sync()
	}
	cerr = errors.Join(cerr, f.Close())
	if err := comm.Agree(env.Comm, cerr, "copy data into the L4 container"); err != nil {
		return errors.Join(err, o.AbortData(env, p, f))
	}
	if err := o.ProtectData(env, p, f); err != nil {
		return err
	}
	delete(p.Files[0].Attrs, AttrInContainer) // the data file exists too
	return nil
}

// copyFileInto copies size bytes of the named file into dst in pieces,
// showing each piece to tap (when not nil) while it is written.
func copyFileInto(dst vfd.File, d vfd.Driver, name string, size int64, piece int, tap io.Writer) error {
	in, err := vfd.OpenRead(d, name)
	if err != nil {
		return fmt.Errorf("open data file: %w", err)
	}
	defer in.Close()
	buf := make([]byte, min(int64(piece), max(size, 1)))
	for off := int64(0); off < size; {
		n := min(int64(len(buf)), size-off)
		if err := vfd.ReadFull(in, buf[:n], off); err != nil {
			return fmt.Errorf("read %s at %d: %w", name, off, err)
		}
		tapped := showTap(tap, buf[:n])
		_, werr := dst.WriteAt(buf[:n], off)
		<-tapped
		if werr != nil {
			return fmt.Errorf("write %s at %d: %w", dst.Name(), off, werr)
		}
		off += n
	}
	return nil
}

// showTap shows b to tap (when not nil) on another goroutine and returns
// a channel closed when it is done with b.
func showTap(tap io.Writer, b []byte) <-chan struct{} {
	done := make(chan struct{})
	if tap == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		_, _ = tap.Write(b)
	}()
	return done
}

// readsData and opensData report the capabilities an upgrade uses.
func readsData(l Level) bool {
	r, ok := l.(DataReader)
	return ok && r.ReadsData()
}

func opensData(l Level) bool {
	o, ok := l.(DataOpener)
	return ok && o.OpensData()
}

// dataTap checks the published data file of an upgrade in the read pass
// of the level's post-processing: the level shows it every byte it reads,
// in order ([partner.FileInfo.Tap], [Pending] for the L4 copies), and
// verdict says whether they were the file's bytes as committed.
type dataTap struct {
	w     io.Writer
	close func() error // the check's verdict once every byte was seen
	seen  int64
	size  int64
	path  string
	rank  int
}

// newDataTap returns the check of data entry f in s: an FTI-FF file
// ([DigestFTIFF]) is opened for its metadata, whose checksum must be the
// recorded digest, and then verified as it streams past
// ([fileformat.Verifier]: every block hash, the structure); a file with a
// BLAKE3 digest is hashed. The file is opened and its size checked here
// (a missing or resized file is reported now). Another digest kind has no
// tap (nil, nil). The error is a *CorruptionError naming the file and
// rank, as [VerifyFile]'s.
func newDataTap(s Store, f File) (*dataTap, error) {
	full := s.Path(f.Name)
	cerr := func(off int64, err error) error {
		return &CorruptionError{Path: full, Rank: f.Of, Offset: off, Err: err}
	}
	t := &dataTap{size: f.Size, path: full, rank: f.Of}
	switch f.Attrs[AttrDigest] {
	case DigestFTIFF:
		file, err := openSized(s, f)
		if err != nil {
			return nil, err
		}
		defer file.Close()
		var v *fileformat.Verifier
		if err := readFTIFF(file, f.Digest, cerr, func(rd *fileformat.Reader) (err error) {
			v, err = rd.NewVerifier()
			return err
		}); err != nil {
			return nil, err
		}
		t.w = v
		t.close = func() error {
			if err := v.Close(); err != nil {
				return ftiffError(err, cerr)
			}
			return nil
		}
	case "":
		file, err := openSized(s, f)
		if err != nil {
			return nil, err
		}
		if err := file.Close(); err != nil {
			return nil, cerr(0, err)
		}
		h := b3.New()
		t.w = h
		t.close = func() error {
			var d Digest
			copy(d[:], h.Sum(nil))
			if d != f.Digest {
				return cerr(0, fmt.Errorf("%w: got %s, manifest says %s", ErrDigestMismatch, d, f.Digest))
			}
			return nil
		}
	default:
		return nil, nil
	}
	return t, nil
}

// Write shows the next bytes of the file to the check.
func (t *dataTap) Write(p []byte) (int, error) {
	t.seen += int64(len(p))
	return t.w.Write(p)
}

// verdict returns what the check found once the level's read pass is
// over; failed is the level's own error. A pass that stopped early
// (failed is not nil and the tap did not see every byte) says nothing
// about the file: failed is the reason then.
func (t *dataTap) verdict(failed error) error {
	if t.seen < t.size {
		if failed != nil {
			return nil
		}
		return &CorruptionError{Path: t.path, Rank: t.rank, Offset: t.seen,
			Err: fmt.Errorf("%w: the post-processing read %d of its %d bytes", ErrSizeMismatch, t.seen, t.size)}
	}
	if t.seen > t.size {
		return &CorruptionError{Path: t.path, Rank: t.rank, Offset: t.size,
			Err: fmt.Errorf("%w: the post-processing read %d bytes, the manifest says %d", ErrSizeMismatch, t.seen, t.size)}
	}
	return t.close()
}

// cloneFile copies f with its own attribute map.
func cloneFile(f File) File {
	f.Attrs = maps.Clone(f.Attrs)
	return f
}

// gatherUpgraded gathers every rank's files of the upgraded checkpoint
// p and returns cur's manifest at p's level with them (every rank).
// Collective.
func (e *Engine) gatherUpgraded(cur *Manifest, p *Pending) (*Manifest, error) {
	mine, err := json.Marshal(p.Files)
	if err != nil {
		return nil, err
	}
	all, err := comm.AllgatherBytes(e.env.Comm, mine)
	if err != nil {
		return nil, err
	}
	up := *cur
	up.Level = p.Level
	up.Kept = false
	up.Files = make([][]File, len(all))
	for r, b := range all {
		if err := json.Unmarshal(b, &up.Files[r]); err != nil {
			return nil, fmt.Errorf("decode rank %d files: %w", r, err)
		}
	}
	return &up, nil
}

// stagedCopies are the upgraded manifest copies written and synced under
// their tmp names (rank 0), ready to be renamed over the L1 copies.
type stagedCopies struct {
	e        *Engine
	seq      uint64
	raw, old []byte
	ds       [2]vfd.Driver
	ps       [2]string
}

// stageUpgraded writes both copies of up (cur raised) under their tmp
// names and syncs them, both at once (rank 0). On failure it removes
// them.
func (e *Engine) stageUpgraded(cur, up *Manifest) (*stagedCopies, error) {
	raw, err := up.Marshal()
	if err != nil {
		return nil, err
	}
	old, err := cur.Marshal()
	if err != nil {
		return nil, err
	}
	s := &stagedCopies{e: e, seq: up.Seq, raw: raw, old: old}
	s.ds, s.ps = e.copyPaths(up.Seq) // the primary, then the replica
	what := [2]string{"manifest", "manifest replica"}
	write := func(i int) func() error {
		return func() error {
			if err := writeSynced(s.ds[i], s.ps[i]+TmpSuffix, raw, false); err != nil {
				return fmt.Errorf("%s: %w", what[i], err)
			}
			return nil
		}
	}
	if err := runAll([]func() error{write(0), write(1)}); err != nil {
		s.discard()
		return nil, err
	}
	return s, nil
}

// discard removes the staged copies (nil: nothing staged). A leftover is
// removed by the next start-up.
func (s *stagedCopies) discard() {
	if s == nil {
		return
	}
	for i := range s.ds {
		if err := removeIfExists(s.ds[i], s.ps[i]+TmpSuffix); err != nil {
			s.e.env.Logger.Warn("removing a staged manifest copy after a failed upgrade; the next start-up removes it",
				zap.String("path", s.ps[i]+TmpSuffix), zap.Error(err))
		}
	}
}

// install renames the staged copies over the L1 ones, the primary
// first, each followed by its directory's sync (rank 0): a crash in
// between leaves the primary, which start-up prefers, at the new level,
// and the replica is repaired from it (docs/format/manifest.md). If
// either fails, both get the old bytes back (a copy may have been
// renamed into place before its directory sync failed); if that fails
// too, the copy stays upgraded, a valid manifest whose files are all
// published.
func (s *stagedCopies) install() error {
	what := [2]string{"manifest", "manifest replica"}
	errs := make([]error, 2)
	for i := range s.ds {
		if err := s.ds[i].Rename(s.ps[i]+TmpSuffix, s.ps[i]); err != nil {
			errs[i] = fmt.Errorf("%s: %w", what[i], err)
		} else if err := s.ds[i].SyncDir(path.Dir(s.ps[i])); err != nil {
			errs[i] = fmt.Errorf("%s: sync dir of %s: %w", what[i], s.ps[i], err)
		}
		if errs[i] != nil {
			s.discard() // the tmp copies left
			break
		}
	}
	err := errors.Join(errs...)
	if err == nil {
		return nil
	}
	for i := range s.ds {
		if rerr := vfd.WriteFileAtomic(s.ds[i], s.ps[i], s.old); rerr != nil {
			s.e.env.Logger.Warn("restoring the L1 manifest copy after a failed upgrade; the upgraded copy may stay",
				zap.String("path", s.ps[i]), zap.Uint64("seq", s.seq), zap.Error(rerr))
		}
	}
	return err
}

// abortUpgrade removes the files the failed upgrade p added (under their
// tmp and final names) and returns err; the checkpoint's own files and
// manifest stay. Local: a leftover is removed with the checkpoint's
// directory, and tmp files by the next start-up.
func (e *Engine) abortUpgrade(p *Pending, err error) error {
	var errs []error
	for _, f := range p.Files[p.Published:] {
		if f.Attrs[AttrInContainer] != "" {
			continue
		}
		s := e.env.Store(f.Where)
		errs = append(errs, removeIfExists(s.Driver, s.Path(f.Name)+TmpSuffix), removeIfExists(s.Driver, s.Path(f.Name)))
	}
	if cerr := errors.Join(errs...); cerr != nil {
		e.env.Logger.Warn("cleanup after a failed upgrade; the checkpoint's directory removal or the next start-up finishes it",
			zap.Uint64("seq", p.Seq), zap.Error(cerr))
	}
	return err
}
