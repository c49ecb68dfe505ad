package ckpt

import (
	"fmt"
	"slices"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/levels"
	"github.com/ftigo/ftigo/vfd"
)

// RebuildOffline checks and rebuilds the newest recoverable checkpoint of
// a job that is not running (ftigo rebuild): it reads the manifests in
// cfg.MetaDir, starts an in-process world with as many ranks as the newest
// checkpoint had, each placed on the node the manifest names, and runs
// Init on every rank, which verifies every file and rebuilds lost ones
// from redundancy exactly as a restart would. It returns the manifest of
// the checkpoint a restart would use. All node-local directories must be
// reachable from this machine through the driver (WithDriver/WithDrivers).
func RebuildOffline(cfg Config, opts ...Option) (*levels.Manifest, error) {
	o := options{meta: vfd.Sec2{}}
	for _, opt := range opts {
		opt(&o)
	}
	newest, err := newestManifest(o.meta, cfg.MetaDir)
	if err != nil {
		return nil, err
	}
	cfg.NodeSize, cfg.GroupSize = newest.NodeSize, newest.GroupSize
	nodes := newest.Nodes
	opts = append(slices.Clone(opts), WithNodeID(func(rank int) string { return nodes[rank/cfg.NodeSize] }),
		func(o *options) { o.verifyAll = true }) // nothing reads the data after Init here
	var got *levels.Manifest
	err = comm.Run(newest.Ranks, func(c comm.Comm) error {
		r, err := Init(cfg, c, opts...)
		if err != nil {
			return err
		}
		defer r.eng.Wait()
		if c.Rank() == 0 {
			got = r.Recovered()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ckpt: offline rebuild: %w", err)
	}
	return got, nil
}

// newestManifest returns the newest manifest in dir that a restart would
// accept: the same scan and checks as the runtime's start-up
// (levels.ScanManifests), so the world is shaped like the checkpoint Init
// will find.
func newestManifest(d vfd.Driver, dir string) (*levels.Manifest, error) {
	ms, err := levels.ScanManifests(levels.Store{Driver: d, Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("ckpt: %w", err)
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Err == nil {
			return ms[i].M, nil
		}
	}
	return nil, fmt.Errorf("%w in %s", levels.ErrNoCheckpoint, dir)
}
