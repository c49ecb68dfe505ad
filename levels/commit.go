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
// [Engine.Checkpoint]). Every rank's file list is gathered on rank 0,
// which writes both copies of the manifest (the primary in the meta area,
// the replica in the global area) under tmp names and syncs them while
// every rank renames its files into place and syncs their directories;
// once every rank has voted both done, rank 0 renames the two copies into
// place and syncs their directories, concurrently: the checkpoint is
// committed once one copy is durable under its name. A failure on any
// rank removes both copies (and their tmp files) and returns
// [ErrVoteFailed] on every rank. On success rank 0 removes the intent
// marker, and the deletion markers of checkpoints every rank has finished
// removing.
//
// Writing the copies beside the renames takes their fsyncs off the
// checkpoint's critical path; a crash with tmp copies on disk leaves the
// checkpoint uncommitted, and the next Open removes them.
func (e *Engine) commit(p *Pending) (*Manifest, error) {
	env := e.env
	mine, err := json.Marshal(manifestPayload{Files: p.Files, Data: p.stats, RmFailed: e.rmFailed})
	if err != nil {
		return nil, err
	}
	all, err := comm.AllgatherBytes(env.Comm, mine)
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
	failed := map[uint64]bool{}
	for r, b := range all {
		var pl manifestPayload
		if err := json.Unmarshal(b, &pl); err != nil {
			werr = fmt.Errorf("decode rank %d files: %w", r, err)
			continue
		}
		m.Files[r] = pl.Files
		p.total.Written += pl.Data.Written
		p.total.Protected += pl.Data.Protected
		for _, seq := range pl.RmFailed {
			failed[seq] = true
		}
	}
	if p.chain != nil {
		m.DCP = &DCP{Chain: p.chain, BlockSize: p.opts.blockSize, Written: p.total.Written, Protected: p.total.Protected}
	}

	// 3. Renames and directory syncs; rank 0 stages the manifest beside them.
	var staged chan error
	if env.Rank == 0 && werr == nil {
		var raw []byte
		if raw, werr = m.Marshal(); werr == nil {
			staged = make(chan error, 1)
			go func() { staged <- e.stageCopies(m.Seq, raw) }()
		}
	}
	perr := e.publish(p)
	if staged != nil {
		werr = <-staged
	}
	if werr != nil {
		werr = fmt.Errorf("manifest: %w", werr)
	}
	if err := e.agree(errors.Join(perr, werr), "publish checkpoint files"); err != nil {
		if env.Rank == 0 {
			e.removeStaged(m.Seq)
		}
		return nil, fmt.Errorf("%w: %w", ErrVoteFailed, err)
	}

	// 4. The commit: both copies renamed into place.
	if env.Rank == 0 {
		werr = e.renameCopies(m.Seq)
	}
	if err := e.agree(werr, "write manifest"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrVoteFailed, err)
	}
	if env.Rank == 0 {
		// No directory sync needed: a marker that comes back beside a
		// valid manifest (intent) or with nothing left (deletion) is
		// resolved by the next Open.
		rerr := removeIfExists(env.Meta.Driver, env.Meta.Path(PendingName(m.Seq)))
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
	return m, nil
}

// copyPaths returns the drivers and paths of both copies of manifest seq
// (rank 0): the primary, then the replica.
func (e *Engine) copyPaths(seq uint64) ([2]vfd.Driver, [2]string) {
	env := e.env
	return [2]vfd.Driver{env.Meta.Driver, env.Global.Driver},
		[2]string{env.Meta.Path(ManifestName(seq)), env.Global.Path(ReplicaName(seq))}
}

// stageCopies writes both copies of manifest seq under their tmp names
// and syncs them, concurrently; on failure it removes what it wrote
// (rank 0).
func (e *Engine) stageCopies(seq uint64, raw []byte) error {
	ds, ps := e.copyPaths(seq)
	err := runAll([]func() error{
		func() error { return writeSynced(ds[0], ps[0]+TmpSuffix, raw) },
		func() error { return writeSynced(ds[1], ps[1]+TmpSuffix, raw) },
	})
	if err != nil {
		e.removeStaged(seq)
	}
	return err
}

// writeSynced writes data to a new file name and syncs it.
func writeSynced(d vfd.Driver, name string, data []byte) error {
	f, err := vfd.CreateTrunc(d, name)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return errors.Join(err, f.Close())
	}
	return errors.Join(f.Sync(), f.Close())
}

// removeStaged removes the tmp copies of manifest seq, if there (rank
// 0); what is left is removed by the next Open.
func (e *Engine) removeStaged(seq uint64) {
	ds, ps := e.copyPaths(seq)
	for i := range ds {
		if err := removeIfExists(ds[i], ps[i]+TmpSuffix); err != nil {
			e.env.Logger.Warn("removing a staged manifest copy; the next start-up removes it", zap.String("path", ps[i]+TmpSuffix), zap.Error(err))
		}
	}
}

// renameCopies renames both staged copies of manifest seq into place and
// syncs their directories, concurrently: the checkpoint is committed once
// one is durable. On any failure it removes both (rank 0).
func (e *Engine) renameCopies(seq uint64) error {
	ds, ps := e.copyPaths(seq)
	place := func(i int, what string) func() error {
		return func() error {
			if err := ds[i].Rename(ps[i]+TmpSuffix, ps[i]); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := ds[i].SyncDir(path.Dir(ps[i])); err != nil {
				return fmt.Errorf("%s: sync dir of %s: %w", what, ps[i], err)
			}
			return nil
		}
	}
	err := runAll([]func() error{place(0, "manifest"), place(1, "manifest replica")})
	if err != nil {
		// A rename may have happened: make sure the checkpoint is not
		// left committed behind our back.
		e.removeStaged(seq)
		err = errors.Join(err, e.removeCopies(seq))
	}
	return err
}
