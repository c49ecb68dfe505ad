package ckpt

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/policy"
	"github.com/ftigo/ftigo/vfd"
)

// seedHistory writes a run history whose measured costs are cost[l]
// (blocked and total) for the levels given, so that the stop path's
// choice of level is known. The launch it records ended by Close.
func seedHistory(t *testing.T, metaDir string, cost map[int]time.Duration) {
	t.Helper()
	h := &policy.History{}
	h.AddLaunch(policy.Launch{Start: 1, Seen: 2, End: 2, Ending: policy.EndClose, Ranks: 1, Nodes: 1})
	seq := uint64(0)
	for l := 1; l <= 4; l++ {
		c, ok := cost[l]
		if !ok {
			continue
		}
		seq++
		h.AddCheckpoint(policy.Checkpoint{Seq: seq, ID: int64(seq), Level: l, Time: 1, Blocked: c.Nanoseconds(), Total: c.Nanoseconds()})
	}
	raw, err := h.Marshal()
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(metaDir, 0o755))
	require.NoError(t, os.WriteFile(historyPath(metaDir), raw, 0o644))
}

// stopRun runs n ranks, each with its own fake clock and signal channel,
// through iterations of Checkpoint(it, 1) with step of clock each, until
// ShouldExit. before runs on each rank before each iteration's call. It
// returns the iteration each rank stopped at (0: never).
func stopRun(t *testing.T, n int, cfg Config, step time.Duration, before func(rank, it int, sig chan os.Signal), opts ...Option) []int {
	t.Helper()
	stopped := make([]int, n)
	var mu sync.Mutex
	err := comm.Run(n, func(c comm.Comm) error {
		clk := &fakeClock{t: time.Unix(1000, 0)}
		sig := make(chan os.Signal, 1)
		o := append([]Option{WithLogger(zaptest.NewLogger(t)), WithWarnings(tbWriter{t}), WithClock(clk.Now), WithSignals(sig)}, opts...)
		r, err := Init(cfg, c, o...)
		if err != nil {
			return err
		}
		defer r.Close()
		x := []float64{0}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		for it := 1; it <= 60; it++ {
			x[0] = float64(it)
			if before != nil {
				before(c.Rank(), it, sig)
			}
			if r.ShouldExit() {
				return errors.New("ShouldExit before the stop")
			}
			if err := r.Checkpoint(int64(it), 1); err != nil {
				return err
			}
			if r.ShouldExit() {
				mu.Lock()
				stopped[c.Rank()] = it
				mu.Unlock()
				return nil
			}
			clk.Advance(step)
		}
		return nil
	}, comm.WithTimeout(60*time.Second))
	require.NoError(t, err)
	return stopped
}

// relaunch restarts the run and returns the value and level recovered.
func relaunch(t *testing.T, n int, cfg Config) (float64, Level) {
	t.Helper()
	var got float64
	var lvl Level
	require.NoError(t, world(t, n, cfg, []Option{WithSignals(make(chan os.Signal, 1))}, func(r *Runtime) error {
		if r.Status() != Restart {
			return errors.New("the relaunch does not restart")
		}
		x := []float64{0}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		if err := r.Recover(); err != nil {
			return err
		}
		if r.c.Rank() == 0 {
			got, lvl = x[0], r.Recovered().Level
		}
		return nil
	}))
	return got, lvl
}

func sameAll(t *testing.T, stopped []int, want int) {
	t.Helper()
	for rank, it := range stopped {
		assert.Equal(t, want, it, "rank %d stopped at iteration %d", rank, it)
	}
}

// A signal on one rank between two calls stops every rank at the next
// Checkpoint, at the highest level whose cost fits stop_grace.
func TestStopSignal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		want  Level
	}{
		// 1.2 times the costs: L1 1.2 s, L2 3.6 s, L3 6 s, L4 48 s.
		{"grace=10s", 10 * time.Second, Level(3)},
		{"grace=5s", 5 * time.Second, Level(2)},
		{"grace=1m", time.Minute, Level(4)},
		{"grace=1s", time.Second, Level(1)}, // nothing fits: the lowest level
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 1)
			cfg.GroupSize = 4
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
			h := readHistory(t, cfg.MetaDir)
			assert.NotEmpty(t, h.Run, "the history names its run")
			final := h.Checkpoints[len(h.Checkpoints)-1]
			assert.True(t, final.Final)
			assert.Equal(t, int(tc.want), final.Level)
			assert.Equal(t, policy.EndStop, h.Launches[len(h.Launches)-2].Ending)
			// Only rank 2 got the signal: rank 0 names it from the check.
			assert.Equal(t, "signal terminated on another rank", h.Launches[len(h.Launches)-2].StopReason)
		})
	}
}

func readHistory(t *testing.T, metaDir string) *policy.History {
	t.Helper()
	raw, err := os.ReadFile(historyPath(metaDir))
	require.NoError(t, err)
	h, err := policy.UnmarshalHistory(raw)
	require.NoError(t, err)
	return h
}

// The halt file stops the job at rank 0's next check and is removed
// once the final checkpoint is committed; one left behind stops the
// next launch at its first call.
func TestStopHaltFile(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	seedHistory(t, cfg.MetaDir, map[int]time.Duration{1: time.Second, 4: 2 * time.Second})
	d := vfd.Sec2{}
	stopped := stopRun(t, 2, cfg, 2*time.Second, func(rank, it int, _ chan os.Signal) {
		if rank == 0 && it == 3 {
			require.NoError(t, WriteHalt(d, cfg.MetaDir, HaltRequest{Reason: "maintenance at 6"}))
		}
	})
	sameAll(t, stopped, 3)
	_, err := ReadHalt(d, cfg.MetaDir)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the halt file is removed")
	got, lvl := relaunch(t, 2, cfg)
	assert.Equal(t, 3.0, got)
	assert.Equal(t, Level(4), lvl, "no deadline: the top level")
	h := readHistory(t, cfg.MetaDir)
	assert.Contains(t, h.Launches[len(h.Launches)-2].StopReason, "maintenance at 6")

	// Left behind: the next launch stops at its first call.
	require.NoError(t, WriteHalt(d, cfg.MetaDir, HaltRequest{Reason: "left"}))
	stopped = stopRun(t, 2, cfg, 2*time.Second, nil)
	sameAll(t, stopped, 1)
}

func TestHaltFileCodec(t *testing.T) {
	dir := t.TempDir()
	d := vfd.Sec2{}
	dl := time.Date(2026, 12, 3, 14, 5, 7, 0, time.UTC)
	require.NoError(t, WriteHalt(d, dir, HaltRequest{Reason: "r", Deadline: dl}))
	raw, err := os.ReadFile(filepath.Join(dir, HaltName))
	require.NoError(t, err)
	assert.Equal(t, "ftigo-halt 1\nreason r\ndeadline 2026-12-03T14:05:07Z\n", string(raw))
	h, err := ReadHalt(d, dir)
	require.NoError(t, err)
	assert.Equal(t, "r", h.Reason)
	assert.True(t, dl.Equal(h.Deadline))
	for _, bad := range []struct{ raw, msg string }{
		{"", "at byte 0: not a halt file"},
		{"ftigo-halt 2\n", "at byte 0: not a halt file"},
		{"ftigo-halt 1\ndeadline soon\n", "at byte 13: deadline \"soon\""},
		{"ftigo-halt 1\nreason x\nwhat\n", "at byte 22: unknown line \"what\""},
	} {
		_, err := parseHalt("f", []byte(bad.raw))
		require.Error(t, err, "%q", bad.raw)
		assert.Contains(t, err.Error(), bad.msg)
	}
	assert.ErrorIs(t, WriteHalt(d, dir, HaltRequest{Reason: "a\nb"}), ErrNilArgument)
}

func FuzzParseHalt(f *testing.F) {
	f.Add([]byte("ftigo-halt 1\nreason r\ndeadline 2026-12-03T14:05:07Z\n"))
	f.Add([]byte("ftigo-halt 1\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		h, err := parseHalt("f", raw)
		if err != nil {
			return
		}
		if h.Reason != "" {
			assert.NotContains(t, h.Reason, "\n")
		}
	})
}

// The allocation's end (walltime, or Slurm's end time) stops the job
// once the time left, less two gaps between checks, no longer holds 1.2
// times the top level's cost; the level is the highest that fits.
func TestStopTimeLeft(t *testing.T) {
	const step = 5 * time.Second
	top := 20 * time.Second
	for _, tc := range []struct {
		name string
		set  func(cfg *Config) []Option
	}{
		{"walltime", func(cfg *Config) []Option { cfg.Policy.Walltime = 100 * time.Second; return nil }},
		{"slurm", func(cfg *Config) []Option {
			return []Option{WithGetenv(func(k string) string {
				if k == slurmEndVar {
					return strconv.Itoa(1000 + 100)
				}
				return ""
			})}
		}},
		{"both", func(cfg *Config) []Option {
			cfg.Policy.Walltime = 300 * time.Second // Slurm's end is earlier
			return []Option{WithGetenv(func(k string) string {
				if k == slurmEndVar {
					return "1100"
				}
				return ""
			})}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 1)
			opts := tc.set(&cfg)
			seedHistory(t, cfg.MetaDir, map[int]time.Duration{1: time.Second, 4: top})
			// The rule, evaluated here: iteration it's check is at
			// (it-1)·step after Init; the gap is 0 at the first check.
			want := 0
			for it := 1; it <= 60; it++ {
				gap := step
				if it == 1 {
					gap = 0
				}
				left := 100*time.Second - time.Duration(it-1)*step
				if float64(left-2*gap) <= 1.2*float64(top) {
					want = it
					break
				}
			}
			require.Equal(t, 15, want, "the worked example: 100 s - 70 s - 10 s <= 24 s")
			stopped := stopRun(t, 2, cfg, step, nil, opts...)
			sameAll(t, stopped, want)
			got, lvl := relaunch(t, 2, cfg)
			assert.Equal(t, float64(want), got)
			assert.Equal(t, Level(4), lvl, "30 s left hold L4's 24 s")
		})
	}
}

// A malformed SLURM_JOB_END_TIME is ignored with a warning: no stop.
func TestStopSlurmBad(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	stopped := stopRun(t, 1, cfg, time.Minute, nil, WithGetenv(func(k string) string {
		if k == slurmEndVar {
			return "tomorrow"
		}
		return ""
	}))
	sameAll(t, stopped, 0)
}

// stop_signals = none catches nothing; the names parse and format.
func TestStopSignalsConfig(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []syscall.Signal
	}{
		{"", []syscall.Signal{syscall.SIGTERM, syscall.SIGUSR1}},
		{"stop_signals = none\n", nil},
		{"stop_signals = term, SIGUSR2\n", []syscall.Signal{syscall.SIGTERM, syscall.SIGUSR2}},
	} {
		c, err := ParseConfig("p", []byte("[basic]\nnode_size = 1\n"+tc.in))
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, c.Policy.signals(), tc.in)
		out, err := FormatConfig(c)
		require.NoError(t, err)
		c2, err := ParseConfig("p2", out)
		require.NoError(t, err)
		assert.Equal(t, c.Policy, c2.Policy, tc.in)
	}
	_, err := ParseConfig("p", []byte("[basic]\nnode_size = 1\nstop_signals = SIGKILL\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SIGKILL")
}
