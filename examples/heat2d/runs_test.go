package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
)

// sharedDemo returns the options of a demonstration in its own run
// directory whose config.fti puts ckpt_dir and glbl_dir under root, where
// other demonstrations put theirs, and meta_dir in its run directory.
// No node is lost: a node of the shared ckpt_dir holds every job's files.
func sharedDemo(t *testing.T, root, name string) *options {
	t.Helper()
	dir := filepath.Join(root, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	cfg := filepath.Join(root, name+".fti")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("[basic]\nnode_size = 1\ngroup_size = 4\nckpt_dir = %s\nglbl_dir = %s\nmeta_dir = %s\nkeep_last_ckpt = 1\n[advanced]\nlocal_test = 1\n",
		filepath.Join(root, "local"), filepath.Join(root, "global"), filepath.Join(dir, "meta"))), 0o644))
	return smallOptions(t, "-dir", dir, "-config", cfg, "-io-latency", "30ms", "-lose-node", "-1")
}

// demoRun is the run the meta_dir of demonstration o names.
func demoRun(t *testing.T, o *options) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(o.dir, "meta", "ftigo.run"))
	require.NoError(t, err)
	id, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ftigo-run ")
	require.True(t, ok)
	return id
}

// assertDemoHeld checks that a demonstration was killed, restarted from
// its own checkpoint and ended bit-identical.
func assertDemoHeld(t *testing.T, name, report string) {
	t.Helper()
	assert.Contains(t, report, "killed with SIGKILL during checkpoint", name)
	assert.Contains(t, report, "restarted (restart) from checkpoint 3 (L3)", name)
	assert.Contains(t, report, "bit-identical to the uninterrupted run", name)
	assert.Contains(t, report, "\nOK\n", name)
	assert.NotContains(t, report, "metadata lost", name)
}

// TestDemosShareStorage: heat2d demonstrations, each a job killed in its
// L4 checkpoint and relaunched as child processes, share ckpt_dir and
// glbl_dir (each its own meta_dir). In turn, the second starts fresh and
// leaves the first's kept checkpoint and every other file of its run as
// they were. At once, both hold: each restarts from its own L3
// checkpoint and ends bit-identical. Every run keeps its checkpoint in a
// directory of its own.
func TestDemosShareStorage(t *testing.T) {
	root := t.TempDir()
	a, b := sharedDemo(t, root, "a"), sharedDemo(t, root, "b")
	var out bytes.Buffer
	require.NoError(t, demo(a, &out), out.String())
	assertDemoHeld(t, "a", out.String())
	runA := demoRun(t, a)
	aFiles := func() map[string]string {
		return testutil.TreeDigests(t, filepath.Join(a.dir, "meta"), filepath.Join(root, "global", runA),
			filepath.Join(root, "local", "node0000", runA), filepath.Join(root, "local", "node0003", runA))
	}
	before := aFiles()
	require.NotEmpty(t, before)
	out.Reset()
	require.NoError(t, demo(b, &out), out.String())
	assertDemoHeld(t, "b", out.String())
	assert.Equal(t, before, aFiles(), "demonstration b touched demonstration a's files")
	runB := demoRun(t, b)
	require.NotEqual(t, runA, runB)

	c, d := sharedDemo(t, root, "c"), sharedDemo(t, root, "d")
	var wg sync.WaitGroup
	reports, errs := make([]bytes.Buffer, 2), make([]error, 2)
	for i, o := range []*options{c, d} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = demo(o, &reports[i])
		}()
	}
	wg.Wait()
	for i, name := range []string{"c", "d"} {
		require.NoError(t, errs[i], "demonstration %s:\n%s", name, reports[i].String())
		assertDemoHeld(t, name, reports[i].String())
	}
	assert.Equal(t, before, aFiles(), "demonstrations c and d touched demonstration a's files")
	runs := map[string]bool{}
	for _, o := range []*options{a, b, c, d} {
		id := demoRun(t, o)
		runs[id] = true
		kept, err := filepath.Glob(filepath.Join(root, "global", id, "manifests", "ckpt*.manifest"))
		require.NoError(t, err)
		assert.Len(t, kept, 1, "run %s keeps its last checkpoint in its own directory", id)
	}
	assert.Len(t, runs, 4)
	ents, err := os.ReadDir(filepath.Join(root, "global"))
	require.NoError(t, err)
	assert.Len(t, ents, 4, "glbl_dir holds the four run directories and nothing else")
}
