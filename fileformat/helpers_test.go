package fileformat

import (
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// fixedClock makes timestamps deterministic.
func fixedClock() time.Time { return time.Unix(1700000000, 123456789) }

// newFile creates a fresh file in a temporary directory.
func newFile(t testing.TB, name string) vfd.File {
	t.Helper()
	f, err := vfd.Create(vfd.Sec2{}, filepath.Join(t.TempDir(), name))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// writeFile writes vars to a new file and returns the file.
func writeFile(t testing.TB, meta Meta, vars []Var, prev *Layout, opts ...Option) (vfd.File, *Layout, Summary) {
	t.Helper()
	f := newFile(t, "ckpt.fti")
	lay, sum, err := Write(f, meta, vars, prev, append([]Option{WithClock(fixedClock)}, opts...)...)
	require.NoError(t, err)
	return f, lay, sum
}

// fileBytes reads a whole file.
func fileBytes(t testing.TB, f vfd.File) []byte {
	t.Helper()
	n, err := f.Size()
	require.NoError(t, err)
	b := make([]byte, n)
	if n > 0 {
		require.NoError(t, vfd.ReadFull(f, b, 0))
	}
	return b
}

// memFile is a minimal in-memory vfd.File for tests that mutate bytes.
type memFile struct {
	name string
	b    []byte
}

func (m *memFile) Name() string         { return m.name }
func (m *memFile) Size() (int64, error) { return int64(len(m.b)), nil }
func (m *memFile) Sync() error          { return nil }
func (m *memFile) Close() error         { return nil }
func (m *memFile) Truncate(n int64) error {
	if n <= int64(len(m.b)) {
		m.b = m.b[:n]
	} else {
		m.b = append(m.b, make([]byte, n-int64(len(m.b)))...)
	}
	return nil
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.b)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > int64(len(m.b)) {
		_ = m.Truncate(end)
	}
	return copy(m.b[off:], p), nil
}

// asBytes views a typed slice as bytes, the way an application passes its memory.
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

// pattern returns n deterministic bytes depending on seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func itoa(n int) string { return strconv.Itoa(n) }

func errNotExist() error { return fs.ErrNotExist }

// newFileAt creates a file at path with the sec2 driver.
func newFileAt(t testing.TB, path string) vfd.File {
	t.Helper()
	f, err := vfd.Create(vfd.Sec2{}, path)
	require.NoError(t, err)
	return f
}

// openAt opens path read-only with the sec2 driver, closed at cleanup.
func openAt(t testing.TB, path string) vfd.File {
	t.Helper()
	f, err := vfd.OpenRead(vfd.Sec2{}, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}
