package levels

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/vfd"
)

// Retention and removal: superseded checkpoints, deletion markers,
// Delete and Keep.

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
		if e.env.Rank == 0 {
			if e.dropNodes == nil {
				e.dropNodes = map[uint64]int{}
			}
			e.dropNodes[d.Seq] = d.NumNodes()
		}
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
		if err := e.endDeletions(e.dropped); err != nil {
			e.env.Logger.Warn("removing deletion markers; the next start-up removes them", zap.Error(err))
		}
	}
	e.dropped, e.rmFailed = nil, nil
	clear(e.dropNodes) // those left go to the next start-up
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
// node's lowest rank in the node-local area, rank 0 in the global area,
// its parts directories and, with replica, m's manifest replica; a level with a [Remover]
// removes what lies elsewhere. Local to the rank.
func (e *Engine) removeFiles(env *Env, m *Manifest, replica bool) error {
	err := removeElsewhere(e.levels[m.Level], env, m)
	// Synced: the deletion marker may go only once the directories (and
	// the replica) are gone for good, or a crash could bring back files
	// without metadata, or a committed checkpoint without its files. The
	// areas at once: their syncs overlap.
	var rm []func() error
	if nodeLeader(env) {
		rm = append(rm, func() error { return errors.Join(removeDir(env.Local, m.Dir()), e.removeOtherNodes(env, m)) })
	}
	if env.Rank == 0 {
		rm = append(rm, func() error { return removeDir(env.Global, m.Dir()) },
			func() error { return removePartsDirs(env, m.Seq) })
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
		err = e.endDeletion(m.Seq, m.NumNodes())
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
