package ckpt

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/ftigo/ftigo/levels"
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
	m, err := RebuildOffline(off, WithLogger(zaptest.NewLogger(t)))
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
