package encode

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var layoutShapes = []struct{ k, m int }{
	{1, 1}, {2, 1}, {2, 2}, {3, 1}, {3, 2}, {4, 1}, {4, 2}, {4, 3}, {4, 4}, {5, 2}, {6, 3}, {8, 2}, {8, 8},
}

// TestLayoutPlacement: every position of every stripe has one holder, the
// maps between segments/chunks and positions are inverse, and in the
// rotated scheme every member holds exactly one shard of every stripe and
// M parity chunks of distinct stripes.
func TestLayoutPlacement(t *testing.T) {
	for _, s := range layoutShapes {
		t.Run(fmt.Sprintf("k%d-m%d", s.k, s.m), func(t *testing.T) {
			l, err := NewLayout(s.k, s.m, 1000, 64)
			require.NoError(t, err)
			require.Equal(t, s.m < s.k, l.Rotated())
			d := l.DataShards()
			held := make([][]int, s.k) // per member, shards per stripe
			for i := range held {
				held[i] = make([]int, l.Stripes())
			}
			for st := range l.Stripes() {
				for p := range d + s.m {
					h := l.Holder(st, p)
					require.True(t, h.Member >= 0 && h.Member < s.k)
					held[h.Member][st]++
					if h.Parity {
						gs, j := l.Chunk(h.Member, h.Unit)
						assert.Equal(t, []int{st, p - d}, []int{gs, j}, "chunk %d of member %d", h.Unit, h.Member)
					} else {
						gs, pos := l.Segment(h.Member, h.Unit)
						assert.Equal(t, []int{st, p}, []int{gs, pos}, "segment %d of member %d", h.Unit, h.Member)
					}
				}
			}
			for i := range s.k {
				for st := range l.Stripes() {
					want := 1
					if !l.Rotated() {
						want = 2 // data shard i and parity shard i of the one codeword
					}
					assert.Equal(t, want, held[i][st], "member %d stripe %d", i, st)
				}
			}
			if l.Rotated() {
				// parity overhead M/(K-M): payload of every member
				assert.Equal(t, l.Rows()*int64(s.m)*64, l.ParitySize())
				assert.GreaterOrEqual(t, l.Rows()*int64(d)*64, int64(1000))
			} else {
				assert.Equal(t, int64(1000), l.ParitySize())
			}
		})
	}
	for _, bad := range [][4]int{{0, 1, 1, 1}, {3, 0, 1, 1}, {3, 4, 1, 1}, {3, 1, -1, 1}, {3, 1, 1, 0}, {200, 100, 1, 1}} {
		_, err := NewLayout(bad[0], bad[1], int64(bad[2]), bad[3])
		require.ErrorIs(t, err, ErrBadShape, "%v", bad)
	}
}

// lossSets returns every subset of members of size n.
func lossSets(k, n int) [][]int {
	var out [][]int
	for mask := 0; mask < 1<<k; mask++ {
		var s []int
		for i := range k {
			if mask&(1<<i) != 0 {
				s = append(s, i)
			}
		}
		if len(s) == n {
			out = append(out, s)
		}
	}
	return out
}

// TestLayoutRoundTrip encodes files of different sizes centrally and, for
// every loss of whole members the scheme tolerates (m members in the
// rotated scheme, k/2 in the full one, and every m-file loss there), rebuilds
// every lost shard from the survivors bit for bit; one member more is
// refused by Check.
func TestLayoutRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range layoutShapes {
		for _, unit := range []int{1, 7, 64} {
			t.Run(fmt.Sprintf("k%d-m%d-u%d", s.k, s.m, unit), func(t *testing.T) {
				data := make([][]byte, s.k)
				sizes := make([]int64, s.k)
				for i := range data {
					data[i] = make([]byte, rng.IntN(300))
					for j := range data[i] {
						data[i][j] = byte(rng.Uint32())
					}
					sizes[i] = int64(len(data[i]))
				}
				l, err := NewLayout(s.k, s.m, PaddedSize(sizes), unit)
				require.NoError(t, err)
				parity, err := l.EncodeFiles(data)
				require.NoError(t, err)
				tol := s.m
				if !l.Rotated() {
					tol = s.k / 2
				}
				for n := 1; n <= min(tol+1, s.k); n++ {
					for _, gone := range lossSets(s.k, n) {
						dmg := Damage{Data: make([]bool, s.k), Parity: make([]bool, s.k)}
						for _, i := range gone {
							dmg.Data[i], dmg.Parity[i] = true, true
						}
						_, err := l.Check(dmg)
						if n > tol {
							require.ErrorIs(t, err, ErrTooManyErasures, "lost %v", gone)
							continue
						}
						require.NoError(t, err, "lost %v", gone)
						gotData, gotParity := rebuildCentral(t, l, data, parity, dmg)
						for _, i := range gone {
							require.True(t, bytes.Equal(data[i], gotData[i][:len(data[i])]), "data of %d after losing %v", i, gone)
							require.True(t, bytes.Equal(parity[i], gotParity[i]), "parity of %d after losing %v", i, gone)
						}
					}
				}
			})
		}
	}
}

// rebuildCentral rebuilds the lost files of dmg stripe by stripe.
func rebuildCentral(t *testing.T, l Layout, data, parity [][]byte, dmg Damage) (outData, outParity [][]byte) {
	code, err := l.Code(Options{})
	require.NoError(t, err)
	d := l.DataShards()
	outData, outParity = make([][]byte, l.K), make([][]byte, l.K)
	for i := range l.K {
		outData[i] = make([]byte, l.Rows()*int64(l.Segments()*l.Unit))
		outParity[i] = make([]byte, l.ParitySize())
	}
	for r := range l.Rows() {
		n := l.UnitLen(r)
		for st := range l.Stripes() {
			lost := l.Lost(dmg, st)
			shards := make([][]byte, d+l.M)
			for p := range shards {
				h := l.Holder(st, p)
				shards[p] = make([]byte, n)
				if lost[p] {
					continue
				}
				if h.Parity {
					off := l.ParityOffset(r) + int64(h.Unit*n)
					copy(shards[p], parity[h.Member][off:off+int64(n)])
				} else if off := l.DataOffset(r) + int64(h.Unit*n); off < int64(len(data[h.Member])) {
					copy(shards[p], data[h.Member][off:])
				}
			}
			require.NoError(t, code.Reconstruct(shards, lost))
			for p := range shards {
				h := l.Holder(st, p)
				if h.Parity {
					copy(outParity[h.Member][l.ParityOffset(r)+int64(h.Unit*n):], shards[p])
				} else {
					copy(outData[h.Member][l.DataOffset(r)+int64(h.Unit*n):], shards[p])
				}
			}
		}
	}
	return outData, outParity
}

// TestLayoutFullMatchesCode: the full scheme is FTI's: parity shard i of
// the files padded to the largest is exactly EncodeBlock over whole files.
func TestLayoutFullMatchesCode(t *testing.T) {
	data := [][]byte{bytes.Repeat([]byte{1}, 100), bytes.Repeat([]byte{2}, 37), {}, bytes.Repeat([]byte{9}, 99)}
	l, err := NewLayout(4, 4, 100, 16)
	require.NoError(t, err)
	got, err := l.EncodeFiles(data)
	require.NoError(t, err)
	code, err := New(4, 4)
	require.NoError(t, err)
	padded := make([][]byte, 4)
	want := make([][]byte, 4)
	for i := range padded {
		padded[i] = make([]byte, 100)
		copy(padded[i], data[i])
		want[i] = make([]byte, 100)
	}
	require.NoError(t, code.EncodeBlock(padded, want))
	assert.Equal(t, want, got)
}
