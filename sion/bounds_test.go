package sion

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// sparseAt is a read-only file of size bytes holding the given pieces at
// their offsets and zeros elsewhere, which are never stored.
type sparseAt struct {
	size   int64
	pieces map[int64][]byte
}

func (s *sparseAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= s.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), s.size-off))
	q := p[:n]
	clear(q)
	for at, b := range s.pieces {
		lo, hi := max(at, off), min(at+int64(len(b)), off+int64(n))
		if lo < hi {
			copy(q[lo-off:hi-off], b[lo-at:hi-at])
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func allocDuring(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

const size20G = 20 << 30

// container20G lays out META1 and META2 of a 20 GiB container by hand: n
// tasks of one chunk each (chunk sizes given), maxchunks mc, block counts
// and sizes as given, the set fields nfiles/filenr, and mapping entries
// when ms > 0 (only the count is written; the entries are zeros).
type container20G struct {
	chunks     []int64
	mc         int32
	blockSizes [][]int64
	keyval     bool
	nfiles     int32
	ms         int32
}

func (c container20G) pieces(t testing.TB) (map[int64][]byte, int64) {
	n := len(c.chunks)
	h := header{Version: LibVersion, Patch: LibPatch, FileFormat: FileFormat, FSBlkSize: 4096,
		NFiles: max(c.nfiles, 1), GlobalRanks: make([]int64, n), ChunkSizes: c.chunks, MaxChunks: c.mc}
	if c.keyval {
		h.Flag1 = KeyValInline << 32
	}
	var skip int64
	for _, cs := range c.chunks {
		skip += cs
	}
	start := roundUp(Meta1Size(n), 4096)
	h.StartOfMeta2 = start + int64(max(c.mc, 1))*skip
	if h.StartOfMeta2 > size20G-int64(8*n)-4 {
		h.StartOfMeta2 = size20G - int64(8*n) - 4 - 8*int64(n)*int64(c.mc)
	}
	m1 := encodeMeta1(&h, true)
	counts := make([]byte, 8*n)
	for i, bs := range c.blockSizes {
		byteOrder(false).PutUint64(counts[8*i:], uint64(len(bs)))
	}
	pieces := map[int64][]byte{0: m1, h.StartOfMeta2: counts}
	for i, bs := range c.blockSizes {
		for b, v := range bs {
			e := make([]byte, 8)
			byteOrder(false).PutUint64(e, uint64(v))
			pieces[h.StartOfMeta2+8*int64(n)+8*int64(b*n+i)] = e
		}
	}
	if c.ms != 0 {
		e := make([]byte, 4)
		byteOrder(false).PutUint32(e, uint32(c.ms))
		pieces[h.StartOfMeta2+8*int64(n)*(int64(c.mc)+1)] = e
	}
	require.LessOrEqual(t, h.StartOfMeta2, int64(size20G))
	return pieces, size20G
}

// hugeContainers are 20 GiB containers whose counts no reader may trust.
var hugeContainers = []struct {
	name  string
	c     container20G
	field string
	want  error
}{
	{"a billion tasks", container20G{chunks: make([]int64, 4), mc: 1}, "ntasks", ErrTooLarge},
	{"two billion blocks", container20G{chunks: []int64{0}, mc: 1<<31 - 1, blockSizes: [][]int64{{}}}, "maxchunks", ErrTooLarge},
	{"a billion mapping entries", container20G{chunks: []int64{4096}, mc: 1, blockSizes: [][]int64{{0}}, nfiles: 2, ms: 1 << 30}, "mapping_size", ErrTooLarge},
	{"a billion files", container20G{chunks: []int64{4096}, mc: 1, blockSizes: [][]int64{{0}}, nfiles: 1 << 30}, "nfiles", ErrTooLarge},
}

// TestOpenHugeContainers: a 20 GiB SIONlib file whose META1 or META2
// claims a billion tasks, blocks, mapping entries or files is refused with
// a *CorruptionError naming the file, offset and field, allocating at most
// a few MiB.
func TestOpenHugeContainers(t *testing.T) {
	for _, tc := range hugeContainers {
		t.Run(tc.name, func(t *testing.T) {
			pieces, size := tc.c.pieces(t)
			if tc.name == "a billion tasks" {
				byteOrder(false).PutUint32(pieces[0][offNTasks:], 1<<30)
			}
			f := &sparseAt{size: size, pieces: pieces}
			var err error
			alloc := allocDuring(func() { _, err = NewReader(f, size) })
			require.ErrorIs(t, err, tc.want)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.field, ce.Field)
			assert.Positive(t, ce.Offset)
			assert.Contains(t, err.Error(), "more than the")
			assert.Less(t, alloc, uint64(8<<20), "allocated %d bytes", alloc)
		})
	}
}

// TestOpenSparse20GiBContainer: the same claims in real 20 GiB sparse
// files on disk, through Open and the sec2 driver; a 20 GiB key-value
// task stream of zeros (a billion empty records) is refused by Records
// after MaxRecords, and EachRecord stops when told.
func TestOpenSparse20GiBContainer(t *testing.T) {
	write := func(t *testing.T, pieces map[int64][]byte, size int64) string {
		path := filepath.Join(t.TempDir(), "huge.sion")
		f, err := vfd.Create(vfd.Sec2{}, path)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(size))
		for off, b := range pieces {
			_, err := f.WriteAt(b, off)
			require.NoError(t, err)
		}
		require.NoError(t, f.Close())
		return path
	}
	for _, tc := range hugeContainers[1:3] {
		t.Run(tc.name, func(t *testing.T) {
			pieces, size := tc.c.pieces(t)
			path := write(t, pieces, size)
			var err error
			alloc := allocDuring(func() { _, err = Open(vfd.Sec2{}, path) })
			require.ErrorIs(t, err, tc.want)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, path, ce.Path)
			assert.Less(t, alloc, uint64(8<<20), "allocated %d bytes", alloc)
		})
	}
	t.Run("20 GiB key-value stream", func(t *testing.T) {
		const stream = size20G - 1<<20
		pieces, size := container20G{chunks: []int64{stream}, mc: 1, blockSizes: [][]int64{{stream}}, keyval: true}.pieces(t)
		path := write(t, pieces, size)
		r, err := Open(vfd.Sec2{}, path)
		require.NoError(t, err)
		defer r.Close()
		require.True(t, r.KeyVal())
		require.Equal(t, int64(stream), r.Tasks()[0].Size)
		var recs []Record
		alloc := allocDuring(func() { recs, err = r.Records(0) })
		require.ErrorIs(t, err, ErrTooLarge)
		assert.Contains(t, err.Error(), "more than 1048576 records (use EachRecord)")
		assert.Len(t, recs, MaxRecords)
		assert.Equal(t, Record{Key: 0, Offset: 16 * MaxRecords, Length: 0}, recs[MaxRecords-1])
		assert.Less(t, alloc, uint64(256<<20), "allocated %d bytes (the list of a million records grows by appending)", alloc)
		stop := errors.New("enough")
		seen := 0
		err = r.EachRecord(0, func(Record) error {
			if seen++; seen == 1000 {
				return stop
			}
			return nil
		})
		require.ErrorIs(t, err, stop)
	})
}

// TestKeyReaderStreams: KeyReader returns the records of one key in
// stream order without holding a list of records: a stream of half a
// million records costs a bounded buffer.
func TestKeyReaderStreams(t *testing.T) {
	core := vfd.NewCore()
	const n = 1 << 19
	w, err := Create(core, "kv.sion", []int64{64 << 20}, nil, &Options{KeyVal: true})
	require.NoError(t, err)
	var want []byte
	tw := w.Task(0)
	for i := 0; i < n; i++ {
		key := int64(i % 4)
		data := []byte{byte(i), byte(i >> 8)}
		if i%1000 == 0 {
			data = nil // empty records too
		}
		require.NoError(t, tw.WriteRecord(key, data))
		if key == 3 {
			want = append(want, data...)
		}
	}
	require.NoError(t, w.Close())
	r, err := Open(core, "kv.sion")
	require.NoError(t, err)
	defer r.Close()
	var kr io.Reader
	var total int64
	alloc := allocDuring(func() { kr, total, err = r.KeyReader(0, 3) })
	require.NoError(t, err)
	assert.Equal(t, int64(len(want)), total)
	assert.Less(t, alloc, uint64(1<<20), "allocated %d bytes", alloc)
	got, err := io.ReadAll(kr)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got))
	count := 0
	require.NoError(t, r.EachRecord(0, func(Record) error { count++; return nil }))
	assert.Equal(t, n, count)
}

// TestWriterRefusesBeyondLimits: a writer refuses a container readers
// would refuse.
func TestWriterRefusesBeyondLimits(t *testing.T) {
	_, err := Create(vfd.NewCore(), "many.sion", make([]int64, MaxTasks+1), nil, nil)
	require.ErrorIs(t, err, ErrTooLarge)
}

// FuzzReaderSparse decodes a virtual file of head, gap zero bytes (up to
// 16 TiB, never stored) and tail, so the fuzzer reaches huge counts and
// offsets. NewReader must not panic, must fail with a sentinel, and must
// allocate no more than the bytes given plus what the (bounded) task and
// block counts it accepted need.
func FuzzReaderSparse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.sion*"))
	for _, p := range files {
		b, err := vfd.ReadFile(vfd.Sec2{}, p)
		if err == nil && len(b) > 2 {
			f.Add(b[:len(b)/2], b[len(b)/2:], uint64(0))
			f.Add(b[:len(b)/2], b[len(b)/2:], uint64(size20G))
		}
	}
	for _, tc := range hugeContainers {
		pieces, _ := tc.c.pieces(f)
		f.Add(pieces[0], []byte{}, uint64(size20G))
	}
	f.Fuzz(func(t *testing.T, head, tail []byte, gap uint64) {
		size := int64(len(head)) + int64(len(tail)) + int64(gap%(1<<44))
		sf := &sparseAt{size: size, pieces: map[int64][]byte{0: head, size - int64(len(tail)): tail}}
		var r *Reader
		var err error
		alloc := allocDuring(func() { r, err = NewReader(sf, size) })
		if err != nil {
			for _, s := range []error{ErrBadMagic, ErrVersion, ErrTruncated, ErrUnclosed, ErrInconsistent, ErrTooLarge} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error matches no sentinel: %v", err)
		}
		fi := r.Files()[0]
		need := uint64(16<<20) + 4*uint64(len(head)+len(tail)) + 320*uint64(fi.NTasks) + 2*8*uint64(fi.NTasks)*uint64(fi.MaxChunks+1)
		if alloc > need {
			t.Fatalf("NewReader allocated %d bytes for %d tasks x %d blocks", alloc, fi.NTasks, fi.MaxChunks)
		}
	})
}
