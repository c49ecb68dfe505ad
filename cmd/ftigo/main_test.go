package main

import (
	"bytes"
	"encoding/json"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testApp is an app writing to buffers, whose standard error counts as a
// terminal when tty is set.
func testApp(tty bool) (*app, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	a := newApp(&out, &errb)
	a.isTerminal = func(w io.Writer) bool { return tty && w == io.Writer(&errb) }
	return a, &out, &errb
}

// TestExitCodesAndMessages runs every kind of command-line mistake and
// every way of asking for help, and checks the exit code, where the output
// goes and what it says.
func TestExitCodesAndMessages(t *testing.T) {
	tests := []struct {
		args    []string
		code    int
		out     string // substring of standard output ("" : must be empty)
		errMsgs []string
	}{
		{nil, 2, "", []string{"ftigo: missing command", "Usage:\n  ftigo COMMAND [flags]", "Commands:\n  bench"}},
		{[]string{"help"}, 0, "Exit codes: 0 success, 1 a problem was found, 2 usage error.", nil},
		{[]string{"--help"}, 0, "Run \"ftigo COMMAND --help\"", nil},
		{[]string{"-h"}, 0, "Commands:\n  bench", nil},
		{[]string{"help", "help"}, 0, "Usage:\n  ftigo help [COMMAND...] [flags]", nil},
		{[]string{"help", "nosuch"}, 2, "", []string{`ftigo help: unknown help topic "nosuch"`}},
		{[]string{"help", "sion", "nosuch"}, 2, "", []string{`unknown help topic "sion nosuch"`}},
		{[]string{"no-such-command"}, 2, "", []string{`ftigo: unknown command "no-such-command" for "ftigo"`, "Commands:"}},
		{[]string{"inspekt", "run"}, 2, "", []string{"did you mean inspect?"}},
		{[]string{"--nope"}, 2, "", []string{"ftigo: unknown flag: --nope"}},
		{[]string{"inspect"}, 2, "", []string{"ftigo inspect: missing RUN (want RUN)", "Usage: ftigo inspect RUN [flags]", "Run 'ftigo inspect --help'"}},
		{[]string{"verify", "a", "b"}, 2, "", []string{`ftigo verify: too many arguments: want RUN, got 2: "a b"`}},
		{[]string{"rebuild", "--nope", "x"}, 2, "", []string{"ftigo rebuild: unknown flag: --nope"}},
		{[]string{"inspect", "x", "-json"}, 2, "", []string{"unknown shorthand flag: 'j' in -json (long flags take two dashes: --json)"}},
		{[]string{"inspect", "x", "--json=maybe"}, 2, "", []string{`invalid argument "maybe" for "--json" flag`}},
		{[]string{"version", "now"}, 2, "", []string{`ftigo version: takes no arguments, got "now"`}},
		{[]string{"version", "--json=false"}, 0, "ftigo (devel)", nil},
		{[]string{"sion", "dump", "--help"}, 0, "Usage:\n  ftigo sion dump FILE [flags]", nil},
		{[]string{"completion"}, 2, "", []string{"ftigo completion: missing command", "bash"}},
		{[]string{"completion", "tcsh"}, 2, "", []string{`unknown command "tcsh" for "ftigo completion"`}},
		{[]string{"completion", "bash", "extra"}, 2, "", []string{`unknown command "extra" for "ftigo completion bash"`}},
		{[]string{"completion", "bash", "--nope"}, 2, "", []string{"unknown flag: --nope"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := ftigo(tc.args...)
			assert.Equal(t, tc.code, code)
			if tc.out == "" {
				assert.Empty(t, out)
			} else {
				assert.Contains(t, out, tc.out)
			}
			if tc.errMsgs == nil {
				assert.Empty(t, errs)
			}
			for _, m := range tc.errMsgs {
				assert.Contains(t, errs, m)
			}
		})
	}
}

// walk calls f for c and every command below it.
func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, s := range c.Commands() {
		walk(s, f)
	}
}

// TestHelpIsTheSameEverywhere: "ftigo help CMD" and "ftigo CMD --help"
// print the same text for every command, with a description, a usage
// line, an Examples section and --flag style flags.
func TestHelpIsTheSameEverywhere(t *testing.T) {
	a, _, _ := testApp(false)
	var paths [][]string
	walk(a.newRoot(), func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		assert.NotEmpty(t, c.Short, c.CommandPath())
		assert.NotEmpty(t, c.Long, c.CommandPath())
		p := strings.Fields(c.CommandPath())[1:]
		paths = append(paths, p)
	})
	require.Greater(t, len(paths), 20, "every command and subcommand")
	for _, p := range paths {
		t.Run(strings.Join(p, " "), func(t *testing.T) {
			code, viaFlag, errs := ftigo(append(append([]string{}, p...), "--help")...)
			require.Equal(t, 0, code, errs)
			code, viaHelp, errs := ftigo(append([]string{"help"}, p...)...)
			require.Equal(t, 0, code, errs)
			assert.Equal(t, viaFlag, viaHelp)
			assert.Contains(t, viaFlag, "Usage:\n  ftigo")
			assert.Contains(t, viaFlag, "\nExamples:\n  ")
			assert.Contains(t, viaFlag, "\nFlags:\n")
			assert.Contains(t, viaFlag, "  -h, --help ")
			assert.NotRegexp(t, `(?m)^\s+-[a-z][a-z]+`, viaFlag, "no single-dash long flags")
		})
	}
}

// TestResultCommandsTakeJSON: every command that prints results has --json.
func TestResultCommandsTakeJSON(t *testing.T) {
	a, _, _ := testApp(false)
	want := []string{"inspect", "verify", "rebuild", "halt", "stats", "bench", "version", "sion dump", "sion split", "sion pack",
		"sion defrag", "gsd dump", "gsd verify", "gsd repair", "dhdf ls", "dhdf verify"}
	got := map[string]bool{}
	walk(a.newRoot(), func(c *cobra.Command) {
		if f := c.Flags().Lookup("json"); f != nil {
			got[strings.TrimPrefix(c.CommandPath(), "ftigo ")] = f.Value.Type() == "bool"
		}
	})
	for _, w := range want {
		assert.True(t, got[w], "%s takes a boolean --json", w)
	}
	assert.Len(t, got, len(want), "no other command takes --json: %v", got)
}

// TestCompletion: cobra's completion scripts for the four shells, and the
// completion requests they make list ftigo's commands.
func TestCompletion(t *testing.T) {
	for sh, marker := range map[string]string{
		"bash":       "__start_ftigo",
		"zsh":        "#compdef ftigo",
		"fish":       "complete -c ftigo",
		"powershell": "Register-ArgumentCompleter",
	} {
		code, out, errs := ftigo("completion", sh)
		assert.Equal(t, 0, code, sh+errs)
		assert.Contains(t, out, marker, sh)
	}
	code, out, _ := ftigo("__complete", "")
	require.Equal(t, 0, code)
	for _, c := range []string{"inspect\t", "verify\t", "rebuild\t", "sion\t", "version\t"} {
		assert.Contains(t, out, c)
	}
	code, out, _ = ftigo("__complete", "sion", "d")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "defrag\t")
	assert.Contains(t, out, "dump\t")
	assert.NotContains(t, out, "split")
	code, out, _ = ftigo("__complete", "help", "gs")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "gsd\t")
}

func fakeBuildInfo(settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
	return func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: modulePath, Version: "v1.2.3"}, Settings: settings}, true
	}
}

func TestVersion(t *testing.T) {
	a, out, _ := testApp(false)
	a.buildInfo = fakeBuildInfo(debug.BuildSetting{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		debug.BuildSetting{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	require.Equal(t, 0, a.run([]string{"version"}))
	assert.Contains(t, out.String(), "ftigo v1.2.3 (module github.com/ftigo/ftigo)\n")
	assert.Contains(t, out.String(), "commit:   0123456789abcdef0123456789abcdef01234567 (2026-01-02T03:04:05Z, with local changes)\n")
	assert.Contains(t, out.String(), "go:       go1.99.1 "+runtime.GOOS+"/"+runtime.GOARCH+"\n")

	out.Reset()
	require.Equal(t, 0, a.run([]string{"version", "--json"}))
	var v versionInfo
	require.NoError(t, json.Unmarshal(out.Bytes(), &v))
	assert.Equal(t, versionInfo{Module: modulePath, Version: "v1.2.3", Commit: "0123456789abcdef0123456789abcdef01234567",
		CommitTime: "2026-01-02T03:04:05Z", Modified: true, Go: "go1.99.1", Platform: runtime.GOOS + "/" + runtime.GOARCH, MPI: mpiLibrary()}, v)

	out.Reset()
	require.Equal(t, 0, a.run([]string{"--version"}))
	assert.Equal(t, "ftigo v1.2.3 (0123456789ab+modified) go1.99.1\n", out.String())

	// No build information at all (or a build without VCS stamping): say
	// "(devel)" and that the commit is unknown, never invent one.
	for _, bi := range []func() (*debug.BuildInfo, bool){
		func() (*debug.BuildInfo, bool) { return nil, false },
		func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: runtime.Version(), Main: debug.Module{Path: modulePath, Version: "(devel)"}}, true
		},
	} {
		a, out, _ := testApp(false)
		a.buildInfo = bi
		require.Equal(t, 0, a.run([]string{"version"}))
		assert.Contains(t, out.String(), "ftigo (devel) (module github.com/ftigo/ftigo)\n")
		assert.Contains(t, out.String(), "commit:   unknown (no VCS information in the build")
		assert.Contains(t, out.String(), "go:       "+runtime.Version())
		out.Reset()
		require.Equal(t, 0, a.run([]string{"version", "--json"}))
		var v versionInfo
		require.NoError(t, json.Unmarshal(out.Bytes(), &v))
		assert.Equal(t, "(devel)", v.Version)
		assert.Empty(t, v.Commit)
		assert.Equal(t, runtime.Version(), v.Go)
	}
}

// TestProgressThrottle: a progress line redraws at most every minRedraw,
// always draws the end, and a nil progress draws nothing.
func TestProgressThrottle(t *testing.T) {
	var w bytes.Buffer
	now := time.Unix(0, 0)
	p := &progress{w: &w, now: func() time.Time { return now }, label: "verify", total: 10}
	for range 5 {
		p.Add(1)
	}
	assert.Equal(t, 1, strings.Count(w.String(), "\r"), "one draw within minRedraw: %q", w.String())
	assert.Contains(t, w.String(), "verify [###...........................] 1/10")
	now = now.Add(minRedraw)
	p.Add(1)
	assert.Contains(t, w.String(), "6/10")
	p.Add(4)
	assert.Contains(t, w.String(), "verify [##############################] 10/10")
	p.Done()
	assert.True(t, strings.HasSuffix(w.String(), "10/10\x1b[K\n"), "%q", w.String())

	w.Reset()
	b := &progress{w: &w, now: func() time.Time { return now }, label: "sion pack", total: 3 << 20, bytes: true}
	b.Add(3 << 19)
	b.Done()
	assert.Contains(t, w.String(), "sion pack [###############...............] 1.5/3.0 MiB")

	var nilp *progress
	nilp.Add(1)
	nilp.Done()
	var nila *activity
	nila.Stop("done")
}

func TestIsTerminal(t *testing.T) {
	assert.False(t, isTerminal(&bytes.Buffer{}))
	f, err := openTemp(t)
	require.NoError(t, err)
	assert.False(t, isTerminal(f), "a regular file is not a terminal")
	pty, err := openPTY(t)
	if err != nil {
		t.Skipf("no pseudo-terminal to test with: %v", err)
	}
	assert.True(t, isTerminal(pty), "a pseudo-terminal is a terminal")
}
