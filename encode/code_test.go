package encode

import (
	"bytes"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"
)

func randBlocks(r *rand.Rand, n, size int) [][]byte {
	b := make([][]byte, n)
	for i := range b {
		b[i] = make([]byte, size)
		for j := range b[i] {
			b[i][j] = byte(r.Uint32())
		}
	}
	return b
}

func cloneAll(b [][]byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = bytes.Clone(b[i])
	}
	return out
}

var shapes = []struct{ k, m int }{{1, 1}, {2, 2}, {3, 3}, {4, 4}, {4, 2}, {5, 2}, {6, 3}, {8, 1}}

// TestEveryErasurePattern checks, like redset's tests, that every pattern
// of at most m losses is rebuilt bit for bit and every pattern of m+1
// losses is refused without touching any buffer.
func TestEveryErasurePattern(t *testing.T) {
	for _, s := range shapes {
		t.Run(fmt.Sprintf("k=%d,m=%d", s.k, s.m), func(t *testing.T) {
			c, err := New(s.k, s.m)
			require.NoError(t, err)
			r := rand.New(rand.NewPCG(uint64(s.k), uint64(s.m)))
			data := randBlocks(r, s.k, 97)
			parity := randBlocks(r, s.m, 97) // garbage, overwritten
			require.NoError(t, c.EncodeBlock(data, parity))
			ok, err := c.Verify(data, parity)
			require.NoError(t, err)
			require.True(t, ok)
			want := append(cloneAll(data), cloneAll(parity)...)
			total := s.k + s.m
			recovered, refused := 0, 0
			for mask := 0; mask < 1<<total; mask++ {
				lost := make([]bool, total)
				shards := cloneAll(want)
				for i := range lost {
					if mask&(1<<i) != 0 {
						lost[i] = true
						for j := range shards[i] {
							shards[i][j] = 0xEE
						}
					}
				}
				before := cloneAll(shards)
				err := c.Reconstruct(shards, lost)
				switch n := bits.OnesCount(uint(mask)); {
				case n <= s.m:
					require.NoError(t, err, "mask %b", mask)
					require.Equal(t, want, shards, "mask %b", mask)
					recovered++
				default:
					require.ErrorIs(t, err, ErrTooManyErasures, "mask %b", mask)
					var ee *ErasureError
					require.ErrorAs(t, err, &ee)
					assert.Len(t, ee.Lost, n)
					require.Equal(t, before, shards, "refused pattern must not touch buffers")
					refused++
				}
			}
			assert.Positive(t, recovered)
			if total > s.m {
				assert.Positive(t, refused)
			}
		})
	}
}

func TestDefaultParityAndErrors(t *testing.T) {
	c, err := New(4, 0)
	require.NoError(t, err)
	assert.Equal(t, 4, c.M())
	for _, tc := range []struct{ k, m int }{{0, 1}, {1, -1}, {200, 100}} {
		_, err := New(tc.k, tc.m)
		require.ErrorIs(t, err, ErrBadShape, "k=%d m=%d", tc.k, tc.m)
	}
	err = c.EncodeBlock(make([][]byte, 3), make([][]byte, 4))
	require.ErrorIs(t, err, ErrBadShape)
	err = c.EncodeBlock([][]byte{{1}, {2}, {3}, {4, 5}}, make([][]byte, 4))
	require.ErrorIs(t, err, ErrBadShape)
	assert.Contains(t, err.Error(), "data shard 3 has 2 bytes")
	err = c.Reconstruct(make([][]byte, 8), make([]bool, 7))
	require.ErrorIs(t, err, ErrBadShape)
	err = c.Reconstruct(randBlocks(rand.New(rand.NewPCG(1, 1)), 8, 4), []bool{true, true, false, true, false, true, true, false})
	require.ErrorIs(t, err, ErrTooManyErasures)
	assert.Contains(t, err.Error(), "lost shards [0 1 3 5 6]")
}

type memFile struct{ b []byte }

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(f.b)) {
		return 0, io.EOF
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > int64(len(f.b)) {
		f.b = append(f.b, make([]byte, end-int64(len(f.b)))...)
	}
	return copy(f.b[off:], p), nil
}

func TestReadBlockShortFile(t *testing.T) {
	buf := make([]byte, 8)
	err := ReadBlock(&memFile{b: []byte("abc")}, 5, buf, 0)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.NoError(t, ReadBlock(&memFile{b: []byte("abc")}, 3, buf, 0))
	assert.Equal(t, []byte("abc\x00\x00\x00\x00\x00"), buf)
	h, err := HashReader(&memFile{b: []byte("abcdef")}, 6, 4)
	require.NoError(t, err)
	assert.Equal(t, Sum([]byte("abcdef")), h)
}

// TestRowMatchesEncode checks the single-row encoders against EncodeBlock.
func TestRowMatchesEncode(t *testing.T) {
	for _, s := range shapes {
		c, err := New(s.k, s.m)
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(11, uint64(s.k)))
		data := randBlocks(r, s.k, 777)
		want := randBlocks(r, s.m, 777)
		require.NoError(t, c.EncodeBlock(data, want))
		for j := range s.m {
			row, err := c.Row(j)
			require.NoError(t, err)
			acc := make([]byte, 777)
			for _, i := range r.Perm(s.k) { // any order
				require.NoError(t, row.Add(data[i], i, acc))
			}
			assert.Equal(t, want[j], acc, "k=%d m=%d row %d", s.k, s.m, j)
		}
	}
	c, err := New(3, 2)
	require.NoError(t, err)
	_, err = c.Row(2)
	require.ErrorIs(t, err, ErrBadShape)
	row, err := c.Row(1)
	require.NoError(t, err)
	require.ErrorIs(t, row.Add(make([]byte, 4), 3, make([]byte, 4)), ErrBadShape)
	require.ErrorIs(t, row.Add(make([]byte, 4), 0, make([]byte, 3)), ErrBadShape)
}

// TestHashReaderPieces: the read-ahead hash equals the one-shot hash at
// every piece boundary, and a short file fails with the offset of the
// missing bytes.
func TestHashReaderPieces(t *testing.T) {
	b := make([]byte, 10000)
	for i := range b {
		b[i] = byte(i*31 + i>>8)
	}
	for _, piece := range []int{1, 7, 999, 1000, 4096, 9999, 10000, 20000} {
		for _, size := range []int{0, 1, 999, 1000, 1001, 10000} {
			h, err := HashReader(&memFile{b: b[:size]}, int64(size), piece)
			require.NoError(t, err, "piece %d size %d", piece, size)
			require.Equal(t, Sum(b[:size]), h, "piece %d size %d", piece, size)
		}
		_, err := HashReader(&memFile{b: b[:5000]}, 10000, piece)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "piece %d", piece)
		assert.Contains(t, err.Error(), "read at 5000")
	}
}

// TestHasherMatchesBLAKE3: the SIMD stream hasher gives BLAKE3-256 (the
// reference implementation's digest) at every size around the chunk and
// subtree boundaries and for any split of the input into writes.
func TestHasherMatchesBLAKE3(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 7))
	b := make([]byte, 300<<10)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	sizes := []int{0, 1, 63, 64, 1023, 1024, 1025, 2048, 16383, 16384, 16385, 32768, 32769, 49152, 65536 + 1024, 131072, 131072 + 16384 + 5, 300 << 10}
	for i := 0; i < 40; i++ {
		sizes = append(sizes, r.IntN(len(b)))
	}
	for _, n := range sizes {
		want := Hash(blake3.Sum256(b[:n]))
		h := NewHasher()
		h.Write(b[:n])
		require.Equal(t, want, h.Sum256(), "size %d, one write", n)
		h = NewHasher()
		for off := 0; off < n; {
			k := min(n-off, r.IntN(40000)+1)
			h.Write(b[off : off+k])
			off += k
			if off < n && r.IntN(4) == 0 {
				require.Equal(t, Hash(blake3.Sum256(b[:off])), h.Sum256(), "size %d, prefix %d", n, off)
			}
		}
		require.Equal(t, want, h.Sum256(), "size %d, random writes", n)
		require.Equal(t, want[:], h.Sum(nil))
	}
}
