package ckpt

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
)

// stopChildVar makes the test binary run stopChild instead of a test.
const stopChildVar = "FTIGO_TEST_STOP_CHILD"

// stopChild is a job in its own process with the default stop signals.
// It sends itself SIGTERM. "idle" then never calls Checkpoint; "take"
// calls it once, prints "stopped" when ShouldExit, and sends SIGTERM
// again. Both end by SIGTERM's default action, or exit 3.
func stopChild(mode, dir string) {
	cfg := testConfig(dir, 1)
	cfg.Policy.StopGrace = 500 * time.Millisecond
	err := comm.Run(1, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithLogger(zap.NewNop()))
		if err != nil {
			return err
		}
		defer r.Close()
		x := []float64{1}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(100 * time.Millisecond) // still alive: the signal is caught
		if mode == "take" {
			if err := r.Checkpoint(1, 1); err != nil {
				return err
			}
			if !r.ShouldExit() {
				return errors.New("no ShouldExit after the signal")
			}
			os.Stdout.WriteString("stopped\n")
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		}
		time.Sleep(20 * time.Second)
		return errors.New("still alive 20 s after SIGTERM")
	})
	os.Stderr.WriteString(err.Error() + "\n")
	os.Exit(3)
}

// SIGTERM is a default stop signal, and it never keeps a process alive:
// a job that makes no call within stop_grace dies by it, and one that
// took it (and checkpointed) dies by the next one.
func TestStopSignalDefaultAction(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		stdout string
		min    time.Duration
	}{
		{"idle", "", 500 * time.Millisecond},
		{"take", "stopped\n", 100 * time.Millisecond},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), stopChildVar+"="+tc.mode, stopChildVar+"_DIR="+t.TempDir())
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "stderr: %s", errb.String())
			ws, ok := ee.Sys().(syscall.WaitStatus)
			require.True(t, ok)
			require.True(t, ws.Signaled(), "the child exited %d, not by a signal; stderr: %s", ws.ExitStatus(), errb.String())
			assert.Equal(t, syscall.SIGTERM, ws.Signal())
			assert.Equal(t, tc.stdout, out.String())
			assert.GreaterOrEqual(t, took, tc.min, "SIGTERM was caught for a while first")
			assert.Less(t, took, 15*time.Second)
		})
	}
}
