package vfdtest

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// Config adapts the suite to drivers whose file names are not plain names.
type Config struct {
	// Name maps a base name the suite uses ("rw", "a") to the name to
	// open with the driver (for a family, a pattern). Default: identity.
	Name func(base string) string
	// Listed maps a base name to the directory entries a small file of
	// that name shows in ReadDir (for split, two files). Default: Name(base).
	Listed func(base string) []string
}

func (c *Config) fill() {
	if c.Name == nil {
		c.Name = func(b string) string { return b }
	}
	if c.Listed == nil {
		c.Listed = func(b string) []string { return []string{c.Name(b)} }
	}
}

// NewFunc returns a fresh driver and an existing empty directory in it.
type NewFunc func(t *testing.T) (vfd.Driver, string)

// TestDriver runs the conformance suite with the default [Config].
func TestDriver(t *testing.T, newDriver NewFunc) { TestDriverConfig(t, newDriver, Config{}) }

// TestDriverConfig runs the conformance suite on drivers from newDriver.
func TestDriverConfig(t *testing.T, newDriver NewFunc, cfg Config) {
	cfg.fill()
	tests := []struct {
		name string
		fn   func(t *testing.T, s *suite)
	}{
		{"ReadYourWrites", testReadYourWrites},
		{"SparseHoles", testSparse},
		{"ReadPastEnd", testReadPastEnd},
		{"Truncate", testTruncate},
		{"OpenFlags", testOpenFlags},
		{"ReadOnly", testReadOnly},
		{"Rename", testRename},
		{"Remove", testRemove},
		{"DirsAndStat", testDirs},
		{"SyncAndReopen", testSync},
		{"Closed", testClosed},
		{"StartWriteback", testWriteback},
		{"DropCache", testDropCache},
		{"ConcurrentDisjoint", testConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, dir := newDriver(t)
			tt.fn(t, &suite{d: d, dir: dir, cfg: cfg})
		})
	}
}

type suite struct {
	d   vfd.Driver
	dir string
	cfg Config
}

func (s *suite) path(base string) string { return path.Join(s.dir, s.cfg.Name(base)) }

func (s *suite) create(t *testing.T, base string) vfd.File {
	t.Helper()
	f, err := s.d.Open(s.path(base), vfd.ReadWrite|vfd.OCreate|vfd.OTrunc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func (s *suite) put(t *testing.T, base string, data []byte) {
	t.Helper()
	f, err := s.d.Open(s.path(base), vfd.ReadWrite|vfd.OCreate|vfd.OTrunc)
	require.NoError(t, err)
	_, err = f.WriteAt(data, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func (s *suite) get(t *testing.T, base string) []byte {
	t.Helper()
	b, err := vfd.ReadFile(s.d, s.path(base))
	require.NoError(t, err)
	return b
}

func readAt(t *testing.T, f vfd.File, off int64, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	require.NoError(t, vfd.ReadFull(f, buf, off))
	return buf
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func size(t *testing.T, f vfd.File) int64 {
	t.Helper()
	n, err := f.Size()
	require.NoError(t, err)
	return n
}

func testReadYourWrites(t *testing.T, s *suite) {
	f := s.create(t, "rw")
	assert.Equal(t, int64(0), size(t, f))
	data := pattern(10000, 1)
	n, err := f.WriteAt(data, 0)
	require.NoError(t, err)
	assert.Equal(t, len(data), n)
	assert.Equal(t, data, readAt(t, f, 0, len(data)))
	n, err = f.WriteAt([]byte("middle"), 4000)
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	copy(data[4000:], "middle")
	assert.Equal(t, data, readAt(t, f, 0, len(data)))
	assert.Equal(t, data[3990:4010], readAt(t, f, 3990, 20))
	assert.Equal(t, int64(len(data)), size(t, f))
	n, err = f.WriteAt(nil, 0)
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	_, err = f.WriteAt([]byte("x"), -1)
	assert.ErrorIs(t, err, vfd.ErrNegativeOffset)
	_, err = f.ReadAt(make([]byte, 1), -1)
	assert.ErrorIs(t, err, vfd.ErrNegativeOffset)
}

func testSparse(t *testing.T, s *suite) {
	f := s.create(t, "sparse")
	_, err := f.WriteAt([]byte("end"), 70000)
	require.NoError(t, err)
	assert.Equal(t, int64(70003), size(t, f))
	got := readAt(t, f, 0, 70003)
	assert.Equal(t, make([]byte, 70000), got[:70000], "a hole reads as zeros")
	assert.Equal(t, []byte("end"), got[70000:])
	_, err = f.WriteAt([]byte("start"), 0)
	require.NoError(t, err)
	assert.Equal(t, []byte("start\x00\x00"), readAt(t, f, 0, 7))
	require.NoError(t, f.Close())
	got = s.get(t, "sparse")
	assert.Len(t, got, 70003)
	assert.Equal(t, []byte("end"), got[70000:])
}

func testReadPastEnd(t *testing.T, s *suite) {
	f := s.create(t, "short")
	_, err := f.WriteAt([]byte("0123456789"), 0)
	require.NoError(t, err)
	tests := []struct {
		off  int64
		n    int
		want string
		eof  bool
	}{
		{0, 10, "0123456789", false},
		{0, 16, "0123456789", true},
		{6, 8, "6789", true},
		{10, 4, "", true},
		{1000, 4, "", true},
		{3, 0, "", false},
	}
	for _, tt := range tests {
		buf := make([]byte, tt.n)
		n, err := f.ReadAt(buf, tt.off)
		assert.Equal(t, tt.want, string(buf[:n]), "read %d at %d", tt.n, tt.off)
		if tt.eof {
			assert.ErrorIs(t, err, io.EOF, "read %d at %d", tt.n, tt.off)
		} else {
			assert.NoError(t, err, "read %d at %d", tt.n, tt.off)
		}
	}
	assert.ErrorIs(t, vfd.ReadFull(f, make([]byte, 12), 0), io.ErrUnexpectedEOF)
}

func testTruncate(t *testing.T, s *suite) {
	f := s.create(t, "trunc")
	_, err := f.WriteAt([]byte("abcdefghij"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(3))
	assert.Equal(t, int64(3), size(t, f))
	n, err := f.ReadAt(make([]byte, 5), 0)
	assert.Equal(t, 3, n)
	assert.ErrorIs(t, err, io.EOF)
	require.NoError(t, f.Truncate(8))
	assert.Equal(t, int64(8), size(t, f))
	assert.Equal(t, []byte("abc\x00\x00\x00\x00\x00"), readAt(t, f, 0, 8), "grow fills with zeros, old bytes do not come back")
	require.NoError(t, f.Truncate(0))
	_, err = f.WriteAt([]byte("z"), 5)
	require.NoError(t, err)
	assert.Equal(t, []byte("\x00\x00\x00\x00\x00z"), readAt(t, f, 0, 6), "write after shrink leaves zeros")
	assert.ErrorIs(t, f.Truncate(-1), vfd.ErrNegativeOffset)
	require.NoError(t, f.Close())
	assert.Equal(t, []byte("\x00\x00\x00\x00\x00z"), s.get(t, "trunc"))
}

func testOpenFlags(t *testing.T, s *suite) {
	_, err := s.d.Open(s.path("missing"), vfd.ReadOnly)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = s.d.Open(s.path("missing"), vfd.ReadWrite)
	assert.ErrorIs(t, err, fs.ErrNotExist)

	f, err := vfd.Create(s.d, s.path("excl"))
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("first"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = vfd.Create(s.d, s.path("excl"))
	assert.ErrorIs(t, err, fs.ErrExist)

	f, err = s.d.Open(s.path("excl"), vfd.ReadWrite|vfd.OCreate)
	require.NoError(t, err)
	assert.Equal(t, []byte("first"), readAt(t, f, 0, 5), "OCreate without OTrunc keeps content")
	require.NoError(t, f.Close())

	f, err = vfd.CreateTrunc(s.d, s.path("excl"))
	require.NoError(t, err)
	assert.Equal(t, int64(0), size(t, f), "OTrunc empties")
	require.NoError(t, f.Close())
}

func testReadOnly(t *testing.T, s *suite) {
	s.put(t, "ro", []byte("keep"))
	f, err := vfd.OpenRead(s.d, s.path("ro"))
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, "keep", string(readAt(t, f, 0, 4)))
	_, err = f.WriteAt([]byte("x"), 0)
	assert.ErrorIs(t, err, vfd.ErrReadOnly)
	assert.ErrorIs(t, f.Truncate(0), vfd.ErrReadOnly)
	assert.Equal(t, []byte("keep"), s.get(t, "ro"))
}

func testRename(t *testing.T, s *suite) {
	s.put(t, "old", []byte("new content"))
	s.put(t, "target", []byte("old content, longer"))
	require.NoError(t, s.d.Rename(s.path("old"), s.path("target")))
	assert.Equal(t, []byte("new content"), s.get(t, "target"), "rename replaces")
	_, err := s.d.Stat(s.path("old"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorIs(t, s.d.Rename(s.path("old"), s.path("other")), fs.ErrNotExist)
	require.NoError(t, s.d.Rename(s.path("target"), s.path("fresh")))
	assert.Equal(t, []byte("new content"), s.get(t, "fresh"))
	require.NoError(t, s.d.SyncDir(s.dir))
}

func testRemove(t *testing.T, s *suite) {
	s.put(t, "gone", []byte("x"))
	require.NoError(t, s.d.Remove(s.path("gone")))
	_, err := s.d.Stat(s.path("gone"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = vfd.OpenRead(s.d, s.path("gone"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorIs(t, s.d.Remove(s.path("gone")), fs.ErrNotExist)
	assert.NoError(t, s.d.RemoveAll(s.path("gone")), "RemoveAll of a missing path")

	sub := path.Join(s.dir, "tree")
	require.NoError(t, s.d.MkdirAll(path.Join(sub, "deep"), 0o755))
	f, err := vfd.Create(s.d, path.Join(sub, "deep", s.cfg.Name("leaf")))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Error(t, s.d.Remove(sub), "Remove of a non-empty directory")
	require.NoError(t, s.d.RemoveAll(sub))
	_, err = s.d.Stat(sub)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, s.d.MkdirAll(sub, 0o755))
	require.NoError(t, s.d.Remove(sub), "Remove of an empty directory")
}

func testDirs(t *testing.T, s *suite) {
	sub := path.Join(s.dir, "sub")
	require.NoError(t, s.d.MkdirAll(path.Join(sub, "x", "y"), 0o755))
	require.NoError(t, s.d.MkdirAll(path.Join(sub, "x"), 0o755), "MkdirAll of an existing directory")
	var want []string
	for i, base := range []string{"c", "a", "b"} {
		name := path.Join(sub, s.cfg.Name(base))
		f, err := vfd.Create(s.d, name)
		require.NoError(t, err)
		_, err = f.WriteAt(bytes.Repeat([]byte{'z'}, 100*(i+1)), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		want = append(want, s.cfg.Listed(base)...)
		info, err := s.d.Stat(name)
		require.NoError(t, err)
		assert.Equal(t, int64(100*(i+1)), info.Size(), "Stat size of %s", base)
		assert.False(t, info.IsDir())
	}
	want = append(want, "x")
	slices.Sort(want)
	ents, err := s.d.ReadDir(sub)
	require.NoError(t, err)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	assert.Equal(t, want, got, "ReadDir lists sorted by name")
	info, err := s.d.Stat(path.Join(sub, "x"))
	require.NoError(t, err)
	assert.True(t, info.IsDir())
	_, err = s.d.ReadDir(path.Join(sub, "nope"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, s.d.SyncDir(sub))
}

func testSync(t *testing.T, s *suite) {
	f := s.create(t, "durable")
	data := pattern(5000, 3)
	_, err := f.WriteAt(data, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	_, err = f.WriteAt([]byte("tail"), 5000)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.NoError(t, s.d.SyncDir(s.dir))
	assert.Equal(t, append(data, "tail"...), s.get(t, "durable"))

	g, err := s.d.Open(s.path("durable"), vfd.ReadWrite)
	require.NoError(t, err)
	defer g.Close()
	assert.Equal(t, int64(5004), size(t, g), "reopen sees the size")
	_, err = g.WriteAt([]byte("X"), 1)
	require.NoError(t, err)
	assert.Equal(t, append([]byte{data[0], 'X'}, data[2:4]...), readAt(t, g, 0, 4))
}

func testClosed(t *testing.T, s *suite) {
	f := s.create(t, "closed")
	_, err := f.WriteAt([]byte("x"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = f.ReadAt(make([]byte, 1), 0)
	assert.ErrorIs(t, err, fs.ErrClosed, "ReadAt")
	_, err = f.WriteAt([]byte("y"), 0)
	assert.ErrorIs(t, err, fs.ErrClosed, "WriteAt")
	_, err = f.Size()
	assert.ErrorIs(t, err, fs.ErrClosed, "Size")
	assert.ErrorIs(t, f.Truncate(0), fs.ErrClosed, "Truncate")
	assert.ErrorIs(t, f.Sync(), fs.ErrClosed, "Sync")
	assert.ErrorIs(t, f.Close(), fs.ErrClosed, "Close")
	assert.Equal(t, []byte("x"), s.get(t, "closed"))
}

// testWriteback checks the writeback hint: it changes neither content
// nor size, takes ranges past the end, rejects negative ranges and
// closed files when the file has the capability, and falls back to a
// no-op when it has not.
func testWriteback(t *testing.T, s *suite) {
	f := s.create(t, "writeback")
	_, starter := f.(vfd.WritebackStarter)
	data := pattern(20000, 5)
	_, err := f.WriteAt(data, 0)
	require.NoError(t, err)
	ranges := []struct{ off, n int64 }{
		{0, 20000}, {4096, 8192}, {100, 0}, {19999, 1}, {0, math.MaxInt64},
		{20000, 4096}, {1 << 40, 1 << 20}, {1 << 40, 0}, // past the end
	}
	for _, r := range ranges {
		assert.NoError(t, vfd.StartWriteback(f, r.off, r.n), "range %d+%d", r.off, r.n)
	}
	assert.Equal(t, int64(len(data)), size(t, f), "a hint does not change the size")
	assert.Equal(t, data, readAt(t, f, 0, len(data)), "a hint does not change the content")
	_, err = f.WriteAt([]byte("after"), 20000)
	require.NoError(t, err)
	require.NoError(t, vfd.StartWriteback(f, 20000, 5))
	assert.Equal(t, []byte("after"), readAt(t, f, 20000, 5))
	require.NoError(t, f.Sync())
	if starter {
		assert.ErrorIs(t, vfd.StartWriteback(f, -1, 10), vfd.ErrNegativeOffset)
		assert.ErrorIs(t, vfd.StartWriteback(f, 0, -1), vfd.ErrNegativeOffset)
	}
	require.NoError(t, f.Close())
	err = vfd.StartWriteback(f, 0, 10)
	if starter {
		assert.ErrorIs(t, err, fs.ErrClosed, "StartWriteback on a closed file")
	} else {
		assert.NoError(t, err, "a file without the capability: the helper does nothing")
	}
	assert.Equal(t, append(data, "after"...), s.get(t, "writeback"))

	g, err := vfd.OpenRead(s.d, s.path("writeback"))
	require.NoError(t, err)
	assert.NoError(t, vfd.StartWriteback(g, 0, 0), "a hint on a read-only file")
	require.NoError(t, g.Close())
}

// testDropCache checks the drop hint as testWriteback checks the
// writeback hint: neither content nor size change, ranges past the end
// are fine, negative ranges and closed files are refused when the file
// has the capability, and the helper is a no-op when it has not.
func testDropCache(t *testing.T, s *suite) {
	f := s.create(t, "dropcache")
	_, dropper := f.(vfd.CacheDropper)
	data := pattern(20000, 9)
	_, err := f.WriteAt(data, 0)
	require.NoError(t, err)
	ranges := []struct{ off, n int64 }{
		{0, 8192}, {4096, 8192}, {100, 0}, {19999, 1}, {0, math.MaxInt64},
		{20000, 4096}, {1 << 40, 1 << 20}, {1 << 40, 0},
	}
	for _, r := range ranges {
		assert.NoError(t, vfd.DropCache(f, r.off, r.n), "range %d+%d", r.off, r.n)
	}
	assert.Equal(t, int64(len(data)), size(t, f), "a drop does not change the size")
	assert.Equal(t, data, readAt(t, f, 0, len(data)), "a drop does not change the content")
	_, err = f.WriteAt([]byte("after"), 20000)
	require.NoError(t, err)
	require.NoError(t, vfd.DropCache(f, 0, 0))
	assert.Equal(t, []byte("after"), readAt(t, f, 20000, 5))
	require.NoError(t, f.Sync())
	if dropper {
		assert.ErrorIs(t, vfd.DropCache(f, -1, 10), vfd.ErrNegativeOffset)
		assert.ErrorIs(t, vfd.DropCache(f, 0, -1), vfd.ErrNegativeOffset)
	}
	require.NoError(t, f.Close())
	err = vfd.DropCache(f, 0, 10)
	if dropper {
		assert.ErrorIs(t, err, fs.ErrClosed, "DropCache on a closed file")
	} else {
		assert.NoError(t, err, "a file without the capability: the helper does nothing")
	}
	assert.Equal(t, append(data, "after"...), s.get(t, "dropcache"))

	g, err := vfd.OpenRead(s.d, s.path("dropcache"))
	require.NoError(t, err)
	assert.NoError(t, vfd.DropCache(g, 0, 0), "a drop on a read-only file")
	assert.Equal(t, append(data, "after"...), readAt(t, g, 0, len(data)+5))
	require.NoError(t, g.Close())
}

func testConcurrent(t *testing.T, s *suite) {
	const workers, chunk, rounds = 8, 8192, 4
	f := s.create(t, "concurrent")
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				off := int64((r*workers + w) * chunk)
				want := pattern(chunk, byte(w*31+r))
				if _, err := f.WriteAt(want, off); err != nil {
					errs <- err
					return
				}
				if err := vfd.StartWriteback(f, off, chunk); err != nil {
					errs <- err
					return
				}
				got := make([]byte, chunk)
				if _, err := f.ReadAt(got, off); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, want) {
					errs <- fmt.Errorf("worker %d round %d: read back differs", w, r)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	require.NoError(t, f.Sync())
	all := readAt(t, f, 0, workers*chunk*rounds)
	for r := range rounds {
		for w := range workers {
			off := (r*workers + w) * chunk
			if !assert.Equal(t, pattern(chunk, byte(w*31+r)), all[off:off+chunk]) {
				return
			}
		}
	}

}
