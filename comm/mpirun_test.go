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

// TestMPIFailingRankEndsJob builds the MPI test binary (build tag mpi) and
// runs it under mpirun.openmpi -np 3 with rank 1 failing while ranks 0 and
// 2 wait in a Barrier: the harness's MPI_Abort must end the job with a
// non-zero status within seconds, never leave it hanging.
func TestMPIFailingRankEndsJob(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the MPI test binary; skipped with -short")
	}
	mpirun := testutil.NeedTool(t, "mpirun.openmpi", "runs the MPI abort-on-failure test")
	testutil.NeedTool(t, "pkg-config", "finds Open MPI for the cgo build")
	goTool := testutil.NeedTool(t, "go", "builds the MPI test binary")
	if out, err := exec.Command("pkg-config", "--exists", "ompi").CombinedOutput(); err != nil {
		testutil.Missing(t, "pkg-config cannot find ompi (libopenmpi-dev): "+string(out))
	}
	bin := filepath.Join(t.TempDir(), "mpi.test")
	build := exec.Command(goTool, "test", "-c", "-tags", "mpi", "-o", bin, "./mpi")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build: %s", out)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, "-np", "3", "-x", "GOMAXPROCS=1", "-x", "FTIGO_MPI_FAIL_RANK=1",
		bin, "-test.run=^TestInjectedFailure$", "-test.count=1")
	cmd.Env = append(cmd.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
		"OMPI_MCA_rmaps_base_oversubscribe=1", "FTIGO_MPI_FAIL_RANK=1")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	require.NoError(t, ctx.Err(), "the job hung until the 60 s limit; output:\n%s", buf.String())
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "output:\n%s", buf.String())
	assert.NotZero(t, exit.ExitCode())
	assert.Contains(t, buf.String(), "rank 1: injected failure")
	assert.Contains(t, buf.String(), "calling MPI_Abort")
	assert.False(t, strings.Contains(buf.String(), "Barrier returned"), "a survivor left the Barrier:\n%s", buf.String())
	t.Logf("job ended %v after start (exit %d)", elapsed.Round(time.Millisecond), exit.ExitCode())
}
