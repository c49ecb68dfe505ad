package ckpt

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/ftigo/ftigo/comm"
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

// In snapshot mode every checkpoint reaches the run's history once
// durable: blocked for the copy, total to durable. A stop a program
// learns of from NeedCheckpoint takes its final checkpoint from a
// staging copy, and the call returns only once it is durable: the
// history written before Close already holds it, marked final.
func TestSnapshotModeHistory(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.Snapshot = true
	cfg.Policy.StopGrace = time.Minute
	seedHistory(t, cfg.MetaDir, map[int]time.Duration{1: time.Second, 4: 2 * time.Second})
	const n, signalAt = 2, 4
	stoppedAt := make([]int, n)
	err := comm.Run(n, func(c comm.Comm) error {
		clk := &fakeClock{t: time.Unix(1000, 0)}
		sig := make(chan os.Signal, 1)
		r, err := Init(cfg, c, WithLogger(zaptest.NewLogger(t)), WithWarnings(tbWriter{t}), WithClock(clk.Now), WithSignals(sig))
		if err != nil {
			return err
		}
		defer r.Close()
		x := []float64{0}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		for it := 1; it <= 40; it++ {
			x[0] = float64(it)
			if c.Rank() == 1 && it == signalAt {
				sig <- syscall.SIGTERM
			}
			need, err := r.NeedCheckpoint()
			if err != nil {
				return err
			}
			lvl := 1
			if need {
				lvl = 4
			}
			if need || it < signalAt {
				if err := r.Checkpoint(int64(it), lvl); err != nil {
					return err
				}
			}
			if r.ShouldExit() {
				stoppedAt[c.Rank()] = it
				if ct := r.CheckpointTimes(); ct.ID != int64(it) || !ct.Durable {
					return fmt.Errorf("rank %d: ShouldExit at %d with checkpoint %d durable=%v", c.Rank(), it, ct.ID, ct.Durable)
				}
				return nil
			}
			clk.Advance(time.Second)
		}
		return nil
	}, comm.WithTimeout(60*time.Second))
	require.NoError(t, err)
	require.NotZero(t, stoppedAt[0], "the stop was never agreed")
	assert.Equal(t, stoppedAt[0], stoppedAt[1])
	final := readHistory(t, cfg.MetaDir)
	var ids []int64
	for _, c := range final.Checkpoints {
		if c.Time == 1 {
			continue // seeded
		}
		ids = append(ids, c.ID)
		assert.True(t, c.Async, "checkpoint %d is marked a background one", c.ID)
		assert.LessOrEqual(t, c.Blocked, c.Total, "checkpoint %d", c.ID)
		assert.Equal(t, c.ID == int64(stoppedAt[0]), c.Final, "checkpoint %d", c.ID)
		if c.Final {
			assert.Equal(t, 4, c.Level)
		} else {
			assert.Equal(t, 1, c.Level, "checkpoint %d", c.ID)
		}
	}
	want := []int64{}
	for it := 1; it < signalAt; it++ {
		want = append(want, int64(it))
	}
	want = append(want, int64(stoppedAt[0]))
	assert.Equal(t, want, ids, "every checkpoint of the launch, the final one before Close")
	got, lvl := relaunch(t, n, cfg)
	assert.Equal(t, float64(stoppedAt[0]), got)
	assert.Equal(t, Level(4), lvl)
}
