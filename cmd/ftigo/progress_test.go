package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runApp runs args on a test app whose standard error is (tty) or is not
// a terminal, with byte-wise progress from minBytes on.
func runApp(t *testing.T, tty bool, minBytes int64, args ...string) (int, string, string) {
	t.Helper()
	a, out, errb := testApp(tty)
	a.progressMinBytes = minBytes
	code := a.run(args)
	return code, out.String(), errb.String()
}

// TestProgressOnlyOnATerminal: each long command draws progress on
// standard error when it is a terminal, and nothing when it is not or
// with --json; standard output is the same either way.
func TestProgressOnlyOnATerminal(t *testing.T) {
	dir := makeRun(t)
	sdir := t.TempDir()
	in := filepath.Join(sdir, "in")
	require.NoError(t, os.WriteFile(in, bytes.Repeat([]byte{7}, 3<<20), 0o644))

	tests := []struct {
		name string
		args func() []string
		// draws are substrings of the terminal's standard error.
		draws []string
	}{
		{"verify", func() []string { return []string{"verify", dir} }, []string{"\rverify [", "8/8\x1b[K\n"}},
		{"rebuild", func() []string { return []string{"rebuild", dir} },
			[]string{"\rrebuild: reconstructing and checking checkpoint files ", " done in ", "\rverify [", "8/8\x1b[K\n"}},
		{"bench", func() []string {
			return []string{"bench", "--levels", "1", "--repeats", "1", "--ranks", "2", "--size", "64KiB", "--cold=false", "--dir", t.TempDir()}
		}, []string{"\rbench [", "4/4\x1b[K\n"}},
		{"sion pack", func() []string { return []string{"sion", "pack", "-o", filepath.Join(t.TempDir(), "p.sion"), in, in} },
			[]string{"\rsion pack [", "6.0/6.0 MiB\x1b[K\n"}},
		{"sion defrag", func() []string {
			return []string{"sion", "defrag", sionRef("par2.sion"), filepath.Join(t.TempDir(), "d.sion")}
		},
			[]string{"\rsion defrag [", "0.0/0.0 MiB"}},
		{"sion split", func() []string {
			return []string{"sion", "split", sionRef("test4.sion"), filepath.Join(t.TempDir(), "t_")}
		},
			[]string{"\rsion split ["}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, plainOut, plainErr := runApp(t, false, 0, tc.args()...)
			require.Equal(t, 0, code, plainErr)
			assert.Empty(t, plainErr, "no progress when standard error is not a terminal")

			code, ttyOut, ttyErr := runApp(t, true, 0, tc.args()...)
			require.Equal(t, 0, code, ttyErr)
			for _, d := range tc.draws {
				assert.Contains(t, ttyErr, d)
			}
			if tc.name != "bench" && !strings.HasPrefix(tc.name, "sion") {
				assert.Equal(t, plainOut, ttyOut, "progress never goes to standard output")
			}
			assert.NotContains(t, ttyOut, "\r")

			code, jsonOut, jsonErr := runApp(t, true, 0, append(tc.args(), "--json")...)
			require.Equal(t, 0, code, jsonErr)
			assert.Empty(t, jsonErr, "no progress with --json")
			assert.True(t, strings.HasPrefix(jsonOut, "{") || strings.HasPrefix(jsonOut, "["), jsonOut)
		})
	}
}

// TestSionProgressOnLargeInputsOnly: sion commands draw progress only
// from progressMinBytes of input on.
func TestSionProgressOnLargeInputsOnly(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	require.NoError(t, os.WriteFile(in, make([]byte, 1000), 0o644))
	code, _, errs := runApp(t, true, 1001, "sion", "pack", "-o", filepath.Join(dir, "a.sion"), in)
	require.Equal(t, 0, code)
	assert.Empty(t, errs, "1000 bytes are below the threshold")
	code, _, errs = runApp(t, true, 1000, "sion", "pack", "-o", filepath.Join(dir, "b.sion"), in)
	require.Equal(t, 0, code)
	assert.Contains(t, errs, "\rsion pack [")
	code, _, errs = ftigo("sion", "pack", "-o", filepath.Join(dir, "c.sion"), in)
	require.Equal(t, 0, code)
	assert.Empty(t, errs, "the default threshold is far above 1000 bytes")
}
