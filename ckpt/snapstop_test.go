package ckpt

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ftigo/ftigo/vfd"
)

// In snapshot mode the stop check rides on the snapshot vote: a signal
// on one rank still stops every rank at the next Checkpoint, at the
// level the stop chose, and the final checkpoint (taken from a staging
// copy) is what the relaunch restarts from. A halt file left behind
// stops the next launch at its first call.
func TestStopSnapshotMode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		want  Level
	}{
		{"grace=10s", 10 * time.Second, Level(3)},
		{"grace=1m", time.Minute, Level(4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 1)
			cfg.GroupSize, cfg.Snapshot = 4, true
			cfg.Policy.StopGrace = tc.grace
			seedHistory(t, cfg.MetaDir, map[int]time.Duration{1: time.Second, 2: 3 * time.Second, 3: 5 * time.Second, 4: 40 * time.Second})
			stopped := stopRun(t, 4, cfg, time.Second, func(rank, it int, sig chan os.Signal) {
				if rank == 2 && it == 5 {
					sig <- syscall.SIGTERM
				}
			})
			sameAll(t, stopped, 5)
			got, lvl := relaunch(t, 4, cfg)
			assert.Equal(t, 5.0, got, "the final checkpoint holds iteration 5")
			assert.Equal(t, tc.want, lvl)
		})
	}
	t.Run("halt-left", func(t *testing.T) {
		cfg := testConfig(t.TempDir(), 1)
		cfg.Snapshot = true
		seedHistory(t, cfg.MetaDir, map[int]time.Duration{1: time.Second, 4: 2 * time.Second})
		assert.NoError(t, WriteHalt(vfd.Sec2{}, cfg.MetaDir, HaltRequest{Reason: "left"}))
		sameAll(t, stopRun(t, 2, cfg, 2*time.Second, nil), 1)
		got, lvl := relaunch(t, 2, cfg)
		assert.Equal(t, 1.0, got)
		assert.Equal(t, Level(4), lvl, "no deadline: the top level")
	})
}
