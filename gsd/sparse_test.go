package gsd

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sparseSize = 20 << 30 // 20 GiB

// sparseFile makes a sparse file of size bytes holding head at offset 0,
// skipping the test where the file system would really allocate it.
func sparseFile(t *testing.T, name string, head []byte, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, head, 0o644))
	require.NoError(t, os.Truncate(p, size))
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(p, &st))
	if st.Blocks*512 > 16<<20 {
		_ = os.Remove(p)
		t.Skipf("%s does not hold sparse files (%d bytes allocated)", filepath.Dir(p), st.Blocks*512)
	}
	return p
}

// allocated runs fn and returns the bytes the Go heap allocated meanwhile.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// sparseHeader is the start of a file of size bytes whose namelist block
// claims the whole file after the index, with one entry of a float64
// chunk from 1 MiB to the end (overlapping it: readers do not mind).
func sparseHeader(size int64, v1 bool) []byte {
	const names, data = 256 + 128*32, 1 << 20
	b := make([]byte, names+64)
	h := Header{IndexLocation: 256, IndexAllocated: 128, NameLocation: names,
		NameAllocated: uint64(size-names) / 64, SchemaVersion: MakeVersion(1, 0),
		GSDVersion: Version2, Application: "sparse", Schema: "test"}
	if v1 {
		h.GSDVersion = Version1
	}
	copy(b, h.encode())
	copy(b[names:], "big\x00")
	encodeEntry(b[256:], Entry{Frame: 0, N: uint64(size-data) / 8, M: 1, Location: data, ID: 0, Type: TypeFloat64})
	return b
}

// TestSparse20GiBFile gives 20 GiB sparse files to every entry point: an
// all-zero one, one whose namelist or index claims the whole file, one
// whose only chunk is 20 GiB, a 1.0 file to upgrade. Each gives an error
// or a bounded answer, and none allocates more than 64 MiB.
func TestSparse20GiBFile(t *testing.T) {
	const bound = 64 << 20
	check := func(t *testing.T, what string, fn func()) {
		t.Helper()
		n := allocated(fn)
		assert.Less(t, n, uint64(bound), "%s allocated %d bytes", what, n)
	}
	t.Run("zeros", func(t *testing.T) {
		p := sparseFile(t, "zeros.gsd", nil, sparseSize)
		check(t, "Open", func() {
			_, err := Open(sec2, p)
			assert.ErrorIs(t, err, ErrNotGSD)
			assert.NotErrorIs(t, err, ErrEmpty, "20 GiB of zeros is not treated as an empty file")
		})
		check(t, "Verify", func() { assert.ErrorIs(t, Verify(sec2, p), ErrNotGSD) })
		check(t, "Repair", func() {
			_, err := Repair(sec2, p)
			assert.ErrorIs(t, err, ErrNotGSD)
		})
		check(t, "CreateOrAppend", func() {
			_, err := CreateOrAppend(sec2, p, "a", "b", MakeVersion(1, 0))
			assert.ErrorIs(t, err, ErrNotGSD)
		})
	})
	t.Run("huge namelist and chunk", func(t *testing.T) {
		head := sparseHeader(sparseSize, false)
		head = append(head, make([]byte, 100)...)
		head[len(head)-1] = 'x' // a stray byte after the name list
		p := sparseFile(t, "big.gsd", head, sparseSize)
		check(t, "Open and read", func() {
			r, err := Open(sec2, p)
			require.NoError(t, err)
			defer r.Close()
			assert.Equal(t, []string{"big"}, r.ChunkNames(""))
			_, _, err = r.ReadChunkRaw(0, "big")
			assert.ErrorIs(t, err, ErrTooLarge)
			v, err := ReadRows[float64](r, 0, "big", 1000, 4)
			require.NoError(t, err)
			assert.Equal(t, []float64{0, 0, 0, 0}, v)
		})
		check(t, "Verify", func() {
			err := Verify(sec2, p)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), "after the end of the name list")
		})
		check(t, "Repair", func() {
			res, err := Repair(sec2, p)
			require.NoError(t, err)
			assert.True(t, res.Changed)
			assert.Equal(t, uint64(1), res.Frames)
		})
		check(t, "Verify after Repair", func() { assert.NoError(t, Verify(sec2, p)) })
	})
	t.Run("index spanning the file", func(t *testing.T) {
		h := Header{IndexLocation: 1 << 20, IndexAllocated: (sparseSize - 1<<20) / 32, NameLocation: 256,
			NameAllocated: 16, SchemaVersion: MakeVersion(1, 0), GSDVersion: Version2}
		head := h.encode()
		head = append(head, make([]byte, 1024)...)
		p := sparseFile(t, "index.gsd", head, sparseSize)
		check(t, "Open", func() {
			r, err := Open(sec2, p)
			require.NoError(t, err)
			assert.Equal(t, uint64(0), r.NFrames())
			require.NoError(t, r.Close())
		})
		check(t, "OpenAppend and a frame", func() {
			w, err := OpenAppend(sec2, p, WithSync(false))
			require.NoError(t, err)
			require.NoError(t, WriteChunk(w, "x", []int32{5}, 1, 1))
			require.NoError(t, w.EndFrame())
			require.NoError(t, w.Close())
			r, err := Open(sec2, p)
			require.NoError(t, err)
			v, _, err := ReadChunk[int32](r, 0, "x")
			require.NoError(t, err)
			assert.Equal(t, []int32{5}, v)
			require.NoError(t, r.Close())
		})
	})
	t.Run("1.0 file to upgrade", func(t *testing.T) {
		p := sparseFile(t, "v1.gsd", sparseHeader(sparseSize, true), sparseSize)
		check(t, "Upgrade", func() {
			require.NoError(t, Upgrade(sec2, p))
			r, err := Open(sec2, p)
			require.NoError(t, err)
			assert.Equal(t, Version2, r.Version())
			assert.Equal(t, uint64(1), r.NFrames())
			require.NoError(t, r.Close())
		})
	})
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

// FuzzSparse reads data followed by tail zero bytes (up to 32 GiB, as a
// sparse file would): whatever sizes the header and entries claim, the
// reader answers with an error or data and allocates at most 64 MiB.
func FuzzSparse(f *testing.F) {
	f.Add(sparseHeader(sparseSize, false), uint64(sparseSize-(1<<20)))
	f.Add(sparseHeader(sparseSize, true), uint64(sparseSize))
	f.Add(sparseHeader(1<<40, false), uint64(1<<35))
	three, err := os.ReadFile("testdata/three.gsd")
	require.NoError(f, err)
	f.Add(three, uint64(0))
	big := append([]byte(nil), three...)
	binary.LittleEndian.PutUint64(big[offNameAlloc:], 1<<30) // namelist of 64 GiB
	f.Add(big, uint64(1<<35))
	big = append([]byte(nil), three...)
	binary.LittleEndian.PutUint64(big[offIndexAlloc:], 1<<30) // index of 32 GiB
	f.Add(big, uint64(1<<35))
	f.Fuzz(func(t *testing.T, data []byte, tail uint64) {
		tail = min(tail, 1<<35)
		size := int64(len(data)) + int64(tail)
		n := allocated(func() {
			r, err := NewReader(sparseReader{data, size}, size, WithMaxRead(1<<20))
			if err != nil {
				return
			}
			for _, e := range r.Entries()[:min(len(r.Entries()), 64)] {
				_, _ = r.ReadRowsRaw(e.Frame, r.Name(e.ID), 0, min(e.N, 4))
			}
		})
		if n > 64<<20 {
			t.Fatalf("%d bytes allocated for a %d-byte file of %d real bytes", n, size, len(data))
		}
	})
}
