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
	rank int
	// coords holds, per block in order of addition, its origin then its
	// dims (2·rank values); seqs the caller's sequence numbers. Levels
	// refer to blocks by their position here, so merging moves 4-byte ids.
	coords []uint64
	seqs   []int
	levels []chunkLevel
}

type chunkLevel struct {
	ids    []int32  // blocks sorted by origin, lexicographically
	maxLen []uint64 // per dimension, the largest extent in the level
}

// linearCutoff is the run length below which a level is scanned rather
// than split by the next dimension.
const linearCutoff = 8

func newChunkSet(rank int) *chunkSet { return &chunkSet{rank: rank} }

func (s *chunkSet) origin(id int32) []uint64 {
	at := int(id) * 2 * s.rank
	return s.coords[at : at+s.rank]
}

func (s *chunkSet) dims(id int32) []uint64 {
	at := int(id)*2*s.rank + s.rank
	return s.coords[at : at+s.rank]
}

// first returns the smallest sequence number of a block that overlaps
// (origin, dims), or false if none does. origin and dims have the set's
// rank and lie inside the SDS (checkChunk).
func (s *chunkSet) first(origin, dims []uint64) (int, bool) {
	best := -1
	for i := range s.levels {
		lv := &s.levels[i]
		s.search(lv, 0, len(lv.ids), 0, origin, dims, &best)
	}
	return best, best >= 0
}

// add inserts a block, which must not overlap any block already added,
// under sequence number seq.
func (s *chunkSet) add(origin, dims []uint64, seq int) {
	id := int32(len(s.seqs))
	s.coords = append(append(s.coords, origin...), dims...)
	s.seqs = append(s.seqs, seq)
	carry := []int32{id}
	for i := 0; ; i++ {
		if i == len(s.levels) {
			s.levels = append(s.levels, chunkLevel{})
		}
		if len(s.levels[i].ids) == 0 {
			s.levels[i] = s.newLevel(carry)
			return
		}
		carry = s.merge(s.levels[i].ids, carry)
		s.levels[i] = chunkLevel{}
	}
}

func (s *chunkSet) newLevel(ids []int32) chunkLevel {
	lv := chunkLevel{ids: ids, maxLen: make([]uint64, s.rank)}
	for _, id := range ids {
		for k, d := range s.dims(id) {
			lv.maxLen[k] = max(lv.maxLen[k], d)
		}
	}
	return lv
}

// merge merges two id lists sorted by origin into a new one.
func (s *chunkSet) merge(a, b []int32) []int32 {
	out := make([]int32, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if slices.Compare(s.origin(b[0]), s.origin(a[0])) < 0 {
			out, b = append(out, b[0]), b[1:]
		} else {
			out, a = append(out, a[0]), a[1:]
		}
	}
	return append(append(out, a...), b...)
}

// search lowers *best to the sequence number of any block of
// lv.ids[lo:hi] that overlaps (qo, qd) and has a smaller one. The blocks
// of lv.ids[lo:hi] share their origin in dimensions 0..k-1 and are sorted
// by dimension k.
func (s *chunkSet) search(lv *chunkLevel, lo, hi, k int, qo, qd []uint64, best *int) {
	ids := lv.ids
	if hi-lo <= linearCutoff || k == s.rank {
		for _, id := range ids[lo:hi] {
			if seq := s.seqs[id]; (*best < 0 || seq < *best) && overlaps(s.origin(id), s.dims(id), qo, qd) {
				*best = seq
			}
		}
		return
	}
	// A block overlapping q in dimension k starts after q.origin-maxLen
	// and before q's end.
	low := uint64(0)
	if m := lv.maxLen[k]; qo[k] >= m {
		low = qo[k] - m + 1
	}
	high := qo[k] + qd[k]
	at := func(i int) uint64 { return s.coords[int(ids[i])*2*s.rank+k] }
	from := lo + sort.Search(hi-lo, func(i int) bool { return at(lo+i) >= low })
	to := from + sort.Search(hi-from, func(i int) bool { return at(from+i) >= high })
	for i := from; i < to; {
		v := at(i)
		j := i + sort.Search(to-i, func(x int) bool { return at(i+x) > v })
		s.search(lv, i, j, k+1, qo, qd, best)
		i = j
	}
}

// overlaps reports whether blocks (ao, ad) and (bo, bd) share an element.
func overlaps(ao, ad, bo, bd []uint64) bool {
	for k := range ao {
		if ao[k]+ad[k] <= bo[k] || bo[k]+bd[k] <= ao[k] {
			return false
		}
	}
	return true
}
