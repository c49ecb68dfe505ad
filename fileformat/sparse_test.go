package fileformat

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sparseWords returns n bytes whose 8-byte words are nonzero with
// probability 1/every (at least one word nonzero).
func sparseWords(n, every int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		if rng.IntN(every) == 0 {
			le.PutUint64(b[i:], rng.Uint64()|1)
		}
	}
	le.PutUint64(b[n/16*8:], 0x0102030405060708)
	return b
}

// TestSparseForm round-trips the word-sparse form at lengths whose
// bitmap does and does not fill its last byte and u64, checks its exact
// length, and checks that fuller, misaligned and short blocks are not
// given it.
func TestSparseForm(t *testing.T) {
	for _, n := range []int{64, 72, 512 + 8, 4096, 16384, 16384 + 56, 1 << 20} {
		b := sparseWords(n, 10, uint64(n))
		nnz := 0
		for i := 0; i < n; i += 8 {
			if le.Uint64(b[i:]) != 0 {
				nnz++
			}
		}
		prefix := []byte("prefix")
		f, ok := appendSparse(append([]byte(nil), prefix...), b)
		require.True(t, ok, "n=%d nnz=%d", n, nnz)
		require.Equal(t, prefix, f[:len(prefix)])
		f = f[len(prefix):]
		require.Len(t, f, sparseLen(n, nnz), "n=%d", n)
		require.Less(t, len(f), n)
		require.True(t, isSparseFrame(f))
		dst := bytes.Repeat([]byte{0xee}, n)
		z, err := decodeBlock(dst, f)
		require.NoError(t, err, "n=%d", n)
		assert.False(t, z)
		require.Equal(t, b, dst, "n=%d", n)

		// compressBlock picks the form, decompressBlock reads it.
		out, sz := compressBlock(nil, nil, b)
		require.Equal(t, f, out[:sz])
		require.NoError(t, decompressBlock(dst, out))
		require.Equal(t, b, dst)
	}
	dense := sparseWords(4096, 2, 9)
	_, ok := appendSparse(nil, dense)
	assert.False(t, ok, "half the words nonzero")
	late := make([]byte, 4096) // zeros first, dense later: not sparse overall
	copy(late[1024:], sparseWords(3072, 1, 3))
	_, ok = appendSparse(nil, late)
	assert.False(t, ok)
	_, ok = appendSparse(nil, sparseWords(4100, 10, 1)[:4100])
	assert.False(t, ok, "length not a multiple of 8")
	_, ok = appendSparse(nil, make([]byte, 56))
	assert.False(t, ok, "shorter than zeroMin")
}

// refSparse is the word-sparse frame of b built word by word, the
// definition appendSparse must match byte for byte.
func refSparse(b []byte) []byte {
	words := len(b) / 8
	bm := make([]byte, (words+7)/8)
	var vals []byte
	for i := range words {
		if w := le.Uint64(b[8*i:]); w != 0 {
			bm[i/8] |= 1 << (i % 8)
			vals = le.AppendUint64(vals, w)
		}
	}
	f := le.AppendUint32(nil, sparseMagic)
	f = le.AppendUint32(f, uint32(sparseHdr-8+len(bm)+len(vals)))
	f = le.AppendUint32(f, uint32(len(b)))
	return append(append(f, bm...), vals...)
}

// TestSparseFormMatchesReference checks appendSparse against refSparse
// at densities up to past the quarter limit, at lengths ending inside a
// group of 64 words, and exactly at the limit: the frame is the
// reference's, and a block is refused exactly when its first 32 words
// hold more than 16 values or the block more than a quarter.
func TestSparseFormMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 31))
	for _, n := range []int{64, 504, 512, 520, 4096 - 8, 16384, 16384 + 8*37} {
		for _, fill := range []int{0, 1, 5, 10, 20, 24, 25, 26, 30, 50} {
			b := make([]byte, n)
			for i := 0; i < n; i += 8 {
				if rng.IntN(100) < fill {
					le.PutUint64(b[i:], rng.Uint64()|1<<uint(rng.IntN(64)))
				}
			}
			checkSparseRef(t, b)
		}
		// Exactly at the limit, then one value past it, put at the end so
		// the probe of the first 32 words passes.
		words := n / 8
		limit := words * sparseMaxFill / 64
		for _, k := range []int{limit, limit + 1} {
			b := make([]byte, n)
			for i := words - 1; i >= 0 && words-1-i < k; i-- {
				le.PutUint64(b[8*i:], uint64(i)+1)
			}
			checkSparseRef(t, b)
		}
	}
}

func checkSparseRef(t *testing.T, b []byte) {
	t.Helper()
	nnz, probe := 0, 0
	for i := 0; i < len(b); i += 8 {
		if le.Uint64(b[i:]) != 0 {
			nnz++
			if i < 256 {
				probe++
			}
		}
	}
	want := probe <= 16 && nnz <= len(b)/8*sparseMaxFill/64
	f, ok := appendSparse([]byte("x"), b)
	require.Equal(t, want, ok, "n=%d nnz=%d probe=%d", len(b), nnz, probe)
	if !ok {
		require.Equal(t, []byte("x"), f)
		return
	}
	require.Equal(t, refSparse(b), f[1:], "n=%d nnz=%d", len(b), nnz)
}

// TestSparseFormDamaged checks that every kind of damage to a
// word-sparse frame is refused without writing past the block: a length
// field, the bitmap (more or fewer words, a bit past the block) and a
// truncated or extended frame.
func TestSparseFormDamaged(t *testing.T) {
	const n = 4096 + 40 // bitmap of 65 bytes: its last byte holds 1 bit
	b := sparseWords(n, 10, 5)
	f, ok := appendSparse(nil, b)
	require.True(t, ok)
	nb := (n/8 + 7) / 8
	damage := map[string]func([]byte) []byte{
		"user length": func(g []byte) []byte { g[4]++; return g },
		"block length": func(g []byte) []byte {
			le.PutUint32(g[8:], 1<<30)
			return g
		},
		"bit set": func(g []byte) []byte {
			for i := 0; i < nb; i++ {
				if g[sparseHdr+i] != 0xff {
					g[sparseHdr+i] |= ^g[sparseHdr+i] & -^g[sparseHdr+i]
					return g
				}
			}
			return g
		},
		"bit past the block": func(g []byte) []byte { g[sparseHdr+nb-1] |= 0x80; return g },
		"truncated":          func(g []byte) []byte { return g[:len(g)-8] },
		"header only":        func(g []byte) []byte { return g[:sparseHdr] },
		"extended":           func(g []byte) []byte { return append(g, make([]byte, 8)...) },
	}
	for name, d := range damage {
		g := d(append([]byte(nil), f...))
		if len(g) >= n {
			continue
		}
		dst := make([]byte, n, n+64)
		canary := dst[n : n+64]
		for i := range canary {
			canary[i] = 0xaa
		}
		_, err := decodeBlock(dst, g)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, errDecode, name)
		assert.Equal(t, bytes.Repeat([]byte{0xaa}, 64), canary, "%s: nothing written past the block", name)
	}
	// A frame for a shorter block is refused by a longer one's reader.
	short, ok := appendSparse(nil, b[:n-40])
	require.True(t, ok)
	_, err := decodeBlock(make([]byte, n), short)
	assert.ErrorIs(t, err, errDecode)
}

// TestSparseBlocksFile writes a compressed variable of sparse words
// (90% zero doubles), with one all-zero block and one random block:
// sparse blocks take the word-sparse form, every block hash is the hash
// of the logical bytes, the file reads back, verifies and copies, and a
// damaged value in a sparse block is caught at that block's offset.
func TestSparseBlocksFile(t *testing.T) {
	const bs = 4096
	data := sparseWords(10*bs, 10, 11)
	clear(data[2*bs : 3*bs])
	copy(data[5*bs:6*bs], dataKinds(bs, 4)["random"])
	vars := []Var{{ID: 1, Type: Float64, Data: data, Codec: CodecZstd}}
	m := &memFile{name: "s.fti"}
	_, sum, err := Write(m, Meta{CkptID: 1}, vars, nil, WithBlockSize(bs), WithClock(fixedClock))
	require.NoError(t, err)
	want, err := HashBlocks(data, bs)
	require.NoError(t, err)
	c := sum.Chunks[0]
	assert.Equal(t, want, c.BlockHashes)
	r, err := Open(&memFile{name: "s.fti", b: m.b})
	require.NoError(t, err)
	rc := r.chunk[0]
	soff := storedOffsets(&rc)
	for j := range c.Stored {
		at := rc.Fptr + soff[j]
		switch j {
		case 2:
			assert.Equal(t, uint32(zeroFrameLen(bs)), c.Stored[j])
		case 5:
			assert.Equal(t, uint32(bs), c.Stored[j], "random block stored raw")
		default:
			assert.True(t, isSparseFrame(m.b[at:at+int64(c.Stored[j])]), "block %d", j)
		}
	}
	checkFile(t, m.b, vars)

	bad := append([]byte(nil), m.b...)
	bad[rc.Fptr+soff[8]+soff[9]-soff[8]-1] ^= 0x10 // a stored value
	br, err := Open(&memFile{name: "bad.fti", b: bad})
	require.NoError(t, err)
	for _, check := range []func() error{br.Verify, func() error { return br.ReadVar(1, make([]byte, len(data))) }} {
		err := check()
		var ce *CorruptionError
		require.True(t, errors.As(err, &ce), "%v", err)
		assert.ErrorIs(t, err, ErrHashMismatch)
		assert.Equal(t, rc.Fptr+soff[8], ce.Offset)
	}
}

// FuzzDecodeBlock feeds arbitrary stored forms to the block decoder for
// a block of a given length: it returns an error or exactly that many
// bytes, never writes past them, and a word-sparse frame that decodes
// re-encodes to itself.
func FuzzDecodeBlock(f *testing.F) {
	for _, n := range []int{64, 4096, 4136} {
		s, _ := appendSparse(nil, sparseWords(n, 10, uint64(n)))
		f.Add(s, uint16(n))
		f.Add(zeroFrame(n), uint16(n))
		out, _ := compressBlock(mustEncoder(f), nil, dataKinds(n, 1)["smooth"])
		f.Add(out, uint16(n))
	}
	f.Fuzz(func(t *testing.T, src []byte, n16 uint16) {
		n := int(n16)
		buf := make([]byte, n+16)
		for i := range buf[n:] {
			buf[n+i] = 0x5a
		}
		_, err := decodeBlock(buf[:n], src)
		require.Equal(t, bytes.Repeat([]byte{0x5a}, 16), buf[n:], "written past the block")
		if err != nil || !isSparseFrame(src) || len(src) == n {
			return
		}
		again, ok := appendSparse(nil, buf[:n])
		if ok {
			require.Equal(t, src, again)
		}
	})
}

func mustEncoder(tb testing.TB) compressor {
	e, err := getEncoder()
	require.NoError(tb, err)
	return e
}

// TestCompressBlocksRawFirst checks the group layout when incompressible
// blocks come before stored forms (they are copied in only then), after
// them, and alone (nil: nothing copied): every block decodes from its
// place in the group to its bytes, and its hash is its bytes'.
func TestCompressBlocksRawFirst(t *testing.T) {
	const bs = 4096
	k := dataKinds(bs, 8)
	blocks := map[byte][]byte{'r': k["random"], 's': sparseWords(bs, 10, 4), 'z': make([]byte, bs), 'm': k["smooth"]}
	for _, pat := range []string{"rrs", "rrrz", "rrm", "srr", "rrrr", "rsrzrmr", "m", "mrrs"} {
		var data []byte
		for i := range pat {
			data = append(data, blocks[pat[i]]...)
		}
		n := len(pat)
		stored := make([]uint32, n)
		hashes := make([][HashSize]byte, n)
		out := compressBlocks(mustEncoder(t), data, bs, 0, n, stored)
		hashGroup(data, bs, 0, n, hashes)
		if strings.Trim(pat, "r") == "" || out == nil {
			// After a raw block the next ones are stored raw untried
			// (probeEvery): "rrm" keeps its smooth block raw too.
			require.Nil(t, out, pat)
			for j := range stored {
				require.Equal(t, uint32(bs), stored[j], "%s block %d", pat, j)
			}
			continue
		}
		off := 0
		for j := 0; j < n; j++ {
			want := data[j*bs : (j+1)*bs]
			assert.Equal(t, BlockHash(want), hashes[j], "%s block %d", pat, j)
			got := make([]byte, bs)
			require.NoError(t, decompressBlock(got, out[off:off+int(stored[j])]), "%s block %d", pat, j)
			require.Equal(t, want, got, "%s block %d", pat, j)
			off += int(stored[j])
		}
		require.Equal(t, len(out), off, pat)
	}
}
