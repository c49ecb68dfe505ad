package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/gsd"
	"github.com/ftigo/ftigo/vfd"
)

// TestRelaunchAfterEmptyTrajectory: a launch killed while heat2d.gsd was
// being created (by a writer without atomic create) left a 0-byte file;
// the relaunch replaces it and writes the whole trajectory. Also after a
// kill past checkpoint 1: the restarted launch keeps going although the
// trajectory it would append to is empty.
func TestRelaunchAfterEmptyTrajectory(t *testing.T) {
	t.Run("fresh", func(t *testing.T) {
		o := smallOptions(t, "-ranks", "2", "-nodes", "2", "-levels", "1")
		require.NoError(t, os.MkdirAll(o.dir, 0o755))
		name := filepath.Join(o.dir, "heat2d.gsd")
		require.NoError(t, os.WriteFile(name, nil, 0o644))
		var out bytes.Buffer
		require.NoError(t, jobMain(o, &out), out.String())
		assert.Contains(t, out.String(), "EVENT done iter=300")
		checkTrajectory(t, name, 25, 12)
	})
	t.Run("restart", func(t *testing.T) {
		o := smallOptions(t, "-ranks", "2", "-nodes", "2", "-levels", "1", "-io-latency", "20ms", "-iters", "2000")
		l1 := runLaunch(o, killPlan{mode: "after", n: 1}, &bytes.Buffer{})
		require.NoError(t, l1.err)
		require.True(t, l1.killed)
		name := filepath.Join(o.dir, "heat2d.gsd")
		require.NoError(t, os.Truncate(name, 0))
		o.ioLatency = 0
		l2 := runLaunch(o, killPlan{mode: "none"}, &bytes.Buffer{})
		require.NoError(t, l2.err)
		require.True(t, l2.done, "relaunch did not finish: %s", l2.stderr)
		assert.Equal(t, "restart", l2.start.kv["status"])
		// Frames from the restart point on: steps iter+25, ..., 2000.
		first := uint64(l2.start.int("iter")) + 25
		require.GreaterOrEqual(t, first, uint64(75))
		checkTrajectory(t, name, first, (2000-first)/25+1)
	})
}

// checkTrajectory requires name to hold n frames with steps first,
// first+25, ...
func checkTrajectory(t *testing.T, name string, first, n uint64) {
	t.Helper()
	require.NoError(t, gsd.Verify(vfd.Sec2{}, name))
	r, err := gsd.Open(vfd.Sec2{}, name)
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, n, r.NFrames())
	for f := uint64(0); f < n; f++ {
		steps, err := gsd.ReadRows[uint64](r, f, "step", 0, 1)
		require.NoError(t, err)
		assert.Equal(t, first+25*f, steps[0], "frame %d", f)
	}
}
