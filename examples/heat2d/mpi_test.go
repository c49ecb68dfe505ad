package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
)

// buildMPIHeat2d builds heat2d with the mpi build tag into a temporary
// directory and returns mpirun.openmpi and the binary (skipping, or
// failing with FTIGO_REQUIRE_TOOLS=1, when Open MPI is missing).
func buildMPIHeat2d(t *testing.T) (mpirun, bin string) {
	return buildHeat2dFor(t, "mpirun.openmpi", "ompi", "libopenmpi-dev", "mpi")
}

// buildHeat2dFor builds heat2d with the build tags tags against the MPI
// that pkg-config knows as pkg (Debian package dev) and returns the
// launcher mpirun and the binary, skipping (or failing with
// FTIGO_REQUIRE_TOOLS=1) when a tool is missing.
func buildHeat2dFor(t *testing.T, launcher, pkg, dev, tags string) (mpirun, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("builds heat2d with -tags '%s'; skipped with -short", tags)
	}
	mpirun = testutil.NeedTool(t, launcher, "runs heat2d under MPI")
	testutil.NeedTool(t, "pkg-config", "finds "+pkg+" for the cgo build")
	goTool := testutil.NeedTool(t, "go", "builds heat2d with -tags '"+tags+"'")
	if out, err := exec.Command("pkg-config", "--exists", pkg).CombinedOutput(); err != nil {
		testutil.Missing(t, "pkg-config cannot find "+pkg+" ("+dev+"): "+string(out))
	}
	bin = filepath.Join(t.TempDir(), "heat2d-"+strings.ReplaceAll(tags, " ", "-"))
	out, err := exec.Command(goTool, "build", "-tags", tags, "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "build: %s", out)
	return mpirun, bin
}

// runMPI runs bin with args as np MPI processes and returns its standard
// output, standard error and exit error; it fails the test if the job
// does not end within 90 s.
func runMPI(t *testing.T, mpirun, bin string, np string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, append([]string{"-np", np, "-x", "GOMAXPROCS=1", bin}, args...)...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
		"OMPI_MCA_rmaps_base_oversubscribe=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "the MPI job hung; stderr:\n%s", stderr.String())
	return stdout.String(), stderr.String(), err
}

// TestMPIFailureIsPrintedBeforeAbort: under mpirun a rank that fails
// prints its error on standard error and into the job log before it calls
// MPI_Abort (which kills every process of the job, so nothing printed
// after it would be seen). Two failures: a wrong -ranks, and a restart
// whose only checkpoint (L1, no redundancy) was damaged after the kill.
func TestMPIFailureIsPrintedBeforeAbort(t *testing.T) {
	mpirun, bin := buildMPIHeat2d(t)

	t.Run("wrong -ranks", func(t *testing.T) {
		dir := t.TempDir()
		_, stderr, err := runMPI(t, mpirun, bin, "2", "-role=job", "-dir", dir, "-ranks", "4", "-nodes", "2",
			"-nx", "32", "-ny", "32", "-iters", "20")
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "stderr:\n%s", stderr)
		assert.NotZero(t, exit.ExitCode())
		assert.Regexp(t, `heat2d: rank [01]: -ranks 4 but mpirun started 2 processes`, stderr)
		log, rerr := os.ReadFile(filepath.Join(dir, "job.log"))
		require.NoError(t, rerr)
		assert.Contains(t, string(log), `"msg":"job failed"`)
		assert.Contains(t, string(log), "-ranks 4 but mpirun started 2 processes")
	})

	t.Run("damaged checkpoint", func(t *testing.T) {
		// Launch 1 (in-process ranks, same topology): killed right after
		// checkpoint 1, an L1 checkpoint with no redundancy.
		o := smallOptions(t, "-ranks", "2", "-nodes", "2", "-levels", "1", "-io-latency", "20ms", "-iters", "2000")
		l1 := runLaunch(o, killPlan{mode: "after", n: 1}, &bytes.Buffer{})
		require.NoError(t, l1.err)
		require.True(t, l1.killed, "launch 1 was not killed: %s", l1.stderr)
		files, err := filepath.Glob(filepath.Join(o.dir, "local", "node*", "*", "ckpt00000001", "data*.fti")) // node, run
		require.NoError(t, err)
		require.Len(t, files, 2)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			b[len(b)-100] ^= 0xff // inside the protected data
			require.NoError(t, os.WriteFile(f, b, 0o644))
		}
		stdout, stderr, err := runMPI(t, mpirun, bin, "2", jobArgs(o)...)
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		assert.NotZero(t, exit.ExitCode())
		assert.NotContains(t, stdout, "EVENT done", "the job finished from damaged data")
		var lines []string
		for _, l := range strings.Split(stderr, "\n") {
			if strings.HasPrefix(l, "heat2d: rank ") {
				lines = append(lines, l)
			}
		}
		require.NotEmpty(t, lines, "no rank printed its error before MPI_Abort; stderr:\n%s", stderr)
		assert.Contains(t, lines[0], "ckpt00000001", "the error names the damaged checkpoint")
		log, err := os.ReadFile(filepath.Join(o.dir, "job.log"))
		require.NoError(t, err)
		assert.Contains(t, string(log), `"msg":"job failed"`)
	})
}
