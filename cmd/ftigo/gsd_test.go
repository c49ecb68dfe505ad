package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/gsd"
	"github.com/ftigo/ftigo/vfd"
)

func writeGSD(t *testing.T, name string, frames int) {
	t.Helper()
	w, err := gsd.Create(vfd.Sec2{}, name, "cli-test", "heat2d", gsd.MakeVersion(1, 0), gsd.WithSync(false))
	require.NoError(t, err)
	for f := 0; f < frames; f++ {
		require.NoError(t, gsd.WriteChunk(w, "temperature", []float64{float64(f), 0.5, 1, 2, 3, 4}, 2, 3))
		require.NoError(t, gsd.WriteChunk(w, "step", []uint64{uint64(100 * f)}, 1, 1))
		require.NoError(t, w.EndFrame())
	}
	require.NoError(t, w.Close())
}

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestGSDCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gsd")
	writeGSD(t, good, 3)

	code, out, _ := runCLI("gsd", "dump", "--values", "3", good)
	assert.Equal(t, 0, code)
	assert.Contains(t, out, `GSD 2.0, application "cli-test", schema "heat2d" 1.0`)
	assert.Contains(t, out, "frames 3\n")
	assert.Contains(t, out, "frame 2  temperature                    float64 2×3 @")
	assert.Contains(t, out, "[2 0.5 1 ...]")
	assert.Contains(t, out, "frame 1  step                           uint64  1×1 @")
	assert.Contains(t, out, "[100]")

	code, out, _ = runCLI("gsd", "dump", "--frame", "1", good)
	assert.Equal(t, 0, code)
	assert.Equal(t, 2, strings.Count(out, "frame 1  "))
	assert.NotContains(t, out, "frame 0  ")

	code, out, _ = runCLI("gsd", "verify", good)
	assert.Equal(t, 0, code)
	assert.Equal(t, "VALID "+good+": GSD 2.0, 3 frames, 6 chunks, 2 names\n", out)

	code, out, _ = runCLI("gsd", "repair", good)
	assert.Equal(t, 0, code)
	assert.Equal(t, good+": valid, left unchanged (3 frames)\n", out)

	cut := filepath.Join(dir, "cut.gsd")
	writeGSD(t, cut, 3)
	st, err := os.Stat(cut)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(cut, st.Size()-1))
	code, out, _ = runCLI("gsd", "verify", cut)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "INVALID gsd: "+cut+": corrupt index entry 5 (frame 2, chunk \"step\")")
	assert.Contains(t, out, "extends past the end of file")
	code, _, errOut := runCLI("gsd", "dump", cut)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "corrupt")
	code, out, _ = runCLI("gsd", "repair", cut)
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "repaired: kept 2 frames (4 entries), dropped 2 entries")
	code, out, _ = runCLI("gsd", "verify", cut)
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "2 frames")

	notgsd := filepath.Join(dir, "not.gsd")
	require.NoError(t, os.WriteFile(notgsd, []byte("hello"), 0o644))
	code, out, _ = runCLI("gsd", "verify", notgsd)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "not a GSD file")
	code, _, errOut = runCLI("gsd", "repair", notgsd)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not a GSD file")
}

func TestGSDCommandUsage(t *testing.T) {
	code, out, _ := runCLI("gsd", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "ftigo gsd dump --values 8 traj.gsd")
	assert.Contains(t, out, "Exit codes: 0 success")
	for _, tc := range []struct {
		args     []string
		msg, use string
	}{
		{[]string{"gsd"}, "ftigo gsd: missing command", "Usage:\n  ftigo gsd COMMAND"},
		{[]string{"gsd", "frob", "x"}, `ftigo gsd: unknown command "frob" for "ftigo gsd"`, "Usage:\n  ftigo gsd COMMAND"},
		{[]string{"gsd", "verify"}, "ftigo gsd verify: missing FILE", "Usage: ftigo gsd verify FILE [flags]"},
		{[]string{"gsd", "dump", "a", "b"}, "ftigo gsd dump: too many arguments", "Usage: ftigo gsd dump FILE [flags]"},
		{[]string{"gsd", "dump", "--nope", "x"}, "ftigo gsd dump: unknown flag: --nope", "Usage: ftigo gsd dump FILE [flags]"},
		{[]string{"gsd", "dump", "--values", "-1", "x"}, "--values -1: must not be negative", "Usage: ftigo gsd dump FILE [flags]"},
		{[]string{"gsd", "dump", "--frame", "one", "x"}, `invalid argument "one" for "--frame" flag`, "Usage: ftigo gsd dump FILE [flags]"},
	} {
		code, _, errOut := runCLI(tc.args...)
		assert.Equal(t, 2, code, "%v", tc.args)
		assert.Contains(t, errOut, tc.msg, "%v", tc.args)
		assert.Contains(t, errOut, tc.use, "%v", tc.args)
	}
	code, out, _ = runCLI("gsd", "dump", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "Usage:\n  ftigo gsd dump FILE [flags]")
}
