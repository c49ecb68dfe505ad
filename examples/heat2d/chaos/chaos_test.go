package main

import (
	"bytes"
	"testing"
	"time"
)

// TestChaos runs each mode of the loop briefly (CI's share of it; the
// long runs are recorded in docs/robustness.md). It needs only the go
// tool, to build heat2d.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the chaos loops run for 15 s per mode")
	}
	for _, mode := range []string{"kill", "corrupt"} {
		t.Run(mode, func(t *testing.T) {
			var out bytes.Buffer
			st, err := Run(Config{Mode: mode, Duration: 15 * time.Second, WorkDir: t.TempDir(), Timeout: time.Minute, Async: "random"}, &out)
			t.Log(out.String())
			if err != nil {
				t.Fatal(err)
			}
			if st.Failures > 0 || st.Runs == 0 || st.Kills == 0 {
				t.Fatalf("%d failures in %d runs (%d kills)", st.Failures, st.Runs, st.Kills)
			}
		})
	}
}
