package vfd

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCoreSyncDirWorkIsTheChanges counts the entries a SyncDir applies:
// after a directory of many files was synced once, the next SyncDir
// applies only the one entry created since, whatever the directory's
// size (16,384 in-process ranks each syncing a shared directory cost
// O(N^2) when SyncDir copied every entry).
func TestCoreSyncDirWorkIsTheChanges(t *testing.T) {
	c := NewCore()
	require.NoError(t, c.MkdirAll("d", 0o755))
	for i := range 1000 {
		create(t, c, fmt.Sprintf("d/f%04d", i))
	}
	d, err := c.walk(splitPath("d"))
	require.NoError(t, err)
	assert.Len(t, d.changed, 1000)
	require.NoError(t, c.SyncDir("d"))
	assert.Empty(t, d.changed)
	assert.Len(t, d.syncedKids, 1000)

	create(t, c, "d/new")
	require.NoError(t, c.Remove("d/f0000"))
	assert.Len(t, d.changed, 2, "a SyncDir now has two entries to apply, not the directory's 1000")
	require.NoError(t, c.SyncDir("d"))
	assert.Len(t, d.syncedKids, 1000)
	assert.Contains(t, d.syncedKids, "new")
	assert.NotContains(t, d.syncedKids, "f0000")
}

func create(t *testing.T, c *Core, name string) {
	t.Helper()
	f, err := CreateTrunc(c, name)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
