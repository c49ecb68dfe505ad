package ckpt

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecoveredAndPlacement: the public views of the restart checkpoint
// and of the topology say what the manifest and FTI's placement say.
func TestRecoveredAndPlacement(t *testing.T) {
	cfg := testConfig(t.TempDir(), 2)
	cfg.GroupSize = 2
	// 8 ranks, 2 per node: nodes 0..3, sectors {0,1} and {2,3}.
	want := func(q int) Placement {
		node := q / 2
		sector, nodeRank := node/2, q%2
		other := (sector*2+(node+1)%2)*2 + nodeRank // the other node of the sector
		return Placement{Nodes: 4, NodeSize: 2, GroupSize: 2, Node: node, NodeRank: nodeRank,
			Group: sector*2 + nodeRank, Sector: sector, GroupRank: node % 2, Left: other, Right: other}
	}
	require.NoError(t, world(t, 8, cfg, nil, func(r *Runtime) error {
		if got := r.Recovered(); got != nil {
			return fmt.Errorf("fresh run recovered %+v", got)
		}
		if got, w := r.Placement(), want(r.c.Rank()); got != w {
			return fmt.Errorf("rank %d: placement %+v, want %+v", r.c.Rank(), got, w)
		}
		x := []int32{int32(r.c.Rank())}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		return r.Checkpoint(5, 2)
	}))
	require.NoError(t, world(t, 8, cfg, nil, func(r *Runtime) error {
		got := r.Recovered()
		if w := (CheckpointInfo{ID: 5, Level: 2, Seq: 1, Ranks: 8}); got == nil || *got != w {
			return fmt.Errorf("rank %d: recovered %+v, want %+v", r.c.Rank(), got, w)
		}
		if got.Level.String() != "L2" {
			return fmt.Errorf("level %q", got.Level.String())
		}
		return nil
	}))
	var nilRT *Runtime
	assert.Equal(t, Placement{}, nilRT.Placement())
	assert.Nil(t, nilRT.Recovered())
}
