package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// outputConfig writes a configuration at verbosity 2 with a misspelled
// key and an unsupported ckpt_io under dir and returns its path.
func outputConfig(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "config.fti")
	cfg := fmt.Sprintf("[basic]\nnode_size = 1\ngroup_size = 2\nckpt_dir = %s\nglbl_dir = %s\nmeta_dir = %s\nverbosity = 2\nckpt_ll = 5\nckpt_io = 2\n[advanced]\nlocal_test = 1\nblock_size = 16\n",
		filepath.Join(dir, "l"), filepath.Join(dir, "g"), filepath.Join(dir, "m"))
	require.NoError(t, os.WriteFile(p, []byte(cfg), 0o644))
	return p
}

// normalized returns the lines of s with dir, run ids and every number
// with a fraction (timings, rates) replaced, so that two runs compare.
func normalized(s, dir string) []string {
	num := regexp.MustCompile(`\d+\.\d+`)
	run := regexp.MustCompile(`\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_[0-9a-f]{32}`)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l != "" {
			l = run.ReplaceAllString(strings.ReplaceAll(l, dir, "DIR"), "RUN")
			out = append(out, num.ReplaceAllString(l, "N"))
		}
	}
	return out
}

// TestOutputMatchesGo: a C program and a Go program without a logger,
// doing the same (an L4 checkpoint asked as FTI_L4_DCP without dCP, an
// L1 one, a refused level 9, a restart that passes over the L1 one with
// a lost file, a recovery), print the same lines on the same streams:
// every line the Go runtime prints, the C API prints too (its own
// lines, about FTI's calls, come in addition).
func TestOutputMatchesGo(t *testing.T) {
	type streams struct{ out, errOut syncBuffer }
	var goOut, cOut streams
	goDir, cDir := t.TempDir(), t.TempDir()
	goCfg, cCfg := outputConfig(t, goDir), outputConfig(t, cDir)
	lose := func(dir string) {
		files, err := filepath.Glob(filepath.Join(dir, "l/node0001/*/ckpt00000002/data000001.fti")) // in the run's directory
		require.NoError(t, err)
		require.Len(t, files, 1)
		require.NoError(t, os.Remove(files[0]))
	}

	// Go.
	cfg, err := ckpt.LoadConfig(vfd.Sec2{}, goCfg)
	require.NoError(t, err)
	goLaunch := func(fn func(rt *ckpt.Runtime) error) {
		require.NoError(t, comm.Run(2, func(c comm.Comm) error {
			rt, err := ckpt.Init(cfg, c, ckpt.WithOutput(&goOut.out, &goOut.errOut))
			if err != nil {
				return err
			}
			defer endRuntime(rt)
			x := make([]float64, 512)
			if err := ckpt.Protect(rt, 0, &x); err != nil {
				return err
			}
			return fn(rt)
		}))
	}
	goLaunch(func(rt *ckpt.Runtime) error {
		if err := errors.Join(rt.Checkpoint(1, 8), rt.Checkpoint(2, 1)); err != nil {
			return err
		}
		if err := rt.Checkpoint(3, 9); err == nil {
			return errors.New("level 9 without h5_single_file_enable committed")
		}
		return nil
	})
	lose(goDir)
	goLaunch(func(rt *ckpt.Runtime) error { return rt.Recover() })

	// C, through the library's entry points.
	cLaunch := func(fn func(l *library) error) {
		require.NoError(t, comm.Run(2, func(c comm.Comm) error {
			l := newLibrary(&cOut.out, &cOut.errOut, lp64)
			if rc := l.init(cCfg, c); rc != codeSuccess {
				return fmt.Errorf("init returned %d", rc)
			}
			defer func() { endRuntime(l.rt) }()
			x := make([]float64, 512)
			if err := expect("protect", l.protect(0, ptr(x), int64(len(x)), typeDouble), codeSuccess); err != nil {
				return err
			}
			return fn(l)
		}))
	}
	cLaunch(func(l *library) error {
		return errors.Join(expect("L4 DCP", l.checkpoint(1, 8), codeCheckpoint), expect("L1", l.checkpoint(2, 1), codeCheckpoint),
			expect("level 9", l.checkpoint(3, 9), codeFailure))
	})
	lose(cDir)
	cLaunch(func(l *library) error { return expect("recover", l.recover("FTI_Recover"), codeSuccess) })

	for _, s := range []struct {
		name  string
		g, c  string
		least int
	}{{"stdout", goOut.out.String(), cOut.out.String(), 4}, {"stderr", goOut.errOut.String(), cOut.errOut.String(), 7}} {
		g, c := normalized(s.g, goDir), normalized(s.c, cDir)
		require.GreaterOrEqual(t, len(g), s.least, "%s of the Go program:\n%s", s.name, s.g)
		count := map[string]int{}
		for _, l := range c {
			count[l]++
		}
		for _, l := range g {
			assert.Positive(t, count[l], "the C API's %s lacks the Go line %q:\n%s", s.name, l, strings.Join(c, "\n"))
			count[l]--
		}
		for l, n := range count {
			if n > 0 {
				assert.Regexp(t, `^\[ FTI[^\]]*\] : (FTI|Variable|FTI_)`, l, "a line of the C API's own (%s)", s.name)
			}
		}
	}
	// What a user sees on both: FTI's prefixes and messages.
	for _, want := range []string{
		"[ FTI Warning 000000 ] : config: DIR/config.fti: unknown keys ignored: [basic] ckpt_ll",
		"[ FTI Warning 000000 ] : L4 dCP requested, but dCP is disabled (enable_dcp = 0): the checkpoint is taken whole at L4 (ckpt-level=8)",
		"[ FTI Error - 000000 ] : Ckpt. ID 3 (level 9) failed (ckpt-id=3, ckpt-level=9, error=ckpt: checkpoint level 9 (FTI_L4_H5_SINGLE): level not available: set h5_single_file_enable = 1)",
	} {
		assert.Contains(t, normalized(cOut.errOut.String(), cDir), want)
	}
	assert.Contains(t, normalized(cOut.out.String(), cDir), "[ FTI  Information ] : This is a restart. Recovering successfully from level 4 with Ckpt. 1 (ckpt00000001) in N sec.")
}
