package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
)

// makeDCPRun writes a killed job's run directory with a chain at level
// lvl: a full checkpoint, then two differential ones (a few blocks changed).
func makeDCPRun(t *testing.T, lvl int) string {
	t.Helper()
	dir := t.TempDir()
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, 4, true
	cfg.EnableDCP, cfg.DCPBlockSize = true, 4096
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		rt, err := ckpt.Init(cfg, c)
		if err != nil {
			return err
		}
		data := make([]float64, 20000)
		for i := range data {
			data[i] = float64(c.Rank()*100000 + i)
		}
		if err := ckpt.Protect(rt, 1, &data); err != nil {
			return err
		}
		for v := 1; v <= 3; v++ {
			data[v*3000] = -float64(v)
			if err := rt.Checkpoint(int64(v), lvl+4); err != nil {
				return err
			}
		}
		return rt.Close()
	}))
	return dir
}

func TestInspectVerifyRebuildDCP(t *testing.T) {
	dir := makeDCPRun(t, 2)

	code, out, errs := ftigo("inspect", dir)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "differential: layer 3 on ckpt00000002.manifest (chain [ckpt00000001.manifest ckpt00000002.manifest])")
	assert.Contains(t, out, "differential: layer 2 on ckpt00000001.manifest")
	assert.Regexp(t, `ckpt0+1\.manifest\s+1\s+L2\s+4\s+4\s+\d+ \S+\s+8/8\s+complete\n\S`, out, "the base is full")

	code, out, _ = ftigo("inspect", "--json", dir)
	require.Equal(t, 0, code)
	var res inspectResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.True(t, res.OK)
	reps := res.Checkpoints
	require.Len(t, reps, 3)
	assert.Nil(t, reps[0].DCP)
	require.NotNil(t, reps[2].DCP)
	assert.Equal(t, "ckpt00000002.manifest", reps[2].DCP.Parent)
	assert.Equal(t, 3, reps[2].DCP.Layers)
	assert.Equal(t, int64(4*4096), reps[2].DCP.Written, "one 4 KiB block per rank")
	assert.InDelta(t, 4*4096/float64(4*160000), reps[2].DCP.Share, 1e-9)

	code, out, _ = ftigo("verify", dir)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "ckpt00000003.manifest id 3 L2: 8/8 files verified")

	// A byte of the base that no delta rewrote, on rank 1: the base and
	// both deltas (whose images read that block from it) fail.
	base := filepath.Join(nodeRunDir(t, dir, 1), "ckpt00000001", "data000001.fti")
	b, err := os.ReadFile(base)
	require.NoError(t, err)
	b[fileformat.HeaderSize+100] ^= 0xff
	require.NoError(t, os.WriteFile(base, b, 0o644))
	code, out, _ = ftigo("verify", dir)
	assert.Equal(t, 1, code, out)
	for _, m := range []string{"ckpt00000001", "ckpt00000002", "ckpt00000003"} {
		assert.Contains(t, out, m+".manifest id", m)
	}
	assert.Contains(t, out, "FAIL "+base+" (data of rank 1)")
	assert.Contains(t, out, fmt.Sprintf("FAIL %s (data of rank 1)", filepath.Join(nodeRunDir(t, dir, 1), "ckpt00000003", "data000001.fti")))

	// Rebuild restores the base from its partner copy; every layer verifies.
	code, out, errs = ftigo("rebuild", dir)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "rebuilt checkpoint 3 (L2")
	assert.Contains(t, out, "differential: layer 3")
	code, out, _ = ftigo("verify", dir)
	require.Equal(t, 0, code, out)

	// A node lost: every layer of the chain is rebuilt.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "local", "node0002")))
	code, out, _ = ftigo("inspect", dir)
	assert.Equal(t, 1, code, "inspect shows an error")
	assert.Contains(t, out, "damaged: 2 of 8 files bad; repair: ftigo rebuild --ckpt ckpt00000003.manifest "+dir+"\n")
	code, out, errs = ftigo("rebuild", dir)
	require.Equal(t, 0, code, out+errs)
	code, out, _ = ftigo("verify", dir)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "ckpt00000001.manifest id 1 L2: 8/8 files verified")

	// The base's manifest moved away, both copies: the chain cannot be restored.
	require.NoError(t, os.Rename(filepath.Join(dir, "meta", "ckpt00000001.manifest"), filepath.Join(t.TempDir(), "m")))
	require.NoError(t, os.Rename(filepath.Join(globalRunDir(t, dir), "manifests", "ckpt00000001.manifest"), filepath.Join(t.TempDir(), "m")))
	code, out, _ = ftigo("inspect", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "METADATA "+filepath.Join(dir, "meta", "ckpt00000001.manifest")+": checkpoint metadata lost")
	assert.Contains(t, out, "damaged: differential on [ckpt00000001.manifest], which is not committed")
	code, out, _ = ftigo("verify", dir)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "ckpt00000001.manifest, which is not committed")
}
