package ckpt

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/internal/levels"
)

// fakeClock is one rank's clock, advanced by the test.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// global4 is a stand-in L4 for scheduling tests: L1's storage under number 4.
type global4 struct{ levels.Local1 }

func (global4) ID() levels.ID { return levels.L4 }

func TestSnapshotSchedule(t *testing.T) {
	for _, tc := range []struct {
		n       int
		minutes bool // FTI's minutes with fast_forward instead of seconds
	}{{1, false}, {4, false}, {8, false}, {4, true}} {
		n := tc.n
		t.Run(fmt.Sprintf("ranks=%d/minutes=%v", n, tc.minutes), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 1)
			cfg.Interval[1] = 10 * time.Second
			cfg.Interval[4] = 30 * time.Second
			if tc.minutes {
				// ckpt_l1 = 1, ckpt_l4 = 3 (minutes), fast_forward = 6.
				c, err := ParseConfig("ff", []byte("[basic]\nckpt_l1 = 1\nckpt_l4 = 3\n[advanced]\nfast_forward = 6\n"))
				require.NoError(t, err)
				cfg.Interval, cfg.FastForward = c.Interval, c.FastForward
			}
			var mu sync.Mutex
			taken := map[int][]string{}
			require.NoError(t, func() error {
				clocks := make([]*fakeClock, n)
				for i := range clocks {
					clocks[i] = &fakeClock{t: time.Unix(1000, 0)}
				}
				return worldClocks(t, n, cfg, clocks, func(r *Runtime, clk *fakeClock) error {
					x := []float64{0}
					if err := Protect(r, 0, &x); err != nil {
						return err
					}
					var mine []string
					for it := 1; it <= 65; it++ {
						x[0] = float64(it)
						lvl, err := r.Snapshot()
						if err != nil {
							return err
						}
						if lvl > 0 {
							mine = append(mine, fmt.Sprintf("it%d:L%d", it, lvl))
						}
						// Ranks run at slightly different speeds.
						clk.Advance(time.Second + time.Duration(r.c.Rank()%2)*7*time.Millisecond)
					}
					mu.Lock()
					taken[r.c.Rank()] = mine
					mu.Unlock()
					return nil
				}, WithLevels(global4{}))
			}())
			for r := 1; r < n; r++ {
				assert.Equal(t, taken[0], taken[r], "rank %d decided differently", r)
			}
			assert.Equal(t, []string{"it11:L1", "it21:L1", "it31:L4", "it41:L1", "it51:L1", "it61:L4"}, taken[0])
		})
	}
}

func TestSnapshotOnRestartRecovers(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		x := []int32{int32(r.c.Rank()), 42}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		return r.Checkpoint(5, 1)
	}))
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		var x []int32
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		lvl, err := r.Snapshot()
		if err != nil || lvl != 0 {
			return fmt.Errorf("snapshot on restart: %d %v", lvl, err)
		}
		if len(x) != 2 || x[0] != int32(r.c.Rank()) || x[1] != 42 {
			return fmt.Errorf("not recovered: %v", x)
		}
		// Later calls tick (no interval configured: never checkpoint).
		for i := 0; i < 5; i++ {
			if lvl, err := r.Snapshot(); err != nil || lvl != 0 {
				return fmt.Errorf("tick: %d %v", lvl, err)
			}
		}
		// A new checkpoint supersedes the one restarted from: Recover and
		// RecoverVar now read it (FTI). Status is Fresh since the
		// Snapshot recovered; Recovered still names the restart.
		x[1] = 43
		if err := r.Checkpoint(6, 1); err != nil {
			return err
		}
		x[1] = 0
		if err := r.RecoverVar(0); err != nil || x[1] != 43 {
			return fmt.Errorf("RecoverVar after a new checkpoint: %v %v", x, err)
		}
		if r.Recovered() == nil || r.Recovered().ID != 5 || r.Status() != Fresh {
			return fmt.Errorf("restart info: %v %v", r.Recovered(), r.Status())
		}
		return nil
	}))
}

// ftiSnapshot is FTI v1.6's level choice in FTI_Snapshot, written from
// the rule and independent of ftigo's code: minutes[k] is the minute
// counter at check k, intv[i] level i's interval in minutes (0: off). At
// every check each level whose counter division is at least 1 advances
// its counter (starting at 1) and becomes the level; the checkpoint is
// taken at the last (highest) such level. It returns the level taken at
// each check (0: none), and whether some level is still behind after it.
func ftiSnapshot(intv [5]int64, minutes []int64) (levels []int, behind []bool) {
	ckptCnt := [5]int64{1, 1, 1, 1, 1}
	for _, minuteCnt := range minutes {
		level := -1
		for i := 1; i < 5; i++ {
			if intv[i] > 0 && minuteCnt/(ckptCnt[i]*intv[i]) >= 1 {
				level = i
				ckptCnt[i]++
			}
		}
		lag := false
		for i := 1; i < 5; i++ {
			lag = lag || intv[i] > 0 && minuteCnt/(ckptCnt[i]*intv[i]) >= 1
		}
		levels = append(levels, max(level, 0))
		behind = append(behind, lag)
	}
	return levels, behind
}

// TestFTISnapshotReference pins the reference to the example worked out
// by hand from FTI's code: L1 every 2 and L2 every 3 minutes give L1@2,
// L2@3, L1@4, L2@6, L1@8, L2@9, L1@10, L2@12 (L1's own schedule is not
// reset when L2 fires at 6 and 12).
func TestFTISnapshotReference(t *testing.T) {
	var minutes []int64
	for m := int64(1); m <= 12; m++ {
		minutes = append(minutes, m)
	}
	got, _ := ftiSnapshot([5]int64{0, 2, 3, 0, 0}, minutes)
	assert.Equal(t, []int{0, 1, 2, 1, 0, 2, 0, 1, 2, 1, 0, 2}, got)
	// A counter behind by several intervals catches up one per check.
	got, behind := ftiSnapshot([5]int64{0, 2, 0, 0, 0}, []int64{1, 7, 8, 9, 10, 11})
	assert.Equal(t, []int{0, 1, 1, 1, 1, 1}, got)
	assert.Equal(t, []bool{false, true, true, true, true, false}, behind)
}

// snapCheck is one check as rank 0 logged it.
type snapCheck struct {
	iter  int64
	clock time.Duration
	level int
}

// TestSnapshotFollowsFTI drives Snapshot with fake clocks (two ranks, one
// running slightly slower) and compares the levels it takes with FTI's
// rule computed by ftiSnapshot: over the clock at each of ftigo's checks,
// and, where iterations have a constant length (so the predicted checks
// land on every deadline), over the clock at every iteration. Intervals
// are FTI minutes, minutes divided by fast_forward, or Go durations; one
// unit of the reference is the largest duration dividing every interval.
func TestSnapshotFollowsFTI(t *testing.T) {
	const iters = 60
	steady := func(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }
	tests := []struct {
		name   string
		config string        // [basic] and [advanced] lines
		unit   time.Duration // the reference's minute
		step   func(it int) time.Duration
		slow   bool // some iterations are longer than an interval
	}{
		{"L1=2 L2=3", "ckpt_l1 = 2\nckpt_l2 = 3\n", time.Minute, steady(time.Minute), false},
		{"equal L1=L4=2", "ckpt_l1 = 2\nckpt_l4 = 2\n", time.Minute, steady(time.Minute), false},
		{"all equal 3", "ckpt_l1 = 3\nckpt_l2 = 3\nckpt_l3 = 3\nckpt_l4 = 3\n", time.Minute, steady(time.Minute), false},
		{"1 2 4 8", "ckpt_l1 = 1\nckpt_l2 = 2\nckpt_l3 = 4\nckpt_l4 = 8\n", time.Minute, steady(time.Minute), false},
		{"L2=5 L4=7 half-minute iterations", "ckpt_l2 = 5\nckpt_l4 = 7\n", time.Minute, steady(30 * time.Second), false},
		{"L1=4 L3=6 fast_forward 4", "ckpt_l1 = 4\nckpt_l3 = 6\n[advanced]\nfast_forward = 4\n", 15 * time.Second, steady(15 * time.Second), false},
		{"sub-minute 20s 30s 1m", "ckpt_l1 = 20s\nckpt_l2 = 30s\nckpt_l4 = 1m\n", 10 * time.Second, steady(10 * time.Second), false},
		{"L1 every iteration, L2 every other", "ckpt_l1 = 1\nckpt_l2 = 2\n", time.Minute, steady(time.Minute), false},
		{"slow iteration skips boundaries", "ckpt_l1 = 2\nckpt_l2 = 5\n", time.Minute, func(it int) time.Duration {
			if it == 9 {
				return 11 * time.Minute
			}
			return time.Minute
		}, true},
		{"slow phase", "ckpt_l1 = 2\nckpt_l3 = 3\nckpt_l4 = 6\n", time.Minute, func(it int) time.Duration {
			if it >= 20 && it < 26 {
				return 5 * time.Minute
			}
			return time.Minute
		}, true},
		{"iterations longer than every interval", "ckpt_l1 = 1\nckpt_l2 = 2\n", time.Minute, steady(3 * time.Minute), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parsed, err := ParseConfig("snap.fti", []byte("[basic]\n"+tc.config))
			require.NoError(t, err)
			cfg := testConfig(t.TempDir(), 1)
			cfg.GroupSize = 2
			cfg.Verbosity = 1
			cfg.Interval, cfg.FastForward = parsed.Interval, parsed.FastForward
			var intv [5]int64
			for l := 1; l <= 4; l++ {
				iv := cfg.Interval[l] / time.Duration(cfg.FastForward)
				require.Zero(t, iv%tc.unit, "level %d's interval is a whole number of units", l)
				intv[l] = int64(iv / tc.unit)
			}

			core, logs := observer.New(zapcore.DebugLevel)
			const n = 2
			clocks := []*fakeClock{{t: time.Unix(1000, 0)}, {t: time.Unix(5000, 0)}}
			var mu sync.Mutex
			taken := make([][]int, n)             // level per iteration, per rank
			elapsed := make([][]time.Duration, n) // clock at each call, per rank
			require.NoError(t, worldClocks(t, n, cfg, clocks, func(r *Runtime, clk *fakeClock) error {
				x := []float64{0}
				if err := Protect(r, 0, &x); err != nil {
					return err
				}
				lv := make([]int, iters+1)
				el := make([]time.Duration, iters+1)
				start := clk.Now()
				for it := 1; it <= iters; it++ {
					x[0] = float64(it)
					el[it] = clk.Now().Sub(start)
					lvl, err := r.Snapshot()
					if err != nil {
						return err
					}
					lv[it] = lvl
					// Rank 1 runs 1 ms per iteration slower.
					clk.Advance(tc.step(it) + time.Duration(r.c.Rank())*time.Millisecond)
				}
				mu.Lock()
				taken[r.c.Rank()], elapsed[r.c.Rank()] = lv, el
				mu.Unlock()
				return nil
			}, WithLevels(asLevel{id: levels.L2}, asLevel{id: levels.L3}, asLevel{id: levels.L4}), WithLogger(zap.New(core))))
			assert.Equal(t, taken[0], taken[1], "the ranks decided differently")

			var checks []snapCheck
			for _, e := range logs.FilterMessage("snapshot: checking whether a level is due").AllUntimed() {
				f := e.ContextMap()
				checks = append(checks, snapCheck{iter: f["iteration"].(int64), clock: f["clock"].(time.Duration), level: int(f["ckpt-level"].(int64))})
			}
			require.NotEmpty(t, checks)

			// 1. At ftigo's checks, FTI's rule over the agreed clock.
			minutes := make([]int64, len(checks))
			for k, c := range checks {
				minutes[k] = int64(c.clock / tc.unit)
				want := max(elapsed[0][c.iter], elapsed[1][c.iter])
				require.Equal(t, want, c.clock, "check at iteration %d: the agreed clock is the slowest rank's", c.iter)
			}
			want, behind := ftiSnapshot(intv, minutes)
			got := make([]int, len(checks))
			isCheck := map[int64]bool{}
			for k, c := range checks {
				got[k] = taken[0][c.iter]
				isCheck[c.iter] = true
				assert.Equal(t, c.level, got[k], "logged and returned level at iteration %d", c.iter)
			}
			assert.Equal(t, want, got, "levels at the checks (minutes %v)", minutes)
			for it := 1; it <= iters; it++ {
				if !isCheck[int64(it)] {
					assert.Zero(t, taken[0][it], "checkpoint at iteration %d, which is no check", it)
				}
			}
			// 2. A level behind its schedule is checked again at the next iteration.
			for k := range checks {
				if behind[k] && checks[k].iter < iters {
					require.Greater(t, len(checks), k+1)
					assert.Equal(t, checks[k].iter+1, checks[k+1].iter, "a level is behind after the check at iteration %d", checks[k].iter)
				}
			}
			// 3. With constant iterations, ftigo's checks catch every deadline:
			// the same levels as checking at every iteration.
			if !tc.slow {
				var all []int64
				for it := 2; it <= iters; it++ {
					all = append(all, int64(max(elapsed[0][it], elapsed[1][it])/tc.unit))
				}
				every, _ := ftiSnapshot(intv, all)
				assert.Equal(t, every, taken[0][2:], "levels per iteration")
			}
			fired := 0
			for _, l := range taken[0] {
				if l > 0 {
					fired++
				}
			}
			assert.Greater(t, fired, 3, "the case exercises the schedule")
			if tc.slow {
				assert.Contains(t, behind, true, "the slow case puts a level behind")
			}
		})
	}
}

// asLevel is a stand-in level for scheduling tests: L1's storage under another number.
type asLevel struct {
	levels.Local1
	id levels.ID
}

func (l asLevel) ID() levels.ID { return l.id }
