package partner

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

var rewrite = flag.Bool("rewrite", false, "rewrite golden files in testdata/")

func hosts(nodeSize int, order ...string) []string {
	var ids []string
	for _, h := range order {
		for i := 0; i < nodeSize; i++ {
			ids = append(ids, h)
		}
	}
	return ids
}

func TestTopologyShape(t *testing.T) {
	tests := []struct {
		name                       string
		nranks, nodeSize, groupSz  int
		ids                        []string
		nodes, groups              int
		group0                     []int
		rightOf0, leftOf0, nodeOf5 int
	}{
		{"16 ranks on 4 nodes in 1 group", 16, 4, 4, nil, 4, 4, []int{0, 4, 8, 12}, 4, 12, 1},
		{"8 ranks on 8 nodes in 2 groups", 8, 1, 4, nil, 8, 2, []int{0, 1, 2, 3}, 1, 3, 5},
		{"interleaved hosts", 8, 2, 2, []string{"a", "b", "c", "d", "a", "b", "c", "d"}, 4, 4, []int{0, 1}, 1, 1, 1},
		{"reversed hosts", 4, 1, 2, []string{"d", "c", "b", "a"}, 4, 2, []int{0, 1}, 1, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := NewTopology(tc.nranks, tc.nodeSize, tc.groupSz, tc.ids)
			require.NoError(t, err)
			assert.Equal(t, tc.nodes, topo.NumNodes())
			assert.Equal(t, tc.groups, topo.NumGroups())
			assert.Equal(t, tc.group0, topo.GroupMembers(0))
			assert.Equal(t, tc.rightOf0, topo.Right(0))
			assert.Equal(t, tc.leftOf0, topo.Left(0))
			if tc.nranks > 5 {
				assert.Equal(t, tc.nodeOf5, topo.NodeOf(5))
			}
			// invariants: every group has one member per node of its sector,
			// ring order matches GroupRank, Right/Left are inverse.
			for g := 0; g < topo.NumGroups(); g++ {
				nodes := map[int]bool{}
				for j, r := range topo.GroupMembers(g) {
					assert.Equal(t, g, topo.GroupOf(r))
					assert.Equal(t, j, topo.GroupRank(r))
					nodes[topo.NodeOf(r)] = true
					assert.Equal(t, r, topo.Left(topo.Right(r)))
					assert.NotEqual(t, topo.NodeOf(r), topo.NodeOf(topo.Right(r)))
				}
				assert.Len(t, nodes, tc.groupSz)
			}
		})
	}
}

func TestTopologyErrors(t *testing.T) {
	tests := []struct {
		name                      string
		nranks, nodeSize, groupSz int
		ids                       []string
		want                      error
		msg                       string
	}{
		{"ranks not multiple of node size", 10, 4, 2, nil, ErrBadRanks, "divisible by node_size"},
		{"zero node size", 4, 0, 1, nil, ErrBadNodeSize, "positive"},
		{"uneven node", 4, 2, 1, []string{"a", "a", "a", "b"}, ErrBadNodeSize, "node 0 (a) holds 3 ranks"},
		{"nodes not multiple of group", 12, 4, 2, nil, ErrBadGroupSize, "3 nodes, group_size 2"},
		{"zero group", 4, 4, 0, nil, ErrBadGroupSize, "group_size 0"},
		{"ids length", 4, 2, 1, []string{"a", "a"}, ErrBadArgument, "2 node ids for 4 ranks"},
		{"empty host", 2, 1, 1, []string{"a", ""}, ErrBadArgument, "rank 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTopology(tc.nranks, tc.nodeSize, tc.groupSz, tc.ids)
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	topo, err := NewTopology(4, 4, 1, nil)
	require.NoError(t, err)
	require.NoError(t, topo.Validate(1, 4))
	err = topo.Validate(1, 2)
	require.ErrorIs(t, err, ErrGroupTooSmall)
	assert.Contains(t, err.Error(), "L2")
	require.ErrorIs(t, topo.Validate(3), ErrGroupTooSmall)
}

func TestNodeTableRoundTrip(t *testing.T) {
	nt := NodeTable{"n1", "node-b", "x.example.org"}
	data, err := nt.Marshal()
	require.NoError(t, err)
	assert.Equal(t, "[topology]\n0 = n1\n1 = node-b\n2 = x.example.org\n", string(data))
	got, err := UnmarshalTable(data)
	require.NoError(t, err)
	assert.Equal(t, nt, got)

	got, err = UnmarshalTable([]byte("; comment\n[topology]\n\n1=b\n0 =  a \n"))
	require.NoError(t, err)
	assert.Equal(t, NodeTable{"a", "b"}, got)

	bad := map[string]string{
		"empty":          "",
		"no section":     "0 = a\n",
		"other section":  "[foo]\n0 = a\n",
		"gap":            "[topology]\n0 = a\n2 = b\n",
		"dup index":      "[topology]\n0 = a\n0 = b\n",
		"dup host":       "[topology]\n0 = a\n1 = a\n",
		"no equals":      "[topology]\n0 a\n",
		"bad index":      "[topology]\nx = a\n",
		"negative index": "[topology]\n-1 = a\n",
		"empty host":     "[topology]\n0 =\n",
	}
	for name, in := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := UnmarshalTable([]byte(in))
			require.ErrorIs(t, err, ErrBadTable)
		})
	}
	_, err = NodeTable{"a", "a"}.Marshal()
	require.ErrorIs(t, err, ErrBadTable)
}

func TestRemap(t *testing.T) {
	tests := []struct {
		name           string
		saved, current NodeTable
		want           NodeTable
		err            error
	}{
		{"same", NodeTable{"a", "b", "c"}, NodeTable{"a", "b", "c"}, NodeTable{"a", "b", "c"}, nil},
		{"reversed", NodeTable{"a", "b", "c", "d"}, NodeTable{"d", "c", "b", "a"}, NodeTable{"a", "b", "c", "d"}, nil},
		{"shuffled", NodeTable{"a", "b", "c", "d"}, NodeTable{"c", "a", "d", "b"}, NodeTable{"a", "b", "c", "d"}, nil},
		{"one replaced", NodeTable{"a", "b", "c", "d"}, NodeTable{"a", "b", "x", "d"}, NodeTable{"a", "b", "x", "d"}, nil},
		{"replaced, shuffled", NodeTable{"a", "b", "c", "d"}, NodeTable{"y", "d", "x", "a"}, NodeTable{"a", "y", "x", "d"}, nil},
		{"all replaced", NodeTable{"a", "b"}, NodeTable{"y", "x"}, NodeTable{"y", "x"}, nil},
		{"size changed", NodeTable{"a", "b"}, NodeTable{"a", "b", "c"}, nil, ErrBadTable},
		{"dup", NodeTable{"a", "b"}, NodeTable{"a", "a"}, nil, ErrBadTable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Remap(tc.saved, tc.current)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestTopologyRemapKeepsRoles checks that after a restart on reordered or
// replaced nodes every surviving host keeps its node index, and the
// replacement inherits the vanished host's groups.
func TestTopologyRemapKeepsRoles(t *testing.T) {
	old, err := NewTopology(8, 2, 2, hosts(2, "a", "b", "c", "d"))
	require.NoError(t, err)
	// new run: c replaced by x, launched in a different order
	cur, err := NewTopology(8, 2, 2, hosts(2, "x", "d", "a", "b"))
	require.NoError(t, err)
	re, err := cur.Remap(old.Table())
	require.NoError(t, err)
	assert.Equal(t, NodeTable{"a", "b", "x", "d"}, re.Table())
	// rank 0 is on x now (node 2), which was c's slot: sector 1.
	assert.Equal(t, 2, re.NodeOf(0))
	assert.Equal(t, 1, re.SectorOf(0))
	assert.Equal(t, re.Right(0), 2) // d's first rank
	for g := 0; g < re.NumGroups(); g++ {
		oldHosts, newHosts := []string{}, []string{}
		for _, r := range old.GroupMembers(g) {
			oldHosts = append(oldHosts, old.Host(old.NodeOf(r)))
		}
		for _, r := range re.GroupMembers(g) {
			newHosts = append(newHosts, re.Host(re.NodeOf(r)))
		}
		assert.Equal(t, strings.ReplaceAll(strings.Join(oldHosts, ","), "c", "x"), strings.Join(newHosts, ","))
	}
}

// TestPlacementsGolden records full placements of typical layouts; run with
// -rewrite to regenerate testdata/placements.golden.
func TestPlacementsGolden(t *testing.T) {
	var b strings.Builder
	cases := []struct {
		name                      string
		nranks, nodeSize, groupSz int
		ids                       []string
		saved                     NodeTable
	}{
		{"16 ranks, 4 nodes, 1 group", 16, 4, 4, nil, nil},
		{"8 ranks, 8 nodes, 2 groups", 8, 1, 4, nil, nil},
		{"12 ranks, 6 nodes of 2, groups of 3", 12, 2, 3, nil, nil},
		{"reversed launch, restored order", 8, 2, 4, hosts(2, "d", "c", "b", "a"), NodeTable{"a", "b", "c", "d"}},
		{"shuffled launch with a replacement", 8, 2, 4, hosts(2, "b", "x", "d", "a"), NodeTable{"a", "b", "c", "d"}},
	}
	for _, c := range cases {
		topo, err := NewTopology(c.nranks, c.nodeSize, c.groupSz, c.ids)
		require.NoError(t, err)
		if c.saved != nil {
			topo, err = topo.Remap(c.saved)
			require.NoError(t, err)
		}
		fmt.Fprintf(&b, "# %s\n%s", c.name, topo)
		for r := 0; r < c.nranks; r++ {
			fmt.Fprintf(&b, "rank %d: node %d local %d sector %d group %d grank %d left %d right %d\n",
				r, topo.NodeOf(r), topo.LocalIndex(r), topo.SectorOf(r), topo.GroupOf(r), topo.GroupRank(r), topo.Left(r), topo.Right(r))
		}
		b.WriteString("\n")
	}
	path := filepath.Join("testdata", "placements.golden")
	if *rewrite {
		require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, path, []byte(b.String())))
	}
	want, err := vfd.ReadFile(vfd.Sec2{}, path)
	require.NoError(t, err)
	assert.Equal(t, string(want), b.String())
}

func FuzzUnmarshalTable(f *testing.F) {
	f.Add([]byte("[topology]\n0 = a\n1 = b\n"))
	f.Add([]byte("[topology]\n1=b\n0=a\n"))
	f.Add([]byte("[x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		nt, err := UnmarshalTable(data)
		if err != nil {
			return
		}
		out, err := nt.Marshal()
		require.NoError(t, err)
		again, err := UnmarshalTable(out)
		require.NoError(t, err)
		require.Equal(t, nt, again)
	})
}

func TestNodeDir(t *testing.T) {
	topo, err := NewTopology(4, 1, 2, nil)
	require.NoError(t, err)
	assert.Equal(t, "node0003", topo.NodeDir(3))
}
