package ckpt

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// l3ParityState is rank r's data; sizes differ per rank so the group's
// files are padded logically.
func l3ParityState(rank int) []uint64 {
	x := make([]uint64, 300+97*rank)
	for i := range x {
		x[i] = uint64(rank)<<40 ^ uint64(i)*0x9e3779b97f4a7c15
	}
	return x
}

// TestL3ParityKey: l3_parity = 2 on 8 ranks, 4 nodes, one sector of 4
// nodes (two rank groups of 4 members): the parity is rotated, so every
// rank holds a parity file; any 2 members of each group may lose all their
// files (every pair of nodes, every pair of members per group) and are
// rebuilt bit for bit, and 3 nodes fail with an error naming the
// unrecoverable group.
func TestL3ParityKey(t *testing.T) {
	root := t.TempDir()
	base := testConfig(root, 2)
	text := fmt.Sprintf("[basic]\nnode_size = 2\ngroup_size = 4\nl3_parity = 2\nckpt_dir = %s\nglbl_dir = %s\nmeta_dir = %s\n[advanced]\nlocal_test = 1\nblock_size = 16\n",
		base.CkptDir, base.GlblDir, base.MetaDir)
	cfg, err := ParseConfig("l3.fti", []byte(text))
	require.NoError(t, err)
	require.Equal(t, 2, cfg.L3Parity)
	require.Empty(t, cfg.Warnings)

	var m *levels.Manifest
	var topo *partner.Topology
	require.NoError(t, world(t, 8, cfg, nil, func(r *Runtime) error {
		x := l3ParityState(r.c.Rank())
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		if err := r.Checkpoint(9, 3); err != nil {
			return err
		}
		if r.c.Rank() == 0 {
			c := r.eng.Committed()
			m, topo = c[len(c)-1], r.Topology()
		}
		return nil
	}))
	require.Equal(t, 2, topo.NumGroups())

	// The manifest: one parity file per rank with rs-k 4, rs-m 2, the
	// member's index and the group's stripe unit; overhead m/(k-m) = 1.
	type file struct {
		rank int
		role string
	}
	members := map[int][]int{}
	unit := map[int]string{}
	parSize := map[int]int64{}
	for r := range 8 {
		g := topo.GroupOf(r)
		members[g] = append(members[g], r)
		var par []levels.File
		for _, f := range heldBy(t, m, r) {
			if f.Role == levels.RoleParity {
				par = append(par, f)
			}
		}
		require.Len(t, par, 1, "rank %d", r)
		assert.Equal(t, "4", par[0].Attrs[levels.AttrRSK])
		assert.Equal(t, "2", par[0].Attrs[levels.AttrRSM])
		assert.Equal(t, strconv.Itoa(topo.GroupRank(r)), par[0].Attrs[levels.AttrRSIndex])
		require.NotEmpty(t, par[0].Attrs[levels.AttrRSUnit])
		if u, ok := unit[g]; ok {
			assert.Equal(t, u, par[0].Attrs[levels.AttrRSUnit], "one unit per group")
		}
		unit[g] = par[0].Attrs[levels.AttrRSUnit]
		parSize[r] = par[0].Size
	}
	for g, rs := range members {
		var largest int64
		for _, r := range rs {
			data, ok := m.DataFile(r)
			require.True(t, ok)
			largest = max(largest, data.Size)
		}
		for _, r := range rs {
			// m/(k-m) of the group's largest file, rounded up to whole
			// units, plus the header
			u, err := strconv.Atoi(unit[g])
			require.NoError(t, err)
			assert.InDelta(t, float64(largest), float64(parSize[r]), float64(2*u+512), "rank %d", r)
		}
	}
	pathOf := func(f file) string {
		return filepath.Join(base.NodeDir(topo.NodeOf(f.rank), m.Run), levels.RankFileName(m.Dir(), f.role, f.rank))
	}
	restart := func(t *testing.T) []error {
		return initErrors(t, 8, cfg)
	}
	recovers := func(t *testing.T) {
		require.NoError(t, world(t, 8, cfg, nil, func(r *Runtime) error {
			var x []uint64
			if err := Protect(r, 0, &x); err != nil {
				return err
			}
			if err := r.Recover(); err != nil {
				return err
			}
			if want := l3ParityState(r.c.Rank()); !assert.ObjectsAreEqual(want, x) {
				return fmt.Errorf("rank %d: recovered data differs", r.c.Rank())
			}
			return nil
		}))
	}

	// Every pair of group 0's members, and at the same time a different
	// pair of group 1's, lose data and parity: rebuilt (the tree is whole
	// again after each restart).
	g0, g1 := members[0], members[1]
	for i := range g0 {
		for j := i + 1; j < len(g0); j++ {
			lost := []int{g0[i], g0[j], g1[(i+1)%4], g1[(j+2)%4]}
			if lost[2] == lost[3] {
				lost = lost[:3]
			}
			t.Run(fmt.Sprintf("lose-ranks-%v", lost), func(t *testing.T) {
				for _, r := range lost {
					for _, role := range []string{levels.RoleData, levels.RoleParity} {
						require.NoError(t, vfd.Sec2{}.Remove(pathOf(file{r, role})))
					}
				}
				recovers(t)
				for _, r := range lost {
					for _, role := range []string{levels.RoleData, levels.RoleParity} {
						_, err := vfd.Sec2{}.Stat(pathOf(file{r, role}))
						require.NoError(t, err, "%s rebuilt", pathOf(file{r, role}))
					}
				}
			})
		}
	}
	// Whole nodes: every node holds one member of each group, so any two
	// nodes cost each group two members.
	for _, nodes := range [][]int{{0}, {0, 1}, {0, 2}, {1, 3}, {2, 3}} {
		t.Run(fmt.Sprintf("lose-nodes-%v", nodes), func(t *testing.T) {
			for _, n := range nodes {
				require.NoError(t, vfd.Sec2{}.RemoveAll(filepath.Join(base.CkptDir, topo.NodeDir(n))))
			}
			recovers(t)
		})
	}
	// Three nodes: three members of each group, refused on every rank with
	// the same error; nothing is returned.
	t.Run("lose-3-nodes", func(t *testing.T) {
		for _, n := range []int{0, 1, 3} {
			require.NoError(t, vfd.Sec2{}.RemoveAll(filepath.Join(base.CkptDir, topo.NodeDir(n))))
		}
		errs := restart(t)
		for _, err := range errs {
			require.ErrorIs(t, err, ErrUnrecoverable)
			assert.Contains(t, err.Error(), "lost 6 of its 8 files")
			assert.Contains(t, err.Error(), "at most 2 may be lost (any 2 of the 4 members)")
			assert.Equal(t, errs[0].Error(), err.Error())
		}
		t.Log(errs[0])
	})
}
