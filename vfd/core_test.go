package vfd_test

import (
	"bytes"
	"io"
	"io/fs"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

func writeFile(t *testing.T, d vfd.Driver, name string, data []byte, sync bool) vfd.File {
	t.Helper()
	f, err := vfd.CreateTrunc(d, name)
	require.NoError(t, err)
	_, err = f.WriteAt(data, 0)
	require.NoError(t, err)
	if sync {
		require.NoError(t, f.Sync())
	}
	return f
}

func readAll(t *testing.T, d vfd.Driver, name string) []byte {
	t.Helper()
	b, err := vfd.ReadFile(d, name)
	require.NoError(t, err)
	return b
}

func TestCoreCrashCloneKeepsExactlySyncedBytes(t *testing.T) {
	c := vfd.NewCore()
	require.NoError(t, c.MkdirAll("d", 0o755))
	require.NoError(t, c.SyncDir("/"))
	f := writeFile(t, c, "d/f", []byte("hello"), true)
	require.NoError(t, c.SyncDir("d"))
	_, err := f.WriteAt([]byte(" world"), 5)
	require.NoError(t, err)

	clone := c.CrashClone()
	assert.Equal(t, []byte("hello"), readAll(t, clone, "d/f"))
	assert.Equal(t, []byte("hello world"), readAll(t, c, "d/f"), "the original is unchanged")

	require.NoError(t, f.Sync())
	assert.Equal(t, []byte("hello world"), readAll(t, c.CrashClone(), "d/f"))
	assert.Equal(t, []byte("hello"), readAll(t, clone, "d/f"), "an earlier clone is independent")

	require.NoError(t, f.Truncate(2))
	assert.Equal(t, []byte("hello world"), readAll(t, c.CrashClone(), "d/f"), "truncate is not durable before sync")
	require.NoError(t, f.Close())
}

func TestCoreCrashCloneDirectoryEntries(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, c *vfd.Core)
		want  map[string]string // path -> content; "" content means exists empty
		gone  []string
	}{
		{
			name: "create without SyncDir vanishes",
			setup: func(t *testing.T, c *vfd.Core) {
				require.NoError(t, writeFile(t, c, "a", []byte("x"), true).Close())
			},
			gone: []string{"a"},
		},
		{
			name: "create with SyncDir but no data sync is empty",
			setup: func(t *testing.T, c *vfd.Core) {
				require.NoError(t, writeFile(t, c, "a", []byte("x"), false).Close())
				require.NoError(t, c.SyncDir("."))
			},
			want: map[string]string{"a": ""},
		},
		{
			name: "rename before SyncDir keeps the old name",
			setup: func(t *testing.T, c *vfd.Core) {
				require.NoError(t, writeFile(t, c, "a.tmp", []byte("new"), true).Close())
				require.NoError(t, c.SyncDir("/"))
				require.NoError(t, c.Rename("a.tmp", "a"))
			},
			want: map[string]string{"a.tmp": "new"},
			gone: []string{"a"},
		},
		{
			name: "rename after SyncDir is durable and replaces",
			setup: func(t *testing.T, c *vfd.Core) {
				require.NoError(t, vfd.WriteFileAtomic(c, "a", []byte("old")))
				require.NoError(t, writeFile(t, c, "a.tmp", []byte("new"), true).Close())
				require.NoError(t, c.Rename("a.tmp", "a"))
				require.NoError(t, c.SyncDir("/"))
			},
			want: map[string]string{"a": "new"},
			gone: []string{"a.tmp"},
		},
		{
			name: "remove without SyncDir comes back",
			setup: func(t *testing.T, c *vfd.Core) {
				require.NoError(t, vfd.WriteFileAtomic(c, "a", []byte("keep")))
				require.NoError(t, c.Remove("a"))
			},
			want: map[string]string{"a": "keep"},
		},
		{
			name: "a second SyncDir applies only what changed since the first",
			setup: func(t *testing.T, c *vfd.Core) {
				require.NoError(t, vfd.WriteFileAtomic(c, "a", []byte("one")))
				require.NoError(t, vfd.WriteFileAtomic(c, "b", []byte("two")))
				require.NoError(t, c.Remove("a"))
				require.NoError(t, writeFile(t, c, "c", []byte("three"), true).Close())
				require.NoError(t, c.SyncDir("/"))
				require.NoError(t, c.Remove("c"))
			},
			want: map[string]string{"b": "two", "c": "three"},
			gone: []string{"a"},
		},
		{
			name: "RemoveAll of the root then SyncDir leaves nothing",
			setup: func(t *testing.T, c *vfd.Core) {
				require.NoError(t, vfd.WriteFileAtomic(c, "a", []byte("one")))
				require.NoError(t, c.RemoveAll("/"))
				require.NoError(t, c.SyncDir("/"))
			},
			gone: []string{"a"},
		},
		{
			name: "directory durable only after parent sync",
			setup: func(t *testing.T, c *vfd.Core) {
				require.NoError(t, c.MkdirAll("p/q", 0o755))
				require.NoError(t, vfd.WriteFileAtomic(c, "p/q/f", []byte("data")))
				require.NoError(t, c.SyncDir("p"))
			},
			gone: []string{"p"},
		},
		{
			name: "directory tree durable after syncing each parent",
			setup: func(t *testing.T, c *vfd.Core) {
				require.NoError(t, c.MkdirAll("p/q", 0o755))
				require.NoError(t, vfd.WriteFileAtomic(c, "p/q/f", []byte("data")))
				require.NoError(t, c.SyncDir("p"))
				require.NoError(t, c.SyncDir("/"))
			},
			want: map[string]string{"p/q/f": "data"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := vfd.NewCore()
			tt.setup(t, c)
			clone := c.CrashClone()
			for p, want := range tt.want {
				assert.Equal(t, want, string(readAll(t, clone, p)), p)
			}
			for _, p := range tt.gone {
				_, err := clone.Stat(p)
				assert.ErrorIs(t, err, fs.ErrNotExist, p)
			}
		})
	}
}

func TestCoreNamespaceErrors(t *testing.T) {
	c := vfd.NewCore()
	require.NoError(t, c.MkdirAll("d/e", 0o755))
	require.NoError(t, writeFile(t, c, "d/f", []byte("1"), false).Close())

	_, err := c.Open("d", vfd.ReadOnly)
	assert.ErrorIs(t, err, syscall.EISDIR)
	_, err = c.Open("nope/f", vfd.ReadWrite|vfd.OCreate)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = c.Open("d/f/g", vfd.ReadWrite|vfd.OCreate)
	assert.ErrorIs(t, err, syscall.ENOTDIR)
	assert.ErrorIs(t, c.Remove("d"), syscall.ENOTEMPTY)
	assert.ErrorIs(t, c.Rename("d", "d/e/x"), syscall.EINVAL)
	assert.ErrorIs(t, c.Rename("d/f", "d/e"), syscall.EISDIR)
	assert.ErrorIs(t, c.MkdirAll("d/f/x", 0o755), syscall.ENOTDIR)
	_, err = c.ReadDir("d/f")
	assert.ErrorIs(t, err, syscall.ENOTDIR)

	info, err := c.Stat("/d/../d/./f")
	require.NoError(t, err)
	assert.Equal(t, "f", info.Name())
	assert.Equal(t, int64(1), info.Size())
	assert.False(t, info.IsDir())

	u := c.Usage()
	assert.Equal(t, vfd.CoreUsage{Dirs: 2, Files: 1, Bytes: 1}, u)

	require.NoError(t, c.RemoveAll("d"))
	require.NoError(t, c.RemoveAll("d"), "a missing path is not an error")
	assert.Equal(t, vfd.CoreUsage{}, c.Usage())
}

func TestCoreOpenHandleSurvivesRemove(t *testing.T) {
	c := vfd.NewCore()
	f := writeFile(t, c, "a", []byte("abc"), false)
	require.NoError(t, c.Remove("a"))
	buf := make([]byte, 4)
	n, err := f.ReadAt(buf, 0)
	assert.Equal(t, 3, n)
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, []byte("abc"), buf[:n])
	require.NoError(t, f.Close())
}

func TestCoreBacking(t *testing.T) {
	dir := t.TempDir()
	c := vfd.NewCore(vfd.WithBacking(vfd.Sec2{}, dir))
	f := writeFile(t, c, "img.h5", []byte("image"), false)
	_, err := vfd.Sec2{}.Stat(dir + "/img.h5")
	assert.ErrorIs(t, err, fs.ErrNotExist, "nothing written before Sync/Close")
	require.NoError(t, f.Sync())
	assert.Equal(t, []byte("image"), readAll(t, vfd.Sec2{}, dir+"/img.h5"))
	_, err = f.WriteAt([]byte("!"), 5)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, []byte("image!"), readAll(t, vfd.Sec2{}, dir+"/img.h5"))

	// A fresh core with the same backing loads the image on open.
	c2 := vfd.NewCore(vfd.WithBacking(vfd.Sec2{}, dir))
	assert.Equal(t, []byte("image!"), readAll(t, c2, "img.h5"))
	assert.Equal(t, []byte("image!"), readAll(t, c2.CrashClone(), "img.h5"), "a loaded image counts as durable")
}

// pattern returns n bytes that differ from their neighbours.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// TestCoreModel runs random writes, truncates, syncs and crash clones on
// a core file and checks every state against a plain byte-slice model.
func TestCoreModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := vfd.NewCore()
	f := writeFile(t, c, "m", nil, true)
	require.NoError(t, c.SyncDir("/"))
	var cur, synced []byte
	const span = 200 << 10 // several 64 KiB pages
	for step := range 300 {
		switch op := rng.IntN(10); {
		case op < 6:
			off, n := rng.IntN(span), rng.IntN(20<<10)
			b := bytes.Repeat([]byte{byte(step%255 + 1), byte(step % 7)}, n/2)
			n = len(b)
			_, err := f.WriteAt(b, int64(off))
			require.NoError(t, err)
			if end := off + n; end > len(cur) {
				cur = append(cur, make([]byte, end-len(cur))...)
			}
			copy(cur[off:], b)
		case op < 8:
			size := rng.IntN(span)
			require.NoError(t, f.Truncate(int64(size)))
			if size < len(cur) {
				cur = cur[:size]
			} else {
				cur = append(cur, make([]byte, size-len(cur))...)
			}
		case op < 9:
			require.NoError(t, f.Sync())
			synced = append([]byte(nil), cur...)
		default:
			got := readAll(t, c.CrashClone(), "m")
			require.Equal(t, len(synced), len(got), "step %d", step)
			require.True(t, bytes.Equal(synced, got), "crash clone differs at step %d", step)
		}
		size, err := f.Size()
		require.NoError(t, err)
		require.Equal(t, int64(len(cur)), size, "step %d", step)
		if step%10 != 9 {
			continue
		}
		got := make([]byte, len(cur))
		if len(cur) > 0 {
			require.NoError(t, vfd.ReadFull(f, got, 0))
		}
		require.True(t, bytes.Equal(cur, got), "content differs at step %d", step)
	}
	require.NoError(t, f.Close())
}

func TestCoreSparseHugeOffsetAllocatesNothingBetween(t *testing.T) {
	c := vfd.NewCore()
	f := writeFile(t, c, "sparse", nil, false)
	_, err := f.WriteAt([]byte("end"), 1<<34)
	require.NoError(t, err)
	size, err := f.Size()
	require.NoError(t, err)
	assert.Equal(t, int64(1<<34+3), size)
	buf := make([]byte, 5)
	require.NoError(t, vfd.ReadFull(f, buf, 1<<34-2))
	assert.Equal(t, []byte("\x00\x00end"), buf)
	require.NoError(t, f.Close())
}

func TestCoreCrashCloneWithTornPages(t *testing.T) {
	const page = 64 << 10
	c := vfd.NewCore()
	old := bytes.Repeat([]byte{'o'}, 8*page)
	f := writeFile(t, c, "f", old, true)
	require.NoError(t, c.SyncDir("/"))
	_, err := f.WriteAt(bytes.Repeat([]byte{'n'}, 10*page), 0) // rewrites 8 pages, grows by 2
	require.NoError(t, err)

	clone := func(seed uint64, p float64) []byte {
		o := vfd.CrashOptions{Rand: rand.New(rand.NewPCG(seed, 0)), UnsyncedPages: p}
		return readAll(t, c.CrashCloneWith(o), "f")
	}
	assert.Equal(t, old, clone(1, 0), "probability 0 is CrashClone")
	assert.Equal(t, old, readAll(t, c.CrashClone(), "f"))
	assert.Equal(t, bytes.Repeat([]byte{'n'}, 10*page), clone(1, 1), "probability 1 keeps everything written")

	got := clone(7, 0.5)
	assert.Equal(t, got, clone(7, 0.5), "the same seed gives the same crash")
	assert.Contains(t, []int{8 * page, 10 * page}, len(got))
	var olds, news int
	for i := 0; i < len(got); i += page {
		pg := got[i : i+page]
		switch {
		case bytes.Equal(pg, bytes.Repeat([]byte{'o'}, page)):
			olds++
		case bytes.Equal(pg, bytes.Repeat([]byte{'n'}, page)):
			news++
		case i >= 8*page && bytes.Equal(pg, make([]byte, page)):
			olds++ // the size reached the device, the page did not
		default:
			t.Fatalf("page %d is torn inside", i/page)
		}
	}
	assert.Positive(t, olds)
	assert.Positive(t, news)
	require.NoError(t, f.Close())
}
