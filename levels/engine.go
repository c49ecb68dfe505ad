package levels

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
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
}

// Stats times one checkpoint on one rank.
type Stats struct {
	Bytes   int64         // this rank's data file size
	Write   time.Duration // writing and syncing the data file
	Protect time.Duration // the level's post-processing
	Commit  time.Duration // votes, renames, directory syncs, manifest
	Clean   time.Duration // deleting superseded checkpoints
	Total   time.Duration
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

// Committed returns the committed checkpoints, oldest first.
func (e *Engine) Committed() []*Manifest { return slices.Clone(e.committed) }

// Open creates the directories, reads the committed manifests (rank 0
// reads, every rank gets the same list) and removes everything a crashed
// run left half-written: tmp files, and checkpoint directories without a
// manifest. Collective.
func (e *Engine) Open() error {
	e.Wait()
	env := e.env
	var local error
	if env.Rank == 0 {
		local = errors.Join(MkdirDurable(env.Meta.Driver, env.Meta.Dir), MkdirDurable(env.Global.Driver, env.Global.Dir))
	}
	if e.nodeLeader() {
		local = errors.Join(local, MkdirDurable(env.Local.Driver, env.Local.Dir))
	}
	if err := e.agree(local, "create directories"); err != nil {
		return err
	}
	var payload []byte
	var scanErr error
	if env.Rank == 0 {
		var raws [][]byte
		raws, scanErr = e.readManifests()
		if scanErr == nil {
			payload, scanErr = json.Marshal(raws)
		}
	}
	if err := e.agree(scanErr, "read manifests"); err != nil {
		return err
	}
	payload, err := BcastBytes(env.Comm, 0, payload)
	if err != nil {
		return err
	}
	var raws [][]byte
	if err := json.Unmarshal(payload, &raws); err != nil {
		return fmt.Errorf("levels: decode manifest list: %w", err)
	}
	e.committed = e.committed[:0]
	for _, raw := range raws {
		m, err := ParseManifest("manifest", raw)
		if err != nil {
			return err // rank 0 parsed it already; cannot happen
		}
		e.committed = append(e.committed, m)
	}
	sort.Slice(e.committed, func(i, j int) bool { return e.committed[i].Seq < e.committed[j].Seq })
	if n := len(e.committed); n > 0 {
		e.nextSeq = e.committed[n-1].Seq + 1
	}
	return e.agree(e.cleanOrphans(), "clean half-written checkpoints")
}

// readManifests runs on rank 0: it lists the meta area, removes tmp
// files, checks every manifest with the scan offline tools use
// ([ScanManifests]) and moves unusable ones aside as .broken.
func (e *Engine) readManifests() ([][]byte, error) {
	meta := e.env.Meta
	ents, err := meta.Driver.ReadDir(meta.Dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", meta.Dir, err)
	}
	changed := false
	for _, de := range ents {
		if name := de.Name(); strings.HasSuffix(name, TmpSuffix) {
			if err := meta.Driver.Remove(meta.Path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			changed = true
		}
	}
	var out [][]byte
	for _, sm := range scanManifests(meta, ents) {
		if sm.Err != nil {
			p := meta.Path(sm.Name)
			e.env.Logger.Warn("unreadable manifest moved aside", zap.String("path", p), zap.Error(sm.Err))
			if rerr := meta.Driver.Rename(p, p+".broken"); rerr != nil {
				return nil, errors.Join(sm.Err, rerr)
			}
			changed = true
			continue
		}
		out = append(out, sm.Raw)
	}
	if changed {
		if err := meta.Driver.SyncDir(meta.Dir); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cleanOrphans removes, in the areas this rank is responsible for, every
// checkpoint directory that no manifest names and every tmp file inside
// committed ones.
func (e *Engine) cleanOrphans() error {
	keep := map[string]bool{}
	for _, m := range e.committed {
		keep[m.Dir()] = true
	}
	var errs []error
	clean := func(s Store) {
		ents, err := s.Driver.ReadDir(s.Dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return
		}
		changed := false
		for _, de := range ents {
			name := de.Name()
			base := strings.TrimSuffix(name, TmpSuffix)
			if _, ok := parseSeq(base, ""); !ok {
				continue
			}
			if keep[name] {
				errs = append(errs, e.cleanTmp(s, name))
				continue
			}
			e.env.Logger.Debug("removing uncommitted checkpoint", zap.String("path", s.Path(name)))
			errs = append(errs, s.Driver.RemoveAll(s.Path(name)))
			changed = true
		}
		if changed {
			errs = append(errs, s.Driver.SyncDir(s.Dir))
		}
	}
	if e.nodeLeader() {
		clean(e.env.Local)
	}
	if e.env.Rank == 0 {
		clean(e.env.Global)
	}
	return errors.Join(errs...)
}

func (e *Engine) cleanTmp(s Store, dir string) error {
	ents, err := s.Driver.ReadDir(s.Path(dir))
	if err != nil {
		return err
	}
	var errs []error
	for _, de := range ents {
		if strings.HasSuffix(de.Name(), TmpSuffix) {
			errs = append(errs, s.Driver.Remove(s.Path(path.Join(dir, de.Name()))))
		}
	}
	return errors.Join(errs...)
}

// nodeLeader reports whether this rank is the lowest rank on its node.
func (e *Engine) nodeLeader() bool {
	me := e.env.Topo.NodeOf(e.env.Rank)
	for r := 0; r < e.env.Rank; r++ {
		if e.env.Topo.NodeOf(r) == me {
			return false
		}
	}
	return true
}

func (e *Engine) agree(local error, what string) error { return Agree(e.env.Comm, local, what) }

// Agree turns a per-rank error into an error every rank returns: nil when
// every rank passed nil, otherwise the same message on every rank, naming
// what failed, the failing ranks and the first one's error. On a failing
// rank the result also wraps its local error for errors.Is. Collective.
func Agree(c comm.Comm, local error, what string) error {
	ok, err := vote(c, local == nil)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	msg := ""
	if local != nil {
		msg = local.Error()
	}
	all, err := GatherBytes(c, []byte(msg))
	if err != nil {
		return err
	}
	var ranks []int
	first := ""
	for r, b := range all {
		if len(b) > 0 {
			if first == "" {
				first = fmt.Sprintf("rank %d: %s", r, b)
			}
			ranks = append(ranks, r)
		}
	}
	agreed := fmt.Errorf("%s failed on ranks %v; %s", what, ranks, first)
	if local != nil {
		return &agreedError{msg: agreed.Error(), local: local}
	}
	return errors.New(agreed.Error())
}

// agreedError carries the message every rank shares and, on the ranks
// that failed, the local error for errors.Is.
type agreedError struct {
	msg   string
	local error
}

func (a *agreedError) Error() string { return a.msg }
func (a *agreedError) Unwrap() error { return a.local }

// Checkpoint writes, protects and commits a checkpoint at level lvl with
// the application's id. Collective. On success the manifest is durable and
// superseded checkpoints are deleted; on failure no rank's files remain and
// the previous committed checkpoints are untouched.
func (e *Engine) Checkpoint(id int64, lvl ID, write WriteFunc) (*Manifest, Stats, error) {
	e.Wait()
	env := e.env
	start := env.Now()
	var st Stats
	level, err := e.Level(lvl)
	if err != nil {
		return nil, st, err
	}
	p := &Pending{Seq: e.nextSeq, ID: id, Level: lvl, Dir: CheckpointDir(e.nextSeq)}
	e.nextSeq++

	// 1. Data file under its tmp name, synced; or, for a level that
	// places the data itself, the level's file.
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
		syncData, werr = e.writeData(p, area, write, &st, ok && reader.ReadsData())
	}
	st.Write = env.Now().Sub(start)
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
	st.Protect = env.Now().Sub(t)
	if err := e.agree(perr, "protect checkpoint at "+lvl.String()); err != nil {
		return nil, st, e.abort(p, fmt.Errorf("%w: %w", ErrVoteFailed, err))
	}

	// 3. Renames and directory syncs.
	t = env.Now()
	if err := e.agree(e.publish(p), "publish checkpoint files"); err != nil {
		return nil, st, e.abort(p, fmt.Errorf("%w: %w", ErrVoteFailed, err))
	}

	// 4. Manifest, written last by rank 0.
	m, err := e.writeManifest(p)
	st.Commit = env.Now().Sub(t)
	if err != nil {
		return nil, st, e.abort(p, err)
	}
	e.committed = append(e.committed, m)

	// 5. Retention: only now may older checkpoints go.
	t = env.Now()
	e.retain(m)
	st.Clean = env.Now().Sub(t)
	st.Total = env.Now().Sub(start)
	return m, st, nil
}

// writeData writes the data file under its tmp name and records it. The
// file is synced and its digest known on return, except with readBy (the
// level's Protect reads the whole file, see [DataReader]) when the write
// gave no digest: then the digest is left pending for Protect, and the
// returned function syncs and closes the file, to be run beside Protect.
func (e *Engine) writeData(p *Pending, area Where, write WriteFunc, st *Stats, readBy bool) (func() error, error) {
	s := e.env.Store(area)
	if err := s.Driver.MkdirAll(s.Path(p.Dir), 0o755); err != nil {
		return nil, fmt.Errorf("create checkpoint dir: %w", err)
	}
	name := RankFileName(p.Dir, RoleData, e.env.Rank)
	full := s.Path(name) + TmpSuffix
	f, err := vfd.CreateTrunc(s.Driver, full)
	if err != nil {
		return nil, fmt.Errorf("create data file: %w", err)
	}
	size, d, ok, err := write(f)
	var attrs map[string]string
	if err == nil && !ok && area == Local {
		if _, l1 := e.levels[p.Level].(Local1); l1 {
			d, attrs, ok = ffDigest(f)
		}
	}
	if err == nil && !ok && readBy {
		st.Bytes = size
		p.Files = append(p.Files, File{Role: RoleData, Where: area, Name: name, Size: size, Of: e.env.Rank})
		p.DigestPending = true
		return func() error {
			err := errors.Join(f.Sync(), f.Close())
			if err != nil {
				return fmt.Errorf("sync %s: %w", full, err)
			}
			return nil
		}, nil
	}
	if err == nil {
		if ok {
			err = f.Sync()
		} else {
			// Hash through a second handle while the data goes to disk:
			// the CPU work hides behind the fsync.
			done := make(chan error, 1)
			go func() {
				rf, err := s.Driver.Open(full, vfd.ReadOnly)
				if err != nil {
					done <- err
					return
				}
				d, err = FileDigest(rf)
				done <- errors.Join(err, rf.Close())
			}()
			err = f.Sync()
			err = errors.Join(err, <-done)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", full, err)
	}
	st.Bytes = size
	p.Files = append(p.Files, File{Role: RoleData, Where: area, Name: name, Size: size, Digest: d, Of: e.env.Rank, Attrs: attrs})
	return nil, nil
}

// ffDigest returns the file checksum of f when f is an FTI-FF file that
// carries a BLAKE3 hash of every block, with the attributes that mark the
// digest as such, so that the data need not be read back and hashed again.
// ok is false for any other file.
func ffDigest(f vfd.File) (d Digest, attrs map[string]string, ok bool) {
	rd, err := fileformat.Open(f)
	if err != nil || !rd.Hashed() {
		return Digest{}, nil, false
	}
	return Digest(rd.Summary().Checksum), map[string]string{AttrDigest: DigestFTIFF}, true
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
	// it made to p.Files, under their tmp names, synced. Collective; on
	// error it has discarded them.
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
	for _, f := range p.Files {
		if f.Attrs[AttrInContainer] != "" {
			continue // no file of its own
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
	for w, ds := range dirs {
		s := e.env.Store(w)
		for d := range ds {
			if err := s.Driver.SyncDir(s.Path(d)); err != nil {
				return fmt.Errorf("sync checkpoint dir: %w", err)
			}
		}
		// The checkpoint directory's own entry in the area.
		if err := s.Driver.SyncDir(s.Dir); err != nil {
			return fmt.Errorf("sync area dir: %w", err)
		}
	}
	return nil
}

func (e *Engine) writeManifest(p *Pending) (*Manifest, error) {
	env := e.env
	mine, err := json.Marshal(p.Files)
	if err != nil {
		return nil, err
	}
	all, err := GatherBytes(env.Comm, mine)
	if err != nil {
		return nil, err
	}
	m := &Manifest{
		Seq: p.Seq, ID: p.ID, Level: p.Level, Ranks: env.Comm.Size(),
		NodeSize: env.Topo.NodeSize(), GroupSize: env.Topo.GroupSize(),
		Nodes: env.Topo.Table(),
		Time:  env.Now().UnixNano(),
		Files: make([][]File, len(all)),
	}
	var werr error
	for r, b := range all {
		if err := json.Unmarshal(b, &m.Files[r]); err != nil {
			werr = fmt.Errorf("decode rank %d files: %w", r, err)
		}
	}
	if env.Rank == 0 && werr == nil {
		var raw []byte
		raw, werr = m.Marshal()
		if werr == nil {
			name := env.Meta.Path(ManifestName(p.Seq))
			werr = vfd.WriteFileAtomic(env.Meta.Driver, name, raw)
			if werr != nil {
				// The rename may have happened: make sure the checkpoint is
				// not left committed behind our back.
				werr = errors.Join(werr, removeIfExists(env.Meta.Driver, name), env.Meta.Driver.SyncDir(env.Meta.Dir))
			}
		}
	}
	if err := e.agree(werr, "write manifest"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrVoteFailed, err)
	}
	return m, nil
}

// MkdirDurable creates dir and its parents and syncs every directory on
// the way up, so the new entries survive a crash.
func MkdirDurable(d vfd.Driver, dir string) error {
	if err := d.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for p := path.Clean(dir); ; p = path.Dir(p) {
		if err := d.SyncDir(p); err != nil {
			return err
		}
		if p == "/" || p == "." {
			return nil
		}
	}
}

func removeIfExists(d vfd.Driver, name string) error {
	if err := d.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// abort removes this rank's files of a failed checkpoint (tmp or renamed)
// and returns err. Leftovers that cannot be removed are cleaned at the next Open.
func (e *Engine) abort(p *Pending, err error) error {
	var errs []error
	for _, f := range p.Files {
		s := e.env.Store(f.Where)
		errs = append(errs, removeIfExists(s.Driver, s.Path(f.Name)+TmpSuffix), removeIfExists(s.Driver, s.Path(f.Name)))
	}
	// A failed data write may have left a tmp file not yet in p.Files.
	for _, w := range []Where{Local, Global} {
		s := e.env.Store(w)
		errs = append(errs, removeIfExists(s.Driver, s.Path(RankFileName(p.Dir, RoleData, e.env.Rank))+TmpSuffix))
	}
	if cerr := errors.Join(errs...); cerr != nil {
		e.env.Logger.Warn("cleanup after failed checkpoint", zap.Uint64("seq", p.Seq), zap.Error(cerr))
	}
	return err
}

// retain deletes the checkpoints the policy drops now that m committed:
// their manifests at once (collectively), their files in the background
// (see [Engine.Wait]). Errors are logged, not returned: m is committed
// either way, and leftovers are removed by the next Open.
func (e *Engine) retain(m *Manifest) {
	var drop []*Manifest
	for _, d := range e.policy.Drop(e.Committed(), m) {
		if d.Seq != m.Seq {
			drop = append(drop, d)
		}
	}
	if len(drop) == 0 {
		return
	}
	if err := e.uncommit(drop); err != nil {
		e.env.Logger.Warn("deleting superseded checkpoints", zap.Error(err))
		return
	}
	done := make(chan struct{})
	e.bg = done
	go func() {
		defer close(done)
		if err := e.removeFiles(drop); err != nil {
			e.env.Logger.Warn("removing superseded checkpoint files", zap.Error(err))
		}
	}()
}

// Wait blocks until the background removal of superseded checkpoint files
// has finished. Every collective method calls it first; call it before
// abandoning an Engine.
func (e *Engine) Wait() {
	if e.bg != nil {
		<-e.bg
		e.bg = nil
	}
}

// uncommit removes the manifests of ms (rank 0) so they stop being
// committed. Collective.
func (e *Engine) uncommit(ms []*Manifest) error {
	env := e.env
	var merr error
	if env.Rank == 0 {
		for _, m := range ms {
			merr = errors.Join(merr, removeIfExists(env.Meta.Driver, env.Meta.Path(ManifestName(m.Seq))))
		}
		merr = errors.Join(merr, env.Meta.Driver.SyncDir(env.Meta.Dir))
	}
	if err := e.agree(merr, "remove manifest"); err != nil {
		return err
	}
	e.committed = slices.DeleteFunc(e.committed, func(x *Manifest) bool {
		return slices.ContainsFunc(ms, func(m *Manifest) bool { return m.Seq == x.Seq })
	})
	return nil
}

// removeFiles removes the directories of uncommitted checkpoints: the
// node's lowest rank in the node-local area, rank 0 in the global area;
// a level with a [Remover] removes what lies elsewhere. Local to the rank.
func (e *Engine) removeFiles(ms []*Manifest) error {
	env := e.env
	var errs []error
	for _, m := range ms {
		if l, ok := e.levels[m.Level]; ok {
			if r, ok := l.(Remover); ok {
				errs = append(errs, r.Remove(env, m))
			}
		}
		if e.nodeLeader() {
			errs = append(errs, env.Local.Driver.RemoveAll(env.Local.Path(m.Dir())))
		}
		if env.Rank == 0 {
			errs = append(errs, env.Global.Driver.RemoveAll(env.Global.Path(m.Dir())))
		}
	}
	return errors.Join(errs...)
}

// Delete removes committed checkpoint m: first its manifest (so it stops
// being committed), then its directories. Collective.
func (e *Engine) Delete(m *Manifest) error {
	e.Wait()
	if err := e.uncommit([]*Manifest{m}); err != nil {
		return err
	}
	return e.agree(e.removeFiles([]*Manifest{m}), "delete checkpoint "+m.Dir())
}

// Recover walks the committed checkpoints newest first and returns the
// first one every rank can recover, with this rank's data source. Every
// digest is verified by the level on the way. When none is recoverable
// the error (identical on every rank) wraps [ErrNoCheckpoint] or
// [ErrUnrecoverable] and names each failure. Collective.
func (e *Engine) Recover() (*Manifest, Source, error) {
	e.Wait()
	if len(e.committed) == 0 {
		return nil, Source{}, ErrNoCheckpoint
	}
	var errs []error
	for i := len(e.committed) - 1; i >= 0; i-- {
		m := e.committed[i]
		src, err := e.RecoverOne(m)
		if err == nil {
			return m, src, nil
		}
		e.env.Logger.Warn("checkpoint not recoverable, trying an older one",
			zap.Uint64("seq", m.Seq), zap.Int64("ckpt-id", m.ID), zap.Stringer("level", m.Level), zap.Error(err))
		errs = append(errs, err)
	}
	return nil, Source{}, joinedError(ErrUnrecoverable, errs)
}

// RecoverDeferred is [Engine.Recover] for a caller that checks every
// block of the data against its hash while reading it (fileformat's
// ReadVar does), so that the data need not be read twice on a restart.
// When on every rank the newest committed checkpoint's data file is an
// FTI-FF file in its place whose digest is its file checksum
// ([DigestFTIFF]: the L1 data files), with the recorded size, a header
// and metadata that check and that checksum, it returns that checkpoint
// with verified false, without reading the data: the checksum covers the
// hash of every block, so a block that matches its hash holds the
// committed bytes. The caller must then read only through those hashes
// and, when a block does not match, call Recover, which verifies every
// file, rebuilds from redundancy and falls back to older checkpoints.
// Otherwise it returns what Recover returns, with verified true.
// Collective; the result is identical on every rank.
func (e *Engine) RecoverDeferred() (m *Manifest, src Source, verified bool, err error) {
	e.Wait()
	if len(e.committed) == 0 {
		return nil, Source{}, false, ErrNoCheckpoint
	}
	m = e.committed[len(e.committed)-1]
	src, lerr := e.checkInPlace(m)
	if Agree(e.env.Comm, lerr, "check data file in place") == nil {
		return m, src, false, nil
	}
	e.env.Logger.Debug("newest checkpoint not checkable in place, verifying every file",
		zap.Uint64("seq", m.Seq), zap.NamedError("local", lerr))
	m, src, err = e.Recover()
	return m, src, true, err
}

// errNotInPlace says the data of a checkpoint cannot be checked in place.
var errNotInPlace = errors.New("levels: data file not checkable in place")

// checkInPlace returns this rank's data file of m when it is an FTI-FF
// file in place whose header, metadata and file checksum match the
// manifest. It reads no data. Local.
func (e *Engine) checkInPlace(m *Manifest) (Source, error) {
	if m.Ranks != e.env.Comm.Size() {
		return Source{}, fmt.Errorf("%w: %w", errNotInPlace, ErrTopologyMismatch)
	}
	if _, ok := e.levels[m.Level]; !ok {
		return Source{}, fmt.Errorf("%w: %w", errNotInPlace, ErrLevelUnavailable)
	}
	f, ok := m.DataFile(e.env.Rank)
	if !ok {
		return Source{}, fmt.Errorf("%w: %w", errNotInPlace, ErrMissingFile)
	}
	if f.Attrs[AttrDigest] != DigestFTIFF || f.Attrs[AttrInContainer] != "" {
		return Source{}, errNotInPlace
	}
	s := e.env.Store(f.Where)
	file, err := s.Driver.Open(s.Path(f.Name), vfd.ReadOnly)
	if err != nil {
		return Source{}, fmt.Errorf("%w: %w", errNotInPlace, err)
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil {
		return Source{}, fmt.Errorf("%w: %w", errNotInPlace, err)
	}
	if size != f.Size {
		return Source{}, fmt.Errorf("%w: %w: %d bytes, manifest says %d", errNotInPlace, ErrSizeMismatch, size, f.Size)
	}
	rd, err := fileformat.Open(file)
	if err != nil {
		return Source{}, fmt.Errorf("%w: %w", errNotInPlace, err)
	}
	if !rd.Hashed() || Digest(rd.Summary().Checksum) != f.Digest {
		return Source{}, fmt.Errorf("%w: %w: FTI-FF checksum", errNotInPlace, ErrDigestMismatch)
	}
	return Source{Store: s, Name: f.Name, Size: f.Size, Digest: f.Digest}, nil
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
func (e *Engine) RecoverOne(m *Manifest) (Source, error) {
	what := fmt.Sprintf("checkpoint %s (id %d, %v)", m.Dir(), m.ID, m.Level)
	if m.Ranks != e.env.Comm.Size() {
		return Source{}, fmt.Errorf("%s: %w: written by %d ranks, running %d", what, ErrTopologyMismatch, m.Ranks, e.env.Comm.Size())
	}
	l, ok := e.levels[m.Level]
	if !ok {
		return Source{}, fmt.Errorf("%s: %w", what, ErrLevelUnavailable)
	}
	src, lerr := l.Recover(e.env, m)
	if err := e.agree(lerr, "recover "+what); err != nil {
		return Source{}, err
	}
	return src, nil
}

// NextSeq returns the sequence number the next checkpoint will get.
func (e *Engine) NextSeq() uint64 { return e.nextSeq }
