//go:build mpi

package mpi

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ftigo/ftigo/comm"
)

func TestCheckCount(t *testing.T) {
	tests := []struct {
		n   int
		bad bool
	}{{0, false}, {1, false}, {MaxCount, false}, {MaxCount + 1, true}, {1 << 40, true}}
	for _, tc := range tests {
		err := checkCount("Send", tc.n)
		if tc.bad {
			assert.ErrorIs(t, err, comm.ErrBadArgument, "n=%d", tc.n)
			assert.Contains(t, err.Error(), "count limit")
		} else {
			assert.NoError(t, err, "n=%d", tc.n)
		}
	}
}

func TestMPIErrorUnwrap(t *testing.T) {
	e := &MPIError{Op: "MPI_Recv", Code: 15, Class: int(classTruncate()), Msg: "message truncated"}
	assert.ErrorIs(t, e, comm.ErrTruncated)
	assert.Equal(t, fmt.Sprintf("mpi: MPI_Recv: message truncated (code 15, class %d)", classTruncate()), e.Error())
	e = &MPIError{Op: "MPI_Send", Code: 6, Class: int(classRank()), Msg: "invalid rank"}
	assert.ErrorIs(t, e, comm.ErrBadArgument)
}

// TestLengthCheck combines the head of the first Allreduce call in Go, the
// way MPI does (sums, minima or maxima of int64 or float64 elements), for
// sets of lengths, and checks that the verdict is "agree" exactly when all
// lengths are equal, and that a bad flag on any rank is seen.
func TestLengthCheck(t *testing.T) {
	sets := [][]int64{
		{0}, {5}, {0, 0}, {3, 3, 3}, {3, 4}, {4, 3, 4}, {1, 2, 3}, {2, 2, 2, 6},
		{1 << 16, 1 << 16}, {1 << 16, 0}, {70000, 70000 + 65536}, {1<<40 + 5, 1<<40 + 5},
		{1<<40 + 5, 1<<41 + 5}, {1<<46 - 1, 1<<46 - 1, 1<<46 - 1}, {7, 7, 7, 7, 7, 7, 7, 8},
		{0, 2, 1, 1}, // same sum and mean as 1,1,1,1
	}
	for _, lens := range sets {
		equal := true
		for _, n := range lens {
			equal = equal && n == lens[0]
		}
		for _, typ := range []comm.Datatype{comm.Int64, comm.Float64} {
			for _, op := range []comm.Op{comm.Sum, comm.Min, comm.Max} {
				for badRank := -1; badRank < len(lens); badRank++ {
					var acc [headSlots]uint64
					for r, n := range lens {
						var h [headSlots]uint64
						lengthCheck(h[:], typ, op, n, r == badRank)
						for i := range h {
							if r == 0 {
								acc[i] = h[i]
							} else {
								acc[i] = combine(typ, op, acc[i], h[i])
							}
						}
					}
					bad, differ := lengthVerdict(acc[:], typ, op, len(lens))
					what := fmt.Sprintf("lengths %v, %v %v, bad rank %d", lens, typ, op, badRank)
					assert.Equal(t, badRank >= 0, bad, what)
					assert.Equal(t, !equal, differ != "", "%s: %q", what, differ)
				}
			}
		}
	}
}

func combine(t comm.Datatype, op comm.Op, a, b uint64) uint64 {
	if t == comm.Float64 {
		x, y := math.Float64frombits(a), math.Float64frombits(b)
		switch op {
		case comm.Sum:
			return math.Float64bits(x + y)
		case comm.Min:
			return math.Float64bits(min(x, y))
		}
		return math.Float64bits(max(x, y))
	}
	x, y := int64(a), int64(b)
	switch op {
	case comm.Sum:
		return uint64(x + y)
	case comm.Min:
		return uint64(min(x, y))
	}
	return uint64(max(x, y))
}
