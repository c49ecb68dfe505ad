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
	// Each variant once, in the rotation's order (shared counts two runs).
	t.Run("variants", func(t *testing.T) {
		var out bytes.Buffer
		st, err := Run(Config{Mode: "corrupt", Runs: 6, Duration: 10 * time.Minute, WorkDir: t.TempDir(), Timeout: time.Minute, Async: "random", Variant: "all"}, &out)
		t.Log(out.String())
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range variants {
			if st.Variants[v] != 1 {
				t.Errorf("variant %s ran %d times, want 1", v, st.Variants[v])
			}
		}
		if st.Failures > 0 || st.Wrong > 0 || st.SilentFresh > 0 || st.Touched > 0 || st.Runs != 7 {
			t.Fatalf("%d failures (wrong %d, silent fresh %d, touched %d) in %d runs", st.Failures, st.Wrong, st.SilentFresh, st.Touched, st.Runs)
		}
	})
}

// TestVariantRotation: -variant all gives run i the i-th variant, and
// the seed keeps it (a replay with -seed runs the same variant).
func TestVariantRotation(t *testing.T) {
	for i := range 2 * len(variants) {
		seed := withVariant(0xfedcba9876543211, i)
		if got, want := variantOf("all", seed), variants[i%len(variants)]; got != want {
			t.Errorf("run %d: variant %s, want %s", i, got, want)
		}
		if got := variantOf("dcp", seed); got != "dcp" {
			t.Errorf("-variant dcp: run %d has variant %s", i, got)
		}
	}
	if _, err := parseFlags([]string{"-variant", "nope"}); err == nil {
		t.Error("-variant nope was accepted")
	}
}
