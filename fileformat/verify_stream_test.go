package fileformat

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// countingFile records every ReadAt (offset, length, memory type) of a
// memFile.
type countingFile struct {
	*memFile
	mu    sync.Mutex
	reads []fileSpan
}

func (c *countingFile) ReadAt(p []byte, off int64) (int, error) {
	return c.ReadAtType(vfd.MemDefault, p, off)
}

func (c *countingFile) ReadAtType(t vfd.MemType, p []byte, off int64) (int, error) {
	c.mu.Lock()
	c.reads = append(c.reads, fileSpan{off, off + int64(len(p)), t})
	c.mu.Unlock()
	return c.memFile.ReadAt(p, off)
}

// TestVerifyReadsEachByteOnce: Verify reads every byte of the file
// exactly once, in order, in pieces of at most about 4 MiB, each part of
// the file with its memory type (header and file block MemSuper, data
// MemDraw, metadata MemOHdr), and never reads a data byte a second time.
func TestVerifyReadsEachByteOnce(t *testing.T) {
	big := Var{ID: 1, Name: "big", Type: Bytes, Data: pattern(9<<20+3, 5)}
	small := Var{ID: 2, Name: "small", Type: Bytes, Data: pattern(1000, 6)}
	m := &memFile{name: "big.fti"}
	_, _, err := Write(m, Meta{CkptID: 1, Rank: 2}, []Var{small, big}, nil, WithClock(fixedClock))
	require.NoError(t, err)
	files := map[string][]byte{"big": m.b, "large": largeFile(t)}
	for name, b := range files {
		cf := &countingFile{memFile: &memFile{name: name, b: b}}
		r, err := Open(cf)
		require.NoError(t, err, name)
		cf.reads = nil // Open's own reads: header, file block, metadata
		require.NoError(t, r.Verify(), name)
		next := int64(0)
		for _, rd := range cf.reads {
			require.Equal(t, next, rd.off, "%s: a read at %d, want %d (every byte once, in order)", name, rd.off, next)
			assert.LessOrEqual(t, rd.end-rd.off, int64(4<<20+int(r.fb.blockSize)), "%s: a read of %d bytes", name, rd.end-rd.off)
			want := vfd.MemDraw
			switch {
			case rd.off < HeaderSize || rd.off >= r.fb.fs-FBSize:
				want = vfd.MemSuper
			case rd.off >= r.fb.metaOff:
				want = vfd.MemOHdr
			}
			assert.Equal(t, want, rd.t, "%s: memory type of the read at %d", name, rd.off)
			next = rd.end
		}
		assert.Equal(t, int64(len(b)), next, "%s: Verify read %d of %d bytes", name, next, len(b))
	}
}

// TestVerifierWorkersFindTheSameBlock: a flipped byte in any block of a
// chunk hashed by several goroutines (writes of 1 MiB and more) is found
// at the same block, with the same offset and the same count of good
// bytes, as when one goroutine hashes it, and as Verify reports it.
func TestVerifierWorkersFindTheSameBlock(t *testing.T) {
	b := largeFile(t)
	r1, err := Open(&memFile{name: "large.fti", b: b}, WithHashWorkers(1))
	require.NoError(t, err)
	c := r1.chunk[len(r1.chunk)-1] // var c, 1 MiB + 17 bytes
	bs := int64(r1.fb.blockSize)
	for _, at := range []int64{c.Fptr, c.Fptr + 5*bs + 1, c.Fptr + c.Size - 1} {
		bad := append([]byte(nil), b...)
		bad[at] ^= 0x40
		var offs []int64
		var goods []int
		for _, w := range []int{1, 4} {
			r, err := Open(&memFile{name: "large.fti", b: bad}, WithHashWorkers(w))
			require.NoError(t, err)
			v, err := r.NewVerifier()
			require.NoError(t, err)
			_, err = v.Write(bad[:c.Fptr])
			require.NoError(t, err)
			n, err := v.Write(bad[c.Fptr:])
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce, "workers %d, byte %d", w, at)
			require.ErrorIs(t, err, ErrHashMismatch)
			assert.Equal(t, int32(9), ce.VarID)
			offs, goods = append(offs, ce.Offset), append(goods, n)
			verr := r.Verify()
			require.ErrorAs(t, verr, &ce)
			assert.Equal(t, offs[len(offs)-1], ce.Offset, "Verify, workers %d", w)
		}
		blk := c.Fptr + (at-c.Fptr)/bs*bs
		assert.Equal(t, []int64{blk, blk}, offs, "byte %d: the damaged block's first byte", at)
		assert.Equal(t, []int{int(blk - c.Fptr), int(blk - c.Fptr)}, goods, "byte %d: the good bytes before it", at)
	}
}
