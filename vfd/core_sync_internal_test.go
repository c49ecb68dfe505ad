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

// TestCoreSyncWorkIsTheWrites counts the pages a file's Sync freezes:
// after a file of many pages was synced once, a write of one byte leaves
// one page to sync, whatever the file's size, and the crash clone holds
// exactly the synced bytes (16,384 in-process ranks each syncing its task
// of one shared L4 container cost O(N^2) when Sync froze every page).
func TestCoreSyncWorkIsTheWrites(t *testing.T) {
	c := NewCore()
	require.NoError(t, c.MkdirAll("d", 0o755))
	f, err := CreateTrunc(c, "d/big")
	require.NoError(t, err)
	require.NoError(t, c.SyncDir("d"))
	require.NoError(t, c.SyncDir("/"))
	const pages = 200
	_, err = f.WriteAt(make([]byte, pages*corePageSize), 0)
	require.NoError(t, err)
	n := f.(*coreFile).n
	assert.Len(t, n.data.dirty, pages)
	require.NoError(t, f.Sync())
	assert.Empty(t, n.data.dirty)

	_, err = f.WriteAt([]byte{7}, 100*corePageSize+5)
	require.NoError(t, err)
	assert.Equal(t, []int{100}, n.data.dirty, "one page to sync, not the file's 200")
	_, err = f.WriteAt([]byte{8}, 100*corePageSize+6)
	require.NoError(t, err)
	assert.Equal(t, []int{100}, n.data.dirty, "a page written twice is listed once")
	// Unsynced: lost in a crash.
	_, err = f.WriteAt([]byte{9, 9}, pages*corePageSize)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	assert.Empty(t, n.data.dirty)
	assert.Equal(t, n.data.pages, n.synced.pages)
	assert.Equal(t, int64(pages*corePageSize+2), n.synced.size)

	_, err = f.WriteAt([]byte{1}, 3)
	require.NoError(t, err)
	cl := c.CrashClone()
	got, err := ReadFile(cl, "d/big")
	require.NoError(t, err)
	want := make([]byte, pages*corePageSize+2)
	want[100*corePageSize+5], want[100*corePageSize+6] = 7, 8
	want[pages*corePageSize], want[pages*corePageSize+1] = 9, 9
	assert.Equal(t, want, got, "the clone has the synced bytes, not the unsynced write at 3")

	// A shrink then a sync: the synced image follows the truncation.
	require.NoError(t, f.Truncate(corePageSize+1))
	require.NoError(t, f.Sync())
	got, err = ReadFile(c.CrashClone(), "d/big")
	require.NoError(t, err)
	want = make([]byte, corePageSize+1)
	want[3] = 1
	assert.Equal(t, want, got)
	assert.Len(t, n.synced.pages, 2)
	require.NoError(t, f.Close())
}
