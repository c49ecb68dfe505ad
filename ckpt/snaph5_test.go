package ckpt

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// TestSnapshotH5L4: in snapshot mode an L4 checkpoint with ckpt_io = 5
// is taken from the staging copy too: Checkpoint returns before it is
// committed, the background workers write the one HDF5 file over their
// communicator, and no L1 checkpoint is made on the way. The solver
// clears its variables as soon as Checkpoint returns: the file (read by
// h5py, when there) and the restarts, on the same and on another rank
// count, hold the values at the call.
func TestSnapshotH5L4(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.Snapshot, cfg.CkptIO = true, 5
	g := newPosterGate()
	require.NoError(t, world(t, 4, cfg, []Option{g.option()}, func(r *Runtime) error {
		field, ids, owner, err := reshapeWriter(r, 2)
		if err != nil {
			return err
		}
		if err := r.Checkpoint(3, 4); err != nil {
			return err
		}
		if r.post.running == nil || r.last != nil {
			return fmt.Errorf("rank %d: checkpoint 3 was committed on the solver's path", r.c.Rank())
		}
		clear(field)
		clear(ids)
		owner[0] = -1
		if err := r.c.Barrier(); err != nil {
			return err
		}
		if r.c.Rank() == 0 {
			g.open()
		}
		if err := r.CheckpointWait(); err != nil {
			return err
		}
		if tm := r.CheckpointTimes(); tm.ID != 3 || !tm.Durable {
			return fmt.Errorf("rank %d: times %+v", r.c.Rank(), tm)
		}
		cm := r.eng.Committed()
		if len(cm) != 1 || cm[0].ID != 3 || cm[0].Level != levels.L4 {
			return fmt.Errorf("rank %d: committed %v, want checkpoint 3 at L4 alone", r.c.Rank(), cm)
		}
		f, ok := cm[0].DataFile(r.c.Rank())
		if !ok || f.Attrs[levels.AttrDigest] != levels.DigestH5 {
			return fmt.Errorf("rank %d: the L4 is not the HDF5 file: %+v", r.c.Rank(), f)
		}
		return nil
	}))
	h5pyCheck(t, filepath.Join(cfg.GlobalDir(runOf(t, cfg)), "ckpt00000001", levels.H5Name), 2, 4)
	// Same count, the local data lost: from the file.
	lose(t, vfd.Sec2{}, cfg, 4)
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		field, ids, owner, err := reshapeWriter(r, 2)
		if err != nil {
			return err
		}
		want := []any{slices.Clone(field), slices.Clone(ids), slices.Clone(owner)}
		clear(field)
		clear(ids)
		owner[0] = -1
		if err := r.Recover(); err != nil {
			return err
		}
		if !assert.ObjectsAreEqual(want, []any{field, ids, owner}) {
			return fmt.Errorf("rank %d: data differs", r.c.Rank())
		}
		return nil
	}))
	// Another count: from the same file.
	require.NoError(t, world(t, 6, cfg, nil, func(r *Runtime) error { return reshapeReader(r, 2, 4, false) }))
}
