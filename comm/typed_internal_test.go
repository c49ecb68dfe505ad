package comm

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFallbackRounds runs the fallbacks with rounds of a few bytes, so that
// every transfer takes many rounds with ragged last blocks, and compares
// them with the native in-process operations.
func TestFallbackRounds(t *testing.T) {
	for _, round := range []int{1, 8, 24, 100, 1 << 20} {
		for _, n := range []int{1, 3, 4} {
			t.Run(fmt.Sprintf("round=%d/n=%d", round, n), func(t *testing.T) {
				err := Run(n, func(c Comm) error {
					return checkFallbacks(t, c, round)
				}, WithTimeout(20*time.Second))
				require.NoError(t, err)
			})
		}
	}
}

func checkFallbacks(t *testing.T, c Comm, round int) error {
	r, n := c.Rank(), c.Size()
	lenOf := func(r int) int { return (r*7 + 5) % 13 } // 5, 12, 6, 0 bytes
	send := make([]byte, lenOf(r))
	for i := range send {
		send[i] = byte(r*50 + i)
	}
	total := 0
	for q := range n {
		total += lenOf(q)
	}
	want := make([]byte, 0, total)
	for q := range n {
		for i := range lenOf(q) {
			want = append(want, byte(q*50+i))
		}
	}
	for root := range n {
		var recv []byte
		if r == root {
			recv = make([]byte, total)
		}
		if err := gatherFallback(c, root, send, recv, false, round); err != nil {
			return err
		}
		if r == root {
			assert.Equal(t, want, recv, "gather to %d", root)
		}
		var all []byte
		if r == root {
			all = want
		}
		part := make([]byte, lenOf(r))
		if err := scatterFallback(c, root, all, part, round); err != nil {
			return err
		}
		assert.Equal(t, send, part, "scatter from %d", root)
	}
	recv := make([]byte, total)
	if err := gatherFallback(c, -1, send, recv, true, round); err != nil {
		return err
	}
	assert.Equal(t, want, recv, "allgather")

	// Reductions: the fallback and the native reduction agree bit for bit
	// (both combine in rank order).
	v := make([]float64, 37)
	for i := range v {
		v[i] = math.Sqrt(float64(r*100+i)) * 1e-3
	}
	native := make([]float64, len(v))
	if err := Allreduce(c, v, native, Sum); err != nil {
		return err
	}
	fb := make([]float64, len(v))
	if err := allreduceFallback(c, asBytes(v), asBytes(fb), Float64, Sum, round); err != nil {
		return err
	}
	assert.Equal(t, native, fb)
	return nil
}

// TestReduceUnaligned hands the in-process Reducer byte slices that are not
// aligned for their elements, as a direct caller of the capability may.
func TestReduceUnaligned(t *testing.T) {
	err := Run(3, func(c Comm) error {
		buf := make([]byte, 8*5+1)
		send := buf[1:]
		for i := range 5 {
			copy(send[8*i:], asBytes([]int64{int64(c.Rank()*10 + i)}))
		}
		out := make([]byte, 8*5+3)
		recv := out[3:]
		if err := c.(Reducer).Allreduce(send, recv, Int64, Sum); err != nil {
			return err
		}
		got := make([]int64, 5)
		copy(asBytes(got), recv)
		assert.Equal(t, []int64{30, 33, 36, 39, 42}, got)
		return nil
	}, WithTimeout(10*time.Second))
	require.NoError(t, err)
}

func TestOverlap(t *testing.T) {
	b := make([]byte, 10)
	for _, tc := range []struct {
		a, b         []byte
		shared, same bool
	}{
		{b[:4], b[4:], false, false},
		{b[:5], b[4:], true, false},
		{b[:4], b[:4], true, true},
		{b[:4], b[:5], true, false},
		{b[:0], b[:4], false, false},
		{nil, nil, false, false},
		{b, make([]byte, 10), false, false},
	} {
		shared, same := overlap(tc.a, tc.b)
		assert.Equal(t, tc.shared, shared)
		assert.Equal(t, tc.same, same)
	}
}
