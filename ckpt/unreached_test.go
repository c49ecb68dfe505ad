package ckpt

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// TestDeletionOnUnreachedNode: a checkpoint written on 4 nodes and
// deleted by a job on 3, which cannot see the fourth node's storage (as
// node-local disks of a cluster), leaves an intent marker naming that
// node instead of no metadata at all. A later job on all 4 nodes removes
// the files there and the marker, and starts (without the marker it
// would refuse the files as lost metadata).
func TestDeletionOnUnreachedNode(t *testing.T) {
	t.Run("commit", func(t *testing.T) { deletionOnUnreachedNode(t, true) })
	t.Run("start-up", func(t *testing.T) { deletionOnUnreachedNode(t, false) })
}

func deletionOnUnreachedNode(t *testing.T, atCommit bool) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	write := func(level int, ids ...int) func(r *Runtime) error {
		return func(r *Runtime) error {
			v := []float64{float64(r.c.Rank()), 0}
			if err := Protect(r, 1, &v); err != nil {
				return err
			}
			for _, id := range ids {
				v[1] = float64(id)
				if err := r.Checkpoint(int64(id), level); err != nil {
					return err
				}
			}
			return nil
		}
	}
	cfg.GroupSize = 4 // an L2 checkpoint: rank 3's data also on node 0
	require.NoError(t, world(t, 4, cfg, nil, write(2, 1)))
	cfg.GroupSize = 1
	run := runOf(t, cfg)
	node3 := cfg.NodeDir(3, run)
	old := filepath.Join(node3, "ckpt00000001")
	_, err := os.Stat(old)
	require.NoError(t, err, "checkpoint 1 on node 3")

	// Node 3's storage out of reach while a job on 3 nodes supersedes
	// checkpoint 1.
	hidden := filepath.Join(root, "hidden")
	require.NoError(t, os.Rename(filepath.Dir(node3), hidden))
	last := 2
	if atCommit {
		// Checkpoint 3's commit ends checkpoint 1's deletion.
		last = 3
		require.NoError(t, world(t, 3, cfg, nil, write(4, 2, 3)))
	} else {
		// The deletion marker stays; the next start-up on 3 nodes ends it.
		require.NoError(t, world(t, 3, cfg, nil, write(4, 2)))
		_, err = os.Stat(filepath.Join(cfg.MetaDir, levels.DeletingName(1)))
		require.NoError(t, err, "checkpoint 1's deletion marker waits for the next start-up")
		require.NoError(t, world(t, 3, cfg, nil, func(r *Runtime) error { return nil }))
	}
	require.NoError(t, os.Rename(hidden, filepath.Dir(node3)))

	raw, err := os.ReadFile(filepath.Join(cfg.MetaDir, levels.PendingName(1)))
	require.NoError(t, err, "the intent marker replacing checkpoint 1's deletion marker")
	assert.Equal(t, "ftigo-pending 1\nnodes 3-3\n", string(raw))
	_, err = os.Stat(filepath.Join(cfg.MetaDir, levels.DeletingName(1)))
	assert.ErrorIs(t, err, os.ErrNotExist, "the deletion marker is gone")
	_, err = os.Stat(old)
	require.NoError(t, err, "node 3 still holds checkpoint 1's files")

	sec2 := func(dir string) levels.Store { return levels.Store{Driver: vfd.Sec2{}, Dir: dir} }
	var locals []levels.Store
	for k := range 4 {
		locals = append(locals, sec2(cfg.NodeDir(k, run)))
	}
	scan, err := levels.ScanRun(run, sec2(cfg.MetaDir), sec2(filepath.Join(cfg.GlblDir, run)), locals...)
	require.NoError(t, err)
	seen := false
	for _, s := range scan {
		if s.Seq == 1 {
			seen = true
			assert.Equal(t, levels.SeqUncommitted, s.State(), "checkpoint 1 is an uncommitted leftover, not lost metadata")
		}
	}
	assert.True(t, seen, "the scan finds checkpoint 1")

	// A job on all 4 nodes cleans node 3, drops the marker and restarts
	// (from the 3 ranks' last checkpoint: a reshape restart).
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		if r.Status() != Restart || r.OldRanks() != 3 {
			return fmt.Errorf("rank %d: status %v from %d ranks, want a restart from 3", r.c.Rank(), r.Status(), r.OldRanks())
		}
		return nil
	}))
	scan, err = levels.ScanRun(run, sec2(cfg.MetaDir), sec2(filepath.Join(cfg.GlblDir, run)), locals...)
	require.NoError(t, err)
	var seqs []uint64
	for _, s := range scan {
		seqs = append(seqs, s.Seq)
	}
	assert.Equal(t, []uint64{uint64(last)}, seqs, "only the last checkpoint is left")
	_, err = os.Stat(old)
	assert.ErrorIs(t, err, os.ErrNotExist, "checkpoint 1's files on node 3 are removed")
	_, err = os.Stat(filepath.Join(cfg.MetaDir, levels.PendingName(1)))
	assert.ErrorIs(t, err, os.ErrNotExist, "the intent marker is removed")
	ents, err := os.ReadDir(cfg.MetaDir)
	require.NoError(t, err)
	for _, e := range ents {
		assert.False(t, strings.HasPrefix(e.Name(), "ckpt00000001"), "left in meta_dir: %s", e.Name())
	}
}
