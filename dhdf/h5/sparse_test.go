package h5

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

const sparseSize = 20 << 30 // 20 GiB

// allocated runs fn and returns the bytes the Go heap allocated meanwhile.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// sampleBytes returns the sample file's bytes.
func sampleBytes(t testing.TB) []byte {
	t.Helper()
	c := vfd.NewCore()
	f, err := vfd.Create(c, "s.h5")
	require.NoError(t, err)
	buildSample(t, f)
	require.NoError(t, f.Close())
	b, err := vfd.ReadFile(c, "s.h5")
	require.NoError(t, err)
	return b
}

// withEOF returns b with the superblock's end of file set to eof (the
// checksum recomputed), as if b were followed by eof-len(b) more bytes.
func withEOF(b []byte, eof uint64) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint64(b[28:], eof)
	binary.LittleEndian.PutUint32(b[44:], Lookup3(b[:44], 0))
	return b
}

// hugeRootHeader is a file whose root object header claims size bytes.
func hugeRootHeader(eof, size uint64) []byte {
	b := encodeSuperblock(eof, superblockSize)
	b = append(b, "OHDR"...)
	b = append(b, 2, 3) // version 2, 8-byte chunk size
	return binary.LittleEndian.AppendUint64(b, size)
}

// hugeHeap is the sample file with its global heap collection claiming
// size bytes.
func hugeHeap(t testing.TB, eof, size uint64) []byte {
	b := withEOF(sampleBytes(t), eof)
	i := bytes.Index(b, []byte("GCOL"))
	require.Positive(t, i)
	binary.LittleEndian.PutUint64(b[i+8:], size)
	return b
}

// sparseFile makes a sparse file of size bytes holding head at offset 0,
// skipping the test where the file system would really allocate it.
func sparseFile(t *testing.T, head []byte, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sparse.h5")
	require.NoError(t, os.WriteFile(p, head, 0o644))
	require.NoError(t, os.Truncate(p, size))
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(p, &st))
	if st.Blocks*512 > 16<<20 {
		t.Skipf("%s does not hold sparse files", filepath.Dir(p))
	}
	return p
}

// TestSparse20GiBFile opens 20 GiB sparse files: all zeros, a root
// object header and a global heap claiming 19 GiB, and the sample file
// followed by 20 GiB of zeros. Each gives an error or the sample's
// objects, within 64 MiB of allocations.
func TestSparse20GiBFile(t *testing.T) {
	tests := []struct {
		name string
		head []byte
		err  error
	}{
		{"zeros", nil, ErrNotHDF5},
		{"root header of 19 GiB", hugeRootHeader(sparseSize, 19<<30), ErrCorrupt},
		{"global heap of 19 GiB", hugeHeap(t, sparseSize, 19<<30), ErrCorrupt},
		{"sample and 20 GiB of zeros", withEOF(sampleBytes(t), sparseSize), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := sparseFile(t, tc.head, sparseSize)
			f, err := vfd.OpenRead(vfd.Sec2{}, p)
			require.NoError(t, err)
			defer f.Close()
			n := allocated(func() {
				h, err := Open(f, sparseSize, p)
				if tc.err != nil {
					require.ErrorIs(t, err, tc.err)
					var ce *CorruptionError
					require.ErrorAs(t, err, &ce)
					assert.Equal(t, p, ce.Path)
					return
				}
				require.NoError(t, err)
				o, err := h.Lookup("/virt")
				require.NoError(t, err)
				assert.Len(t, o.Virtual, 2)
			})
			assert.Less(t, n, uint64(64<<20), "%d bytes allocated", n)
		})
	}
}

// sparseReader reads as data followed by zeros up to size bytes.
type sparseReader struct {
	data []byte
	size int64
}

func (s sparseReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	n := len(p)
	if int64(n) > s.size-off {
		n = int(s.size - off)
	}
	clear(p[:n])
	if off < int64(len(s.data)) {
		copy(p[:n], s.data[off:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// FuzzSparse opens data followed by tail zero bytes (up to 32 GiB, as a
// sparse file would): whatever sizes the structures claim, Open returns
// an error or a file, allocating at most 300 MiB (one metadata block may
// be 256 MiB).
func FuzzSparse(f *testing.F) {
	f.Add(hugeRootHeader(sparseSize, 19<<30), uint64(sparseSize))
	f.Add(hugeRootHeader(sparseSize, 1<<20), uint64(sparseSize))
	f.Add(hugeHeap(f, sparseSize, 19<<30), uint64(sparseSize))
	f.Add(withEOF(sampleBytes(f), sparseSize), uint64(sparseSize))
	f.Add(sampleBytes(f), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, tail uint64) {
		tail = min(tail, 1<<35)
		size := int64(len(data)) + int64(tail)
		n := allocated(func() {
			h, err := Open(sparseReader{data, size}, size, "fuzz.h5")
			if err != nil {
				return
			}
			_ = h.Walk(func(string, Link) error { return nil })
		})
		if n > 300<<20 {
			t.Fatalf("%d bytes allocated for a %d-byte file of %d real bytes", n, size, len(data))
		}
	})
}
