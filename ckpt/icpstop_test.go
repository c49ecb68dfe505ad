package ckpt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/policy"
	"github.com/ftigo/ftigo/vfd"
)

// An incremental checkpoint taken once a stop was agreed (the halt file,
// seen by NeedCheckpoint) is the stop's final checkpoint, as Checkpoint's
// would be: taken at the level the stop chose (L4, not the L1 asked
// for), committed there when FinalizeICP returns (in snapshot mode too,
// though the background job is held a while), and the stop is finished:
// ShouldExit, StopLevel, StopReason, the halt file removed, the launch
// recorded as stopped. The relaunch restarts from it, with the value at
// AddVarICP.
func TestStopICP(t *testing.T) {
	for _, snap := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", snap), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 1)
			cfg.Snapshot = snap
			cfg.Policy.StopGrace = time.Minute
			seedHistory(t, cfg.MetaDir, map[int]time.Duration{1: time.Second, 4: 2 * time.Second})
			d := vfd.Sec2{}
			require.NoError(t, WriteHalt(d, cfg.MetaDir, HaltRequest{Reason: "icp stop"}))
			const n = 2
			stoppedAt := make([]int, n)
			slow := func(o *options) { o.postStart = func() { time.Sleep(100 * time.Millisecond) } }
			require.NoError(t, comm.Run(n, func(c comm.Comm) error {
				clk := &fakeClock{t: time.Unix(1000, 0)}
				r, err := Init(cfg, c, WithLogger(zaptest.NewLogger(t)), WithWarnings(tbWriter{t}), WithClock(clk.Now),
					WithSignals(make(chan os.Signal, 1)), slow)
				if err != nil {
					return err
				}
				defer r.Close()
				x := []float64{0}
				if err := Protect(r, 0, &x); err != nil {
					return err
				}
				for it := 1; it <= 10; it++ {
					x[0] = float64(it)
					need, err := r.NeedCheckpoint()
					if err != nil {
						return err
					}
					if !need {
						clk.Advance(time.Second)
						continue
					}
					if err := r.BeginICP(int64(it), 1, true); err != nil {
						return err
					}
					if snap && (r.icp == nil || !r.icp.snap) {
						return fmt.Errorf("rank %d: the final iCP is not staged", c.Rank())
					}
					if err := r.AddVarICP(0); err != nil {
						return err
					}
					x[0] = -1 // the solver goes on
					if err := r.FinalizeICP(); err != nil {
						return err
					}
					switch {
					case !r.ShouldExit() || r.StopLevel() != 4:
						return fmt.Errorf("rank %d: after the final iCP ShouldExit %v, StopLevel %d", c.Rank(), r.ShouldExit(), r.StopLevel())
					case r.post.running != nil:
						return fmt.Errorf("rank %d: the final iCP returned with its background job in flight", c.Rank())
					case r.last == nil || r.last.ID != int64(it) || r.last.Level != levels.L4:
						return fmt.Errorf("rank %d: newest committed %v, want %d at L4", c.Rank(), r.last, it)
					case snap && (r.CheckpointTimes().ID != int64(it) || !r.CheckpointTimes().Durable):
						return fmt.Errorf("rank %d: times %+v", c.Rank(), r.CheckpointTimes())
					case c.Rank() == 0 && !strings.Contains(r.StopReason(), "icp stop"):
						return fmt.Errorf("stop reason %q", r.StopReason())
					}
					stoppedAt[c.Rank()] = it
					return nil
				}
				return nil
			}, comm.WithTimeout(60*time.Second)))
			require.NotZero(t, stoppedAt[0], "the stop was never agreed")
			sameAll(t, stoppedAt, stoppedAt[0])
			_, err := ReadHalt(d, cfg.MetaDir)
			assert.ErrorIs(t, err, fs.ErrNotExist, "the halt file is removed")
			h := readHistory(t, cfg.MetaDir)
			l := h.Launches[len(h.Launches)-1]
			assert.Equal(t, policy.EndStop, l.Ending)
			assert.Contains(t, l.StopReason, "icp stop")
			last := h.Checkpoints[len(h.Checkpoints)-1]
			assert.Equal(t, int64(stoppedAt[0]), last.ID)
			assert.True(t, last.Final)
			assert.Equal(t, 4, last.Level)
			got, lvl := relaunch(t, n, cfg)
			assert.Equal(t, float64(stoppedAt[0]), got, "the value at AddVarICP")
			assert.Equal(t, Level(4), lvl)
		})
	}
}

// A variable rank 1 did not add fails FinalizeICP on every rank, and
// nothing is committed, the same way on the file path and in snapshot
// mode (as FTI, which returns FTI_NSCS on the rank that missed it): the
// error wraps ErrICP on rank 1 only; every rank gets the same agreed
// error (a *comm.AgreedError) naming rank 1 and the variable.
func TestICPMissingModes(t *testing.T) {
	for _, snap := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", snap), func(t *testing.T) {
			core := vfd.NewCore()
			cfg := snapConfig(false)
			cfg.Snapshot = snap
			errs := make([]error, 4)
			require.NoError(t, comm.Run(4, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
				if err != nil {
					return err
				}
				defer r.Close()
				a, b, x := icpVars(c.Rank(), 1)
				ver := []int64{1}
				if err := protectICPVars(r, &a, &b, &x, &ver); err != nil {
					return err
				}
				if err := errors.Join(r.Checkpoint(1, 2), r.CheckpointWait()); err != nil {
					return err
				}
				a, b, x = icpVars(c.Rank(), 2)
				ver[0] = 2
				if err := r.BeginICP(2, 2, true); err != nil {
					return err
				}
				if r.icp.snap != snap {
					return fmt.Errorf("rank %d: staged %v, want %v", c.Rank(), r.icp.snap, snap)
				}
				for _, id := range []int{0, 1, 2, 3} {
					if id == 2 && c.Rank() == 1 {
						continue // rank 1 forgets variable 2
					}
					if err := r.AddVarICP(id); err != nil {
						return err
					}
				}
				errs[c.Rank()] = r.FinalizeICP()
				if r.post.running != nil || r.icp != nil {
					return fmt.Errorf("rank %d: a failed iCP left work behind", c.Rank())
				}
				if err := r.CheckpointWait(); err != nil {
					return fmt.Errorf("rank %d: CheckpointWait after a failed iCP: %w", c.Rank(), err)
				}
				if cm := r.eng.Committed(); len(cm) != 1 || cm[0].ID != 1 {
					return fmt.Errorf("rank %d: the failed iCP changed what is committed", c.Rank())
				}
				return nil
			}, comm.WithTimeout(30*time.Second)))
			for rank, err := range errs {
				require.Error(t, err, "rank %d", rank)
				assert.Equal(t, rank == 1, errors.Is(err, ErrICP), "rank %d: errors.Is(ErrICP): %v", rank, err)
				var ae *comm.AgreedError
				assert.True(t, errors.As(err, &ae), "rank %d: %v", rank, err)
				assert.Equal(t, errs[0].Error(), err.Error(), "rank %d", rank)
				assert.Contains(t, err.Error(), "failed on rank 1: ")
				assert.Contains(t, err.Error(), "protected variables [2] were not added")
			}
			icpRecover(t, cfg, core, 1, levels.L2)
		})
	}
}
