package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/sion"
	"github.com/ftigo/ftigo/vfd"
)

// makeRun writes a run directory like a killed heat2d job's: 4 ranks on 4
// nodes in one group, an L1 then an L3 checkpoint, and no Finalize, so the
// directory is what a restart would find.
func makeRun(t *testing.T) string {
	t.Helper()
	return makeRunAt(t, 1, 3)
}

// makeRunAt is makeRun with the levels of its two checkpoints.
func makeRunAt(t *testing.T, first, second int) string {
	t.Helper()
	return makeRunWith(t, first, second, 0)
}

// makeRunWith is makeRunAt with an L3 parity count (l3_parity).
func makeRunWith(t *testing.T, first, second, l3Parity int) string {
	t.Helper()
	dir := t.TempDir()
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, 4, true
	cfg.L3Parity = l3Parity
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")
	err := comm.Run(4, func(c comm.Comm) error {
		rt, err := ckpt.Init(cfg, c)
		if err != nil {
			return err
		}
		data := make([]float64, 5000+100*c.Rank())
		for i := range data {
			data[i] = float64(c.Rank()*100000 + i)
		}
		if err := ckpt.Protect(rt, 1, &data); err != nil {
			return err
		}
		if err := rt.Checkpoint(1, first); err != nil {
			return err
		}
		if err := rt.Checkpoint(2, second); err != nil {
			return err
		}
		// The job ends without Finalize, as if killed, so the L3 checkpoint
		// stays (Finalize with keep_last_ckpt would flush it to L4).
		return rt.Close()
	})
	require.NoError(t, err)
	return dir
}

func ftigo(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func dataFile(t *testing.T, dir string, node int) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(nodeRunDir(t, dir, node), "ckpt*", "data*.fti"))
	require.NoError(t, err)
	require.Len(t, m, 1)
	return m[0]
}

func TestInspectVerifyRebuildOnARunDirectory(t *testing.T) {
	dir := makeRun(t)

	code, out, errs := ftigo("inspect", dir)
	require.Equal(t, 0, code, errs)
	assert.Regexp(t, `ckpt0+2\.manifest\s+2\s+L3\s+4\s+4\s+\d+ \S+\s+8/8\s+complete`, out, "the L3 checkpoint superseded the L1 one")
	assert.NotContains(t, out, "ckpt00000001.manifest")

	code, out, _ = ftigo("verify", dir)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "8/8 files verified")

	// A flipped byte in rank 1's data file: verify fails naming the file and rank.
	victim := dataFile(t, dir, 1)
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	b[len(b)/3] ^= 0xff
	require.NoError(t, os.WriteFile(victim, b, 0o644))
	code, out, _ = ftigo("verify", dir)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "7/8 files verified")
	assert.Contains(t, out, "FAIL "+victim+" (data of rank 1)")

	// Offline rebuild repairs it from the Reed-Solomon parity.
	code, out, errs = ftigo("rebuild", dir)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "rebuilt checkpoint 2 (L3")
	assert.Contains(t, out, "8/8 files verified")

	// A whole lost node: inspect reports the damage, rebuild restores it.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "local", "node0002")))
	code, out, _ = ftigo("inspect", dir)
	assert.Equal(t, 1, code, "inspect shows an error")
	assert.Contains(t, out, "6/8")
	assert.Contains(t, out, "damaged: 2 of 8 files bad; repair: ftigo rebuild --ckpt ckpt00000002.manifest "+dir+"\n")
	code, out, errs = ftigo("rebuild", dir)
	require.Equal(t, 0, code, out+errs)
	code, out, _ = ftigo("verify", "--json", dir)
	require.Equal(t, 0, code, out)
	var res struct {
		OK          bool `json:"ok"`
		Checkpoints []struct {
			Level  int    `json:"level"`
			Status string `json:"status"`
			Files  int    `json:"files"`
		} `json:"checkpoints"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.True(t, res.OK)
	require.Len(t, res.Checkpoints, 1)
	assert.Equal(t, 3, res.Checkpoints[0].Level)
	assert.Equal(t, "verified", res.Checkpoints[0].Status)

	// Losing three of the group's four nodes is beyond L3's tolerance.
	for _, n := range []string{"node0000", "node0001", "node0003"} {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "local", n)))
	}
	code, _, errs = ftigo("rebuild", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "ftigo rebuild:")
}

// TestRebuildRotatedParity: with l3_parity = 1 of a group of 4 (rotated
// parity, a third of a data file each), ftigo rebuild restores any one
// lost node, data and parity, bit for bit, and refuses two, naming the
// unrecoverable group.
func TestRebuildRotatedParity(t *testing.T) {
	dir := makeRunWith(t, 1, 3, 1)
	files := map[string][]byte{}
	for n := range 4 {
		ms, err := filepath.Glob(filepath.Join(nodeRunDir(t, dir, n), "ckpt*", "*.fti"))
		require.NoError(t, err)
		require.Len(t, ms, 2, "node %d: a data file and a parity file", n)
		for _, m := range ms {
			b, err := os.ReadFile(m)
			require.NoError(t, err)
			files[m] = b
		}
	}
	for n := range 4 {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "local", fmt.Sprintf("node%04d", n))))
		code, out, errs := ftigo("rebuild", dir)
		require.Equal(t, 0, code, out+errs)
		assert.Contains(t, out, "8/8 files verified")
		for path, want := range files {
			got, err := os.ReadFile(path)
			require.NoError(t, err, "node %d lost: %s rebuilt", n, path)
			require.True(t, bytes.Equal(want, got), "node %d lost: %s bit for bit", n, path)
		}
	}
	for _, n := range []string{"node0000", "node0002"} {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "local", n)))
	}
	code, _, errs := ftigo("rebuild", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "at most 1 may be lost (any 1 of the 4 members)")
}

// TestInspectVerifyRebuildL4: the inline L4 keeps each rank's data only
// as its task of the global container; inspect and verify check it there,
// a flipped byte in a task fails verify naming the container and the rank,
// and rebuild recovers every rank from the container after all local
// storage is lost.
func TestInspectVerifyRebuildL4(t *testing.T) {
	dir := makeRunAt(t, 1, 4)
	container := filepath.Join(globalRunDir(t, dir), "ckpt00000002", levels.ContainerName)

	code, out, errs := ftigo("inspect", dir)
	require.Equal(t, 0, code, errs)
	t.Log(out)
	assert.Regexp(t, `ckpt0+2\.manifest\s+2\s+L4\s+4\s+4\s+\d+ \S+\s+5/5\s+complete`, out, "4 tasks and the container")

	code, out, _ = ftigo("verify", dir)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "5/5 files verified")

	// A flipped byte inside rank 1's task of the container.
	rd, err := sion.Open(vfd.Sec2{}, container)
	require.NoError(t, err)
	var task sion.Task
	for _, tk := range rd.Tasks() {
		if tk.GlobalRank == 1 {
			task = tk
		}
	}
	require.NoError(t, rd.Close())
	require.Positive(t, task.Size)
	off := task.Start + min(task.Size, task.ChunkSize)/2
	orig, err := os.ReadFile(container)
	require.NoError(t, err)
	bad := bytes.Clone(orig)
	bad[off] ^= 0xff
	require.NoError(t, os.WriteFile(container, bad, 0o644))
	code, out, _ = ftigo("verify", dir)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "4/5 files verified")
	assert.Contains(t, out, "FAIL "+container+" (data of rank 1)")
	code, out, _ = ftigo("inspect", dir)
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "5/5", "inspect checks presence and size only")
	require.NoError(t, os.WriteFile(container, orig, 0o644))

	// Every local directory erased: the container is the checkpoint
	// (inline L4), which rebuild verifies; nothing is staged locally.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "local")))
	code, out, errs = ftigo("rebuild", dir)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "rebuilt checkpoint 2 (L4")
	assert.Contains(t, out, "5/5 files verified")
	staged, err := filepath.Glob(filepath.Join(dir, "local", "node*", runIn(t, dir), "ckpt*", "data*.fti"))
	require.NoError(t, err)
	assert.Empty(t, staged, "an inline L4 recovery writes nothing locally")

	// The container gone as well: nothing is left to rebuild from.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "local")))
	require.NoError(t, os.Remove(container))
	code, out, _ = ftigo("verify", dir)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "0/5 files verified")
	code, _, errs = ftigo("rebuild", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "ftigo rebuild:")
}

func TestRunCommandsUsage(t *testing.T) {
	for _, c := range []string{"inspect", "verify", "rebuild"} {
		code, _, errs := ftigo(c)
		assert.Equal(t, 2, code, c)
		assert.Contains(t, errs, "ftigo "+c+": missing RUN")
		assert.Contains(t, errs, "Usage: ftigo "+c+" RUN [flags]")
		code, out, _ := ftigo(c, "--help")
		assert.Equal(t, 0, code, c)
		assert.Contains(t, out, "Examples:\n  ftigo "+c+" ")
		assert.Contains(t, out, "RUN is a run directory")
		code, _, errs = ftigo(c, filepath.Join(t.TempDir(), "nope"))
		assert.Equal(t, 1, code, c)
		assert.Contains(t, errs, "no such file or directory")
	}
	code, _, errs := ftigo("inspect", t.TempDir())
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "is not a run directory")
}

// TestRebuildTwoDamagedCheckpoints: an L3 checkpoint and a newer L2 one
// (which does not supersede it) both lose node 2's files. inspect names
// the command that repairs each; run as printed, it repairs that one
// only; ftigo rebuild without --ckpt repairs both, and verify then passes
// on both, not only on the newest.
func TestRebuildTwoDamagedCheckpoints(t *testing.T) {
	dir := makeRunAt(t, 3, 2)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "local", "node0002")))
	code, out, _ := ftigo("inspect", dir)
	require.Equal(t, 1, code, out)
	hint := func(name string) []string {
		want := "repair: ftigo rebuild --ckpt " + name + " " + dir + "\n"
		require.Contains(t, out, want)
		return strings.Fields(strings.TrimPrefix(strings.TrimSuffix(want, "\n"), "repair: ftigo "))
	}
	l3 := hint("ckpt00000001.manifest")
	hint("ckpt00000002.manifest")

	// The command inspect printed for the L3 checkpoint repairs it alone.
	code, out, errs := ftigo(l3...)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "rebuilt checkpoint 1 (L3, ckpt00000001.manifest)\n")
	assert.Contains(t, out, "ckpt00000001.manifest id 1 L3: 8/8 files verified")
	assert.NotContains(t, out, "ckpt00000002.manifest id 2")
	code, out, _ = ftigo("inspect", dir)
	assert.Equal(t, 1, code, "the L2 checkpoint is still damaged:\n"+out)
	assert.Regexp(t, `ckpt00000001\.manifest\s+1\s+L3.*8/8\s+complete`, out)
	assert.Regexp(t, `ckpt00000002\.manifest\s+2\s+L2.*6/8\s+damaged`, out)

	// Both damaged again; one rebuild repairs both.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "local", "node0002")))
	code, out, errs = ftigo("rebuild", dir)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "rebuilt checkpoint 2 (L2, ckpt00000002.manifest): a restart would use it\n")
	assert.Contains(t, out, "rebuilt checkpoint 1 (L3, ckpt00000001.manifest)\n")
	assert.Contains(t, out, "ckpt00000001.manifest id 1 L3: 8/8 files verified")
	assert.Contains(t, out, "ckpt00000002.manifest id 2 L2: 8/8 files verified")
	code, out, _ = ftigo("verify", dir)
	require.Equal(t, 0, code, out)
	code, _, _ = ftigo("inspect", dir)
	require.Equal(t, 0, code)

	// A bad --ckpt is a usage error; an unknown one names the manifest.
	code, _, errs = ftigo("rebuild", "--ckpt", "ckpt2", dir)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `--ckpt "ckpt2": want a manifest name as inspect lists it`)
	code, _, errs = ftigo("rebuild", "--ckpt", "7", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "ckpt00000007.manifest is not a committed checkpoint")
}

// TestRebuildExitsNonZeroWhenOneStaysDamaged: an L3 checkpoint and a
// newer L1 one lose node 2's files. The L1 one has no redundancy: rebuild
// repairs the L3 one (the one a restart uses), says the L1 one is not
// rebuilt and why, and exits 1; the --json result lists both.
func TestRebuildExitsNonZeroWhenOneStaysDamaged(t *testing.T) {
	dir := makeRunAt(t, 3, 1)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "local", "node0002")))
	code, out, _ := ftigo("inspect", dir)
	require.Equal(t, 1, code, out)
	assert.Regexp(t, `ckpt00000002\.manifest\s+2\s+L1.*damaged: L1 has no redundancy`, out)
	code, out, errs := ftigo("rebuild", dir)
	assert.Equal(t, 1, code, out+errs)
	assert.Contains(t, out, "NOT REBUILT checkpoint 2 (L1, ckpt00000002.manifest): ")
	assert.Contains(t, out, "checkpoint file missing")
	assert.Contains(t, out, "rebuilt checkpoint 1 (L3, ckpt00000001.manifest): a restart would use it\n")
	assert.Contains(t, out, "ckpt00000001.manifest id 1 L3: 8/8 files verified")

	code, out, _ = ftigo("rebuild", "--json", dir)
	assert.Equal(t, 1, code)
	var res struct {
		OK       bool `json:"ok"`
		Rebuilds []struct {
			Manifest string `json:"manifest"`
			OK       bool   `json:"ok"`
			Restart  bool   `json:"restart"`
			Error    string `json:"error"`
		} `json:"rebuilds"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.False(t, res.OK)
	require.Len(t, res.Rebuilds, 2)
	assert.Equal(t, "ckpt00000002.manifest", res.Rebuilds[0].Manifest)
	assert.False(t, res.Rebuilds[0].OK)
	assert.NotEmpty(t, res.Rebuilds[0].Error)
	assert.True(t, res.Rebuilds[1].OK)
	assert.True(t, res.Rebuilds[1].Restart)
}
