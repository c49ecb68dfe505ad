package levels

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPendingContent: the intent marker's content round-trips, and what
// a crash or an older version leaves names no nodes.
func TestPendingContent(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		seq  uint64
		want []NodeRange
		ok   bool
	}{
		{"ftigo-pending 7\nnodes 0-3\n", 7, []NodeRange{{0, 3}}, true},
		{"ftigo-pending 7\nnodes 3-3,5-9\n", 7, []NodeRange{{3, 3}, {5, 9}}, true},
		{"ftigo-pending 7\n", 7, nil, false},                // before markers named nodes
		{"", 7, nil, false},                                 // a crash left it empty
		{"ftigo-pending 8\nnodes 0-3\n", 7, nil, false},     // another checkpoint's
		{"ftigo-pending 7\nnodes 3-1\n", 7, nil, false},     // reversed
		{"ftigo-pending 7\nnodes 0-3,2-5\n", 7, nil, false}, // overlapping
		{"ftigo-pending 7\nnodes -1-3\n", 7, nil, false},
		{"ftigo-pending 7\nnodes 0-3\nextra\n", 7, nil, false},
		{"ftigo-pending 7\nnodes \n", 7, nil, false},
	} {
		got, ok := parsePending([]byte(tc.raw), tc.seq)
		assert.Equal(t, tc.ok, ok, "%q", tc.raw)
		assert.Equal(t, tc.want, got, "%q", tc.raw)
		if ok {
			assert.Equal(t, tc.raw, string(pendingContent(tc.seq, got)), "round trip")
		}
	}
	assert.Equal(t, "ftigo-pending 2\n", string(pendingContent(2, nil)))
}

// TestOutside: the nodes of a marker that a job on nodes 0..n-1 cannot
// reach.
func TestOutside(t *testing.T) {
	span := []NodeRange{{0, 3}, {6, 7}}
	assert.Equal(t, []NodeRange{{3, 3}, {6, 7}}, outside(span, 3))
	assert.Equal(t, []NodeRange{{6, 7}}, outside(span, 4))
	assert.Equal(t, []NodeRange{{7, 7}}, outside(span, 7))
	assert.Empty(t, outside(span, 8))
	assert.Empty(t, outside(nil, 1))
	assert.Equal(t, "node0003, node0006-node0007", joinRanges(outside(span, 3)))
	s := SeqScan{Seq: 1, Pending: "/m/ckpt00000001.pending", PendingNodes: span}
	assert.Equal(t, []NodeRange{{6, 7}}, s.LeftOn(4))
	s.Primary.State = CopyValid
	assert.Empty(t, s.LeftOn(4), "a committed checkpoint's marker is a leftover of its commit")
}

// FuzzParsePending: any bytes parse without panic, and what parses is
// sorted, disjoint and written back byte for byte.
func FuzzParsePending(f *testing.F) {
	f.Add([]byte("ftigo-pending 1\nnodes 0-3\n"), uint64(1))
	f.Add([]byte("ftigo-pending 9\nnodes 3-3,5-5\n"), uint64(9))
	f.Add([]byte("ftigo-pending 1\n"), uint64(1))
	f.Fuzz(func(t *testing.T, raw []byte, seq uint64) {
		span, ok := parsePending(raw, seq)
		if !ok {
			require.Nil(t, span)
			return
		}
		require.NotEmpty(t, span)
		for i, r := range span {
			require.LessOrEqual(t, r.First, r.Last)
			require.GreaterOrEqual(t, r.First, 0)
			if i > 0 {
				require.Greater(t, r.First, span[i-1].Last)
			}
		}
		again, ok := parsePending(pendingContent(seq, span), seq)
		require.True(t, ok)
		require.Equal(t, span, again)
	})
}
