package ckpt

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

func TestRebuildOffline(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 2)
	cfg.GroupSize = 2
	require.NoError(t, world(t, 8, cfg, nil, func(r *Runtime) error {
		x := []int64{int64(r.c.Rank()) * 11}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		return r.Checkpoint(3, 2)
	}))
	// Node 1 dies with its disk.
	node1 := filepath.Join(root, "local", "node0001")
	require.NoError(t, vfd.Sec2{}.RemoveAll(node1))

	off := cfg
	off.NodeSize, off.GroupSize, off.LocalTest = 0, 0, false // taken from the manifest
	m, err := rebuildOffline(off, WithLogger(zaptest.NewLogger(t)))
	require.NoError(t, err)
	assert.Equal(t, int64(3), m.ID)
	assert.Equal(t, levels.L2, m.Level)
	// The lost files are back and verify against the manifest.
	for r := 2; r <= 3; r++ {
		f, ok := m.DataFile(r)
		require.True(t, ok)
		require.NoError(t, levels.VerifyFile(levels.Store{Driver: vfd.Sec2{}, Dir: node1}, f), "rank %d", r)
	}

	// Nothing at all: a clear error.
	_, err = RebuildOffline(testConfig(t.TempDir(), 1))
	require.Error(t, err)
	empty := t.TempDir()
	require.NoError(t, vfd.Sec2{}.MkdirAll(filepath.Join(empty, "meta"), 0o755))
	_, err = RebuildOffline(testConfig(empty, 1))
	require.True(t, errors.Is(err, levels.ErrNoCheckpoint), fmt.Sprint(err))
}

// TestOfflineChoosesWhatRestartChooses: a newer manifest whose content
// names another sequence number (and another world: one rank), with no
// replica and no marker, is lost metadata for the offline rebuild exactly
// as for the runtime's start-up: both refuse, naming the file, and change
// nothing. Once it is moved aside, both pick the same checkpoint and the
// offline world has its shape.
func TestOfflineChoosesWhatRestartChooses(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		x := []int32{int32(r.c.Rank()) + 40}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		return r.Checkpoint(9, 1)
	}))
	meta := filepath.Join(root, "meta")
	raw, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join(meta, levels.ManifestName(1)))
	require.NoError(t, err)
	bogus, err := levels.ParseManifest("m", raw)
	require.NoError(t, err)
	bogus.Seq, bogus.ID, bogus.Ranks = 2, 10, 1
	bogus.Files, bogus.Nodes = bogus.Files[:1], bogus.Nodes[:1]
	b, err := bogus.Marshal()
	require.NoError(t, err)
	bad := filepath.Join(meta, levels.ManifestName(5))
	require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, bad, b))

	_, err = newestManifest(vfd.Sec2{}, vfd.Sec2{}, cfg)
	require.ErrorIs(t, err, ErrMetadataLost)
	assert.Contains(t, err.Error(), "a copy is foreign ("+bad+" at offset 0: ")

	off := cfg
	off.NodeSize, off.GroupSize, off.LocalTest = 0, 0, false
	_, err = RebuildOffline(off, WithLogger(zaptest.NewLogger(t)))
	require.ErrorIs(t, err, ErrMetadataLost)
	for _, err := range initErrors(t, 2, cfg) {
		require.ErrorIs(t, err, ErrMetadataLost)
		assert.Contains(t, err.Error(), bad)
	}
	got, err := vfd.ReadFile(vfd.Sec2{}, bad)
	require.NoError(t, err)
	assert.Equal(t, b, got, "refusing changes nothing")

	// Moved aside by the user: both choose checkpoint 1 again.
	require.NoError(t, vfd.Sec2{}.Rename(bad, bad+".aside"))
	m, err := newestManifest(vfd.Sec2{}, vfd.Sec2{}, cfg)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), m.Seq)
	assert.Equal(t, 2, m.Ranks)
	info, err := RebuildOffline(off, WithLogger(zaptest.NewLogger(t)))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.Seq)
	assert.Equal(t, int64(9), info.ID)
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		if got := r.Recovered(); got == nil || got.Seq != 1 || got.ID != 9 {
			return fmt.Errorf("restart chose %+v", got)
		}
		var x []int32
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		if err := r.Recover(); err != nil {
			return err
		}
		if len(x) != 1 || x[0] != int32(r.c.Rank())+40 {
			return fmt.Errorf("rank %d recovered %v", r.c.Rank(), x)
		}
		return nil
	}))
}

// TestRebuildOfflineReadsTheData: the offline rebuild verifies every byte
// (no Recover follows to hash the data while reading it), so a flipped
// data byte of an L1 checkpoint, whose header and metadata are intact,
// makes it unrecoverable.
func TestRebuildOfflineReadsTheData(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		x := make([]float64, 2000)
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		return r.Checkpoint(1, 1)
	}))
	off := cfg
	off.NodeSize, off.GroupSize, off.LocalTest = 0, 0, false
	_, err := RebuildOffline(off, WithLogger(zaptest.NewLogger(t)))
	require.NoError(t, err)
	p := filepath.Join(root, "local", "node0001", levels.RankFileName(levels.CheckpointDir(1), levels.RoleData, 1))
	require.NoError(t, flipData(p, 0))
	_, err = RebuildOffline(off, WithLogger(zaptest.NewLogger(t)))
	require.ErrorIs(t, err, ErrUnrecoverable)
}
