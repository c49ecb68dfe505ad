package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// RequireToolsEnv is the environment variable CI sets to make a missing
// external tool a test failure instead of a skip.
const RequireToolsEnv = "FTIGO_REQUIRE_TOOLS"

// ToolsRequired reports whether missing tools must fail tests.
func ToolsRequired() bool { return os.Getenv(RequireToolsEnv) == "1" }

// NeedTool returns the absolute path of an executable. When it is not
// installed the test is skipped with the reason, or fails when
// FTIGO_REQUIRE_TOOLS=1. why says what the tool is needed for.
func NeedTool(t testing.TB, name, why string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	Missing(t, name+" is not installed ("+why+")")
	return ""
}

// NeedPython returns /usr/bin/python3 after checking that it can import
// every named module. Debian's python3 is used on purpose: another
// python3 earlier on PATH may lack the distribution's packages.
func NeedPython(t testing.TB, modules ...string) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		Missing(t, py+" is not installed")
		return ""
	}
	for _, m := range modules {
		if out, err := exec.Command(py, "-c", "import "+m).CombinedOutput(); err != nil {
			Missing(t, "python module "+m+" is not importable by "+py+": "+string(out))
			return ""
		}
	}
	return py
}

// Missing skips the test with reason, or fails it when tools are required.
func Missing(t testing.TB, reason string) {
	t.Helper()
	if ToolsRequired() {
		t.Fatalf("required tool missing (%s=1): %s", RequireToolsEnv, reason)
	}
	t.Skipf("skipping: %s; set %s=1 to make this a failure", reason, RequireToolsEnv)
}
