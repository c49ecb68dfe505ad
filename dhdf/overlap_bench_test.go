package dhdf

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// tinyChunks returns n = Πgrid chunks of one element each, covering a
// grid, in the order buildMHF and the reader meet them: by name
// ("x_1_<row-major position>"), which is not the order of their origins.
func tinyChunks(grid []uint64) []Chunk {
	var cs []Chunk
	idx := make([]uint64, len(grid))
	for n := 0; ; n++ {
		ones := make([]uint64, len(grid))
		for k := range ones {
			ones[k] = 1
		}
		cs = append(cs, Chunk{FileID: 1, Name: fmt.Sprintf("x_1_%d", n), Origin: slices.Clone(idx), Dims: ones})
		k := len(grid) - 1
		for k >= 0 {
			idx[k]++
			if idx[k] < grid[k] {
				break
			}
			idx[k] = 0
			k--
		}
		if k < 0 {
			break
		}
	}
	slices.SortFunc(cs, func(a, b Chunk) int { return strings.Compare(a.Name, b.Name) })
	return cs
}

// BenchmarkChunkOverlap checks n tiny chunks (1-, 2- and 3-D grids, up to
// 100 000 chunks) for overlaps, as buildMHF and the reader do for one SDS.
// chunkSet is the check; sort, the raw reference, only sorts the same
// origins (the floor of any sort-based check); pairwise is the quadratic
// check it replaced, run up to 10 000 chunks only. SetBytes counts the
// chunk table rows checked (515 bytes each): compare MB/s across n and
// against sort.
func BenchmarkChunkOverlap(b *testing.B) {
	layouts := []struct {
		name string
		grid []uint64
	}{
		{"1d-1000", []uint64{1000}},
		{"1d-10000", []uint64{10000}},
		{"1d-100000", []uint64{100000}},
		{"2d-32x32", []uint64{32, 32}},
		{"2d-100x100", []uint64{100, 100}},
		{"2d-316x316", []uint64{316, 316}},
		{"3d-10x10x10", []uint64{10, 10, 10}},
		{"3d-22x22x22", []uint64{22, 22, 22}},
		{"3d-46x46x46", []uint64{46, 46, 46}},
	}
	for _, l := range layouts {
		cs := tinyChunks(l.grid)
		rowBytes := int64(len(cs)) * int64(chunkTableType.Size)
		b.Run(l.name+"/chunkSet", func(b *testing.B) {
			b.SetBytes(rowBytes)
			for b.Loop() {
				set := newChunkSet(len(l.grid))
				for i, c := range cs {
					if j, hit := set.first(c.Origin, c.Dims); hit {
						b.Fatalf("chunks %d and %d overlap", i, j)
					}
					set.add(c.Origin, c.Dims, i)
				}
			}
		})
		b.Run(l.name+"/sort", func(b *testing.B) {
			b.SetBytes(rowBytes)
			origins := make([][]uint64, len(cs))
			for b.Loop() {
				for i, c := range cs {
					origins[i] = c.Origin
				}
				slices.SortFunc(origins, slices.Compare)
			}
		})
		if len(cs) > 10000 {
			continue
		}
		b.Run(l.name+"/pairwise", func(b *testing.B) {
			b.SetBytes(rowBytes)
			for b.Loop() {
				for i, c := range cs {
					for j, d := range cs[:i] {
						if overlaps(c.Origin, c.Dims, d.Origin, d.Dims) {
							b.Fatalf("chunks %d and %d overlap", i, j)
						}
					}
				}
			}
		})
	}
}
