package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a TB that records Fatalf and Skipf instead of stopping the
// test.
type recorder struct {
	fatals, skips []string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skips = append(r.skips, fmt.Sprintf(format, args...))
}

// requireModes are the values of FTIGO_REQUIRE_TOOLS a rule is tested
// under, and whether each makes a missing tool a failure.
var requireModes = []struct {
	env      string
	required bool
}{
	{"", false},
	{"0", false},
	{"yes", false},
	{"1", true},
}

// checkRule asserts that rec saw exactly one call, a failure when
// required and a skip otherwise, whose message holds every want.
func checkRule(t *testing.T, rec *recorder, required bool, want ...string) {
	t.Helper()
	msgs := rec.skips
	if required {
		assert.Empty(t, rec.skips, "a required tool fails, never skips")
		require.Len(t, rec.fatals, 1)
		msgs = rec.fatals
		assert.Contains(t, msgs[0], RequireToolsEnv+"=1", "the failure says why it is not a skip")
	} else {
		assert.Empty(t, rec.fatals, "a tool not required skips, never fails")
		require.Len(t, rec.skips, 1)
		assert.Contains(t, msgs[0], "set "+RequireToolsEnv+"=1", "the skip says how to make it a failure")
	}
	for _, w := range want {
		assert.Contains(t, msgs[0], w)
	}
}

func TestMissing(t *testing.T) {
	for _, m := range requireModes {
		t.Run("env="+m.env, func(t *testing.T) {
			t.Setenv(RequireToolsEnv, m.env)
			assert.Equal(t, m.required, ToolsRequired())
			rec := &recorder{}
			Missing(rec, "h5dump is not installed (read the set)")
			checkRule(t, rec, m.required, "h5dump is not installed (read the set)")
		})
	}
}

func TestNeedTool(t *testing.T) {
	const absent = "ftigo-no-such-tool-5e1d"
	for _, m := range requireModes {
		t.Run("env="+m.env, func(t *testing.T) {
			t.Setenv(RequireToolsEnv, m.env)
			rec := &recorder{}
			assert.Empty(t, NeedTool(rec, absent, "compare the dumps"))
			checkRule(t, rec, m.required, absent+" is not installed", "compare the dumps")

			rec = &recorder{}
			p := NeedTool(rec, "sh", "run scripts")
			assert.True(t, filepath.IsAbs(p), "path %q", p)
			assert.Empty(t, rec.fatals)
			assert.Empty(t, rec.skips)
		})
	}
}

// needSystemPython makes this test itself follow the rule when
// /usr/bin/python3 is absent.
func needSystemPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		Missing(t, systemPython+" is not installed (check NeedPython against a real interpreter)")
	}
}

func TestNeedPython(t *testing.T) {
	needSystemPython(t)
	const absent, absent2 = "ftigo_no_such_module_a", "ftigo_no_such_module_b"
	tests := []struct {
		name    string
		modules []string
		failed  []string // modules the message must name as failing
	}{
		{"no modules", nil, nil},
		{"importable", []string{"json", "os.path", "importlib"}, nil},
		{"one missing among importable", []string{"json", absent, "os.path"}, []string{absent}},
		{"two missing", []string{absent, "json", absent2}, []string{absent, absent2}},
		{"missing submodule", []string{"json.ftigo_nothing"}, []string{"json.ftigo_nothing"}},
	}
	// The rule itself is TestMissing's; here one mode of each outcome.
	for _, m := range []struct {
		env      string
		required bool
	}{{"", false}, {"1", true}} {
		for _, tc := range tests {
			t.Run("env="+m.env+"/"+tc.name, func(t *testing.T) {
				t.Setenv(RequireToolsEnv, m.env)
				rec := &recorder{}
				py := NeedPython(rec, tc.modules...)
				if tc.failed == nil {
					assert.Equal(t, systemPython, py)
					assert.Empty(t, rec.fatals)
					assert.Empty(t, rec.skips)
					return
				}
				assert.Empty(t, py)
				want := []string{"python module " + strings.Join(tc.failed, ", ") + " not importable by " + systemPython}
				for _, f := range tc.failed {
					want = append(want, f+": ModuleNotFoundError")
				}
				checkRule(t, rec, m.required, want...)
				msg := append(rec.fatals, rec.skips...)[0]
				assert.NotContains(t, msg, "json:", "an importable module is not named as failing")
			})
		}
	}
}

func TestNeedPythonAbsentInterpreter(t *testing.T) {
	for _, m := range requireModes {
		t.Run("env="+m.env, func(t *testing.T) {
			rec := &recorder{}
			py := filepath.Join(t.TempDir(), "python3")
			assert.Empty(t, needPython(rec, m.required, py, []string{"json"}))
			checkRule(t, rec, m.required, py+" is not installed")
		})
	}
}

// TestNeedPythonOneProcess: several modules, importable or not, are
// checked by one python process, through an interpreter that counts its
// starts.
func TestNeedPythonOneProcess(t *testing.T) {
	needSystemPython(t)
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "python3")
	script := "#!/bin/sh\necho started >> '" + calls + "'\nexec " + systemPython + " \"$@\"\n"
	require.NoError(t, os.WriteFile(fake, []byte(script), 0o755))
	tests := []struct {
		name    string
		modules []string
		ok      bool
	}{
		{"all importable", []string{"json", "os", "os.path", "importlib", "string"}, true},
		{"some missing", []string{"json", "ftigo_no_such_module_a", "os", "ftigo_no_such_module_b"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(calls, nil, 0o644))
			rec := &recorder{}
			py := needPython(rec, false, fake, tc.modules)
			b, err := os.ReadFile(calls)
			require.NoError(t, err)
			assert.Equal(t, 1, strings.Count(string(b), "started"), "python processes for %d modules", len(tc.modules))
			if tc.ok {
				assert.Equal(t, fake, py)
				assert.Empty(t, rec.skips)
				return
			}
			assert.Empty(t, py)
			checkRule(t, rec, false, "ftigo_no_such_module_a, ftigo_no_such_module_b not importable")
		})
	}
}

// TestTreeDigests: files by content, directories as "dir", a missing
// root as nothing; a change of one byte changes the picture.
func TestTreeDigests(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a", "f"), []byte("x"), 0o644))
	got := TreeDigests(t, root, filepath.Join(root, "missing"))
	assert.Equal(t, map[string]string{
		root: "dir", filepath.Join(root, "a"): "dir", filepath.Join(root, "a", "b"): "dir",
		filepath.Join(root, "a", "f"): "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881",
	}, got)
	require.NoError(t, os.WriteFile(filepath.Join(root, "a", "f"), []byte("y"), 0o644))
	assert.NotEqual(t, got, TreeDigests(t, root))
}
