package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemoKeepsLastCheckpointForCLI runs the demonstration as a user
// does, then the two command lines its report ends with: the checkpoint
// the relaunch kept at L4 is listed by ftigo inspect and re-hashed by
// ftigo verify, both exiting 0.
func TestDemoKeepsLastCheckpointForCLI(t *testing.T) {
	o := smallOptions(t, "-io-latency", "30ms")
	var out bytes.Buffer
	require.NoError(t, demo(o, &out), out.String())
	report := out.String()
	// Launch 2 took checkpoints 4 (L4) and 5 (L1); 5 is flushed to L4 and kept.
	want := "\nthe last checkpoint (5, taken at L1) is kept at L4 (keep_last_ckpt = 1); the command line shows and re-hashes it:\n" +
		"  go run ./cmd/ftigo inspect " + o.dir + "\n" +
		"  go run ./cmd/ftigo verify " + o.dir + "\n"
	require.True(t, strings.HasSuffix(report, want), "the report ends with the command lines:\n%s", report)

	// The command lines as printed, with a built ftigo in place of go run.
	ftigo := filepath.Join(t.TempDir(), "ftigo")
	build := exec.Command(goTool(t), "build", "-o", ftigo, "github.com/ftigo/ftigo/cmd/ftigo")
	b, err := build.CombinedOutput()
	require.NoError(t, err, "build ftigo: %s", b)
	lines := strings.Split(strings.TrimSpace(want), "\n")[1:]
	type ckptJSON struct {
		ID        int64  `json:"id"`
		Level     int    `json:"level"`
		Committed bool   `json:"committed"`
		Status    string `json:"status"`
	}
	for _, line := range lines {
		args := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "go run ./cmd/ftigo "))
		cmd := exec.Command(ftigo, args...)
		text, err := cmd.Output()
		require.NoError(t, err, "%s: exit 0 wanted:\n%s", line, text)
		assert.Contains(t, string(text), "5", line)

		jcmd := exec.Command(ftigo, append(args, "--json")...)
		raw, err := jcmd.Output()
		require.NoError(t, err, "%s --json", line)
		// inspect and verify both print {"ok": ..., "checkpoints": [...]}.
		var v struct {
			OK          bool       `json:"ok"`
			Checkpoints []ckptJSON `json:"checkpoints"`
		}
		require.NoError(t, json.Unmarshal(raw, &v), "%s", raw)
		assert.True(t, v.OK, "%s", raw)
		got := v.Checkpoints
		require.Len(t, got, 1, "%s: only the kept checkpoint remains:\n%s", line, raw)
		assert.Equal(t, ckptJSON{ID: 5, Level: 4, Committed: true, Status: got[0].Status}, got[0], line)
		assert.Contains(t, []string{"complete", "verified"}, got[0].Status, line)
	}
}

// TestPrepareRunDir: a fresh or empty directory is marked as the
// demonstration's; a marked one is emptied for the next demonstration; a
// foreign non-empty one is refused with its name, its files untouched.
// While a demonstration holds the directory, a second one is refused,
// naming the holder, and nothing in it changes (its lock included).
func TestPrepareRunDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	cleared, unlock, err := prepareRunDir(dir)
	require.NoError(t, err)
	assert.False(t, cleared)
	require.FileExists(t, filepath.Join(dir, demoMarker))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "meta", "x"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "final.f64"), []byte{1}, 0o644))

	// A second demonstration while the first runs.
	_, _, err = prepareRunDir(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "run directory "+dir+" is in use by another demonstration (pid "+strconv.Itoa(os.Getpid())+" on ")
	require.FileExists(t, filepath.Join(dir, "final.f64"), "the refused demonstration deleted nothing")
	require.FileExists(t, filepath.Join(dir, demoLock))
	unlock()

	cleared, unlock, err = prepareRunDir(dir)
	require.NoError(t, err)
	defer unlock()
	assert.True(t, cleared)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{demoMarker, demoLock, demoHolder}, names)

	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "thesis.tex"), []byte("x"), 0o644))
	_, _, err = prepareRunDir(foreign)
	require.Error(t, err)
	assert.Contains(t, err.Error(), foreign)
	assert.FileExists(t, filepath.Join(foreign, "thesis.tex"))
	assert.NoFileExists(t, filepath.Join(foreign, demoLock), "nothing created in a foreign directory")
}

// TestDemoRefusesABusyDir: a demonstration started in the directory
// another one holds fails at once, naming it, and the first one's files
// stay.
func TestDemoRefusesABusyDir(t *testing.T) {
	o := smallOptions(t)
	_, unlock, err := prepareRunDir(o.dir)
	require.NoError(t, err)
	defer unlock()
	require.NoError(t, os.WriteFile(filepath.Join(o.dir, "job.log"), []byte("running"), 0o644))
	var out bytes.Buffer
	err = demo(o, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is in use by another demonstration (pid ")
	assert.Empty(t, out.String(), "nothing was started")
	b, err := os.ReadFile(filepath.Join(o.dir, "job.log"))
	require.NoError(t, err)
	assert.Equal(t, "running", string(b))
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp/heat2d-123": "/tmp/heat2d-123",
		"/tmp/my run":     "'/tmp/my run'",
		"it's":            `'it'\''s'`,
		"":                "''",
	} {
		assert.Equal(t, want, shellQuote(in), in)
	}
}

func goTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	require.NoError(t, err, "the go command (go test puts it on PATH)")
	return p
}

// TestDemoWithFTIConfig runs the demonstration with FTI's example
// config.fti (its keys and values: node_size 2, group_size 4, Ckpt_dir =
// ./Local, keep_last_ckpt = 0), from a working directory of its own. The
// run has 8 ranks on 4 nodes, as the file says; the node directory it
// deletes after the kill is the file's ./Local/node0002, which it names;
// the restart rebuilds that node's files from L3; and, keep_last_ckpt
// being 0, Finalize deletes the checkpoints and the report says so. With
// -keep-last the last one is kept, and the report says why.
func TestDemoWithFTIConfig(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "ckpt", "testdata", "config", "fti16_examples_config.fti"))
	require.NoError(t, err)
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep-last=%v", keep), func(t *testing.T) {
			work := t.TempDir()
			t.Chdir(work)
			cfgPath := filepath.Join(work, "config.fti")
			require.NoError(t, os.WriteFile(cfgPath, raw, 0o644))
			args := []string{"-config", cfgPath, "-io-latency", "30ms"}
			if keep {
				args = append(args, "-keep-last")
			}
			o := smallOptions(t, args...)
			require.Equal(t, 8, o.ranks, "node_size 2 × group_size 4")
			require.Equal(t, 4, o.nodes)
			var out bytes.Buffer
			require.NoError(t, demo(o, &out), out.String())
			report := out.String()
			local := filepath.Join(work, "Local")
			assert.Contains(t, report, "8 ranks on 4 simulated nodes (node_size 2 and group_size 4 from "+cfgPath+": 1 group of 4 nodes)")
			assert.Contains(t, report, "node-local storage: "+local+" (ckpt_dir of "+cfgPath+")")
			assert.Regexp(t, `lost node: deleted node0002's local storage \([1-9]\d* files\) `+regexp.QuoteMeta(filepath.Join(local, "node0002"))+`\n`, report)
			assert.Contains(t, report, "restarted (restart) from checkpoint 3 (L3)")
			assert.Contains(t, report, "rebuilt 4 files onto node0002's empty storage from the L3 redundancy")
			assert.NotContains(t, report, filepath.Join(o.dir, "local"), "the run never uses -dir/local")
			assert.Contains(t, report, "\nOK\n")
			manifests, err := filepath.Glob(filepath.Join(work, "Meta", "*.manifest"))
			require.NoError(t, err)
			if keep {
				assert.Contains(t, report, "is kept at L4 (keep_last_ckpt = 1, set by -keep-last); the command line shows and re-hashes it:\n  go run ./cmd/ftigo inspect "+cfgPath+"\n")
				assert.Len(t, manifests, 1, "the kept checkpoint")
			} else {
				assert.Contains(t, report, "\nkeep_last_ckpt = 0 (in "+cfgPath+"): Finalize deleted the checkpoints, as FTI does")
				assert.NotContains(t, report, "is kept at L4")
				assert.Empty(t, manifests, "Finalize deleted every checkpoint")
			}
		})
	}
}
