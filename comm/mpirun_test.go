package comm_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
)

// TestMPIJobs builds the MPI test binary (build tag mpi) once and runs it
// under mpirun.openmpi in two set-ups the plain MPI test command does not
// cover:
//   - rank 1 of 3 fails while ranks 0 and 2 wait in a Barrier: the
//     harness's MPI_Abort must end the job with a non-zero status within
//     seconds, never leave it hanging;
//   - the whole suite at np 2 with MPI initialised at THREAD_SERIALIZED
//     and at THREAD_FUNNELED, which exercise the binding's funnel (every
//     call non-blocking, served by one goroutine; at FUNNELED only by the
//     thread that initialised MPI).
func TestMPIJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the MPI test binary; skipped with -short")
	}
	mpirun := testutil.NeedTool(t, "mpirun.openmpi", "runs the MPI job tests")
	testutil.NeedTool(t, "pkg-config", "finds Open MPI for the cgo build")
	goTool := testutil.NeedTool(t, "go", "builds the MPI test binary")
	if out, err := exec.Command("pkg-config", "--exists", "ompi").CombinedOutput(); err != nil {
		testutil.Missing(t, "pkg-config cannot find ompi (libopenmpi-dev): "+string(out))
	}
	bin := filepath.Join(t.TempDir(), "mpi.test")
	build := exec.Command(goTool, "test", "-c", "-tags", "mpi", "-o", bin, "./mpi")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build: %s", out)

	// run starts bin under mpirun with env and returns its output and error.
	run := func(t *testing.T, np string, env []string, args ...string) (string, time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		mpiArgs := []string{"-np", np, "-x", "GOMAXPROCS=1"}
		for _, e := range env {
			mpiArgs = append(mpiArgs, "-x", e)
		}
		cmd := exec.CommandContext(ctx, mpirun, append(append(mpiArgs, bin), args...)...)
		cmd.Env = append(append(cmd.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
			"OMPI_MCA_rmaps_base_oversubscribe=1"), env...)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		start := time.Now()
		err := cmd.Run()
		require.NoError(t, ctx.Err(), "the job hung until the 60 s limit; output:\n%s", buf.String())
		return buf.String(), time.Since(start), err
	}

	t.Run("failing rank aborts the job", func(t *testing.T) {
		out, elapsed, err := run(t, "3", []string{"FTIGO_MPI_FAIL_RANK=1"}, "-test.run=^TestInjectedFailure$", "-test.count=1")
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "output:\n%s", out)
		assert.NotZero(t, exit.ExitCode())
		assert.Contains(t, out, "rank 1: injected failure")
		assert.Contains(t, out, "calling MPI_Abort")
		assert.False(t, strings.Contains(out, "Barrier returned"), "a survivor left the Barrier:\n%s", out)
		t.Logf("job ended %v after start (exit %d)", elapsed.Round(time.Millisecond), exit.ExitCode())
	})
	for _, level := range []string{"serialized", "funneled"} {
		t.Run("suite at THREAD_"+strings.ToUpper(level), func(t *testing.T) {
			out, elapsed, err := run(t, "2", []string{"FTIGO_MPI_THREAD=" + level}, "-test.count=1", "-test.v")
			require.NoError(t, err, "output:\n%s", out)
			for _, name := range []string{"TestConformance", "TestConformanceBytesOnly", "TestConformanceSmallCount"} {
				assert.Equal(t, 2, strings.Count(out, "--- PASS: "+name+" ("), "%s; output:\n%s", name, out)
			}
			assert.Equal(t, 2, strings.Count(out, "--- PASS: TestThreadLevel"), "output:\n%s", out)
			t.Logf("suite passed in %v", elapsed.Round(time.Millisecond))
		})
	}
}
