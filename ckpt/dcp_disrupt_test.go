package ckpt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/sion"
	"github.com/ftigo/ftigo/vfd"
)

// dchain takes, at level lvl, a full checkpoint of version 1 and
// differential checkpoints of versions 2 and 3 on 4 ranks (4 nodes, one
// group), and returns the configuration and the manifests.
func dchain(t *testing.T, lvl int) (Config, []*levels.Manifest) {
	t.Helper()
	return dchainAsync(t, lvl, false)
}

// dchainAsync is dchain, with the level's post-processing in the
// background when async is set (each checkpoint waited for, so the chain
// is at lvl).
func dchainAsync(t *testing.T, lvl int, async bool) (Config, []*levels.Manifest) {
	t.Helper()
	const n = 4
	cfg := dcpConfig(t.TempDir(), n)
	cfg.Async[lvl] = async
	var ms []*levels.Manifest
	require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
		x, ver := dversion(r.c.Rank(), 1), []int64{1}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
			return err
		}
		for v := 1; v <= 3; v++ {
			x, ver[0] = dversion(r.c.Rank(), v), int64(v)
			if err := r.Checkpoint(int64(v), lvl+4); err != nil {
				return err
			}
			if err := r.CheckpointWait(); err != nil {
				return err
			}
		}
		if r.c.Rank() == 0 {
			ms = r.eng.Committed()
		}
		return nil
	}))
	require.Len(t, ms, 3)
	require.Nil(t, ms[0].DCP)
	require.NotNil(t, ms[2].DCP)
	return cfg, ms
}

// restartVersion restarts on cfg and returns the version every rank
// recovered (all equal), checking the data bit for bit.
func restartVersion(t *testing.T, cfg Config) (int, error) {
	t.Helper()
	const n = 4
	got := make([]int, n)
	err := world(t, n, cfg, nil, func(r *Runtime) error {
		var x []uint64
		ver := []int64{0}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Recover()); err != nil {
			return err
		}
		v := int(ver[0])
		if !assert.ObjectsAreEqual(dversion(r.c.Rank(), v), x) {
			return fmt.Errorf("rank %d: not exactly version %d", r.c.Rank(), v)
		}
		got[r.c.Rank()] = v
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, v := range got {
		if v != got[0] {
			return 0, fmt.Errorf("ranks recovered versions %v", got)
		}
	}
	return got[0], nil
}

// flipByte flips one byte in the middle of a file.
func flipByte(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b[len(b)/2] ^= 0x01
	require.NoError(t, os.WriteFile(p, b, 0o644))
}

// heldPath is where rank holder keeps file f of m.
func heldPath(cfg Config, m *levels.Manifest, holder int, f levels.File) string {
	if f.Where == levels.Global {
		return filepath.Join(cfg.GlobalDir(m.Run), f.Name)
	}
	return filepath.Join(cfg.NodeDir(holder/cfg.NodeSize, m.Run), f.Name)
}

// heldBy returns the files rank holder holds in m (read from its part).
func heldBy(t *testing.T, m *levels.Manifest, holder int) []levels.File {
	t.Helper()
	fs, err := m.RankFiles(holder)
	require.NoError(t, err)
	return fs
}

// fileOf returns the path of the file of role held by holder in m.
func fileOf(t *testing.T, cfg Config, m *levels.Manifest, holder int, role string) string {
	t.Helper()
	for _, f := range heldBy(t, m, holder) {
		if f.Role == role {
			return heldPath(cfg, m, holder, f)
		}
	}
	t.Fatalf("%s: rank %d holds no %s file", m.Dir(), holder, role)
	return ""
}

// TestDCPCorruption corrupts one byte in a delta, in the base, in a
// partner's copy of a delta, in the parity of a delta and in an L4
// container's delta: each is detected, and the restart gets the newest
// state from redundancy, or falls back to the newest layer still whole
// (warning), or is refused clearly — never wrong data.
func TestDCPCorruption(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level int
		seq   int    // 0 base, 1 middle delta, 2 newest delta
		role  string // file to damage on rank 1
		want  int    // version recovered, 0: refused
	}{
		{"L1 newest delta", 1, 2, levels.RoleData, 2},
		{"L1 middle delta", 1, 1, levels.RoleData, 1},
		{"L1 base", 1, 0, levels.RoleData, 0},
		{"L2 newest delta", 2, 2, levels.RoleData, 3},
		{"L2 base", 2, 0, levels.RoleData, 3},
		{"L2 partner copy of a delta", 2, 1, levels.RolePartner, 3},
		{"L3 newest delta", 3, 2, levels.RoleData, 3},
		{"L3 base", 3, 0, levels.RoleData, 3},
		{"L3 parity of a delta", 3, 1, levels.RoleParity, 3},
		{"L4 container of the newest delta", 4, 2, levels.RoleContainer, 2},
		{"L4 container of the base", 4, 0, levels.RoleContainer, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ms := dchain(t, tc.level)
			m := ms[tc.seq]
			holder := 1
			if tc.role == levels.RoleContainer {
				holder = 0 // the container's leader lists it
			}
			p := fileOf(t, cfg, m, holder, tc.role)
			if tc.role == levels.RoleContainer {
				// A byte in the middle of rank 1's task (its delta).
				sr, err := sion.Open(vfd.Sec2{}, p)
				require.NoError(t, err)
				var off int64 = -1
				for _, tk := range sr.Tasks() {
					if tk.GlobalRank == 1 {
						off = tk.Start + tk.BlockSizes[0]/2
					}
				}
				require.NoError(t, sr.Close())
				require.GreaterOrEqual(t, off, int64(0))
				b, err := os.ReadFile(p)
				require.NoError(t, err)
				b[off] ^= 1
				require.NoError(t, os.WriteFile(p, b, 0o644))
			} else {
				flipByte(t, p)
			}
			v, err := restartVersion(t, cfg)
			if tc.want == 0 {
				require.ErrorIs(t, err, ErrUnrecoverable)
				assert.Contains(t, err.Error(), "digest mismatch")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, v)
		})
	}
}

// TestDCPDisruptionMatrix runs FTI's L2/L3 disruption matrix after a
// chain of differential checkpoints: files erased or corrupted on
// non-consecutive nodes, partner or parity files erased, whole node
// directories of consecutive and non-consecutive nodes erased, and (L3)
// one node more than the code tolerates. Every layer is rebuilt from its
// own redundancy where the level allows, and the restart is refused
// clearly where it does not. Every row runs twice: post-processing
// inline, and in the background (inline_lL = 0).
func TestDCPDisruptionMatrix(t *testing.T) {
	type disruption struct {
		name  string
		apply func(t *testing.T, cfg Config, ms []*levels.Manifest)
		ok    map[int]bool // level -> recoverable
	}
	nodeDir := func(cfg Config, n int) string { return filepath.Join(cfg.CkptDir, fmt.Sprintf("node%04d", n)) }
	eachFile := func(t *testing.T, cfg Config, ms []*levels.Manifest, nodes []int, role string, fn func(p string)) {
		for _, m := range ms {
			for _, nd := range nodes {
				for _, f := range heldBy(t, m, nd) {
					if f.Role == role {
						fn(heldPath(cfg, m, nd, f))
					}
				}
			}
		}
	}
	cases := []disruption{
		{"erase data files on nodes 0,2", func(t *testing.T, cfg Config, ms []*levels.Manifest) {
			eachFile(t, cfg, ms, []int{0, 2}, levels.RoleData, func(p string) { require.NoError(t, os.Remove(p)) })
		}, map[int]bool{2: true, 3: true}},
		{"corrupt data files on nodes 0,2", func(t *testing.T, cfg Config, ms []*levels.Manifest) {
			eachFile(t, cfg, ms, []int{0, 2}, levels.RoleData, func(p string) { corruptFile(t, p) })
		}, map[int]bool{2: true, 3: true}},
		{"erase partner and parity files on nodes 0,2", func(t *testing.T, cfg Config, ms []*levels.Manifest) {
			for _, role := range []string{levels.RolePartner, levels.RoleParity} {
				eachFile(t, cfg, ms, []int{0, 2}, role, func(p string) { require.NoError(t, os.Remove(p)) })
			}
		}, map[int]bool{2: true, 3: true}},
		{"erase node dirs 0,1 (consecutive)", func(t *testing.T, cfg Config, ms []*levels.Manifest) {
			require.NoError(t, os.RemoveAll(nodeDir(cfg, 0)))
			require.NoError(t, os.RemoveAll(nodeDir(cfg, 1)))
		}, map[int]bool{2: false, 3: true}},
		{"erase node dirs 0,2 (non-consecutive)", func(t *testing.T, cfg Config, ms []*levels.Manifest) {
			require.NoError(t, os.RemoveAll(nodeDir(cfg, 0)))
			require.NoError(t, os.RemoveAll(nodeDir(cfg, 2)))
		}, map[int]bool{2: true, 3: true}},
		{"erase node dirs 0,1,2 (k+1 losses)", func(t *testing.T, cfg Config, ms []*levels.Manifest) {
			for _, n := range []int{0, 1, 2} {
				require.NoError(t, os.RemoveAll(nodeDir(cfg, n)))
			}
		}, map[int]bool{2: false, 3: false}},
	}
	for _, lvl := range []int{2, 3} {
		for _, d := range cases {
			for _, async := range []bool{false, true} {
				t.Run(fmt.Sprintf("L%d/async=%v/%s", lvl, async, d.name), func(t *testing.T) {
					cfg, ms := dchainAsync(t, lvl, async)
					require.Equal(t, levels.ID(lvl), ms[2].Level)
					d.apply(t, cfg, ms)
					v, err := restartVersion(t, cfg)
					if !d.ok[lvl] {
						require.ErrorIs(t, err, ErrUnrecoverable)
						assert.True(t, strings.Contains(err.Error(), "unrecoverable") || strings.Contains(err.Error(), "lost"), err.Error())
						return
					}
					require.NoError(t, err)
					assert.Equal(t, 3, v, "the newest differential checkpoint, every layer rebuilt")
					// A second restart finds every layer in place.
					v, err = restartVersion(t, cfg)
					require.NoError(t, err)
					assert.Equal(t, 3, v)
				})
			}
		}
	}
}

// TestDCPKeepLast: with keep_last_ckpt, Finalize flushes a differential
// L1-L3 checkpoint to L4 as a full file (its image, every block verified)
// and keeps it; a differential L4 checkpoint is kept with its chain. After
// every node-local directory is erased, the next run restarts from it
// (RestartKept) bit for bit, and a run without keep_last deletes them all.
func TestDCPKeepLast(t *testing.T) {
	for _, lvl := range []int{1, 3, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			const n = 4
			cfg := dcpConfig(t.TempDir(), n)
			cfg.KeepLastCkpt = true
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				x, ver := dversion(r.c.Rank(), 1), []int64{1}
				if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
					return err
				}
				for v := 1; v <= 3; v++ {
					x, ver[0] = dversion(r.c.Rank(), v), int64(v)
					if err := r.Checkpoint(int64(v), lvl+4); err != nil {
						return err
					}
				}
				return r.Finalize()
			}))
			require.NoError(t, os.RemoveAll(cfg.CkptDir))
			scanned, err := levels.ScanManifests(levels.Store{Driver: vfd.Sec2{}, Dir: cfg.MetaDir})
			require.NoError(t, err)
			var kept *levels.Manifest
			for _, sm := range scanned {
				require.NoError(t, sm.Err)
				if sm.M.Kept {
					kept = sm.M
				}
			}
			require.NotNil(t, kept)
			assert.Equal(t, levels.L4, kept.Level)
			if lvl == 4 {
				assert.Len(t, scanned, 3, "the kept L4 delta and its chain")
				assert.Equal(t, 3, kept.Layers())
			} else {
				assert.Len(t, scanned, 1, "one full L4 checkpoint")
				assert.Nil(t, kept.DCP)
			}
			cfg.KeepLastCkpt = false
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				if r.Status() != RestartKept || r.Recovered().ID != 3 {
					return fmt.Errorf("status %v from %+v", r.Status(), r.Recovered())
				}
				var x []uint64
				ver := []int64{0}
				if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Recover()); err != nil {
					return err
				}
				if ver[0] != 3 || !assert.ObjectsAreEqual(dversion(r.c.Rank(), 3), x) {
					return fmt.Errorf("rank %d: not version 3", r.c.Rank())
				}
				return r.Finalize()
			}))
			scanned, err = levels.ScanManifests(levels.Store{Driver: vfd.Sec2{}, Dir: cfg.MetaDir})
			require.NoError(t, err)
			assert.Empty(t, scanned, "Finalize without keep_last deletes every checkpoint, chains newest first")
		})
	}
}
