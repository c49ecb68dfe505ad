package dhdf

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/vfd"
)

type block struct{ origin, dims []uint64 }

func blk(origin, dims []uint64) block { return block{origin, dims} }

// firstPairwise is the quadratic check chunkSet replaced: the first placed
// block (in order) that overlaps q, or -1.
func firstPairwise(placed []block, q block) int {
	for j, b := range placed {
		if overlaps(b.origin, b.dims, q.origin, q.dims) {
			return j
		}
	}
	return -1
}

func TestChunkSetCases(t *testing.T) {
	u := func(v ...uint64) []uint64 { return v }
	tests := []struct {
		name   string
		placed []block
		q      block
		want   int // index in placed of the chunk reported, -1 for none
	}{
		{"1-D empty set", nil, blk(u(0), u(4)), -1},
		{"1-D adjacent before", []block{blk(u(4), u(4))}, blk(u(0), u(4)), -1},
		{"1-D adjacent after", []block{blk(u(0), u(4))}, blk(u(4), u(4)), -1},
		{"1-D one element shared", []block{blk(u(0), u(4))}, blk(u(3), u(4)), 0},
		{"1-D identical", []block{blk(u(2), u(3))}, blk(u(2), u(3)), 0},
		{"1-D inside", []block{blk(u(0), u(10))}, blk(u(4), u(1)), 0},
		{"1-D around", []block{blk(u(4), u(1))}, blk(u(0), u(10)), 0},
		{"1-D spans three, first placed reported", []block{blk(u(6), u(2)), blk(u(2), u(2)), blk(u(4), u(2))}, blk(u(3), u(4)), 0},
		{"1-D spans three placed out of order", []block{blk(u(10), u(2)), blk(u(4), u(2)), blk(u(2), u(2))}, blk(u(3), u(2)), 1},
		{"2-D side by side", []block{blk(u(0, 0), u(2, 2))}, blk(u(0, 2), u(2, 2)), -1},
		{"2-D corner to corner", []block{blk(u(0, 0), u(2, 2))}, blk(u(2, 2), u(2, 2)), -1},
		{"2-D corners overlap", []block{blk(u(0, 0), u(2, 2))}, blk(u(1, 1), u(2, 2)), 0},
		{"2-D cross, no corner inside the other", []block{blk(u(0, 3), u(10, 1))}, blk(u(5, 0), u(1, 10)), 0},
		{"2-D same rows, disjoint columns", []block{blk(u(0, 0), u(4, 1)), blk(u(0, 1), u(4, 1))}, blk(u(0, 2), u(4, 1)), -1},
		{"2-D long row after many small", append(grid2(4, 4), blk(u(4, 0), u(1, 4))), blk(u(3, 3), u(2, 1)), 15},
		{"3-D neighbours on every face", []block{
			blk(u(0, 1, 1), u(1, 1, 1)), blk(u(2, 1, 1), u(1, 1, 1)),
			blk(u(1, 0, 1), u(1, 1, 1)), blk(u(1, 2, 1), u(1, 1, 1)),
			blk(u(1, 1, 0), u(1, 1, 1)), blk(u(1, 1, 2), u(1, 1, 1)),
		}, blk(u(1, 1, 1), u(1, 1, 1)), -1},
		{"3-D one shared element", []block{blk(u(0, 0, 0), u(2, 2, 2))}, blk(u(1, 1, 1), u(2, 2, 2)), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set := newChunkSet(len(tc.q.origin))
			for i, b := range tc.placed {
				_, hit := set.first(b.origin, b.dims)
				require.False(t, hit, "placed block %d overlaps an earlier one", i)
				set.add(b.origin, b.dims, i)
			}
			require.Equal(t, tc.want, firstPairwise(tc.placed, tc.q), "the case agrees with the pairwise check")
			got, hit := set.first(tc.q.origin, tc.q.dims)
			if tc.want < 0 {
				assert.False(t, hit)
				return
			}
			require.True(t, hit)
			assert.Equal(t, tc.want, got)
		})
	}
}

// grid2 returns the 1×1 blocks of an r×c grid in row-major order.
func grid2(r, c uint64) []block {
	var bs []block
	for i := range r {
		for j := range c {
			bs = append(bs, blk([]uint64{i, j}, []uint64{1, 1}))
		}
	}
	return bs
}

// TestChunkSetMatchesPairwise: random blocks of ranks 1 to 4, of mixed
// sizes so that levels get long and short extents; each is offered in
// turn and kept when it overlaps nothing. chunkSet must report what the
// pairwise check reports, every time.
func TestChunkSetMatchesPairwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for rank := 1; rank <= 4; rank++ {
		t.Run(fmt.Sprintf("rank%d", rank), func(t *testing.T) {
			size := []uint64{1000, 60, 16, 8}[rank-1]
			set := newChunkSet(rank)
			var placed []block
			hits := 0
			for range 1500 {
				q := block{make([]uint64, rank), make([]uint64, rank)}
				for k := range rank {
					maxLen := uint64(3)
					if rng.IntN(20) == 0 {
						maxLen = size / 2
					}
					q.dims[k] = 1 + rng.Uint64N(maxLen)
					q.origin[k] = rng.Uint64N(size - q.dims[k] + 1)
				}
				want := firstPairwise(placed, q)
				got, hit := set.first(q.origin, q.dims)
				require.Equal(t, want >= 0, hit, "block %v+%v", q.origin, q.dims)
				if hit {
					hits++
					require.Equal(t, want, got, "block %v+%v", q.origin, q.dims)
					continue
				}
				set.add(q.origin, q.dims, len(placed))
				placed = append(placed, q)
			}
			// Both outcomes were exercised.
			assert.Positive(t, hits)
			assert.Greater(t, len(placed), 50)
		})
	}
}

// TestWriteChunkOverlap: WriteChunk refuses a chunk that shares an
// element with an earlier chunk of the same SDS and names both; adjacent
// chunks and chunks of another SDS are accepted.
func TestWriteChunkOverlap(t *testing.T) {
	type wr struct {
		sds, name      string
		origin, dims   []uint64
		wantOverlapsOf string // "" when the write must succeed
	}
	u := func(v ...uint64) []uint64 { return v }
	tests := []struct {
		name   string
		writes []wr
	}{
		{"adjacent rows", []wr{
			{"a", "top", u(0, 0), u(2, 4), ""},
			{"a", "bottom", u(2, 0), u(2, 4), ""},
		}},
		{"adjacent columns", []wr{
			{"a", "left", u(0, 0), u(4, 2), ""},
			{"a", "right", u(0, 2), u(4, 2), ""},
		}},
		{"same place in another SDS", []wr{
			{"a", "a0", u(0, 0), u(4, 4), ""},
			{"b", "b0", u(0, 0), u(4, 4), ""},
		}},
		{"one shared corner element", []wr{
			{"a", "first", u(0, 0), u(2, 2), ""},
			{"a", "second", u(1, 1), u(2, 2), "first"},
		}},
		{"cross", []wr{
			{"a", "row", u(1, 0), u(1, 4), ""},
			{"a", "col", u(0, 2), u(4, 1), "row"},
		}},
		{"the first of two overlapped chunks is named", []wr{
			{"b", "other", u(0, 0), u(1, 1), ""},
			{"a", "c0", u(0, 0), u(1, 4), ""},
			{"a", "c1", u(1, 0), u(1, 4), ""},
			{"a", "both", u(0, 1), u(2, 1), "c0"},
		}},
		{"a refused chunk is not kept", []wr{
			{"a", "c0", u(0, 0), u(2, 2), ""},
			{"a", "bad", u(1, 1), u(2, 2), "c0"},
			{"a", "where bad was", u(2, 2), u(2, 2), ""},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Create("ov", 1, Options{Driver: vfd.NewCore(), Now: fixedClock})
			require.NoError(t, err)
			for _, s := range []string{"a", "b"} {
				require.NoError(t, w.DefineSDS(SDS{Name: s, Type: h5.Int8, Dims: []uint64{4, 4}}))
			}
			for _, x := range tc.writes {
				err := w.WriteChunk(x.sds, 1, x.name, x.origin, x.dims, make([]byte, x.dims[0]*x.dims[1]))
				if x.wantOverlapsOf == "" {
					require.NoError(t, err, "chunk %q", x.name)
					continue
				}
				require.ErrorIs(t, err, ErrInvalid, "chunk %q", x.name)
				assert.EqualError(t, err, fmt.Sprintf("%v: chunk %q overlaps chunk %q of SDS %q", ErrInvalid, x.name, x.wantOverlapsOf, x.sds))
			}
			require.NoError(t, w.Close())
		})
	}
}

// TestParallelOverlapAcrossRanks: each rank's chunks are disjoint, but
// rank 1's chunk overlaps rank 0's; the MHF check at Close finds it (in
// (file id, name) order) and every rank's Close fails.
func TestParallelOverlapAcrossRanks(t *testing.T) {
	tests := []struct {
		name    string
		origin1 uint64 // row of rank 1's 2-row chunk; rank 0 has rows 0-1
		wantErr string
	}{
		{"adjacent", 2, ""},
		{"one row shared", 1, `chunk "x_2_0" overlaps chunk "x_1_0" of SDS "x"`},
		{"identical", 0, `chunk "x_2_0" overlaps chunk "x_1_0" of SDS "x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := vfd.NewCore()
			errs := make([]error, 2)
			_ = comm.Run(2, func(cm comm.Comm) error {
				w, err := CreateParallel(cm, "par", Options{Driver: c, Now: fixedClock})
				if err != nil {
					return err
				}
				if err := w.DefineSDS(SDS{Name: "x", Type: h5.Int8, Dims: []uint64{4, 3}}); err != nil {
					return err
				}
				row := uint64(0)
				if cm.Rank() == 1 {
					row = tc.origin1
				}
				if err := w.WriteChunk("x", 0, "", []uint64{row, 0}, []uint64{2, 3}, make([]byte, 6)); err != nil {
					return err
				}
				errs[cm.Rank()] = w.Close()
				return nil
			})
			if tc.wantErr == "" {
				require.NoError(t, errs[0])
				require.NoError(t, errs[1])
				return
			}
			require.ErrorIs(t, errs[0], ErrInvalid)
			assert.ErrorContains(t, errs[0], tc.wantErr)
			assert.ErrorIs(t, errs[0], ErrVote)
			assert.ErrorIs(t, errs[1], ErrVote)
		})
	}
}
