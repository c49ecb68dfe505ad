package levels

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// WriteFunc writes this rank's data file into f (an empty, writable file)
// and returns its size and digest. The engine syncs and closes f. A
// WriteFunc that cannot compute the digest while writing returns ok=false
// and the engine re-reads the file.
type WriteFunc func(f vfd.File) (size int64, d Digest, ok bool, err error)

// Config configures an [Engine].
type Config struct {
	// Levels are the implemented levels; a checkpoint or a manifest at a
	// level not listed fails with [ErrLevelUnavailable].
	Levels []Level
	// Policy decides which checkpoints a new one supersedes; nil is
	// FTIPolicy{} (FTI's rule).
	Policy Policy
	// NodeStore returns the local area of node n (ckpt_dir/node%04d) as
	// this rank sees it. With it, [Engine.Recover] recovers checkpoints of
	// another shape (reshape.go); without it they are refused with
	// [ErrTopologyMismatch].
	NodeStore func(node int) Store
}

// Stats times one checkpoint on one rank.
type Stats struct {
	Bytes   int64         // this rank's data file size
	Write   time.Duration // writing and syncing the data file
	Protect time.Duration // the level's post-processing
	Commit  time.Duration // votes, renames, directory syncs, manifest
	Clean   time.Duration // deleting superseded checkpoints
	Total   time.Duration
	// Data is this rank's variable data written and protected, and Total
	// the sums over every rank (as reported through [Differential] or
	// [WithDataStats]; zero otherwise).
	Data, TotalData DataStats
}

// Engine runs the commit protocol and the recovery ladder for one rank.
// Every method is collective over Env.Comm and must be called by every
// rank in the same order with the same arguments.
type Engine struct {
	env       *Env
	cfg       Config
	levels    map[ID]Level
	policy    Policy
	committed []*Manifest // oldest first, identical on every rank
	nextSeq   uint64
	bg        chan struct{} // closed when the background removal ends

	// unrecoverable holds the committed checkpoints Recover found
	// unrecoverable (identical on every rank), skipped why.
	unrecoverable map[uint64]bool
	skipped       []Skipped
	// alt holds, per committed checkpoint whose two manifest copies are
	// both valid but describe different checkpoints (one is another
	// run's), the copy not in committed; Recover tries it when the chosen
	// one does not recover, then makes both copies agree (identical on
	// every rank).
	alt map[uint64]*Manifest
	// dropped lists the checkpoints whose deletion markers wait until
	// every rank has removed their files; rmFailed those whose removal
	// failed on this rank (their markers stay for the next Open).
	dropped  []uint64
	rmFailed []uint64
	// reshape is the checkpoint of another shape the last Recover chose.
	reshape *Reshape
	// intent is the checkpoint number whose intent marker rank 0 is
	// making durable ahead of the checkpoint (0: none; identical on every
	// rank), marking the result of that background write on rank 0 (see
	// [Engine.premark]).
	intent  uint64
	marking chan error
	markErr error
	// unconverted holds, on rank 0, the checkpoints dropped by a commit
	// whose superseded markers are not yet deletion markers.
	unconverted []*Manifest
}

// Skipped is a committed checkpoint that [Engine.Recover] found
// unrecoverable and passed over, with the reason (identical on every rank).
type Skipped struct {
	Manifest *Manifest
	Err      error
}

// NewEngine returns an engine for env. It does no I/O; call [Engine.Open].
func NewEngine(env *Env, cfg Config) (*Engine, error) {
	if env.Comm == nil || env.Topo == nil {
		return nil, errors.New("levels: engine needs a communicator and a topology")
	}
	if env.Logger == nil {
		env.Logger = zap.NewNop()
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.BlockSize <= 0 {
		env.BlockSize = 1 << 20
	}
	if env.TransferSize <= 0 {
		env.TransferSize = 16 << 20
	}
	e := &Engine{env: env, cfg: cfg, levels: map[ID]Level{}, policy: cfg.Policy, nextSeq: 1}
	if e.policy == nil {
		e.policy = FTIPolicy{}
	}
	for _, l := range cfg.Levels {
		e.levels[l.ID()] = l
	}
	return e, nil
}

// Env returns the engine's environment.
func (e *Engine) Env() *Env { return e.env }

// Level returns the implementation of level id.
func (e *Engine) Level(id ID) (Level, error) {
	l, ok := e.levels[id]
	if !ok {
		return nil, fmt.Errorf("%w: %v", ErrLevelUnavailable, id)
	}
	return l, nil
}

// Committed returns the committed checkpoints, oldest first, including
// those [Engine.Recover] found unrecoverable.
func (e *Engine) Committed() []*Manifest { return slices.Clone(e.committed) }

// Recoverable returns the committed checkpoints, oldest first, except
// those [Engine.Recover] found unrecoverable: the ones retention and
// keep_last_ckpt may treat as the newest.
func (e *Engine) Recoverable() []*Manifest {
	return slices.DeleteFunc(e.Committed(), func(m *Manifest) bool { return e.unrecoverable[m.Seq] })
}

// Skipped returns the checkpoints the last [Engine.Recover] passed over
// as unrecoverable, newest first, with why.
func (e *Engine) Skipped() []Skipped { return slices.Clone(e.skipped) }

// nodeLeader reports whether this rank is the lowest rank on its node.
func (e *Engine) nodeLeader() bool { return nodeLeader(e.env) }

// nodeLeader reports whether env's rank is the lowest rank on its node.
func nodeLeader(env *Env) bool {
	me := env.Topo.NodeOf(env.Rank)
	for r := 0; r < env.Rank; r++ {
		if env.Topo.NodeOf(r) == me {
			return false
		}
	}
	return true
}

func (e *Engine) agree(local error, what string) error { return comm.Agree(e.env.Comm, local, what) }

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
		go func() { marked <- writePending(env.Meta, p.Seq) }()
	}

	// 1. Data file under its final name (its tmp name without a marker
	// written ahead), synced; or, for a level that places the data
	// itself, the level's file.
	area := level.DataArea()
	opener, direct := level.(DataOpener)
	direct = direct && opener.OpensData()
	var held vfd.File // non-nil on every rank or on none
	var werr error
	var syncData func() error // the data file's fsync, left to run beside Protect
	if direct {
		held, werr = e.writeDirect(p, opener, area, write, &st)
	} else {
		reader, ok := level.(DataReader)
		syncData, werr = e.writeData(p, area, write, &st, ok && reader.ReadsData(), co.prewritten, ahead)
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
	if err == nil && !ok && area == Local && recordsFTIFF(e.levels[p.Level]) {
		_, l2 := e.levels[p.Level].(Partner2) // sends the preamble
		d, attrs, p.preamble, ok = ffDigestPreamble(f, l2)
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
				return fmt.Errorf("sync %s: %w", full, err)
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
		return nil, fmt.Errorf("write %s: %w", full, err)
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
	pn, ok := e.levels[p.Level].(Prenamer)
	if !ok {
		return nil
	}
	s := e.env.Local
	for _, name := range pn.Prenames(e.env, p) {
		if path.Dir(name) != p.Dir {
			continue // not in the checkpoint's directory: written under its tmp name
		}
		p.WroteFinal(Local, name) // removed by abort, even when not created
		if err := createEmpty(s.Driver, s.Path(name)); err != nil {
			return fmt.Errorf("create %s: %w", s.Path(name), err)
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

// recordsFTIFF reports whether level l records an FTI-FF data file's
// checksum as its digest ([DigestFTIFF]) instead of the BLAKE3 of its
// bytes: L1, which does not read the file; L2, whose partner copy is
// checked against the file's block hashes as it arrives
// ([ftiffFormat]); L3, whose encoder checks the bytes it reads against
// the block hashes (a file rebuilt from parity is checked against the
// checksum).
func recordsFTIFF(l Level) bool {
	switch l.(type) {
	case Local1, Partner2, RS3:
		return true
	}
	return false
}

// DataOpener is the optional capability of a level that places each
// rank's data itself instead of in a data file of its own (the inline L4
// writes it straight into its container). The engine then calls, on every
// rank: OpenData (collective; every rank gets a file or every rank an
// error), the [WriteFunc] on that file, Sync and Close, and after the vote
// ProtectData instead of [Level.Protect] — or AbortData when the vote
// failed. ProtectData records on p.Files[0] (the data entry, at the
// level's DataArea under the conventional name) where the data is and
// marks it with [AttrInContainer] when no file exists under that name.
type DataOpener interface {
	// OpensData reports whether the level uses this path; the answer
	// must be the same on every rank.
	OpensData() bool
	// OpenData returns the file this rank's data is written to. hint is
	// the size of this rank's data in the newest committed checkpoint
	// (0 when there is none). Collective.
	OpenData(env *Env, p *Pending, hint int64) (vfd.File, error)
	// ProtectData commits what f was written into and appends the files
	// it made to p.Files, under their tmp names — or their final names,
	// recorded with [Pending.WroteFinal], when [Pending.Final] allowed
	// and their directories synced — synced. Collective; on error it has
	// discarded them.
	ProtectData(env *Env, p *Pending, f vfd.File) error
	// AbortData discards what f was written into. Collective.
	AbortData(env *Env, p *Pending, f vfd.File) error
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
		return f, fmt.Errorf("write %s: %w", f.Name(), err)
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

// runAll runs fns concurrently (the first on the calling goroutine) and
// joins their errors.
func runAll(fns []func() error) error {
	if len(fns) == 0 {
		return nil
	}
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i+1] = fn()
		}()
	}
	errs[0] = fns[0]()
	wg.Wait()
	return errors.Join(errs...)
}

// manifestPayload is what every rank sends rank 0 for the manifest.
type manifestPayload struct {
	Files []File `json:"files"`
	// Data is this rank's data statistics.
	Data DataStats `json:"data"`
	// RmFailed lists the dropped checkpoints whose files this rank could
	// not remove (their deletion markers must stay).
	RmFailed []uint64 `json:"rm_failed,omitempty"`
	// Unpublished counts this rank's files still under tmp names.
	Unpublished int `json:"unpublished,omitempty"`
}

// writePending writes the intent marker of checkpoint seq in meta (rank 0).
// Only its name counts, so only the directory entry is made durable: a
// crash may leave it empty, never absent once this returns.
func writePending(meta Store, seq uint64) error {
	err := createPending(meta, seq)
	if err == nil {
		if err = meta.Driver.SyncDir(meta.Dir); err != nil {
			err = fmt.Errorf("write intent marker %s: %w", meta.Path(PendingName(seq)), err)
		}
	}
	return err
}

// createPending creates the intent marker of checkpoint seq in meta
// without syncing the directory (rank 0).
func createPending(meta Store, seq uint64) error {
	name := meta.Path(PendingName(seq))
	f, err := vfd.CreateTrunc(meta.Driver, name)
	if err == nil {
		_, err = f.WriteAt([]byte(fmt.Sprintf("ftigo-pending %d\n", seq)), 0)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		return fmt.Errorf("write intent marker %s: %w", name, err)
	}
	return nil
}

// removeCopies removes both copies of manifest seq and syncs their
// directories (rank 0).
func (e *Engine) removeCopies(seq uint64) error {
	env := e.env
	repl := replicaStore(env.Global)
	return errors.Join(
		removeIfExists(env.Meta.Driver, env.Meta.Path(ManifestName(seq))),
		removeIfExists(repl.Driver, repl.Path(ManifestName(seq))),
		env.Meta.Driver.SyncDir(env.Meta.Dir), repl.Driver.SyncDir(repl.Dir))
}

// MkdirDurable creates dir and its parents and syncs every directory on
// the way up, so the new entries survive a crash. The syncs run at once:
// on one file system they share journal commits.
func MkdirDurable(d vfd.Driver, dir string) error {
	if err := d.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return runAll(syncPath(d, dir))
}

// syncPath returns the syncs of dir and of every directory above it.
func syncPath(d vfd.Driver, dir string) []func() error {
	var syncs []func() error
	for p := path.Clean(dir); ; p = path.Dir(p) {
		syncs = append(syncs, func() error { return d.SyncDir(p) })
		if p == "/" || p == "." {
			break
		}
	}
	return syncs
}

// syncPaths returns the syncs of the directory of every store in ss and
// of every directory above it, each directory once per driver: the
// areas of a rank usually share their upper directories (rank 0 holds
// meta_dir, glbl_dir, its replica directory and its node's directory,
// often under one root), and a second fsync of a directory whose entries
// are already durable costs a journal flush for nothing.
func syncPaths(ss []Store) []func() error {
	type key struct {
		d   int // index in drivers
		dir string
	}
	var drivers []vfd.Driver
	driverIndex := func(d vfd.Driver) int {
		for i, o := range drivers {
			if sameDriver(o, d) {
				return i
			}
		}
		drivers = append(drivers, d)
		return len(drivers) - 1
	}
	seen := map[key]bool{}
	var syncs []func() error
	for _, s := range ss {
		i := driverIndex(s.Driver)
		for p := path.Clean(s.Dir); ; p = path.Dir(p) {
			if !seen[key{i, p}] {
				seen[key{i, p}] = true
				d := s.Driver
				syncs = append(syncs, func() error { return d.SyncDir(p) })
			}
			if p == "/" || p == "." {
				break
			}
		}
	}
	return syncs
}

// sameDriver reports whether a and b are the same driver: equal values
// of a comparable type (vfd.Sec2{}, or one pointer). Drivers of other
// types are never taken as the same, nor values that cannot be compared
// without a panic (a comparable type holding an uncomparable value in an
// interface field: a wrapper of a driver by value).
func sameDriver(a, b vfd.Driver) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || ta == nil {
		return false
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Comparable() && vb.Comparable() && a == b
}

func removeIfExists(d vfd.Driver, name string) error {
	if err := d.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
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
			cerr = errors.Join(cerr, removeDir(env.Global, p.Dir))
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

// removeDir removes directory dir of s, if there, and syncs s so that
// the removal survives a crash.
func removeDir(s Store, dir string) error {
	if err := s.Driver.RemoveAll(s.Path(dir)); err != nil {
		return err
	}
	if err := s.Driver.SyncDir(s.Dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// retain deletes the checkpoints the policy drops now that m committed,
// and the older checkpoints Recover found unrecoverable: their manifests
// at once (collectively, behind deletion markers), their files in the
// background (see [Engine.Wait]). Errors are logged, not returned: m is
// committed either way, and leftovers are removed by the next Open.
func (e *Engine) retain(m *Manifest) {
	drop := e.dropsFor(m)
	if len(drop) == 0 {
		return
	}
	if err := e.uncommit(drop, false); err != nil {
		if e.env.Rank == 0 {
			e.env.Logger.Warn("deleting superseded checkpoints", zap.Error(err))
		}
		return
	}
	e.removeLater(drop, false)
}

// dropsFor returns the checkpoints to delete once m is committed: those
// the policy drops and the older ones Recover found unrecoverable, less
// those a remaining checkpoint depends on. The same on every rank.
func (e *Engine) dropsFor(m *Manifest) []*Manifest {
	all := e.Committed()
	if !slices.ContainsFunc(all, func(c *Manifest) bool { return c.Seq == m.Seq }) {
		all = append(all, m)
	}
	rec := slices.DeleteFunc(slices.Clone(all), func(c *Manifest) bool { return e.unrecoverable[c.Seq] })
	var drop []*Manifest
	for _, d := range e.policy.Drop(rec, m) {
		if d.Seq != m.Seq {
			drop = append(drop, d)
		}
	}
	for _, c := range e.committed {
		if e.unrecoverable[c.Seq] && c.Seq < m.Seq {
			drop = append(drop, c)
		}
	}
	return keepChains(all, drop)
}

// retainMarked deletes the checkpoints drops that a commit has just
// dropped through their superseded markers ([Engine.commit]): they stop
// being committed at once, on every rank; in the background rank 0
// turns the markers into deletion markers ([Engine.convertDrops]) while
// every rank removes the files ([Engine.removeFiles]) — the commit made
// them a deletion already. Local.
func (e *Engine) retainMarked(drops []*Manifest) {
	if len(drops) == 0 {
		return
	}
	e.committed = slices.DeleteFunc(e.committed, func(x *Manifest) bool {
		return slices.ContainsFunc(drops, func(m *Manifest) bool { return m.Seq == x.Seq })
	})
	for _, m := range drops {
		delete(e.unrecoverable, m.Seq)
	}
	if e.env.Rank == 0 {
		e.unconverted = append(e.unconverted, drops...)
	}
	e.removeLater(drops, true)
}

// removeLater removes the files of the uncommitted checkpoints drop in
// the background (see [Engine.Wait]); with convert, rank 0 first turns
// their superseded markers into deletion markers, beside the removal, and
// removes their replicas. The deletion markers wait in e.dropped until
// every rank has removed the files.
func (e *Engine) removeLater(drop []*Manifest, convert bool) {
	for _, d := range drop {
		e.dropped = append(e.dropped, d.Seq)
	}
	done := make(chan struct{})
	e.bg = done
	env := e.env // not e.env in the goroutine: it is the caller's
	go func() {
		defer close(done)
		var fns []func() error
		var replFailed map[uint64]bool
		if convert && env.Rank == 0 {
			fns = append(fns, func() error {
				var err error
				if replFailed, err = e.convertDrops(env); err != nil {
					env.Logger.Warn("marking superseded checkpoints deleted; retried before the next deletion, or by the next start-up", zap.Error(err))
				}
				return nil
			})
		}
		failed := make([]bool, len(drop))
		for i, d := range drop {
			fns = append(fns, func() error {
				if err := e.removeFiles(env, d, !convert); err != nil {
					failed[i] = true
					env.Logger.Warn("removing superseded checkpoint files; the next start-up retries", zap.Uint64("seq", d.Seq), zap.Error(err))
				}
				return nil
			})
		}
		_ = runAll(fns)
		for i, d := range drop {
			// While some dropped checkpoint is held only by a superseded
			// marker naming a newer one, no deletion marker may go: the
			// one it names may be among them.
			if failed[i] || replFailed[d.Seq] || len(e.unconverted) > 0 {
				e.rmFailed = append(e.rmFailed, d.Seq)
			}
		}
	}()
}

// convertDrops turns the superseded markers of the checkpoints in
// e.unconverted into deletion markers (rank 0): each primary renamed to
// its deletion marker, the meta directory synced, then the replicas and
// the superseded markers removed and the replica directory synced. A
// superseded marker is only as good as the checkpoint it names, which a
// later retention may delete: its deletion marker must be durable before
// then, so [Engine.uncommit] retries what is left here first.
//
// It returns the checkpoints whose replica removal failed (their deletion
// markers must stay: a replica that outlives its marker would be a
// committed checkpoint without files).
func (e *Engine) convertDrops(env *Env) (map[uint64]bool, error) {
	ms := e.unconverted
	if len(ms) == 0 {
		return nil, nil
	}
	var errs []error
	var marked, left []*Manifest
	for _, m := range ms {
		if err := markDeleting(env.Meta, m); err != nil {
			errs = append(errs, err)
			left = append(left, m)
			continue
		}
		marked = append(marked, m)
	}
	if err := env.Meta.Driver.SyncDir(env.Meta.Dir); err != nil {
		e.unconverted = ms
		return nil, errors.Join(append(errs, err)...)
	}
	e.unconverted = left
	repl := replicaStore(env.Global)
	replFailed := map[uint64]bool{}
	for _, m := range marked {
		if err := removeIfExists(repl.Driver, repl.Path(ManifestName(m.Seq))); err != nil {
			errs = append(errs, err)
			replFailed[m.Seq] = true
		}
	}
	if len(marked) > 0 {
		if err := repl.Driver.SyncDir(repl.Dir); err != nil {
			errs = append(errs, err)
			for _, m := range marked {
				replFailed[m.Seq] = true
			}
		}
	}
	// The superseded markers, now that the deletion markers say the
	// same (no sync: one that comes back is harmless beside them).
	if ents, err := env.Meta.Driver.ReadDir(env.Meta.Dir); err == nil {
		for _, de := range ents {
			if seq, _, ok := parseSuperseded(de.Name()); ok && slices.ContainsFunc(marked, func(m *Manifest) bool { return m.Seq == seq }) {
				errs = append(errs, removeIfExists(env.Meta.Driver, env.Meta.Path(de.Name())))
			}
		}
	}
	return replFailed, errors.Join(errs...)
}

// Wait blocks until the background work has finished: the removal of
// superseded checkpoint files, on rank 0 the intent marker of the next
// checkpoint written ahead, and a verification Open started ahead that
// Recover has not taken (its image is dropped). Every collective method
// calls it first (Recover only waits for the removal); call it before
// abandoning an Engine. Local.
func (e *Engine) Wait() {
	e.dropPreload()
	e.waitRemoval()
	e.waitMarking()
}

// waitRemoval blocks until the background removal has finished.
func (e *Engine) waitRemoval() {
	if e.bg != nil {
		<-e.bg
		e.bg = nil
	}
}

// waitMarking blocks until the intent marker written ahead (rank 0) is
// durable or failed, and records the result for [Engine.takeIntent].
func (e *Engine) waitMarking() {
	if e.marking != nil {
		e.markErr = <-e.marking
		e.marking = nil
	}
}

// premark starts writing the intent marker of checkpoint seq, the next
// one, and syncing the meta directory, in the background on rank 0 —
// after removing the marker of checkpoint done (0: none), which the same
// sync makes durable — so that the next [Engine.Checkpoint] finds it
// durable and writes its data under the final names at once. Every rank
// records seq. Local.
func (e *Engine) premark(seq, done uint64) {
	e.intent, e.markErr = seq, nil
	if e.env.Rank != 0 {
		return
	}
	ch := make(chan error, 1)
	e.marking = ch
	meta, log := e.env.Meta, e.env.Logger // not e.env in the goroutine: it is the caller's
	go func() {
		if done != 0 {
			if err := removeIfExists(meta.Driver, meta.Path(PendingName(done))); err != nil {
				log.Warn("removing the intent marker of a committed checkpoint; the next start-up removes it", zap.Uint64("seq", done), zap.Error(err))
			}
		}
		ch <- writePending(meta, seq)
	}()
}

// takeIntent reports, identically on every rank, whether the intent
// marker of checkpoint seq was made durable ahead ([Engine.premark]):
// rank 0 waits for its background write, then every rank votes (one
// integer). Collective when a marker was written ahead for seq, local
// otherwise; either way the marker is taken (a later call returns false).
func (e *Engine) takeIntent(seq uint64) (bool, error) {
	if e.intent != seq {
		e.intent = 0
		return false, nil
	}
	e.intent = 0
	e.waitMarking()
	local := e.markErr
	e.markErr = nil
	ok, err := vote(e.env.Comm, local == nil)
	if err != nil {
		return false, err
	}
	if local != nil {
		e.env.Logger.Warn("the intent marker written ahead failed; it is written again beside the data", zap.Uint64("seq", seq), zap.Error(local))
	}
	return ok, nil
}

// Release waits for the background work ([Engine.Wait]) and removes the
// intent marker written ahead for the next checkpoint, if any (rank 0):
// for a run that ends without [Engine.Settle]. A marker left behind costs
// nothing: the next Open removes it. The engine stays usable; its next
// checkpoint writes the marker again. Local.
func (e *Engine) Release() {
	e.Wait()
	e.dropIntent()
}

// dropIntent removes the intent marker written ahead, if any, once it is
// durable (rank 0).
func (e *Engine) dropIntent() {
	e.waitMarking()
	if e.intent != 0 && e.env.Rank == 0 {
		if err := removeIfExists(e.env.Meta.Driver, e.env.Meta.Path(PendingName(e.intent))); err != nil {
			e.env.Logger.Warn("removing the intent marker written ahead; the next start-up removes it", zap.Error(err))
		}
	}
	e.intent, e.markErr = 0, nil
}

// Settle waits for the background removal on every rank and, when every
// rank removed every file, has rank 0 remove the deletion markers (which
// otherwise go with the next checkpoint's commit or at the next Open).
// Collective: the error, the same on every rank, says some rank could not
// remove the files of a superseded checkpoint.
func (e *Engine) Settle() error {
	e.Wait()
	e.dropIntent()
	var local error
	if len(e.rmFailed) > 0 {
		local = fmt.Errorf("files of checkpoints %v not removed", e.rmFailed)
	}
	if err := e.agree(local, "remove superseded checkpoints"); err != nil {
		return err
	}
	if e.env.Rank == 0 {
		// A marker left behind costs nothing: the next Open finds it with
		// nothing left of its checkpoint and removes it.
		var errs []error
		for _, seq := range e.dropped {
			errs = append(errs, removeIfExists(e.env.Meta.Driver, e.env.Meta.Path(DeletingName(seq))))
		}
		if err := errors.Join(errs...); err != nil {
			e.env.Logger.Warn("removing deletion markers; the next start-up removes them", zap.Error(err))
		}
	}
	e.dropped, e.rmFailed = nil, nil
	return nil
}

// uncommit makes ms stop being committed: rank 0 renames each primary
// manifest to its deletion marker (a marker file is written when the
// primary is gone), syncs, and only then (with replicas; otherwise
// [Engine.removeFiles] does) removes the replicas: a replica removed
// before its marker is durable could leave, after a crash, the
// checkpoint's files with neither a manifest copy nor a marker — lost
// metadata, which start-up refuses, so the run could not restart from its
// newest checkpoint either. A replica whose marker failed stays.
// Collective.
func (e *Engine) uncommit(ms []*Manifest, replicas bool) error {
	env := e.env
	var merr error
	if env.Rank == 0 {
		// Dropped checkpoints still held only by a superseded marker
		// naming a checkpoint that may be among ms: their deletion
		// markers first.
		replFailed, err := e.convertDrops(env)
		for seq := range replFailed {
			e.rmFailed = append(e.rmFailed, seq) // its deletion marker stays
		}
		if len(e.unconverted) > 0 {
			merr = err // not one more deletion while a marker is not durable
		} else if err != nil {
			env.Logger.Warn("marking superseded checkpoints deleted", zap.Error(err))
		}
	}
	if env.Rank == 0 && merr == nil {
		repl := replicaStore(env.Global)
		marked := make([]bool, len(ms))
		for i, m := range ms {
			err := markDeleting(env.Meta, m)
			marked[i] = err == nil
			merr = errors.Join(merr, err)
		}
		if err := env.Meta.Driver.SyncDir(env.Meta.Dir); err != nil {
			merr = errors.Join(merr, err)
			clear(marked)
		}
		if !replicas {
			clear(marked)
		}
		var errs []error
		for i, m := range ms {
			if marked[i] {
				errs = append(errs, removeIfExists(repl.Driver, repl.Path(ManifestName(m.Seq))))
			}
		}
		if slices.Contains(marked, true) {
			errs = append(errs, repl.Driver.SyncDir(repl.Dir))
		}
		merr = errors.Join(append(errs, merr)...)
	}
	if err := e.agree(merr, "remove manifest"); err != nil {
		return err
	}
	e.committed = slices.DeleteFunc(e.committed, func(x *Manifest) bool {
		return slices.ContainsFunc(ms, func(m *Manifest) bool { return m.Seq == x.Seq })
	})
	for _, m := range ms {
		delete(e.unrecoverable, m.Seq)
	}
	return nil
}

// markDeleting turns the primary manifest of m into its deletion marker
// (rank 0); the caller syncs the meta directory.
func markDeleting(meta Store, m *Manifest) error {
	err := meta.Driver.Rename(meta.Path(ManifestName(m.Seq)), meta.Path(DeletingName(m.Seq)))
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	raw, err := m.Marshal()
	if err != nil {
		return err
	}
	return vfd.WriteFileAtomic(meta.Driver, meta.Path(DeletingName(m.Seq)), raw)
}

// removeFiles removes the directories of uncommitted checkpoint m: the
// node's lowest rank in the node-local area, rank 0 in the global area
// and, with replica, m's manifest replica; a level with a [Remover]
// removes what lies elsewhere. Local to the rank.
func (e *Engine) removeFiles(env *Env, m *Manifest, replica bool) error {
	err := e.removeElsewhere(env, m)
	// Synced: the deletion marker may go only once the directories (and
	// the replica) are gone for good, or a crash could bring back files
	// without metadata, or a committed checkpoint without its files. The
	// areas at once: their syncs overlap.
	var rm []func() error
	if nodeLeader(env) {
		rm = append(rm, func() error { return errors.Join(removeDir(env.Local, m.Dir()), e.removeOtherNodes(env, m)) })
	}
	if env.Rank == 0 {
		rm = append(rm, func() error { return removeDir(env.Global, m.Dir()) })
		if replica {
			rm = append(rm, func() error {
				repl := replicaStore(env.Global)
				if err := removeIfExists(repl.Driver, repl.Path(ManifestName(m.Seq))); err != nil {
					return err
				}
				return repl.Driver.SyncDir(repl.Dir)
			})
		}
	}
	return errors.Join(err, runAll(rm))
}

// removeElsewhere lets m's level remove its files outside the checkpoint
// directories, if it has a [Remover].
func (e *Engine) removeElsewhere(env *Env, m *Manifest) error {
	if l, ok := e.levels[m.Level]; ok {
		if r, ok := l.(Remover); ok {
			return r.Remove(env, m)
		}
	}
	return nil
}

// Delete removes committed checkpoint m: first its manifests (behind a
// deletion marker, so it stops being committed), then its directories,
// then the marker. Collective.
//
// A checkpoint that a committed differential checkpoint depends on is
// refused with [ErrInUse] (identically on every rank): delete the
// dependents first, newest first.
func (e *Engine) Delete(m *Manifest) error {
	e.Wait()
	if d := e.dependent(m); d != nil {
		return fmt.Errorf("delete checkpoint %s: %w: %s", m.Dir(), ErrInUse, d.Dir())
	}
	if err := e.uncommit([]*Manifest{m}, true); err != nil {
		return err
	}
	if err := e.agree(e.removeFiles(e.env, m, false), "delete checkpoint "+m.Dir()); err != nil {
		return err
	}
	var err error
	if e.env.Rank == 0 {
		err = removeIfExists(e.env.Meta.Driver, e.env.Meta.Path(DeletingName(m.Seq)))
	}
	return e.agree(err, "remove deletion marker of "+m.Dir())
}

// Keep rewrites both copies of committed checkpoint m with Kept set
// (keep_last_ckpt at Finalize) and returns the new manifest. Collective.
// A crash in between leaves one copy kept and one not; Open prefers the
// kept one.
func (e *Engine) Keep(m *Manifest) (*Manifest, error) {
	e.Wait()
	k := *m
	k.Kept = true
	var err error
	if e.env.Rank == 0 {
		var raw []byte
		if raw, err = k.Marshal(); err == nil {
			env := e.env
			rep := make(chan error, 1)
			go func() { rep <- vfd.WriteFileAtomic(env.Global.Driver, env.Global.Path(ReplicaName(k.Seq)), raw) }()
			err = errors.Join(vfd.WriteFileAtomic(env.Meta.Driver, env.Meta.Path(ManifestName(k.Seq)), raw), <-rep)
		}
	}
	if err := e.agree(err, "keep checkpoint "+m.Dir()); err != nil {
		return nil, err
	}
	for i, c := range e.committed {
		if c.Seq == k.Seq {
			e.committed[i] = &k
		}
	}
	return &k, nil
}

// Recover walks the committed checkpoints newest first and returns the
// first one every rank can recover, with this rank's data source. Every
// digest is verified by the level on the way. The checkpoints passed
// over are remembered ([Engine.Skipped]): retention and
// [Engine.Recoverable] no longer treat them as the newest. When none is
// recoverable the error (identical on every rank) wraps [ErrNoCheckpoint]
// or [ErrUnrecoverable] and names each failure. Collective.
func (e *Engine) Recover() (*Manifest, Source, error) {
	defer e.dropPreload() // a verification started ahead and not used
	e.waitRemoval()       // the intent marker written ahead may still be syncing
	e.skipped = nil
	if len(e.committed) == 0 {
		return nil, Source{}, ErrNoCheckpoint
	}
	var errs []error
	for i := len(e.committed) - 1; i >= 0; i-- {
		m := e.committed[i]
		a := e.alt[m.Seq]
		// With two disagreeing copies, files that match neither are
		// left for the other attempt (see Env.tentative).
		e.env.tentative = a != nil
		src, err := e.RecoverOne(m)
		if a != nil {
			// The copies disagree: the other one may be this run's.
			if err != nil {
				var aerr error
				if src, aerr = e.RecoverOne(a); aerr == nil {
					m, err = a, nil
					e.committed[i] = a
				} else {
					err = fmt.Errorf("%w; with the other manifest copy: %w", err, aerr)
				}
			}
			if err == nil {
				e.settleCopies(m)
				delete(e.alt, m.Seq)
			}
		}
		e.env.tentative = false
		if err == nil {
			return m, src, nil
		}
		if e.unrecoverable == nil {
			e.unrecoverable = map[uint64]bool{}
		}
		e.unrecoverable[m.Seq] = true
		e.skipped = append(e.skipped, Skipped{Manifest: m, Err: err})
		if e.env.Rank == 0 { // the error is the same everywhere: log it once
			e.env.Logger.Warn("checkpoint not recoverable, trying an older one",
				zap.Uint64("seq", m.Seq), zap.Int64("ckpt-id", m.ID), zap.Stringer("level", m.Level), zap.Error(err))
		}
		errs = append(errs, err)
	}
	return nil, Source{}, joinedError(ErrUnrecoverable, errs)
}

// settleCopies makes both manifest copies of m hold m once recovery
// chose it among two disagreeing copies (rank 0): the other copy is kept
// as *.broken and rewritten. Failures are logged; the next Open sees the
// disagreement again.
func (e *Engine) settleCopies(m *Manifest) {
	env := e.env
	if env.Rank != 0 {
		return
	}
	raw, err := m.Marshal()
	if err != nil {
		return
	}
	for _, c := range []struct {
		d    vfd.Driver
		name string
	}{{env.Meta.Driver, env.Meta.Path(ManifestName(m.Seq))}, {env.Global.Driver, env.Global.Path(ReplicaName(m.Seq))}} {
		old, rerr := vfd.ReadFileLimit(c.d, c.name, MaxManifestSize)
		if rerr == nil && bytes.Equal(old, raw) {
			continue
		}
		err := c.d.Rename(c.name, c.name+BrokenSuffix)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			err = vfd.WriteFileAtomic(c.d, c.name, raw)
		}
		if err != nil {
			env.Logger.Warn("manifest copies disagree; rewriting the one recovery did not use failed", zap.String("path", c.name), zap.Error(err))
			continue
		}
		env.Logger.Warn(fmt.Sprintf("manifest copy %s described another checkpoint than the one recovered (another run's?); kept as %s and rewritten", c.name, c.name+BrokenSuffix))
	}
}

// joinedError returns an error that matches head and every one of errs
// with errors.Is, with the message "head: e1; e2; ...".
func joinedError(head error, errs []error) error {
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return &multiError{msg: head.Error() + ": " + strings.Join(msgs, "; "), errs: append([]error{head}, errs...)}
}

type multiError struct {
	msg  string
	errs []error
}

func (m *multiError) Error() string   { return m.msg }
func (m *multiError) Unwrap() []error { return m.errs }

// RecoverOne checks and rebuilds committed checkpoint m on every rank.
// Collective; the error is identical on every rank.
//
// A checkpoint of another shape (another rank count, or ranks placed on
// other nodes: [Engine.OtherShape]) is recovered by a verification pass
// of its own (reshape.go) when Config.NodeStore is set: the Source is
// then empty and [Engine.Reshaped] says where each old rank's data is.
func (e *Engine) RecoverOne(m *Manifest) (Source, error) {
	what := fmt.Sprintf("checkpoint %s (id %d, %v)", m.Dir(), m.ID, m.Level)
	e.reshape = nil
	if m.Ranks != e.env.Comm.Size() {
		return Source{}, e.recoverReshaped(m, what)
	}
	l, ok := e.levels[m.Level]
	if !ok {
		return Source{}, fmt.Errorf("%s: %w", what, ErrLevelUnavailable)
	}
	if m.DCP != nil {
		return e.recoverChain(m, what)
	}
	src, lerr := l.Recover(e.env, m)
	if err := e.agree(lerr, "recover "+what); err != nil {
		if e.cfg.NodeStore != nil && e.OtherShape(m) {
			// Ranks moved between nodes: read the files where they are.
			if rerr := e.recoverReshaped(m, what); rerr != nil {
				return Source{}, fmt.Errorf("%w; read where the files are: %w", err, rerr)
			}
			return Source{}, nil
		}
		return Source{}, err
	}
	return src, nil
}

// NextSeq returns the sequence number the next checkpoint will get.
func (e *Engine) NextSeq() uint64 { return e.nextSeq }
