package ckpt

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// TestAllLevelsRoundTrip checkpoints at every level through the public API
// and restarts from each.
func TestAllLevelsRoundTrip(t *testing.T) {
	for _, n := range []int{1, 4, 8} {
		for lvl := 1; lvl <= 4; lvl++ {
			if n == 1 && (lvl == 2 || lvl == 3) {
				continue // one node cannot form a group of two
			}
			t.Run(fmt.Sprintf("ranks=%d/L%d", n, lvl), func(t *testing.T) {
				cfg := testConfig(t.TempDir(), 1)
				if n > 1 {
					cfg.NodeSize = max(n/4, 1) // 4 nodes in 2 groups of 2
					cfg.GroupSize = 2
				}
				require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
					s := makeState(r.c.Rank(), lvl, 30+r.c.Rank())
					if err := s.protect(r); err != nil {
						return err
					}
					return r.Checkpoint(int64(100+lvl), lvl)
				}))
				var mu sync.Mutex
				got := map[int]*state{}
				require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
					if r.recoveredManifest().Level != levels.ID(lvl) || r.recoveredManifest().ID != int64(100+lvl) {
						return fmt.Errorf("recovered %v id %d", r.Recovered().Level, r.Recovered().ID)
					}
					s := &state{Map: &mapVar{}}
					if err := s.protect(r); err != nil {
						return err
					}
					mu.Lock()
					got[r.c.Rank()] = s
					mu.Unlock()
					return r.Recover()
				}))
				for rank := 0; rank < n; rank++ {
					assert.Equal(t, makeState(rank, lvl, 30+rank), got[rank], "rank %d", rank)
				}
			})
		}
	}
}

// corruptFile overwrites the first bytes of a file, as FTI's tests do.
func corruptFile(t *testing.T, p string) {
	f, err := vfd.Sec2{}.Open(p, vfd.ReadWrite)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("TextForCorruption"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestBadL1FallsBackToOlderLevel: a level-4 checkpoint, then a newer L1
// one (which does not supersede L4); damaging any rank's L1 file makes the
// L1 checkpoint unusable and the restart comes from L4, word by word.
func TestBadL1FallsBackToOlderLevel(t *testing.T) {
	for _, n := range []int{1, 4, 8} {
		for _, how := range []string{"erase", "corrupt"} {
			for _, older := range []int{0, 2, 4} {
				if n == 1 && older == 2 {
					continue
				}
				t.Run(fmt.Sprintf("ranks=%d/%s/older=L%d", n, how, older), func(t *testing.T) {
					root := t.TempDir()
					cfg := testConfig(root, 1)
					if n > 1 {
						cfg.GroupSize = 2
					}
					require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
						x := []float64{float64(r.c.Rank()), 1}
						if err := Protect(r, 0, &x); err != nil {
							return err
						}
						if older > 0 {
							if err := r.Checkpoint(1, older); err != nil {
								return err
							}
						}
						x[1] = 2
						return r.Checkpoint(2, 1)
					}))
					seq := uint64(1)
					if older > 0 {
						seq = 2
					}
					victim := n - 1
					p := filepath.Join(cfg.NodeDir(victim, runOf(t, cfg)),
						levels.RankFileName(levels.CheckpointDir(seq), levels.RoleData, victim))
					if how == "erase" {
						require.NoError(t, vfd.Sec2{}.Remove(p))
					} else {
						corruptFile(t, p)
					}
					if older == 0 {
						errs := initErrors(t, n, cfg)
						for _, err := range errs {
							require.ErrorIs(t, err, ErrUnrecoverable)
							assert.Equal(t, errs[0].Error(), err.Error())
						}
						return
					}
					require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
						if r.Status() != Restart || r.recoveredManifest().ID != 1 || r.recoveredManifest().Level != levels.ID(older) {
							return fmt.Errorf("status %v from %+v", r.Status(), r.Recovered())
						}
						var x []float64
						if err := Protect(r, 0, &x); err != nil {
							return err
						}
						if err := r.Recover(); err != nil {
							return err
						}
						if len(x) != 2 || x[0] != float64(r.c.Rank()) || x[1] != 1 {
							return fmt.Errorf("rank %d recovered %v", r.c.Rank(), x)
						}
						return nil
					}))
				})
			}
		}
	}
}

// TestReplacementNode: a node vanishes with its disk and the restart runs
// on a new host; the new host takes the lost node's place in the saved
// node table (partner's Remap), so its directory is rebuilt from the L2
// partner copies and every rank gets its data back.
func TestReplacementNode(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	cfg.LocalTest, cfg.GroupSize = false, 2
	hosts := []string{"alpha", "beta", "gamma", "delta"}
	require.NoError(t, world(t, 4, cfg, []Option{WithNodeID(func(r int) string { return hosts[r] })}, func(r *Runtime) error {
		x := []uint32{uint32(r.c.Rank()) * 3, 7}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		return r.Checkpoint(1, 2)
	}))
	require.NoError(t, vfd.Sec2{}.RemoveAll(filepath.Join(cfg.NodeDir(2, runOf(t, cfg)))))
	// gamma is gone; epsilon starts in its place.
	newHosts := []string{"alpha", "beta", "epsilon", "delta"}
	var mu sync.Mutex
	nodeOf := map[string]int{}
	require.NoError(t, world(t, 4, cfg, []Option{WithNodeID(func(r int) string { return newHosts[r] })}, func(r *Runtime) error {
		mu.Lock()
		nodeOf[newHosts[r.c.Rank()]] = r.Topology().NodeOf(r.c.Rank())
		mu.Unlock()
		var x []uint32
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		if err := r.Recover(); err != nil {
			return err
		}
		if len(x) != 2 || x[0] != uint32(r.c.Rank())*3 || x[1] != 7 {
			return fmt.Errorf("rank %d recovered %v", r.c.Rank(), x)
		}
		return nil
	}))
	assert.Equal(t, map[string]int{"alpha": 0, "beta": 1, "epsilon": 2, "delta": 3}, nodeOf)
	// The node table in meta_dir now names the new host.
	b, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join(root, "meta", "topology"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "epsilon")
	assert.NotContains(t, string(b), "gamma")
}
