package ckpt

import (
	"errors"
	"fmt"
	"io/fs"
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
	node1 := filepath.Join(cfg.NodeDir(1, runOf(t, cfg)))
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
	if bogus.Files != nil { // a whole manifest; a root lists no files
		bogus.Files, bogus.Nodes = bogus.Files[:1], bogus.Nodes[:1]
	}
	b, err := bogus.Marshal()
	require.NoError(t, err)
	bad := filepath.Join(meta, levels.ManifestName(5))
	require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, bad, b))

	_, err = newestManifest(vfd.Sec2{}, vfd.Sec2{}, cfg, runOf(t, cfg))
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
	m, err := newestManifest(vfd.Sec2{}, vfd.Sec2{}, cfg, runOf(t, cfg))
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
	p := filepath.Join(cfg.NodeDir(1, runOf(t, cfg)), levels.RankFileName(levels.CheckpointDir(1), levels.RoleData, 1))
	require.NoError(t, flipData(p, 0))
	_, err = RebuildOffline(off, WithLogger(zaptest.NewLogger(t)))
	require.ErrorIs(t, err, ErrUnrecoverable)
}

// TestRebuildEveryDamagedCheckpoint: an L3 checkpoint and a newer L2 one
// (which does not supersede it), each with a lost data file: the offline
// rebuild repairs both, not only the newest; named by its sequence
// number, it repairs that one only. A newer L1 checkpoint with a lost
// file stays damaged, reported as such, while the older ones are
// rebuilt and the restart's choice is named.
func TestRebuildEveryDamagedCheckpoint(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	cfg.GroupSize = 4
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		x := make([]int64, 3000)
		for i := range x {
			x[i] = int64(r.c.Rank()*100000 + i)
		}
		if err := errors.Join(Protect(r, 0, &x), r.Checkpoint(1, 3)); err != nil {
			return err
		}
		x[7]++
		return r.Checkpoint(2, 2)
	}))
	d := vfd.Sec2{}
	data := func(seq uint64, rank int) string {
		return filepath.Join(cfg.NodeDir(rank, runOf(t, cfg)), levels.RankFileName(levels.CheckpointDir(seq), levels.RoleData, rank))
	}
	lose := func(seq uint64, rank int) []byte {
		b, err := vfd.ReadFile(d, data(seq, rank))
		require.NoError(t, err)
		require.NoError(t, d.Remove(data(seq, rank)))
		return b
	}
	same := func(seq uint64, rank int, want []byte) {
		got, err := vfd.ReadFile(d, data(seq, rank))
		require.NoError(t, err, "seq %d rank %d rebuilt", seq, rank)
		assert.Equal(t, want, got, "seq %d rank %d bit for bit", seq, rank)
	}
	off := cfg
	off.NodeSize, off.GroupSize, off.LocalTest = 0, 0, false

	b1, b2 := lose(1, 2), lose(2, 1)
	reps, err := RebuildCheckpointsOffline(off, 0, WithLogger(zaptest.NewLogger(t)))
	require.NoError(t, err)
	require.Len(t, reps, 2)
	assert.Equal(t, RebuildReport{Checkpoint: CheckpointInfo{ID: 2, Level: 2, Seq: 2, Ranks: 4}, Restart: true}, reps[0])
	assert.Equal(t, RebuildReport{Checkpoint: CheckpointInfo{ID: 1, Level: 3, Seq: 1, Ranks: 4}}, reps[1])
	same(1, 2, b1)
	same(2, 1, b2)

	// Named: that one only.
	b1, b2 = lose(1, 3), lose(2, 0)
	reps, err = RebuildCheckpointsOffline(off, 1, WithLogger(zaptest.NewLogger(t)))
	require.NoError(t, err)
	require.Len(t, reps, 1)
	assert.Equal(t, uint64(1), reps[0].Checkpoint.Seq)
	require.NoError(t, reps[0].Err)
	same(1, 3, b1)
	_, err = d.Stat(data(2, 0))
	require.ErrorIs(t, err, fs.ErrNotExist, "checkpoint 2 was not asked for")
	_, err = RebuildCheckpointsOffline(off, 9)
	require.ErrorIs(t, err, levels.ErrNoCheckpoint)
	assert.Contains(t, err.Error(), levels.ManifestName(9)+" is not a committed checkpoint")
	_, err = RebuildCheckpointsOffline(off, 2, WithLogger(zaptest.NewLogger(t)))
	require.NoError(t, err)
	same(2, 0, b2)

	// A newer L1 checkpoint that lost a file: no redundancy to rebuild it.
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		x := make([]int64, 3000)
		if err := errors.Join(Protect(r, 0, &x), r.Recover()); err != nil {
			return err
		}
		return r.Checkpoint(3, 1)
	}))
	lose(3, 0)
	b1 = lose(1, 0)
	reps, err = RebuildCheckpointsOffline(off, 0, WithLogger(zaptest.NewLogger(t)))
	require.NoError(t, err)
	require.Len(t, reps, 3)
	assert.Equal(t, uint64(3), reps[0].Checkpoint.Seq)
	require.ErrorIs(t, reps[0].Err, levels.ErrMissingFile)
	assert.False(t, reps[0].Restart)
	assert.True(t, reps[1].Restart, "checkpoint 2 is what a restart uses")
	require.NoError(t, reps[1].Err)
	require.NoError(t, reps[2].Err)
	same(1, 0, b1)
}
