package ckpt

import (
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// RebuildOffline checks and rebuilds the newest recoverable checkpoint
// of a job that is not running (ftigo rebuild). It takes the run's locks
// (meta_dir's and the run directory's): while a job uses them it fails
// with [ErrLocked]. The run is the one meta_dir names (cfg.Run, when set,
// must be it, or meta_dir names none: see [Config.Run]). It reads the
// checkpoint metadata in cfg.MetaDir and the run's directory of
// cfg.GlblDir. It starts an
// in-process world with as many ranks as that checkpoint had, each on the
// node its manifest names. Init runs on every rank, exactly as on a
// restart: it repairs the metadata, verifies every file and rebuilds lost
// ones from redundancy. RebuildOffline returns the checkpoint a restart
// would use. Every node-local directory must be reachable from this
// machine through the driver (WithDriver/WithDrivers).
func RebuildOffline(cfg Config, opts ...Option) (*CheckpointInfo, error) {
	m, err := rebuildOffline(cfg, opts...)
	return infoOf(m), err
}

// rebuildOffline is RebuildOffline, returning the checkpoint's manifest.
func rebuildOffline(cfg Config, opts ...Option) (*levels.Manifest, error) {
	var got *levels.Manifest
	err := offlineWorld(cfg, 0, false, opts, func(r *Runtime) {
		if r.c.Rank() == 0 {
			got = r.from
		}
	})
	return got, err
}

// offlineWorld takes the run's locks and runs fn on every rank of an
// in-process world shaped like the newest committed checkpoint (seq 0)
// or checkpoint seq, each rank on the node its manifest names, after
// Init: a restart, or with offline only the opening of the checkpoints.
// Every rank runs in this process and nothing is restored: the data is
// verified (and rebuilt) on storage, never kept in memory.
func offlineWorld(cfg Config, seq uint64, offline bool, opts []Option, fn func(r *Runtime)) error {
	o := options{local: vfd.Sec2{}, global: vfd.Sec2{}, meta: vfd.Sec2{}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	cl, err := claimRun(cfg, o, time.Now(), o.logger)
	if err != nil {
		return fmt.Errorf("ckpt: offline rebuild: %w", err)
	}
	defer cl.Close()
	shape, err := newestManifest(o.meta, o.global, cfg, cl.run)
	if err == nil && seq != 0 {
		shape, err = committedManifest(o.meta, o.global, cfg, cl.run, seq)
	}
	if err != nil {
		return err
	}
	cfg.NodeSize, cfg.GroupSize = shape.NodeSize, shape.GroupSize
	if offline {
		cfg.Head, cfg.KeepHeadsAlive, cfg.Async = false, false, [5]bool{} // no heads, no background work
	}
	nodes := shape.Nodes
	opts = append(slices.Clone(opts), WithNodeID(func(rank int) string { return nodes[rank/cfg.NodeSize] }),
		func(o *options) { o.lockHeld, o.run, o.offline = true, cl.run, offline }, WithRestartImage(0))
	err = comm.Run(shape.Ranks, func(c comm.Comm) error {
		r, err := Init(cfg, c, opts...)
		if err != nil {
			return err
		}
		defer r.Close()
		fn(r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("ckpt: offline rebuild: %w", err)
	}
	return nil
}

// newestManifest returns the manifest of the newest committed checkpoint
// by the rules of the runtime's start-up (levels.ScanCheckpoints and
// SeqScan.State), so the world is shaped like the checkpoint Init will
// find. Lost metadata is refused here already.
func newestManifest(meta, global vfd.Driver, cfg Config, run string) (*levels.Manifest, error) {
	scan, err := levels.ScanRun(run, levels.Store{Driver: meta, Dir: cfg.MetaDir}, levels.Store{Driver: global, Dir: cfg.GlobalDir(run)})
	if err != nil {
		return nil, fmt.Errorf("ckpt: %w", err)
	}
	if err := levels.LostErrorIn(scan, levels.LostDirs{Meta: cfg.MetaDir, Global: cfg.GlobalDir(run), Local: cfg.NodeDir(0, run)}); err != nil {
		return nil, fmt.Errorf("ckpt: %w", err)
	}
	for i := len(scan) - 1; i >= 0; i-- {
		if scan[i].State() == levels.SeqCommitted {
			return scan[i].Valid().M, nil
		}
	}
	return nil, fmt.Errorf("%w in %s", levels.ErrNoCheckpoint, cfg.MetaDir)
}

// RebuildReport is what the offline rebuild did with one checkpoint.
type RebuildReport struct {
	Checkpoint CheckpointInfo
	// Restart says a restart would use this checkpoint: the newest one
	// that could be rebuilt (only when every committed one was tried).
	Restart bool
	// Err is nil when every file of the checkpoint was verified and the
	// lost or damaged ones rebuilt; otherwise it says why the checkpoint
	// stays damaged.
	Err error
}

// RebuildCheckpointsOffline checks and rebuilds every committed
// checkpoint of a job that is not running (ftigo rebuild), newest first,
// or with seq not 0 only the checkpoint of that sequence number. It takes
// the run's locks, as [RebuildOffline] does. It starts an in-process
// world shaped like the newest checkpoint (or the one named), each rank
// on the node its manifest names. Every rank opens the checkpoints as a
// restart does, which repairs the metadata. Then each checkpoint is
// recovered in turn on storage: every file verified, lost ones rebuilt
// from the level's redundancy (a checkpoint of another shape by the
// verification pass a reshaping restart runs). The error is for what
// prevents the attempt (a lock, lost metadata, no such checkpoint);
// a checkpoint that stays damaged has its report's Err set.
func RebuildCheckpointsOffline(cfg Config, seq uint64, opts ...Option) ([]RebuildReport, error) {
	var reps []RebuildReport
	err := offlineWorld(cfg, seq, true, opts, func(r *Runtime) {
		got := r.rebuildAll(seq)
		if r.c.Rank() == 0 {
			reps = got
		}
	})
	if err != nil {
		return nil, err
	}
	return reps, nil
}

// rebuildAll recovers every committed checkpoint (or the one of sequence
// number seq) on storage, newest first, and reports each. Collective:
// the reports are the same on every rank. The whole ladder first, as a
// restart runs it (it settles disagreeing manifest copies), then the
// older checkpoints one by one.
func (r *Runtime) rebuildAll(seq uint64) []RebuildReport {
	committed := r.eng.Committed()
	done := map[uint64]error{}
	restart := uint64(0)
	if seq == 0 {
		if m, _, err := r.eng.Recover(); err == nil {
			done[m.Seq], restart = nil, m.Seq
		}
		for _, s := range r.eng.Skipped() {
			done[s.Manifest.Seq] = s.Err
		}
		committed = r.eng.Committed() // Recover may have taken the other manifest copy
	}
	var reps []RebuildReport
	for i := len(committed) - 1; i >= 0; i-- {
		m := committed[i]
		if seq != 0 && m.Seq != seq {
			continue
		}
		err, tried := done[m.Seq]
		if !tried {
			_, err = r.eng.RecoverOne(m)
		}
		reps = append(reps, RebuildReport{Checkpoint: *infoOf(m), Restart: m.Seq == restart, Err: err})
	}
	return reps
}

// committedManifest returns the manifest of committed checkpoint seq, by
// the rules of the runtime's start-up.
func committedManifest(meta, global vfd.Driver, cfg Config, run string, seq uint64) (*levels.Manifest, error) {
	scan, err := levels.ScanRun(run, levels.Store{Driver: meta, Dir: cfg.MetaDir}, levels.Store{Driver: global, Dir: cfg.GlobalDir(run)})
	if err != nil {
		return nil, fmt.Errorf("ckpt: %w", err)
	}
	for _, s := range scan {
		if s.State() == levels.SeqCommitted && s.Valid().M.Seq == seq {
			return s.Valid().M, nil
		}
	}
	return nil, fmt.Errorf("ckpt: offline rebuild: %w: %s is not a committed checkpoint of %s", levels.ErrNoCheckpoint, levels.ManifestName(seq), cfg.MetaDir)
}
