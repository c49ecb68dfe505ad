package testutil

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
)

// RequireToolsEnv is the environment variable CI sets to make a missing
// external tool a test failure instead of a skip.
const RequireToolsEnv = "FTIGO_REQUIRE_TOOLS"

// TB is the part of testing.TB the helpers use; *testing.T, *testing.B,
// *testing.F and any testing.TB satisfy it. After Fatalf or Skipf the
// helpers return at once, so a recorder that does not stop the goroutine
// sees exactly one call.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// ToolsRequired reports whether missing tools must fail tests.
func ToolsRequired() bool { return os.Getenv(RequireToolsEnv) == "1" }

// NeedTool returns the absolute path of an executable. When it is not
// installed the test is skipped with the reason, or fails when
// FTIGO_REQUIRE_TOOLS=1. why says what the tool is needed for.
func NeedTool(t TB, name, why string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	Missing(t, name+" is not installed ("+why+")")
	return ""
}

// systemPython is the interpreter NeedPython checks. Debian's python3 is
// used on purpose: another python3 earlier on PATH may lack the
// distribution's packages.
const systemPython = "/usr/bin/python3"

// NeedPython returns /usr/bin/python3 after checking, in one python
// process, that it can import every named module. When it cannot, the
// test is skipped (or fails, see [Missing]) with the modules that failed
// and python's reason for each.
func NeedPython(t TB, modules ...string) string {
	t.Helper()
	return needPython(t, ToolsRequired(), systemPython, modules)
}

// importCheck imports each module named on the command line and prints
// one line "module: reason" per module that fails; it exits 3 if any did.
const importCheck = `import importlib, sys
bad = []
for m in sys.argv[1:]:
    try:
        importlib.import_module(m)
    except BaseException as e:
        bad.append("%s: %s: %s" % (m, type(e).__name__, e))
print("\n".join(bad))
sys.exit(3 if bad else 0)
`

func needPython(t TB, required bool, py string, modules []string) string {
	t.Helper()
	if _, err := os.Stat(py); err != nil {
		missing(t, required, py+" is not installed")
		return ""
	}
	if len(modules) == 0 {
		return py
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(py, append([]string{"-c", importCheck}, modules...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return py
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		failed := make([]string, len(lines))
		for i, l := range lines {
			failed[i], _, _ = strings.Cut(l, ":")
		}
		missing(t, required, "python module "+strings.Join(failed, ", ")+" not importable by "+py+": "+strings.Join(lines, "; "))
		return ""
	}
	missing(t, required, "cannot check python modules "+strings.Join(modules, ", ")+" with "+py+": "+err.Error()+": "+strings.TrimSpace(stderr.String()+stdout.String()))
	return ""
}

// Missing skips the test with reason, or fails it when tools are required
// (FTIGO_REQUIRE_TOOLS=1).
func Missing(t TB, reason string) {
	t.Helper()
	missing(t, ToolsRequired(), reason)
}

func missing(t TB, required bool, reason string) {
	t.Helper()
	if required {
		t.Fatalf("required tool missing (%s=1): %s", RequireToolsEnv, reason)
		return
	}
	t.Skipf("skipping: %s; set %s=1 to make this a failure", reason, RequireToolsEnv)
}
