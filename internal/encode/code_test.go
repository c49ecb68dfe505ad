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

// TestReconstructSome: for every pattern of at most m losses and every
// subset of the lost shards wanted, the wanted shards are rebuilt bit for
// bit and the other lost shards' buffers are not touched (not computed);
// a pattern of more than m losses is refused whatever is wanted.
func TestReconstructSome(t *testing.T) {
	for _, s := range []struct{ k, m int }{{2, 2}, {4, 4}, {4, 2}, {5, 2}, {2, 3}, {1, 3}, {3, 1}} {
		t.Run(fmt.Sprintf("k=%d,m=%d", s.k, s.m), func(t *testing.T) {
			c, err := New(s.k, s.m)
			require.NoError(t, err)
			r := rand.New(rand.NewPCG(uint64(s.k), uint64(s.m)))
			data := randBlocks(r, s.k, 97)
			parity := randBlocks(r, s.m, 97)
			require.NoError(t, c.EncodeBlock(data, parity))
			full := append(cloneAll(data), cloneAll(parity)...)
			total := s.k + s.m
			for mask := 1; mask < 1<<total; mask++ {
				n := bits.OnesCount(uint(mask))
				for sub := mask; ; sub = (sub - 1) & mask { // every subset of the lost shards
					lost, want := make([]bool, total), make([]bool, total)
					shards := cloneAll(full)
					for i := range total {
						if mask&(1<<i) != 0 {
							lost[i] = true
							want[i] = sub&(1<<i) != 0
							for j := range shards[i] {
								shards[i][j] = 0xEE
							}
						}
					}
					err := c.ReconstructSome(shards, lost, want)
					if n > s.m {
						require.ErrorIs(t, err, ErrTooManyErasures, "mask %b", mask)
						break
					}
					require.NoError(t, err, "mask %b want %b", mask, sub)
					for i := range total {
						if lost[i] && !want[i] {
							require.Equal(t, bytes.Repeat([]byte{0xEE}, 97), shards[i], "mask %b want %b: shard %d not wanted, untouched", mask, sub, i)
						} else {
							require.Equal(t, full[i], shards[i], "mask %b want %b: shard %d", mask, sub, i)
						}
					}
					if sub == 0 {
						break
					}
				}
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

// TestRowCombineMatchesAdd checks Combine against EncodeBlock with every
// shard given (in any order, shard sizes on both sides of the library's
// kernel thresholds) and against Adds of the shards given when some are
// missing, and its refusals.
func TestRowCombineMatchesAdd(t *testing.T) {
	for _, s := range shapes {
		c, err := New(s.k, s.m)
		require.NoError(t, err)
		for _, size := range []int{1, 777, 64 << 10, 1<<20 + 3} {
			r := rand.New(rand.NewPCG(12, uint64(s.k*size)))
			data := randBlocks(r, s.k, size)
			want := randBlocks(r, s.m, size)
			require.NoError(t, c.EncodeBlock(data, want))
			for j := range s.m {
				row, err := c.Row(j)
				require.NoError(t, err)
				perm := r.Perm(s.k)
				shards := make([][]byte, s.k)
				for i, p := range perm {
					shards[i] = data[p]
				}
				acc := randBlocks(r, 1, size)[0] // Combine overwrites acc
				require.NoError(t, row.Combine(shards, perm, acc))
				assert.Equal(t, want[j], acc, "k=%d m=%d row %d size %d", s.k, s.m, j, size)
				if s.k > 1 {
					some, idx := shards[1:], perm[1:]
					sum := make([]byte, size)
					for i, d := range some {
						require.NoError(t, row.Add(d, idx[i], sum))
					}
					require.NoError(t, row.Combine(some, idx, acc))
					assert.Equal(t, sum, acc, "k=%d m=%d row %d size %d without shard %d", s.k, s.m, j, size, perm[0])
				}
			}
		}
	}
	c, err := New(3, 2)
	require.NoError(t, err)
	row, err := c.Row(1)
	require.NoError(t, err)
	b := func() []byte { return make([]byte, 4) }
	require.ErrorIs(t, row.Combine([][]byte{b()}, []int{3}, b()), ErrBadShape)
	require.ErrorIs(t, row.Combine([][]byte{b(), b()}, []int{1, 1}, b()), ErrBadShape)
	require.ErrorIs(t, row.Combine([][]byte{b()}, []int{0, 1}, b()), ErrBadShape)
	require.ErrorIs(t, row.Combine([][]byte{b()}, []int{0}, make([]byte, 3)), ErrBadShape)
}
