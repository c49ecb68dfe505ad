package ckpt

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/levels"
	"github.com/ftigo/ftigo/partner"
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
// nodes (two rank groups of 4 members): each group holds 2 parity files
// (members 0 and 1), every loss of 2 of a group's 6 files is rebuilt bit
// for bit, and 3 losses fail with an error naming the unrecoverable group.
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

	// The manifest: per group, parity files held by members 0 and 1, with
	// rs-k 4, rs-m 2 and distinct indices.
	type file struct {
		rank int
		role string
	}
	groupFiles := map[int][]file{}
	for r := range 8 {
		g := topo.GroupOf(r)
		groupFiles[g] = append(groupFiles[g], file{r, levels.RoleData})
		var par []levels.File
		for _, f := range m.Files[r] {
			if f.Role == levels.RoleParity {
				par = append(par, f)
			}
		}
		if topo.GroupRank(r) < 2 {
			require.Len(t, par, 1, "rank %d", r)
			assert.Equal(t, "4", par[0].Attrs[levels.AttrRSK])
			assert.Equal(t, "2", par[0].Attrs[levels.AttrRSM])
			assert.Equal(t, strconv.Itoa(topo.GroupRank(r)), par[0].Attrs[levels.AttrRSIndex])
			groupFiles[g] = append(groupFiles[g], file{r, levels.RoleParity})
		} else {
			assert.Empty(t, par, "rank %d holds no parity", r)
		}
	}
	for g, fs := range groupFiles {
		require.Len(t, fs, 6, "group %d: 4 data + 2 parity files", g)
	}
	pathOf := func(f file) string {
		return filepath.Join(base.CkptDir, topo.NodeDir(topo.NodeOf(f.rank)), levels.RankFileName(m.Dir(), f.role, f.rank))
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

	// Every pair of group 0's files, and at the same time a different pair
	// in group 1: rebuilt (the tree is whole again after each restart).
	fs0, fs1 := groupFiles[0], groupFiles[1]
	for i := range fs0 {
		for j := i + 1; j < len(fs0); j++ {
			lost := []file{fs0[i], fs0[j], fs1[(i+1)%6], fs1[(j+2)%6]}
			if fs1[(i+1)%6] == fs1[(j+2)%6] {
				lost = lost[:3]
			}
			t.Run(fmt.Sprintf("lose-%d%s-%d%s", fs0[i].rank, fs0[i].role, fs0[j].rank, fs0[j].role), func(t *testing.T) {
				for _, f := range lost {
					require.NoError(t, vfd.Sec2{}.Remove(pathOf(f)))
				}
				recovers(t)
				for _, f := range lost {
					_, err := vfd.Sec2{}.Stat(pathOf(f))
					require.NoError(t, err, "%s rebuilt", pathOf(f))
				}
			})
		}
	}
	// Whole nodes: node 0 holds one data and one parity file of each
	// group (2 losses per group), nodes 2 and 3 hold data only.
	for _, nodes := range [][]int{{0}, {1}, {2, 3}} {
		t.Run(fmt.Sprintf("lose-nodes-%v", nodes), func(t *testing.T) {
			for _, n := range nodes {
				require.NoError(t, vfd.Sec2{}.RemoveAll(filepath.Join(base.CkptDir, topo.NodeDir(n))))
			}
			recovers(t)
		})
	}
	// Three losses in group 1 (any kind) are refused on every rank with the
	// same error; nothing is returned.
	t.Run("lose-3", func(t *testing.T) {
		for _, f := range []file{fs1[0], fs1[3], fs1[4]} {
			require.NoError(t, vfd.Sec2{}.Remove(pathOf(f)))
		}
		errs := restart(t)
		for _, err := range errs {
			require.ErrorIs(t, err, ErrUnrecoverable)
			assert.Contains(t, err.Error(), "group 1 lost 3 of its 6 files")
			assert.Contains(t, err.Error(), "at most 2 may be lost")
			assert.Equal(t, errs[0].Error(), err.Error())
		}
		t.Log(errs[0])
	})
	// The limit of m < k: nodes 0 and 1 hold both parity files of each
	// group besides data, so losing those two nodes costs every group 4
	// of its 6 files, more than m = 2.
	t.Run("lose-parity-nodes", func(t *testing.T) {
		for _, n := range []int{0, 1} {
			require.NoError(t, vfd.Sec2{}.RemoveAll(filepath.Join(base.CkptDir, topo.NodeDir(n))))
		}
		for _, err := range restart(t) {
			require.ErrorIs(t, err, ErrUnrecoverable)
			assert.Contains(t, err.Error(), "at most 2 may be lost")
		}
	})
}
