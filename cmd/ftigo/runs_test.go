package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/testutil"
	"github.com/ftigo/ftigo/vfd"
)

// runIn returns the run the meta directory of run directory dir names.
func runIn(t testing.TB, dir string) string {
	t.Helper()
	id, _, err := levels.ReadRun(levels.Store{Driver: vfd.Sec2{}, Dir: filepath.Join(dir, "meta")})
	require.NoError(t, err)
	return id
}

// globalRunDir is the directory of dir's run in dir/global.
func globalRunDir(t testing.TB, dir string) string {
	t.Helper()
	return levels.RunDir(filepath.Join(dir, "global"), runIn(t, dir))
}

// nodeRunDir is the directory of dir's run in node n's local directory.
func nodeRunDir(t testing.TB, dir string, n int) string {
	t.Helper()
	return levels.RunDir(filepath.Join(dir, "local", fmt.Sprintf("node%04d", n)), runIn(t, dir))
}

// sharedRuns makes two jobs, a and b, that share glbl_dir and ckpt_dir
// under root, each with its own meta_dir and config.fti; a takes one L2
// checkpoint, b two L1 checkpoints. It returns the configs.
func sharedRuns(t *testing.T) (root, cfgA, cfgB string) {
	t.Helper()
	root = t.TempDir()
	write := func(name string, ckpts []int) string {
		cfg := ckpt.DefaultConfig()
		cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, 2, true
		cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(root, "local"), filepath.Join(root, "global"), filepath.Join(root, "meta-"+name)
		require.NoError(t, comm.Run(2, func(c comm.Comm) error {
			rt, err := ckpt.Init(cfg, c)
			if err != nil {
				return err
			}
			data := make([]float64, 3000)
			if err := ckpt.Protect(rt, 1, &data); err != nil {
				return err
			}
			for i, l := range ckpts {
				if err := rt.Checkpoint(int64(i+1), l); err != nil {
					return err
				}
			}
			return rt.Close()
		}))
		b, err := ckpt.FormatConfig(cfg)
		require.NoError(t, err)
		p := filepath.Join(root, name+".fti")
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	return root, write("a", []int{2}), write("b", []int{1, 1})
}

// metaRun is the run the meta_dir of config file cfg names.
func metaRun(t *testing.T, cfg string) string {
	t.Helper()
	c, err := ckpt.LoadConfig(vfd.Sec2{}, cfg)
	require.NoError(t, err)
	id, ok, err := levels.ReadRun(levels.Store{Driver: vfd.Sec2{}, Dir: c.MetaDir})
	require.NoError(t, err)
	require.True(t, ok)
	return id
}

// TestInspectVerifyRebuildRuns: with two runs in one glbl_dir, inspect and
// verify list both runs and read the one meta_dir names; --run reads the
// other from its manifest replicas; an unknown --run is an error listing
// the runs. rebuild repairs the run of its meta_dir and refuses --run of
// another one, changing nothing.
func TestInspectVerifyRebuildRuns(t *testing.T) {
	root, cfgA, cfgB := sharedRuns(t)
	a, b := metaRun(t, cfgA), metaRun(t, cfgB)
	require.NotEqual(t, a, b)

	var ir inspectResult
	jsonOut(t, 0, &ir, "inspect", "--json", cfgA)
	assert.Equal(t, a, ir.Dirs.Run)
	assert.Equal(t, a, ir.Dirs.MetaRun)
	assert.Equal(t, filepath.Join(root, "global", a), ir.Dirs.Global)
	ids := map[string]int{}
	for _, r := range ir.Dirs.Runs {
		ids[r.ID] = r.Checkpoints
	}
	assert.Equal(t, map[string]int{a: 1, b: 1}, ids, "L1 supersedes L1: b keeps one checkpoint")
	require.Len(t, ir.Checkpoints, 1)
	assert.Equal(t, 2, ir.Checkpoints[0].Level)
	for _, c := range ir.Checkpoints[0].Checks {
		assert.Contains(t, c.Path, string(filepath.Separator)+a+string(filepath.Separator), "a's files only")
	}

	// b's run through a's config: read from b's replicas.
	code, out, errs := ftigo("inspect", cfgA, "--run", b)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "run "+b+" (read from its manifest replicas; meta_dir names run "+a+")")
	assert.Contains(t, out, "  "+a+": 1 checkpoint(s)")
	assert.Contains(t, out, "  "+b+": 1 checkpoint(s)")
	assert.Contains(t, out, "ckpt00000002.manifest")
	var vr verifyResult
	jsonOut(t, 0, &vr, "verify", "--json", "--run", b, cfgA)
	require.Len(t, vr.Checkpoints, 1)
	assert.Equal(t, "verified", vr.Checkpoints[0].Status)
	assert.Equal(t, 1, vr.Checkpoints[0].Level)
	for _, c := range vr.Checkpoints[0].Checks {
		assert.Contains(t, c.Path, string(filepath.Separator)+b+string(filepath.Separator), "b's files only")
	}

	code, _, errs = ftigo("inspect", cfgA, "--run", "2000-01-01_00-00-00_none")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "holds no run 2000-01-01_00-00-00_none (runs found: ")
	assert.Contains(t, errs, a)
	code, _, errs = ftigo("inspect", cfgA, "--run", "../x")
	assert.Equal(t, 2, code, errs)

	// rebuild: a lost node of a's L2 checkpoint is rebuilt; b's files stay.
	before := testutil.TreeDigests(t, filepath.Join(root, "meta-b"), filepath.Join(root, "global", b), filepath.Join(root, "local", "node0000", b), filepath.Join(root, "local", "node0001", b))
	require.NoError(t, os.RemoveAll(filepath.Join(root, "local", "node0001", a)))
	code, _, errs = ftigo("rebuild", cfgA, "--run", b)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "meta_dir "+filepath.Join(root, "meta-a")+" belongs to run "+a)
	code, out, errs = ftigo("rebuild", cfgA, "--run", a)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "rebuilt checkpoint 1 (L2")
	after := testutil.TreeDigests(t, filepath.Join(root, "meta-b"), filepath.Join(root, "global", b), filepath.Join(root, "local", "node0000", b), filepath.Join(root, "local", "node0001", b))
	assert.Equal(t, before, after, "rebuilding run a leaves run b's files as they were")
}
