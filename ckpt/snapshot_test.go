package ckpt

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/levels"
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
