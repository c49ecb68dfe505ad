package levels

import (
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

// ErrNotRaisable is returned by [Engine.Raise] for a checkpoint not
// committed at L1. It is returned too for a target level that no
// post-processing of a committed L1 checkpoint reaches.
var ErrNotRaisable = errors.New("checkpoint cannot be raised")

// Raise raises committed L1 checkpoint m to level lvl (2, 3 or 4). It
// runs that level's post-processing on m's published data files:
// [Level.Protect] with [Pending.Published] set. That writes the L2
// partner copy, the L3 parity or the L4 container. A vote follows. Then
// every rank renames its new files and syncs their directories. Rank 0
// meanwhile writes and syncs both manifest copies at the new level, under
// tmp names. After a vote on both, the copies are renamed over the L1
// ones. The primary goes first, each copy followed by its directory's
// sync. A crash in between leaves the primary at the new level, and
// start-up prefers the primary. The differential information (chain,
// totals) and the commit time stay as they were. Retention then runs as
// for a checkpoint committed at lvl.
//
// This is asynchronous post-processing (FTI's inline_lN = 0). It commits
// a checkpoint twice: at L1 on the solver's path, at its level in the
// background. c, when not nil, replaces the environment's communicator
// for every collective call of the raise. It is a private communicator
// whose messages never mix with the solver's. While Raise runs, no other
// method of the engine may be called. When Raise returns, the checkpoint
// is committed at lvl. The files of the checkpoints retention dropped
// may still be being removed in the background, as after
// [Engine.Checkpoint]. The engine's next call waits for them, as does
// [Engine.Wait].
//
// On failure the new files are removed and m stays committed at L1,
// untouched. The error is the same on every rank. It wraps
// [ErrVoteFailed] when some rank failed. Collective over c.
func (e *Engine) Raise(m *Manifest, lvl ID, c comm.Comm) (*Manifest, Stats, error) {
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
		return nil, Stats{}, fmt.Errorf("%w: checkpoint %s is not committed", ErrNotRaisable, m.Dir())
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

// RaiseFor is [Engine.Raise] for an engine that does not hold the
// checkpoint. The application ranks committed m at L1. RaiseFor raises
// it to lvl as Raise does and returns the raised manifest. Nothing is
// retained or dropped. The application ranks' engines take the result
// with [Engine.AdoptRaised]. FTI's head ranks post-process this way on
// behalf of their node's application ranks. ckpt runs one engine per
// application rank in the head, over a [comm.Mux] virtual world. No Open
// is needed. Collective over c (the environment's communicator when c is
// nil).
func (e *Engine) RaiseFor(m *Manifest, lvl ID, c comm.Comm) (*Manifest, Stats, error) {
	e.Wait()
	if c != nil {
		defer e.useComm(c)()
	}
	start := e.env.Now()
	up, st, err := e.raise(e.adopt(m, nil), lvl)
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

// AdoptRaised records up in place of its L1 commit. up is a checkpoint
// raised elsewhere by [Engine.RaiseFor]. Retention runs as after
// [Engine.Raise]: the checkpoints up supersedes are dropped. Their files
// are removed in the background (see [Engine.Wait]). c, when not nil,
// replaces the environment's communicator, as for Raise. Collective:
// every rank adopts the same manifest at the same point.
func (e *Engine) AdoptRaised(up *Manifest, c comm.Comm) error {
	e.Wait()
	if c != nil {
		defer e.useComm(c)()
	}
	if e.committedSeq(up.Seq) == nil {
		return fmt.Errorf("%w: checkpoint %s is not committed here", ErrNotRaisable, up.Dir())
	}
	up = e.adopt(up, nil)
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
	level, err := e.raiseLevel(cur, lvl)
	if err != nil {
		return nil, st, err
	}
	// Every rank makes the same collective calls: a rank without its
	// data file votes no before Protect.
	p, perr := e.raisePending(cur, lvl)
	t := env.Now()
	if err := e.agree(perr, "find the data files of "+cur.Dir()); err != nil {
		return nil, st, fmt.Errorf("%w: %w", ErrVoteFailed, err)
	}
	perr = e.protectRaised(level, p)
	st.Protect = env.Now().Sub(t)
	st.Bytes = p.Files[0].Size
	if err := e.agree(perr, "post-process checkpoint "+cur.Dir()+" to "+lvl.String()); err != nil {
		return nil, st, e.abortRaise(p, fmt.Errorf("%w: %w", ErrVoteFailed, err))
	}
	up, err := e.commitRaised(cur, p, &st)
	if err != nil {
		return nil, st, err
	}
	return up, st, nil
}

// raiseLevel returns level lvl, to which committed checkpoint cur is to
// be raised, or why cur cannot be raised to it.
func (e *Engine) raiseLevel(cur *Manifest, lvl ID) (Level, error) {
	switch {
	case cur.Level != L1:
		return nil, fmt.Errorf("%w: checkpoint %s is at %v, not L1", ErrNotRaisable, cur.Dir(), cur.Level)
	case lvl <= L1 || !lvl.Valid():
		return nil, fmt.Errorf("%w: to level %d (want 2..4)", ErrNotRaisable, int(lvl))
	case cur.Ranks != e.env.Comm.Size():
		return nil, fmt.Errorf("%w: checkpoint %s was written by %d ranks, this run has %d", ErrNotRaisable, cur.Dir(), cur.Ranks, e.env.Comm.Size())
	}
	level, err := e.Level(lvl)
	if err != nil {
		return nil, err
	}
	if err := canRaise(level); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotRaisable, err)
	}
	return level, nil
}

// raisePending returns the raise of cur to lvl as this rank sees it: its
// published files, data first (Protect appends its own). The error says
// that cur lists no data file for this rank. Then files[0] would be
// another entry, which must never take the data file's place.
func (e *Engine) raisePending(cur *Manifest, lvl ID) (*Pending, error) {
	rank := e.env.Rank
	var files []File
	d, hasData := cur.DataFile(rank)
	if hasData {
		files = append(files, cloneFile(d))
	}
	held, err := cur.RankFiles(rank)
	if err != nil {
		return &Pending{Seq: cur.Seq, ID: cur.ID, Level: lvl, Dir: cur.Dir(), raising: true}, err
	}
	for _, f := range held {
		if !(f.Role == RoleData && f.Of == rank) {
			files = append(files, cloneFile(f))
		}
	}
	p := &Pending{Seq: cur.Seq, ID: cur.ID, Level: lvl, Dir: cur.Dir(), Files: files, Published: len(files), raising: true}
	if !hasData {
		return p, fmt.Errorf("%w: checkpoint %s lists no data file for rank %d", ErrMissingFile, cur.Dir(), rank)
	}
	return p, nil
}

// protectRaised runs level's post-processing on p and checks the data
// file against its L1 digest on the way ([dataCheck]). Collective.
func (e *Engine) protectRaised(level Level, p *Pending) error {
	opener, direct := opensData(level)
	check := e.checkData(level, p, direct)
	var perr error
	if direct {
		perr = e.raiseDirect(opener, p)
	} else {
		perr = level.Protect(e.env, p)
	}
	perr = check.result(perr)
	if perr == nil && p.DigestPending {
		perr = fmt.Errorf("%w (level %v)", ErrDigestNotRecorded, p.Level)
	}
	return perr
}

// dataCheck checks the data file of a raise against its L1 digest. The
// check runs in the read pass of the level's post-processing where it
// can: the bytes sent, encoded or copied are the bytes checked. A failed
// check fails the vote, so nothing damaged is raised.
type dataCheck struct {
	// checked says the level checks the FTI-FF checksum itself.
	checked bool
	// tap checks the bytes the level reads; verified is a check beside
	// the level's pass; err is the failure to set up the tap.
	tap      *dataTap
	verified chan error
	err      error
}

// checkData prepares the check of p's data file for level (direct: the
// level places the data itself) and starts a check beside it if needed.
// It also marks the data entry's digest pending when the level records a
// new one.
func (e *Engine) checkData(level Level, p *Pending, direct bool) *dataCheck {
	env := e.env
	data := &p.Files[0]
	reader := readsData(level)
	kind := data.Attrs[AttrDigest]
	// A level that records the FTI-FF checksum (L2, L3) keeps the entry
	// as it is. A level that checks that checksum as it reads (L2) needs
	// no tap. L3's encoder does not check it: the tap verifies the file.
	keepFTIFF := kind == DigestFTIFF && recordsFTIFF(level)
	c := &dataCheck{checked: keepFTIFF && checksFTIFF(level)}
	switch {
	case c.checked:
	case (tapsData(level) || direct) && (kind == DigestFTIFF || (kind == "" && !reader)):
		// An FTI-FF file is verified as it streams past. A file with a
		// BLAKE3 digest is hashed, unless the level's transfer checks
		// that digest itself (a [DataReader]: L2, L3).
		if c.tap, c.err = newDataTap(env.Store(data.Where), *data); c.tap != nil {
			p.tap = c.tap
		}
	case kind != "" || !reader:
		// Another kind, or a level that shows no tap what it reads:
		// checked on its own beside the post-processing.
		c.verified = make(chan error, 1)
		go func(f File) { c.verified <- VerifyFile(env.Store(f.Where), f) }(cloneFile(*data))
	}
	if reader && kind != "" && !keepFTIFF {
		// The transfer records the BLAKE3 of the bytes it sends, as for
		// a synchronous checkpoint.
		delete(data.Attrs, AttrDigest)
		if kind == DigestFTIFF {
			data.Attrs[AttrL1Digest] = data.Digest.String()
		}
		p.DigestPending = true
	}
	return c
}

// result joins the level's error perr with what the check found.
func (c *dataCheck) result(perr error) error {
	if c.checked && errors.Is(perr, partner.ErrHashMismatch) {
		// The copy a receiver refused, or the file the sender found
		// changed, is a data file that no longer matches its L1 digest.
		perr = fmt.Errorf("%w: a data file changed since its L1 commit (its partner copy does not match its FTI-FF checksum): %w", ErrDigestMismatch, perr)
	}
	checkErr := c.err
	if c.tap != nil {
		checkErr = c.tap.verdict(perr)
	}
	if c.verified != nil {
		checkErr = <-c.verified
	}
	if checkErr != nil {
		perr = errors.Join(perr, fmt.Errorf("the data file changed since its L1 commit: %w", checkErr))
	}
	return perr
}

// commitRaised publishes the new files of p and installs the manifest
// of cur raised, and sets st.Commit. Every rank's files are known now,
// under their final names. Each rank sends its list to its part's
// leader, which writes both copies of the raised part (named after the
// new level: the committed root does not name it) and sends rank 0 its
// reference. Rank 0 writes both root copies under tmp names and syncs
// them. Meanwhile every rank renames its new files into place and syncs
// their directories. The flushes overlap. One vote on all of it, then
// the root copies are renamed over the L1 ones, and the leaders remove
// the L1 parts. Collective.
func (e *Engine) commitRaised(cur *Manifest, p *Pending, st *Stats) (*Manifest, error) {
	env := e.env
	t := env.Now()
	up := e.newManifest(cur.Seq, cur.ID, p.Level, cur.Time, cur.Bytes())
	up.DCP, up.Compressed = cur.DCP, cur.Compressed
	if from := cur.ident(); from != (Digest{}) {
		up.raisedFrom = &from
	}
	published := make(chan error, 1)
	go func() { published <- e.publish(p) }()
	pw := e.writeParts(up, p.Files)
	var copies *raisedCopies
	var werr error
	if env.Rank == 0 {
		if pw.refErr != nil || pw.refs == nil {
			werr = errors.Join(errors.New("manifest: a part has no reference"), pw.refErr)
		} else {
			up.refs = pw.refs
			copies, werr = e.writeRaised(cur, up)
		}
	}
	werr = errors.Join(werr, pw.wait(), <-published)
	if err := e.agree(werr, "publish the "+p.Level.String()+" files of "+cur.Dir()); err != nil {
		copies.discard()
		if pw.part != nil {
			e.removeParts(up)
		}
		return nil, e.abortRaise(p, fmt.Errorf("%w: %w", ErrVoteFailed, err))
	}
	werr = nil
	if env.Rank == 0 {
		werr = copies.install()
	}
	st.Commit = env.Now().Sub(t)
	if err := e.agree(werr, "rewrite the manifest of "+cur.Dir()+" at "+p.Level.String()); err != nil {
		// The new files are published: they stay, unlisted, until the
		// checkpoint's directories go (a copy that could not be restored
		// lists them); so do the new parts, until start-up.
		return nil, fmt.Errorf("%w: %w", ErrVoteFailed, err)
	}
	if cur.version == ManifestVersionParts && cur.Level != up.Level {
		e.removeParts(cur)
	}
	return e.adopt(up, p.Files, pw.part), nil
}

// removeParts removes, on the leader of a part of m, both copies of
// that part (the new parts of a failed raise, the L1 parts of a raised
// checkpoint). No sync: a part that comes back is not one its root
// names, and start-up removes it.
func (e *Engine) removeParts(m *Manifest) {
	env := e.env
	lay := m.layout()
	if !lay.isLeader(env.Rank) {
		return
	}
	var errs []error
	for _, d := range partsDirs(env, m.Seq) {
		errs = append(errs, removeIfExists(d.Driver, d.Path(partBase(m.Level, lay.index(env.Rank)))))
	}
	if err := errors.Join(errs...); err != nil {
		env.Logger.Warn("removing a manifest part; the next start-up removes it", zap.Uint64("seq", m.Seq), zap.Error(err))
	}
}

// raiseDirect post-processes p for a level that places the data itself
// (the inline L4). Each rank copies its published data file into its
// task of the container the level opens. The copy is written as the
// inline L4 writes, so nothing is read back. The local file stays, as
// the local copy the non-inline L4 keeps. Collective.
func (e *Engine) raiseDirect(o DataOpener, p *Pending) error {
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
			return vfd.WrapPathAt(err, "read", name, off)
		}
		tapped := showTap(tap, buf[:n])
		_, werr := dst.WriteAt(buf[:n], off)
		<-tapped
		if werr != nil {
			return vfd.WrapPathAt(werr, "write", dst.Name(), off)
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

// dataTap checks the published data file of a raise in the read pass
// of the level's post-processing. The level shows it every byte it
// reads, in order ([DataTapper]). verdict says whether they were the
// file's bytes as committed.
type dataTap struct {
	w     io.Writer
	close func() error // the check's verdict once every byte was seen
	seen  int64
	size  int64
	path  string
	rank  int
}

// newDataTap returns the check of data entry f in s. An FTI-FF file
// ([DigestFTIFF]) is opened for its metadata, whose checksum must be the
// recorded digest. It is then verified as it streams past
// ([fileformat.Verifier]: every block hash, the structure). A file with a
// BLAKE3 digest is hashed. The file is opened and its size checked here,
// so a missing or resized file is reported now. Another digest kind has
// no tap (nil, nil). The error is a *CorruptionError naming the file and
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

// raisedCopies are the raised manifest copies written and synced under
// their tmp names (rank 0), ready to be renamed over the L1 copies.
type raisedCopies struct {
	e        *Engine
	seq      uint64
	raw, old []byte
	ds       [2]vfd.Driver
	ps       [2]string
}

// writeRaised writes both copies of up (cur raised) under their tmp
// names and syncs them, both at once (rank 0). On failure it removes
// them.
func (e *Engine) writeRaised(cur, up *Manifest) (*raisedCopies, error) {
	raw, err := up.Marshal()
	if err == nil {
		up.identity, err = up.computeIdentity()
	}
	if err != nil {
		return nil, err
	}
	old, err := e.committedBytes(cur)
	if err != nil {
		return nil, err
	}
	s := &raisedCopies{e: e, seq: up.Seq, raw: raw, old: old}
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

// committedBytes returns the bytes of the root (or whole manifest) of
// committed checkpoint m as they are stored: the primary's, or the
// replica's when the primary does not hold m (rank 0).
func (e *Engine) committedBytes(m *Manifest) ([]byte, error) {
	var errs []error
	ds, ps := e.copyPaths(m.Seq)
	for i := range ds {
		raw, err := vfd.ReadFileLimit(ds[i], ps[i], MaxManifestSize)
		if err == nil {
			var got *Manifest
			if got, err = ParseManifest(ps[i], raw); err == nil && got.ident() == m.ident() {
				return raw, nil
			}
			if err == nil {
				err = fmt.Errorf("%s holds another checkpoint", ps[i])
			}
		}
		errs = append(errs, err)
	}
	if raw, err := m.Marshal(); err == nil {
		return raw, nil
	}
	return nil, fmt.Errorf("levels: read the manifest of %s: %w", m.Dir(), errors.Join(errs...))
}

// discard removes the tmp copies (nil: nothing written). A leftover is
// removed by the next start-up.
func (s *raisedCopies) discard() {
	if s == nil {
		return
	}
	for i := range s.ds {
		if err := removeIfExists(s.ds[i], s.ps[i]+TmpSuffix); err != nil {
			s.e.env.Logger.Warn("removing a tmp manifest copy after a failed raise; the next start-up removes it",
				zap.String("path", s.ps[i]+TmpSuffix), zap.Error(err))
		}
	}
}

// install renames the tmp copies over the L1 ones (rank 0). The
// primary goes first, each copy followed by its directory's sync. A crash
// in between leaves the primary at the new level. Start-up prefers it
// and repairs the replica from it (docs/format/manifest.md). If either
// step fails, both copies get the old bytes back: a copy may have been
// renamed into place before its directory sync failed. If that fails
// too, the copy stays raised: a valid manifest whose files are all
// published.
func (s *raisedCopies) install() error {
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
			s.e.env.Logger.Warn("restoring the L1 manifest copy after a failed raise; the raised copy may stay",
				zap.String("path", s.ps[i]), zap.Uint64("seq", s.seq), zap.Error(rerr))
		}
	}
	return err
}

// abortRaise removes the files the failed raise p added (under their
// tmp and final names) and returns err; the checkpoint's own files and
// manifest stay. Local: a leftover is removed with the checkpoint's
// directory, and tmp files by the next start-up.
func (e *Engine) abortRaise(p *Pending, err error) error {
	var errs []error
	for _, f := range p.Files[p.Published:] {
		if f.Attrs[AttrInContainer] != "" {
			continue
		}
		s := e.env.Store(f.Where)
		errs = append(errs, removeIfExists(s.Driver, s.Path(f.Name)+TmpSuffix), removeIfExists(s.Driver, s.Path(f.Name)))
	}
	if cerr := errors.Join(errs...); cerr != nil {
		e.env.Logger.Warn("cleanup after a failed raise; the checkpoint's directory removal or the next start-up finishes it",
			zap.Uint64("seq", p.Seq), zap.Error(cerr))
	}
	return err
}
