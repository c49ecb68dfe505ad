package h5

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
)

func TestH5dumpSample(t *testing.T) {
	h5dump := testutil.NeedTool(t, "h5dump", "check that libhdf5 reads our files")
	p := writeSampleFile(t)
	out, err := exec.Command(h5dump, "--enable-error-stack", p).CombinedOutput()
	t.Logf("%s", out)
	require.NoError(t, err, "%s", out)
}
