package partner

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBlockTopologyIsTheTable: a block topology answers every question
// as the topology built from every rank's host name does, with the
// nodes in any order.
func TestBlockTopologyIsTheTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for trial := range 100 {
		ns, gs := 1+rng.IntN(4), 1+rng.IntN(4)
		nodes := gs * (1 + rng.IntN(4))
		n := nodes * ns
		slots := rng.Perm(nodes)
		if trial%3 == 0 {
			slots = nil
		}
		host := func(k int) string { return fmt.Sprintf("h%03d", k) }
		table := make(NodeTable, nodes)
		for k := range table {
			table[k] = host(k)
		}
		ids := make([]string, n)
		for r := range ids {
			b := r / ns
			if slots != nil {
				b = slots[b]
			}
			ids[r] = host(b)
		}
		full, err := NewTopologyTable(n, ns, gs, ids, table)
		require.NoError(t, err)
		var blk *Topology
		if trial%2 == 0 {
			blk, err = NewBlockTopology(n, ns, gs, nil, host, slots)
		} else {
			blk, err = NewBlockTopology(n, ns, gs, table, nil, slots)
		}
		require.NoError(t, err)
		assert.True(t, full.Blocks())
		assert.Equal(t, full.Slots(), blk.Slots(), "trial %d", trial)
		assert.Equal(t, full.Table(), blk.Table())
		assert.Equal(t, full.String(), blk.String())
		for r := range n {
			assert.Equal(t, full.NodeOf(r), blk.NodeOf(r), "trial %d rank %d", trial, r)
			assert.Equal(t, full.LocalIndex(r), blk.LocalIndex(r))
			assert.Equal(t, full.GroupOf(r), blk.GroupOf(r))
			assert.Equal(t, full.GroupRank(r), blk.GroupRank(r))
			assert.Equal(t, full.Left(r), blk.Left(r))
			assert.Equal(t, full.Right(r), blk.Right(r))
		}
		for k := range nodes {
			assert.Equal(t, full.NodeRanks(k), blk.NodeRanks(k))
			assert.Equal(t, full.Host(k), blk.Host(k))
		}
		saved := append(NodeTable{"other"}, table[1:]...)
		rf, err := full.Remap(saved)
		require.NoError(t, err)
		rb, err := blk.Remap(saved)
		require.NoError(t, err)
		assert.Equal(t, rf.String(), rb.String(), "trial %d: remapped", trial)
	}
}

// TestBlockTopologyRefuses: bad shapes and slots are refused.
func TestBlockTopologyRefuses(t *testing.T) {
	h := func(k int) string { return fmt.Sprint(k) }
	_, err := NewBlockTopology(6, 4, 1, nil, h, nil)
	assert.ErrorIs(t, err, ErrBadRanks)
	_, err = NewBlockTopology(4, 0, 1, nil, h, nil)
	assert.ErrorIs(t, err, ErrBadNodeSize)
	_, err = NewBlockTopology(6, 2, 2, nil, h, nil)
	assert.ErrorIs(t, err, ErrBadGroupSize)
	_, err = NewBlockTopology(4, 2, 1, nil, h, []int{0, 0})
	assert.ErrorIs(t, err, ErrBadTable)
	_, err = NewBlockTopology(4, 2, 1, NodeTable{"a"}, nil, nil)
	assert.ErrorIs(t, err, ErrBadTable)
	_, err = NewBlockTopology(4, 2, 1, nil, nil, nil)
	assert.ErrorIs(t, err, ErrBadArgument)
}
