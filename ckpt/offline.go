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
// of a job that is not running (ftigo rebuild). It takes meta_dir's lock:
// while a job uses the directories it fails with [ErrLocked]. It reads
// the checkpoint metadata in cfg.MetaDir and cfg.GlblDir. It starts an
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
	o := options{local: vfd.Sec2{}, global: vfd.Sec2{}, meta: vfd.Sec2{}}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	cl, err := claimRun(cfg, o, time.Now(), o.logger)
	if err != nil {
		return nil, fmt.Errorf("ckpt: offline rebuild: %w", err)
	}
	defer cl.Close()
	newest, err := newestManifest(o.meta, o.global, cfg, cl.run)
	if err != nil {
		return nil, err
	}
	cfg.NodeSize, cfg.GroupSize = newest.NodeSize, newest.GroupSize
	nodes := newest.Nodes
	// Every rank runs in this process and nothing is restored: the data
	// is verified (and rebuilt) on storage, never kept in memory.
	opts = append(slices.Clone(opts), WithNodeID(func(rank int) string { return nodes[rank/cfg.NodeSize] }),
		func(o *options) { o.lockHeld, o.run = true, cl.run }, WithRestartImage(0))
	var got *levels.Manifest
	err = comm.Run(newest.Ranks, func(c comm.Comm) error {
		r, err := Init(cfg, c, opts...)
		if err != nil {
			return err
		}
		defer r.Close()
		if c.Rank() == 0 {
			got = r.from
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ckpt: offline rebuild: %w", err)
	}
	return got, nil
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
	if err := levels.LostError(scan); err != nil {
		return nil, fmt.Errorf("ckpt: %w", err)
	}
	for i := len(scan) - 1; i >= 0; i-- {
		if scan[i].State() == levels.SeqCommitted {
			return scan[i].Valid().M, nil
		}
	}
	return nil, fmt.Errorf("%w in %s", levels.ErrNoCheckpoint, cfg.MetaDir)
}
