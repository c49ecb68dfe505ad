package levels

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHomes: every old rank has exactly one home, HomeRanks lists each
// home's old ranks, and no home has more than ceil(N/M).
func TestHomes(t *testing.T) {
	for _, c := range [][2]int{{4, 3}, {3, 7}, {2048, 1536}, {1, 5}, {5, 1}, {100, 100}} {
		n, m := c[0], c[1]
		seen := make([]int, n)
		for q := range m {
			hs := HomeRanks(n, m, q)
			assert.LessOrEqual(t, len(hs), (n+m-1)/m, "%d -> %d, rank %d", n, m, q)
			for _, o := range hs {
				assert.Equal(t, q, HomeOf(o, n, m))
				seen[o]++
			}
		}
		for o, k := range seen {
			assert.Equal(t, 1, k, "%d -> %d: old rank %d", n, m, o)
		}
	}
}

// TestOldRight: the holder of an old rank's partner copy is its right
// neighbour in the old topology, placed in blocks.
func TestOldRight(t *testing.T) {
	m := &Manifest{Ranks: 24, NodeSize: 2, GroupSize: 3, Nodes: make([]string, 12)}
	for k := range m.Nodes {
		m.Nodes[k] = fmt.Sprint("h", k)
	}
	topo, err := oldTopology(m)
	assert.NoError(t, err)
	for r := range m.Ranks {
		assert.Equal(t, topo.Right(r), oldRight(m, r), "rank %d", r)
	}
}

// FuzzRankFileName: a name parses back to what RankFileName wrote, and
// anything else parses to a rank in range or not at all.
func FuzzRankFileName(f *testing.F) {
	f.Add("data000003.fti")
	f.Add("partner123456.fti")
	f.Add("x.fti")
	f.Add("data-00001.fti")
	f.Fuzz(func(t *testing.T, name string) {
		role, r, ok := parseRankFile(name)
		if !ok {
			return
		}
		assert.GreaterOrEqual(t, r, 0)
		assert.Equal(t, name, RankFileName("d", role, r)[2:], "round trip")
	})
}
