package main

import (
	"bufio"
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/ckpt"
)

// TestDemoStopsOnHaltCommandAndSIGTERM runs the demonstration as a user
// does (its own process, no kill planned) and stops it while its job
// checkpoints: once with the command line's `ftigo halt DIR`, once with
// SIGTERM to the demonstration, which passes it on to the job. Each time
// the job takes its final checkpoint at L4, the demonstration reports it
// with the command line that resumes the job and exits 0, and no halt
// file is left. The halted run is then resumed with that command line:
// it restarts from the final checkpoint and ends bit-identical to an
// uninterrupted run.
func TestDemoStopsOnHaltCommandAndSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demonstration and its child jobs; skipped with -short")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	ftigo := filepath.Join(t.TempDir(), "ftigo")
	b, err := exec.Command(goTool(t), "build", "-o", ftigo, "github.com/ftigo/ftigo/cmd/ftigo").CombinedOutput()
	require.NoError(t, err, "build ftigo: %s", b)

	for _, tc := range []struct {
		name   string
		stop   func(t *testing.T, dir string, demo *os.Process)
		reason string
		resume bool
	}{
		{"ftigo-halt", func(t *testing.T, dir string, _ *os.Process) {
			out, err := exec.Command(ftigo, "halt", dir, "--reason", "halt command test").CombinedOutput()
			require.NoError(t, err, "ftigo halt: exit 0 wanted:\n%s", out)
			assert.Contains(t, string(out), filepath.Join(dir, "meta", ckpt.HaltName))
		}, "halt command test", true},
		{"sigterm-to-demo", func(t *testing.T, _ string, demo *os.Process) {
			require.NoError(t, demo.Signal(syscall.SIGTERM))
		}, "signal terminated", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"-dir", dir, "-nx", "40", "-ny", "32", "-iters", "1500", "-ckpt-every", "50",
				"-frame-every", "0", "-io-latency", "20ms", "-kill", "none"}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, exe, args...)
			cmd.Env = append(os.Environ(), childEnv+"=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			var (
				mu  sync.Mutex
				out strings.Builder
			)
			read := make(chan struct{})
			go func() {
				defer close(read)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					mu.Lock()
					out.WriteString(sc.Text() + "\n")
					mu.Unlock()
				}
			}()
			// Stop once the job has committed a checkpoint: its run is
			// then well under way, far from its end.
			committed := func() bool {
				m, _ := filepath.Glob(filepath.Join(dir, "meta", "ckpt*.manifest"))
				return len(m) > 0
			}
			deadline := time.Now().Add(60 * time.Second)
			for !committed() && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			require.True(t, committed(), "the job committed no checkpoint in 60 s; stderr:\n%s", stderr.String())
			tc.stop(t, dir, cmd.Process)
			<-read
			werr := cmd.Wait()
			require.NoError(t, ctx.Err(), "the demonstration hung; stderr:\n%s", stderr.String())
			mu.Lock()
			report := out.String()
			mu.Unlock()
			require.NoError(t, werr, "the demonstration must exit 0:\n%s\nstderr:\n%s", report, stderr.String())

			line := regexp.MustCompile(`stopped by ([^\n]*): final checkpoint (\d+) at L4 \(iteration (\d+)\), exiting\n`)
			m := line.FindStringSubmatch(report)
			require.NotNil(t, m, "the report names the final checkpoint at L4:\n%s", report)
			assert.NotContains(t, report, "finished at iteration", "the job stopped before its end")
			assert.Contains(t, m[1], tc.reason, "the report says why the job stopped")
			_, err = os.Stat(filepath.Join(dir, "meta", ckpt.HaltName))
			assert.ErrorIs(t, err, fs.ErrNotExist, "the halt file is removed after the final checkpoint")
			if !tc.resume {
				return
			}

			// The printed command line resumes the job.
			resumeAt := strings.Index(report, "the job resumes from it with: ")
			require.GreaterOrEqual(t, resumeAt, 0, "the report shows how to resume:\n%s", report)
			resume := strings.Fields(strings.SplitN(report[resumeAt:], "\n", 2)[0])[6:]
			require.NotEmpty(t, resume)
			last := launchStop(t, exe, resume[1:], nil, stopAction{})
			require.Zero(t, last.exitCode, "resumed launch: %s", last.stderr)
			require.True(t, last.done, "the resumed launch did not finish: %s", last.stderr)
			require.NotNil(t, last.start)
			assert.Equal(t, "restart", last.start.kv["status"])
			assert.Equal(t, m[2], last.start.kv["id"], "resumed from the final checkpoint")
			assert.Equal(t, m[3], last.start.kv["iter"], "resumed at the final checkpoint's iteration")

			o, err := parseFlags(args, &bytes.Buffer{})
			require.NoError(t, err)
			ref, err := solveInProcess(o)
			require.NoError(t, err)
			want := fieldBytes(ref)
			got, err := os.ReadFile(filepath.Join(dir, "final.f64"))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want, got), "final field differs from the uninterrupted run: %s", firstDiff(got, want))
		})
	}
}
