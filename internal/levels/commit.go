package levels

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// commit publishes the files of p and commits it (steps 3 and 4 of
// [Engine.Checkpoint]). One fixed-size reduction gives every rank the
// totals: files under tmp names, data statistics, rank 0's commit time,
// and which dropped checkpoints some rank failed to remove. Each rank
// sends its file list to its part's leader, which writes both copies of
// the part and sends rank 0 its size and hash; rank 0 writes both copies
// of the root. When some rank has files under tmp names, every rank
// renames them and syncs their directories while the leaders write the
// parts, a vote follows, and only then rank 0 writes the root; otherwise
// the root is written beside the parts. Every copy is written under its
// final name and synced beside its directory. The checkpoint is
// committed once a root copy and a copy of every part are durable; until
// then the intent marker (durable before any file was published) says
// the files belong to an uncommitted checkpoint. A failure on any rank
// withdraws the root and the parts and returns [ErrVoteFailed] on every
// rank. On success rank 0 removes the deletion markers of checkpoints
// every rank has finished removing and, in the background, the intent
// marker, writing the next checkpoint's ([Engine.premark]).
func (e *Engine) commit(p *Pending) (*Manifest, []*Manifest, error) {
	env := e.env
	tot := make([]int64, totalsFixed+len(e.dropped))
	tot[totUnpublished] = int64(unpublished(p))
	tot[totWritten], tot[totProtected] = p.stats.Written, p.stats.Protected
	tot[totLogical], tot[totStored] = p.stats.Logical, p.stats.Stored
	for _, f := range p.Files {
		if f.Role == RoleData {
			tot[totBytes] += f.Size
		}
	}
	if env.Rank == 0 {
		tot[totTime] = env.Now().UnixNano()
	}
	for i, seq := range e.dropped {
		if slices.Contains(e.rmFailed, seq) {
			tot[totalsFixed+i] = 1
		}
	}
	if err := comm.AllreduceInt64s(env.Comm, tot, comm.Sum); err != nil {
		return nil, nil, err
	}
	p.total = DataStats{Written: tot[totWritten], Protected: tot[totProtected],
		Logical: tot[totLogical], Stored: tot[totStored]}
	m := e.newManifest(p.Seq, p.ID, p.Level, tot[totTime], tot[totBytes])
	m.Compressed = compressedOf(p.total)
	if p.chain != nil {
		m.DCP = &DCP{Chain: p.chain, BlockSize: p.opts.blockSize, Written: p.total.Written, Protected: p.total.Protected}
	}
	toPublish := tot[totUnpublished] > 0

	// 3. The renames and directory syncs, if any rank has files to
	// rename, beside the parts; 4. the root, with the superseded markers
	// of the checkpoints retention drops once this one commits (computed
	// identically on every rank).
	drops := e.dropsFor(m)
	var published chan error
	if toPublish {
		published = make(chan error, 1)
		go func() { published <- e.publish(p) }()
	}
	pw := e.writeParts(m, p.Files)
	var werr error
	if toPublish {
		werr = errors.Join(<-published, pw.wait())
		if err := e.agree(werr, "publish checkpoint files"); err != nil {
			return nil, nil, e.withdraw(m, drops, fmt.Errorf("%w: %w", ErrVoteFailed, err))
		}
		werr = nil
		if env.Rank == 0 {
			werr = e.writeRoot(m, pw, drops)
		}
	} else {
		var rootErr error
		if env.Rank == 0 {
			rootErr = e.writeRoot(m, pw, drops)
		}
		werr = errors.Join(rootErr, pw.wait())
	}
	if err := e.agree(werr, "write manifest"); err != nil {
		return nil, nil, e.withdraw(m, drops, fmt.Errorf("%w: %w", ErrVoteFailed, err))
	}
	if env.Rank == 0 {
		// No directory sync needed: a deletion marker that comes back
		// with nothing left is resolved by the next Open.
		var done []uint64
		for i, seq := range e.dropped {
			if tot[totalsFixed+i] == 0 {
				done = append(done, seq)
			}
		}
		rerr := e.endDeletions(done)
		if rerr != nil {
			env.Logger.Warn("removing checkpoint markers", zap.Error(rerr))
		}
	}
	e.dropped, e.rmFailed = nil, nil
	clear(e.dropNodes) // those left go to the next start-up
	e.premark(e.nextSeq, m.Seq)
	return e.adopt(m, p.Files, pw.part), drops, nil
}

// The totals a commit reduces, by index; the flags of e.dropped follow.
const (
	totUnpublished = iota
	totWritten
	totProtected
	totLogical
	totStored
	totBytes
	totTime
	totalsFixed
)

// newManifest returns the version 3 manifest of a checkpoint of this
// run, without file lists.
func (e *Engine) newManifest(seq uint64, id int64, lvl ID, t, bytes int64) *Manifest {
	env := e.env
	return &Manifest{Run: env.Run, Seq: seq, ID: id, Level: lvl, Ranks: env.Comm.Size(), NodeSize: env.Topo.NodeSize(),
		GroupSize: env.Topo.GroupSize(), Time: t, version: ManifestVersionParts, bytes: bytes, hasBytes: true,
		shape: e.shape, partRanks: e.layout().per}
}

// partsWrite is a leader's part being written, and on rank 0 every
// part's reference.
type partsWrite struct {
	// part is the leader's part (nil elsewhere), raw its bytes.
	part *Part
	raw  []byte
	// refs are, on rank 0, the parts' references; refErr says why some
	// leader has none.
	refs   []PartRef
	refErr error
	// err is this rank's failure before the writes; done the writes'.
	err  error
	done chan error
}

// wait returns the rank's failure: to send its list, or to build, write
// and sync its part (a leader).
func (w *partsWrite) wait() error {
	err := w.err
	if w.done != nil {
		err = errors.Join(err, <-w.done)
		w.done = nil
	}
	return err
}

// partMsg is what a rank sends its leader, and a leader rank 0: a
// payload, or why there is none.
type partMsg struct {
	Err   string   `json:"err,omitempty"`
	Files []File   `json:"files,omitempty"`
	Ref   *PartRef `json:"ref,omitempty"`
}

// writeParts sends this rank's files to its leader. The leader builds
// its part of m, sends rank 0 its reference, and starts writing both
// copies under their final names, each synced beside its directory
// ([partsWrite.wait] waits for them). Rank 0 gets every reference.
// Collective.
func (e *Engine) writeParts(m *Manifest, files []File) *partsWrite {
	env := e.env
	lay := m.layout()
	w := &partsWrite{}
	mine, err := json.Marshal(partMsg{Files: files})
	if err != nil {
		mine, _ = json.Marshal(partMsg{Err: err.Error()})
	}
	lists, err := toLeader(env.Comm, lay, tagPartList, mine)
	if err != nil {
		w.err = err
	}
	var ref []byte
	if lay.isLeader(env.Rank) && w.err == nil {
		var perr error
		w.part, w.raw, perr = e.buildPart(m, lists)
		if perr == nil {
			perr = mkdirParts(env, m.Seq)
		}
		r := refOf(w.raw)
		msg := partMsg{Ref: &r}
		if perr != nil {
			w.err, msg = perr, partMsg{Err: perr.Error()}
		}
		ref, _ = json.Marshal(msg)
	} else if lay.isLeader(env.Rank) {
		ref, _ = json.Marshal(partMsg{Err: w.err.Error()})
	}
	refs, err := leadersToRoot(env.Comm, lay, tagPartRef, ref)
	if err != nil {
		w.err = errors.Join(w.err, err)
	}
	if env.Rank == 0 && err == nil {
		w.refs, w.refErr = e.decodeRefs(refs, lay)
	}
	if w.part != nil && w.err == nil {
		w.done = make(chan error, 1)
		go func(raw []byte) { w.done <- writePartCopies(env, m, lay.index(env.Rank), raw) }(w.raw)
	}
	return w
}

// buildPart decodes the lists of a leader's ranks into its part of m.
func (e *Engine) buildPart(m *Manifest, lists [][]byte) (*Part, []byte, error) {
	env := e.env
	lay := m.layout()
	i := lay.index(env.Rank)
	p := &Part{Index: i, First: lay.first(i), Files: make([][]File, len(lists))}
	var errs []error
	for j, b := range lists {
		e.decoded.Add(int64(len(b)))
		var msg partMsg
		if err := json.Unmarshal(b, &msg); err != nil {
			errs = append(errs, fmt.Errorf("decode rank %d's files: %w", p.First+j, err))
			continue
		}
		if msg.Err != "" {
			errs = append(errs, fmt.Errorf("rank %d: %s", p.First+j, msg.Err))
		}
		p.Files[j] = msg.Files
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, fmt.Errorf("manifest part %d: %w", i, err)
	}
	ns := env.Topo.NodeSize()
	for n := p.First / ns; n < (p.First+len(p.Files))/ns; n++ {
		p.Nodes = append(p.Nodes, env.Topo.Host(n))
	}
	if err := p.validate(m); err != nil {
		return nil, nil, fmt.Errorf("manifest part %d: %w", i, err)
	}
	raw, err := marshalPart(m, i, p.Nodes, p.Files)
	return p, raw, err
}

// decodeRefs decodes the leaders' messages (rank 0).
func (e *Engine) decodeRefs(msgs [][]byte, lay layout) ([]PartRef, error) {
	refs := make([]PartRef, len(msgs))
	var errs []error
	for i, b := range msgs {
		e.decoded.Add(int64(len(b)))
		var msg partMsg
		switch err := json.Unmarshal(b, &msg); {
		case err != nil:
			errs = append(errs, fmt.Errorf("decode the reference of part %d: %w", i, err))
		case msg.Err != "":
			errs = append(errs, fmt.Errorf("part %d (rank %d): %s", i, lay.first(i), msg.Err))
		case msg.Ref == nil:
			errs = append(errs, fmt.Errorf("part %d (rank %d): no reference", i, lay.first(i)))
		default:
			refs[i] = *msg.Ref
		}
	}
	return refs, errors.Join(errs...)
}

// partsDirs returns the stores of checkpoint seq's two parts directories.
func partsDirs(env *Env, seq uint64) [2]Store {
	repl := replicaStore(env.Global)
	return [2]Store{{env.Meta.Driver, env.Meta.Path(PartsDirName(seq))}, {repl.Driver, repl.Path(PartsDirName(seq))}}
}

// mkdirParts creates checkpoint seq's parts directories (a leader; their
// entries are made durable by the sync of the root's directories, which
// rank 0 runs after every leader reported).
func mkdirParts(env *Env, seq uint64) error {
	var errs []error
	for _, d := range partsDirs(env, seq) {
		errs = append(errs, d.Driver.MkdirAll(d.Dir, 0o755))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("create parts directory: %w", err)
	}
	return nil
}

// writePartCopies writes both copies of part i of m under their final
// names and syncs each beside its directory, both at once.
func writePartCopies(env *Env, m *Manifest, i int, raw []byte) error {
	ds := partsDirs(env, m.Seq)
	what := [2]string{"manifest part", "manifest part replica"}
	var fns []func() error
	for k := range ds {
		fns = append(fns, func() error {
			if err := writeSynced(ds[k].Driver, ds[k].Path(partBase(m.Level, i)), raw, true); err != nil {
				return fmt.Errorf("%s: %w", what[k], err)
			}
			return nil
		})
	}
	return runAll(fns)
}

// writeRoot writes both root copies of m from the leaders' references
// (rank 0), with the superseded markers of drops.
func (e *Engine) writeRoot(m *Manifest, pw *partsWrite, drops []*Manifest) error {
	if pw.refs == nil || pw.refErr != nil {
		return errors.Join(errors.New("manifest: a part has no reference"), pw.refErr)
	}
	m.refs = pw.refs
	raw, err := m.Marshal()
	if err == nil {
		m.identity, err = m.computeIdentity()
	}
	if err != nil {
		return err
	}
	return e.writeCopies(m.Seq, raw, drops)
}

// withdraw undoes a commit that failed after the parts and the root may
// have been written (rank 0): the root copies, the superseded markers
// and the parts directories go, each synced, before any rank removes a
// data file. Collective: it returns err once rank 0 is done.
func (e *Engine) withdraw(m *Manifest, drops []*Manifest, err error) error {
	env := e.env
	var werr error
	if env.Rank == 0 {
		werr = e.removeCopies(m.Seq)
		for _, d := range drops {
			werr = errors.Join(werr, removeIfExists(env.Meta.Driver, env.Meta.Path(SupersededName(d.Seq, m.Seq))))
		}
		werr = errors.Join(werr, removePartsDirs(env, m.Seq))
	}
	if aerr := e.agree(werr, "withdraw the manifest of "+m.Dir()); aerr != nil {
		env.Logger.Warn("withdrawing the manifest of a failed checkpoint; the next start-up finishes it", zap.Error(aerr))
	}
	return err
}

// removePartsDirs removes checkpoint seq's parts directories and syncs
// their parents (rank 0).
func removePartsDirs(env *Env, seq uint64) error {
	var errs []error
	for _, d := range partsDirs(env, seq) {
		if err := d.Driver.RemoveAll(d.Dir); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := d.Driver.SyncDir(path.Dir(d.Dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// unpublished counts the files of p still under their tmp names (a
// level's files written in place have their final names already, and
// those in a container no name of their own).
func unpublished(p *Pending) int {
	n := 0
	for _, f := range p.Files[p.Published:] {
		if !p.inPlace(f) {
			n++
		}
	}
	return n
}

// copyPaths returns the drivers and paths of both copies of manifest seq
// (rank 0): the primary, then the replica.
func (e *Engine) copyPaths(seq uint64) ([2]vfd.Driver, [2]string) {
	env := e.env
	return [2]vfd.Driver{env.Meta.Driver, env.Global.Driver},
		[2]string{env.Meta.Path(ManifestName(seq)), env.Global.Path(ReplicaName(seq))}
}

// writeCopies writes both copies of manifest seq under their final
// names and syncs each file beside its directory, all at once (rank 0);
// before the primary's directory (the meta area) is synced, it creates
// there the superseded marker of every checkpoint in drops. On failure it
// removes the copies and the markers: a copy may be durable already, and
// the checkpoint must not be left committed behind the vote's back.
func (e *Engine) writeCopies(seq uint64, raw []byte, drops []*Manifest) error {
	ds, ps := e.copyPaths(seq)
	meta := e.env.Meta
	write := func(i int, what string) func() error {
		return func() error {
			if i == 0 {
				for _, d := range drops {
					if err := createEmpty(meta.Driver, meta.Path(SupersededName(d.Seq, seq))); err != nil {
						return fmt.Errorf("superseded marker: %w", err)
					}
				}
			}
			if err := writeSynced(ds[i], ps[i], raw, true); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
	}
	err := runAll([]func() error{write(0, "manifest"), write(1, "manifest replica")})
	if err != nil {
		err = errors.Join(err, e.removeCopies(seq))
		for _, d := range drops {
			// Stale once the copies are gone (they name a checkpoint that
			// is not committed): no sync needed.
			err = errors.Join(err, removeIfExists(meta.Driver, meta.Path(SupersededName(d.Seq, seq))))
		}
	}
	return err
}

// writeSynced creates (or truncates) name, writes raw and syncs it and,
// with dir, its directory beside the file's sync; it closes the file. A
// failed sync's error names the file.
func writeSynced(d vfd.Driver, name string, raw []byte, dir bool) error {
	f, err := vfd.CreateTrunc(d, name)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(raw, 0); err != nil {
		return errors.Join(err, f.Close())
	}
	syncs := []func() error{f.Sync}
	if dir {
		syncs = append(syncs, func() error { return d.SyncDir(path.Dir(name)) })
	}
	if err := errors.Join(runAll(syncs), f.Close()); err != nil {
		return vfd.WrapPath(err, "sync", name)
	}
	return nil
}

// createEmpty creates an empty file (its name is what counts).
func createEmpty(d vfd.Driver, name string) error {
	f, err := vfd.CreateTrunc(d, name)
	if err != nil {
		return err
	}
	return f.Close()
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
