package levels

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// commit publishes the files of p and commits it (steps 3 and 4 of
// [Engine.Checkpoint]). Every rank's file list is gathered on every rank.
// When some rank has files under tmp names (a level's redundancy, or a
// data file written before its intent marker was durable), every rank
// renames its files into place and syncs their directories, and votes.
// Then rank 0 writes both copies of the manifest (the primary in the meta
// area, the replica in the global area) under their final names and
// syncs each beside its directory, all four at once: the checkpoint is
// committed once one copy is durable, and until both are the intent
// marker (durable before any file was published) says a copy found
// damaged or alone after a crash belongs to an uncommitted checkpoint. A
// failure on any rank removes both copies and returns [ErrVoteFailed] on
// every rank. On success rank 0 removes the deletion markers of
// checkpoints every rank has finished removing and, in the background,
// the intent marker, writing the next checkpoint's ([Engine.premark]).
func (e *Engine) commit(p *Pending) (*Manifest, []*Manifest, error) {
	env := e.env
	mine, err := json.Marshal(manifestPayload{Files: p.Files, Data: p.stats, RmFailed: e.rmFailed,
		Unpublished: unpublished(p)})
	if err != nil {
		return nil, nil, err
	}
	all, err := comm.AllgatherBytes(env.Comm, mine)
	if err != nil {
		return nil, nil, err
	}
	m := &Manifest{
		Run: env.Run, Seq: p.Seq, ID: p.ID, Level: p.Level, Ranks: env.Comm.Size(),
		NodeSize: env.Topo.NodeSize(), GroupSize: env.Topo.GroupSize(),
		Nodes: env.Topo.Table(),
		Time:  env.Now().UnixNano(),
		Files: make([][]File, len(all)),
	}
	var werr error
	failed := map[uint64]bool{}
	toPublish := false
	for r, b := range all {
		var pl manifestPayload
		if err := json.Unmarshal(b, &pl); err != nil {
			werr = fmt.Errorf("decode rank %d files: %w", r, err)
			toPublish = true // cannot tell: the publish vote fails anyway
			continue
		}
		m.Files[r] = pl.Files
		p.total.Written += pl.Data.Written
		p.total.Protected += pl.Data.Protected
		p.total.Logical += pl.Data.Logical
		p.total.Stored += pl.Data.Stored
		for _, seq := range pl.RmFailed {
			failed[seq] = true
		}
		toPublish = toPublish || pl.Unpublished > 0
	}
	m.Compressed = compressedOf(p.total)
	if p.chain != nil {
		m.DCP = &DCP{Chain: p.chain, BlockSize: p.opts.blockSize, Written: p.total.Written, Protected: p.total.Protected}
	}
	if werr != nil {
		werr = fmt.Errorf("manifest: %w", werr)
	}

	// 3. Renames and directory syncs, if any rank has files to rename
	// (every rank knows from the gathered lists).
	if toPublish {
		if err := e.agree(errors.Join(e.publish(p), werr), "publish checkpoint files"); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrVoteFailed, err)
		}
	}

	// 4. The commit: both copies written and synced beside their
	// directories, and with the primary's the superseded markers of the
	// checkpoints retention drops once this one commits (computed
	// identically on every rank).
	drops := e.dropsFor(m)
	if env.Rank == 0 && werr == nil {
		var raw []byte
		if raw, werr = m.Marshal(); werr == nil {
			werr = e.writeCopies(m.Seq, raw, drops)
		}
	}
	if err := e.agree(werr, "write manifest"); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrVoteFailed, err)
	}
	if env.Rank == 0 {
		// No directory sync needed: a deletion marker that comes back
		// with nothing left is resolved by the next Open.
		var rerr error
		for _, seq := range e.dropped {
			if !failed[seq] {
				rerr = errors.Join(rerr, removeIfExists(env.Meta.Driver, env.Meta.Path(DeletingName(seq))))
			}
		}
		if rerr != nil {
			env.Logger.Warn("removing checkpoint markers", zap.Error(rerr))
		}
	}
	e.dropped, e.rmFailed = nil, nil
	e.premark(e.nextSeq, m.Seq)
	return m, drops, nil
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
