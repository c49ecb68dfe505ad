package fileformat

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamIn shows b to a Verifier of open in pieces of the given size and
// returns the first error of Write or Close.
func streamIn(t *testing.T, open *Reader, b []byte, piece int) error {
	t.Helper()
	v, err := open.NewVerifier()
	require.NoError(t, err)
	for off := 0; off < len(b); off += piece {
		p := b[off:min(off+piece, len(b))]
		n, err := v.Write(p)
		if err != nil {
			assert.Less(t, n, len(p), "a failed Write reports fewer bytes than given")
			_, again := v.Write(p)
			assert.Equal(t, err, again, "the error sticks")
			assert.Equal(t, err, v.Close(), "Close returns the first error")
			return err
		}
		require.Equal(t, len(p), n)
	}
	return v.Close()
}

// largeFile returns a file of three variables whose chunks are not
// multiples of the default block size, over two data blocks.
func largeFile(t *testing.T) []byte {
	t.Helper()
	a := Var{ID: 7, Name: "a", Type: Bytes, Data: pattern(300_001, 1)}
	b := Var{ID: 8, Name: "b", Type: Float64, Data: pattern(8*20_000, 2)}
	m := &memFile{name: "large.fti"}
	lay, _, err := Write(m, Meta{CkptID: 1, Rank: 3}, []Var{a, b}, nil, WithClock(fixedClock))
	require.NoError(t, err)
	a.Data = pattern(250_003, 3) // shrunk: a zero tail
	c := Var{ID: 9, Name: "c", Type: Bytes, Data: pattern(1<<20+17, 4)}
	m = &memFile{name: "large.fti"}
	_, _, err = Write(m, Meta{CkptID: 2, Rank: 3}, []Var{a, b, c}, lay, WithClock(fixedClock))
	require.NoError(t, err)
	return m.b
}

// TestVerifierAcceptsSoundFiles streams sound files in pieces of many
// sizes (one byte, pieces that cut dCP blocks, whole blocks, the whole
// file) and through the golden files.
func TestVerifierAcceptsSoundFiles(t *testing.T) {
	small, _ := smallFile(t)
	files := map[string][]byte{"small": small, "large": largeFile(t)}
	for _, g := range []string{"single.fti", "grown.fti", "empty.fti", "blocks.fti", "datasets.fti"} {
		files[g] = fileBytes(t, openAt(t, "testdata/"+g))
	}
	for name, b := range files {
		r, err := Open(&memFile{name: name, b: b})
		require.NoError(t, err, name)
		require.NoError(t, r.Verify(), name)
		bs := int(r.fb.blockSize)
		for _, piece := range []int{1, 7, 1000, bs - 1, bs, bs + 1, 3*bs + 5, 1 << 20, len(b)} {
			assert.NoError(t, streamIn(t, r, b, max(piece, 1)), "%s in pieces of %d", name, piece)
		}
	}
}

// TestVerifierFindsEveryByte flips every byte of a small file in turn
// (header, data, zero tails, metadata, file block): the stream fails with
// a *CorruptionError at or before the flipped byte, never passes.
func TestVerifierFindsEveryByte(t *testing.T) {
	b, _ := smallFile(t)
	r, err := Open(&memFile{name: "small.fti", b: b})
	require.NoError(t, err)
	for i := range b {
		bad := append([]byte(nil), b...)
		bad[i] ^= 0x10
		for _, piece := range []int{len(b), 13, int(r.fb.blockSize)} {
			err := streamIn(t, r, bad, piece)
			var ce *CorruptionError
			if !assert.ErrorAs(t, err, &ce, "byte %d flipped, pieces of %d", i, piece) {
				continue
			}
			assert.True(t, errors.Is(err, ErrHashMismatch) || errors.Is(err, ErrCorrupt), "byte %d: %v", i, err)
			assert.LessOrEqual(t, ce.Offset, int64(i), "byte %d: the error names a later offset (%v)", i, err)
		}
	}
}

// TestVerifierDataBlock names the variable, chunk and block of a damaged
// data byte, as Verify does.
func TestVerifierDataBlock(t *testing.T) {
	b := largeFile(t)
	r, err := Open(&memFile{name: "large.fti", b: b})
	require.NoError(t, err)
	c := r.chunk[len(r.chunk)-1] // var c, 1 MiB + 17 bytes
	at := c.Fptr + 3*int64(r.fb.blockSize) + 100
	bad := append([]byte(nil), b...)
	bad[at]++
	err = streamIn(t, r, bad, 1<<20)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, ErrHashMismatch)
	assert.Equal(t, int32(9), ce.VarID)
	assert.Equal(t, c.Fptr+3*int64(r.fb.blockSize), ce.Offset, "the block's first byte")
	assert.Contains(t, err.Error(), "block 3 of chunk")
}

// TestVerifierLength: a stream that stops early is ErrTruncated, one with
// bytes past the file's end ErrCorrupt, and a file written without hashes
// has no verifier.
func TestVerifierLength(t *testing.T) {
	b, _ := smallFile(t)
	r, err := Open(&memFile{name: "small.fti", b: b})
	require.NoError(t, err)
	for _, cut := range []int{0, 1, HeaderSize, len(b) / 2, len(b) - FBSize, len(b) - 1} {
		assert.ErrorIs(t, streamIn(t, r, b[:cut], 64), ErrTruncated, "cut at %d", cut)
	}
	assert.ErrorIs(t, streamIn(t, r, append(append([]byte(nil), b...), 0), 64), ErrCorrupt, "one byte too many")

	m := &memFile{name: "unhashed.fti"}
	_, _, err = Write(m, Meta{CkptID: 1}, []Var{{ID: 1, Type: Bytes, Data: pattern(5000, 9)}}, nil, WithoutHash())
	require.NoError(t, err)
	u, err := Open(m)
	require.NoError(t, err)
	_, err = u.NewVerifier()
	assert.ErrorIs(t, err, ErrUnhashed)
}

// FuzzVerifier streams a sound file cut at two fuzzed points, with one
// fuzzed byte change: it passes exactly when the bytes are the file's.
func FuzzVerifier(f *testing.F) {
	f.Add(uint16(10), uint16(500), uint16(0), byte(0))
	f.Add(uint16(64), uint16(1024), uint16(300), byte(1))
	f.Add(uint16(1), uint16(2), uint16(2000), byte(0x80))
	f.Fuzz(func(t *testing.T, c1, c2, at uint16, x byte) {
		b, _ := smallFile(t)
		r, err := Open(&memFile{name: "small.fti", b: b})
		require.NoError(t, err)
		s := append([]byte(nil), b...)
		i := int(at) % len(s)
		s[i] ^= x
		v, err := r.NewVerifier()
		require.NoError(t, err)
		p1, p2 := min(int(c1), len(s)), min(int(c2), len(s))
		p1, p2 = min(p1, p2), max(p1, p2)
		var werr error
		for _, p := range [][]byte{s[:p1], s[p1:p2], s[p2:]} {
			if _, werr = v.Write(p); werr != nil {
				break
			}
		}
		err = v.Close()
		if werr != nil {
			require.Equal(t, werr, err)
		}
		if x == 0 {
			require.NoError(t, err)
		} else {
			require.Error(t, err)
		}
	})
}
