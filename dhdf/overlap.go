package dhdf

import (
	"slices"
	"sort"
)

// chunkSet holds the blocks (origin, dims) of the chunks of one SDS, which
// are pairwise disjoint, and finds which of them a new block overlaps. It
// replaces comparing each new chunk with every earlier one.
//
// The blocks live in levels in the manner of a binary counter: level i is
// empty or holds 2^i blocks sorted by origin (lexicographically); adding a
// block merges the full levels below the first empty one into it, so each
// block is merged O(log n) times. A query searches every level: in the
// sorted order the blocks that can overlap q in dimension 0 are one run
// (origin within (q.origin-maxLen, q.end), maxLen the longest extent of the
// level in that dimension); inside the run, blocks with the same origin in
// dimension 0 are again sorted by dimension 1, and so on. For chunks on a
// grid (the layouts dhdf writes: equal blocks, or blocks of a regular
// decomposition) each level yields O(1) candidates per dimension, so n
// additions and queries cost O(n·rank·log² n). Every candidate is tested
// exactly, so the answer is exact for any layout; only the work grows for
// layouts that mix very long and short extents in one dimension.
type chunkSet struct {
	rank   int
	levels []chunkLevel
}

type chunkLevel struct {
	boxes  []chunkBox // sorted by origin, lexicographically
	maxLen []uint64   // per dimension, the largest extent in boxes
}

// chunkBox is one block and the caller's sequence number for it.
type chunkBox struct {
	origin, dims []uint64
	seq          int
}

// linearCutoff is the run length below which a level is scanned rather
// than split by the next dimension.
const linearCutoff = 8

func newChunkSet(rank int) *chunkSet { return &chunkSet{rank: rank} }

// first returns the smallest sequence number of a block that overlaps
// (origin, dims), or false if none does. origin and dims have the set's
// rank and lie inside the SDS (checkChunk).
func (s *chunkSet) first(origin, dims []uint64) (int, bool) {
	q := chunkBox{origin: origin, dims: dims}
	best := -1
	for i := range s.levels {
		lv := &s.levels[i]
		lv.search(0, len(lv.boxes), 0, &q, &best)
	}
	return best, best >= 0
}

// add inserts a block, which must not overlap any block already added,
// under sequence number seq.
func (s *chunkSet) add(origin, dims []uint64, seq int) {
	carry := []chunkBox{{origin: origin, dims: dims, seq: seq}}
	for i := 0; ; i++ {
		if i == len(s.levels) {
			s.levels = append(s.levels, chunkLevel{})
		}
		if len(s.levels[i].boxes) == 0 {
			s.levels[i] = newChunkLevel(carry, s.rank)
			return
		}
		carry = mergeBoxes(s.levels[i].boxes, carry)
		s.levels[i] = chunkLevel{}
	}
}

func newChunkLevel(boxes []chunkBox, rank int) chunkLevel {
	lv := chunkLevel{boxes: boxes, maxLen: make([]uint64, rank)}
	for _, b := range boxes {
		for k, d := range b.dims {
			lv.maxLen[k] = max(lv.maxLen[k], d)
		}
	}
	return lv
}

// mergeBoxes merges two slices sorted by origin into a new one.
func mergeBoxes(a, b []chunkBox) []chunkBox {
	out := make([]chunkBox, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if slices.Compare(b[0].origin, a[0].origin) < 0 {
			out, b = append(out, b[0]), b[1:]
		} else {
			out, a = append(out, a[0]), a[1:]
		}
	}
	return append(append(out, a...), b...)
}

// search lowers *best to the sequence number of any block in boxes[lo:hi]
// that overlaps q and has a smaller one. The blocks of boxes[lo:hi] share
// their origin in dimensions 0..k-1 and are sorted by dimension k.
func (lv *chunkLevel) search(lo, hi, k int, q *chunkBox, best *int) {
	bs := lv.boxes
	if hi-lo <= linearCutoff || k == len(q.origin) {
		for i := lo; i < hi; i++ {
			if (*best < 0 || bs[i].seq < *best) && overlaps(&bs[i], q) {
				*best = bs[i].seq
			}
		}
		return
	}
	// A block overlapping q in dimension k starts after q.origin-maxLen
	// and before q's end.
	low := uint64(0)
	if m := lv.maxLen[k]; q.origin[k] >= m {
		low = q.origin[k] - m + 1
	}
	high := q.origin[k] + q.dims[k]
	from := lo + sort.Search(hi-lo, func(i int) bool { return bs[lo+i].origin[k] >= low })
	to := from + sort.Search(hi-from, func(i int) bool { return bs[from+i].origin[k] >= high })
	for i := from; i < to; {
		v := bs[i].origin[k]
		j := i + sort.Search(to-i, func(x int) bool { return bs[i+x].origin[k] > v })
		lv.search(i, j, k+1, q, best)
		i = j
	}
}

// overlaps reports whether two blocks share an element.
func overlaps(a, b *chunkBox) bool {
	for k := range a.origin {
		if a.origin[k]+a.dims[k] <= b.origin[k] || b.origin[k]+b.dims[k] <= a.origin[k] {
			return false
		}
	}
	return true
}
