package fileformat

import (
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/vfd"
)

// sparseFile is a read-only file of size bytes: head at offset 0, tail at
// the end, zeros between, which are never stored.
type sparseFile struct {
	name       string
	head, tail []byte
	size       int64
}

func newSparse(name string, head, tail []byte, size int64) *sparseFile {
	return &sparseFile{name: name, head: head, tail: tail, size: max(size, int64(len(head)+len(tail)))}
}

func (s *sparseFile) Name() string                       { return s.name }
func (s *sparseFile) Size() (int64, error)               { return s.size, nil }
func (s *sparseFile) Sync() error                        { return nil }
func (s *sparseFile) Close() error                       { return nil }
func (s *sparseFile) Truncate(int64) error               { return errors.New("read-only") }
func (s *sparseFile) WriteAt([]byte, int64) (int, error) { return 0, errors.New("read-only") }

func (s *sparseFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= s.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), s.size-off))
	q := p[:n]
	clear(q)
	if off < int64(len(s.head)) {
		copy(q, s.head[off:])
	}
	tailOff := s.size - int64(len(s.tail))
	if end := off + int64(n); end > tailOff {
		from := max(off, tailOff)
		copy(q[from-off:], s.tail[from-tailOff:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// hostileTail returns the header and file block of a real file with the
// file block's claims edited by edit for a file of size bytes (the
// metadata placed right before the file block) and its own hash
// recomputed, as a forger would.
func hostileTail(t testing.TB, size int64, edit func(fb *fileBlock)) (hdr, tail []byte) {
	good, _ := smallFile(t)
	fb := decodeFB(good[len(good)-FBSize:])
	fb.fs = size
	edit(&fb)
	fb.metaOff = size - FBSize - fb.metaSize // where the file block says the metadata starts
	b := fb.encode()
	h := fbHash(good[:HeaderSize], b[:])
	copy(b[fbHashOff:], h[:])
	return good[:HeaderSize], b[:]
}

// consistentHuge makes fb claim one variable of all the data between the
// header and a metadata block of zeros, with block hashes that match
// those counts exactly, so only the metadata's content is wrong.
func consistentHuge(size int64, bs uint32, sealZeros bool) func(fb *fileBlock) {
	return func(fb *fileBlock) {
		fb.numVars, fb.numBlocks, fb.numChunks, fb.blockSize = 1, 1, 1, bs
		var metaSize, data int64
		bh := uint64(0)
		for range 8 { // converges in two or three rounds
			metaSize = VarRecordSize + BMDSize + VMDSize + int64(bh)*HashSize
			data = size - FBSize - metaSize - HeaderSize
			bh = uint64(numBlocks(data, bs))
		}
		fb.metaSize, fb.metaOff, fb.ckptSize, fb.numBHashes = metaSize, HeaderSize+data, data, bh
		if sealZeros {
			h := blake3.New()
			zero := make([]byte, 1<<20)
			for left := metaSize; left > 0; left -= int64(len(zero)) {
				_, _ = h.Write(zero[:min(left, int64(len(zero)))])
			}
			h.Sum(fb.metaHash[:0])
		}
	}
}

// allocDuring returns the bytes allocated while fn runs.
func allocDuring(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

const size20G = 20 << 30

// hugeClaims are file blocks of a 20 GiB file (sealed with a valid hash
// of their own) whose sizes and counts no reader may trust.
var hugeClaims = []struct {
	name string
	edit func(fb *fileBlock)
	want error
	what string
}{
	{"metadata claims the whole file", func(fb *fileBlock) {
		fb.metaOff, fb.metaSize, fb.ckptSize = HeaderSize, size20G-HeaderSize-FBSize, 0
	}, ErrCorrupt, "metadata block of 21474836224 bytes, more than the 268435456 bytes a writer produces"},
	{"metadata one byte over the limit", func(fb *fileBlock) {
		fb.metaSize = MaxMetaSize + 1
		fb.metaOff = size20G - FBSize - fb.metaSize
		fb.ckptSize = 0
	}, ErrCorrupt, "more than the 268435456 bytes"},
	{"4 billion variables", func(fb *fileBlock) { fb.numVars = 1<<32 - 1 }, ErrCorrupt, "does not fit 4294967295 variables"},
	{"4 billion chunks", func(fb *fileBlock) { fb.numChunks = 1<<32 - 1 }, ErrCorrupt, "4294967295 chunks and"},
	{"more blocks than chunks", func(fb *fileBlock) { fb.numBlocks = fb.numChunks + 1 }, ErrCorrupt, "blocks holding"},
	{"2^60 block hashes", func(fb *fileBlock) { fb.numBHashes = 1 << 60 }, ErrCorrupt, "1152921504606846976 block hashes"},
	{"consistent counts, metadata of zeros", consistentHuge(size20G, 64<<10, true), ErrCorrupt, "variable 0: element type 0 size 0"},
	{"consistent counts, wrong metadata hash", consistentHuge(size20G, 64<<10, false), ErrHashMismatch, "metadata hash"},
	{"consistent counts beyond the limit", consistentHuge(size20G, MinBlockSize, false), ErrCorrupt, "more than the 268435456 bytes"},
}

// TestOpenHugeClaims: a 20 GiB file whose file block claims sizes and
// counts out of all proportion is refused with a *CorruptionError naming
// the file, offset and claim, after allocating at most a few MiB.
func TestOpenHugeClaims(t *testing.T) {
	for _, tc := range hugeClaims {
		t.Run(tc.name, func(t *testing.T) {
			hdr, tail := hostileTail(t, size20G, tc.edit)
			f := newSparse("hostile.fti", hdr, tail, size20G)
			var err error
			alloc := allocDuring(func() { _, err = Open(f) })
			require.ErrorIs(t, err, tc.want)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "hostile.fti", ce.Path)
			assert.GreaterOrEqual(t, ce.Offset, int64(0))
			assert.Contains(t, err.Error(), tc.what)
			assert.Less(t, alloc, uint64(8<<20), "allocated %d bytes", alloc)
		})
	}
}

// TestOpenSparse20GiBFile: the same claims in a real 20 GiB sparse file
// on disk, opened through the sec2 driver.
func TestOpenSparse20GiBFile(t *testing.T) {
	for _, tc := range []int{0, 6, 7} {
		c := hugeClaims[tc]
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sparse.fti")
			f, err := vfd.Create(vfd.Sec2{}, path)
			require.NoError(t, err)
			hdr, tail := hostileTail(t, size20G, c.edit)
			require.NoError(t, f.Truncate(size20G))
			_, err = f.WriteAt(hdr, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(tail, size20G-FBSize)
			require.NoError(t, err)
			require.NoError(t, f.Close())

			rf := openAt(t, path)
			alloc := allocDuring(func() { _, err = Open(rf) })
			require.ErrorIs(t, err, c.want)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, path, ce.Path)
			assert.Contains(t, err.Error(), c.what)
			assert.Less(t, alloc, uint64(8<<20), "allocated %d bytes", alloc)
		})
	}
}

// TestWriteRefusesHugeMetadata: Plan and Write refuse a file whose
// metadata block would exceed MaxMetaSize, which Open would refuse, and
// leave the file untouched.
func TestWriteRefusesHugeMetadata(t *testing.T) {
	name := strings.Repeat("n", 0xffff) // shared by every variable: no memory
	vars := make([]Var, MaxMetaSize/varRecordLen(len(name))+1)
	for i := range vars {
		vars[i] = Var{ID: int32(i), Name: name, Data: []byte{}}
	}
	_, _, err := Plan(vars, nil)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "exceeds MaxMetaSize")
	m := &memFile{name: "big.fti", b: []byte("previous")}
	_, _, err = Write(m, Meta{}, vars, nil)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Equal(t, "previous", string(m.b))
	// One variable fewer fits.
	_, fs, err := Plan(vars[:len(vars)-1], nil)
	require.NoError(t, err)
	assert.Greater(t, fs, int64(MaxMetaSize)-int64(varRecordLen(len(name))))
}

// FuzzReaderSparse feeds Open a virtual file made of head, gap zero bytes
// (up to 16 TiB, never stored) and tail, so that the fuzzer explores huge
// sizes, offsets and counts. Open must not panic, must fail with a
// *CorruptionError or succeed, and must allocate no more than a few MiB
// beyond the bytes actually given. With reseal the file block's own hash
// is recomputed, so the claims behind it are reached.
func FuzzReaderSparse(f *testing.F) {
	for _, g := range goldenFiles(f) {
		b := g.b
		f.Add(b[:len(b)/2], b[len(b)/2:], uint64(0), false)
		f.Add(b[:HeaderSize], b[len(b)-FBSize:], uint64(size20G), true)
	}
	for _, c := range hugeClaims {
		hdr, tail := hostileTail(f, size20G, c.edit)
		f.Add(hdr, tail, uint64(size20G-HeaderSize-FBSize), false)
	}
	f.Fuzz(func(t *testing.T, head, tail []byte, gap uint64, reseal bool) {
		if reseal && len(head) >= HeaderSize && len(tail) >= FBSize {
			tail = append([]byte(nil), tail...)
			fb := tail[len(tail)-FBSize:]
			h := fbHash(head[:HeaderSize], fb)
			copy(fb[fbHashOff:], h[:])
		}
		size := int64(len(head)) + int64(len(tail)) + int64(gap%(1<<44))
		sf := newSparse("sparse.fti", head, tail, size)
		var err error
		alloc := allocDuring(func() { _, err = Open(sf) })
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) && !errors.Is(err, ErrNotFTIFF) {
				t.Fatalf("error is no *CorruptionError: %v", err)
			}
		}
		if limit := uint64(8<<20) + 8*uint64(len(head)+len(tail)); alloc > limit {
			t.Fatalf("Open allocated %d bytes for %d given bytes (file of %d bytes)", alloc, len(head)+len(tail), size)
		}
	})
}
