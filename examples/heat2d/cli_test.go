package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
func TestPrepareRunDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	cleared, err := prepareRunDir(dir)
	require.NoError(t, err)
	assert.False(t, cleared)
	require.FileExists(t, filepath.Join(dir, demoMarker))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "meta", "x"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "final.f64"), []byte{1}, 0o644))
	cleared, err = prepareRunDir(dir)
	require.NoError(t, err)
	assert.True(t, cleared)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, demoMarker, entries[0].Name())

	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "thesis.tex"), []byte("x"), 0o644))
	_, err = prepareRunDir(foreign)
	require.Error(t, err)
	assert.Contains(t, err.Error(), foreign)
	assert.FileExists(t, filepath.Join(foreign, "thesis.tex"))
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
