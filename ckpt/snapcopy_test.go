package ckpt

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// snapConfig is asyncConfig's 4-rank, 4-node layout in snapshot mode.
func snapConfig(dcp bool) Config {
	cfg := testConfig("/", 1)
	cfg.GroupSize = 2
	cfg.Snapshot = true
	if dcp {
		cfg.EnableDCP, cfg.DCPBlockSize, cfg.DCPStackSize = true, 512, 5
	}
	return cfg
}

// scribble overwrites every protected variable of recoverAll's layout.
func scribble(x []uint64, ver []int64) {
	for i := range x {
		x[i] = 0xdeadbeef
	}
	ver[0] = 999
}

// TestSnapshotLevels takes checkpoints at L1..L4 (full and dCP) in
// snapshot mode. The poster is held until the solver has overwritten
// every protected variable right after Checkpoint returned: the
// checkpoint still holds the values at the call, bit for bit. Nothing is
// committed until the background work is done; then the checkpoint is at
// its level, with no L1 commit on the way.
func TestSnapshotLevels(t *testing.T) {
	for _, dcp := range []bool{false, true} {
		for lvl := 1; lvl <= 4; lvl++ {
			t.Run(fmt.Sprintf("L%d/dcp=%v", lvl, dcp), func(t *testing.T) {
				core := vfd.NewCore()
				cfg := snapConfig(dcp)
				level := lvl
				if dcp {
					level += dcpLevelOffset
				}
				var gmu sync.Mutex
				var gate chan struct{}
				hold := func(o *options) {
					o.postStart = func() {
						gmu.Lock()
						g := gate
						gmu.Unlock()
						<-g
					}
				}
				times := make([]CheckpointTimes, 4)
				require.NoError(t, comm.Run(4, func(c comm.Comm) error {
					r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()), hold)
					if err != nil {
						return err
					}
					defer r.Close()
					var x []uint64
					ver := []int64{0}
					if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
						return err
					}
					for v := 1; v <= 3; v++ {
						x, ver[0] = version(c.Rank(), v), int64(v)
						if v == 3 {
							x[0]++ // a small change: a dCP layer writes one block
						}
						if c.Rank() == 0 {
							gmu.Lock()
							gate = make(chan struct{})
							gmu.Unlock()
						}
						if err := c.Barrier(); err != nil {
							return err
						}
						if err := r.Checkpoint(int64(v), level); err != nil {
							return err
						}
						scribble(x, ver)
						if err := c.Barrier(); err != nil {
							return err
						}
						if c.Rank() == 0 {
							close(gate)
						}
						if err := r.CheckpointWait(); err != nil {
							return err
						}
						tm := r.CheckpointTimes()
						if tm.ID != int64(v) || !tm.Durable || tm.ToDurable < tm.Blocked || tm.Background <= 0 {
							return fmt.Errorf("rank %d: times %+v", c.Rank(), tm)
						}
						times[c.Rank()] = tm
						cm := r.eng.Committed()
						newest := cm[len(cm)-1]
						if newest.ID != int64(v) || newest.Level != levels.ID(lvl) {
							return fmt.Errorf("rank %d: newest committed %d at %v", c.Rank(), newest.ID, newest.Level)
						}
						if dcp && v > 1 && newest.DCP == nil {
							return fmt.Errorf("rank %d: checkpoint %d is not differential", c.Rank(), v)
						}
					}
					return nil
				}, comm.WithTimeout(60*time.Second)))
				for rank, tm := range times {
					assert.Equal(t, int64(3), tm.ID, "rank %d", rank)
					assert.Positive(t, tm.Copy, "rank %d", rank)
				}
				if lvl > 1 {
					lose(t, core, cfg, lvl)
				}
				got, err := recoverAllSnap(t, cfg, core)
				require.NoError(t, err)
				assert.Equal(t, []int{3, 3, 3, 3}, got)
			})
		}
	}
}

// recoverAllSnap is recoverAll for version 3 of TestSnapshotLevels,
// whose first element was changed.
func recoverAllSnap(t *testing.T, cfg Config, d vfd.Driver) ([]int, error) {
	got := make([]int, 4)
	err := comm.Run(4, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDriver(d), WithLogger(zap.NewNop()))
		if err != nil {
			return err
		}
		defer r.Close()
		var x []uint64
		ver := []int64{0}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
			return err
		}
		if err := r.Recover(); err != nil {
			return err
		}
		want := version(c.Rank(), int(ver[0]))
		want[0]++
		if !assert.ObjectsAreEqual(want, x) {
			return fmt.Errorf("rank %d: data is not exactly version %d at the call", c.Rank(), ver[0])
		}
		got[c.Rank()] = int(ver[0])
		return nil
	}, comm.WithTimeout(20*time.Second))
	return got, err
}

// TestSnapshotCrash crashes (or fails) at every file operation of the
// background work of checkpoint 2, taken in snapshot mode at L1..L4
// over checkpoint 1, with every protected variable overwritten right
// after Checkpoint returned. A restart after losing what the level
// protects against recovers exactly version 1 or exactly version 2 as
// it was at the call; with a failure (no crash) the ranks agree and a
// failed background write leaves version 1.
func TestSnapshotCrash(t *testing.T) {
	for lvl := 1; lvl <= 4; lvl++ {
		for _, crash := range []bool{true, false} {
			name := fmt.Sprintf("L%d/crash=%v", lvl, crash)
			t.Run(name, func(t *testing.T) {
				cfg := snapConfig(false)
				stride := 1
				if raceEnabled {
					stride = 7
				}
				outcomes := map[string]int{}
				for k := 0; ; k += stride {
					core := vfd.NewCore()
					sync1 := cfg
					sync1.Snapshot = false
					commitVersion1(t, 4, sync1, core, lvl, WithLogger(zap.NewNop()))
					inj := &crashInjector{core: core, crash: crash, k: k}
					inj.base.Store(-1)
					fault := vfd.NewFault(core, inj)
					var mu sync.Mutex
					var waitErrs []error
					armed := make(chan struct{})
					hold := func(o *options) { o.postStart = func() { <-armed } }
					runErr := comm.Run(4, func(c comm.Comm) error {
						r, err := Init(cfg, c, WithDriver(fault), WithLogger(zap.NewNop()), hold)
						if err != nil {
							return err
						}
						defer r.Close()
						x, ver := version(c.Rank(), 2), []int64{2}
						if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
							return err
						}
						if err := r.Checkpoint(2, lvl); err != nil {
							return err
						}
						scribble(x, ver)
						_ = c.Barrier()
						if c.Rank() == 0 {
							inj.base.Store(int64(fault.Ops()))
							close(armed)
						}
						werr := r.CheckpointWait()
						mu.Lock()
						waitErrs = append(waitErrs, werr)
						mu.Unlock()
						return nil
					}, comm.WithTimeout(30*time.Second))
					require.NoError(t, runErr)
					if !inj.hit {
						t.Logf("%s: %d operations in the background, outcomes %v", name, k, outcomes)
						require.Greater(t, k, 5, "the background work did file operations")
						break
					}
					after := vfd.Driver(core)
					if crash {
						after = inj.clone
					} else {
						for _, e := range waitErrs {
							if waitErrs[0] == nil {
								require.NoError(t, e, "op %d: ranks disagree", k)
							} else {
								require.ErrorIs(t, e, ErrBackground, "op %d", k)
								assert.Equal(t, waitErrs[0].Error(), e.Error(), "op %d", k)
							}
						}
					}
					if lvl > 1 {
						lose(t, after, cfg, lvl)
					}
					got, err := recoverAll(t, 4, cfg, after)
					require.NoError(t, err, "op %d", k)
					requireSameVersion(t, got, k)
					require.Contains(t, []int{1, 2}, got[0], "op %d", k)
					if !crash {
						want := 2
						if waitErrs[0] != nil {
							want = 1
						}
						require.Equal(t, want, got[0], "op %d: background result %v", k, waitErrs[0])
					}
					outcomes[fmt.Sprintf("v%d", got[0])]++
				}
				if !crash {
					assert.Positive(t, outcomes["v1"], "some failure left version 1")
				}
				assert.Positive(t, outcomes["v2"], "some run committed version 2")
			})
		}
	}
}

// TestSnapshotBudget gives a budget smaller than the data: rank 0 says
// so once, every checkpoint is taken on the solver's path (committed on
// return), and the run restarts from the last one.
func TestSnapshotBudget(t *testing.T) {
	core := vfd.NewCore()
	cfg := snapConfig(false)
	cfg.SnapshotBudget = 64 // bytes: version() is hundreds
	obs, logs := observer.New(zapcore.WarnLevel)
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		lg := zap.NewNop()
		if c.Rank() == 0 {
			lg = zap.New(obs)
		}
		r, err := Init(cfg, c, WithDriver(core), WithLogger(lg))
		if err != nil {
			return err
		}
		defer r.Close()
		var x []uint64
		ver := []int64{0}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
			return err
		}
		for v := 1; v <= 3; v++ {
			x, ver[0] = version(c.Rank(), v), int64(v)
			if err := r.Checkpoint(int64(v), 2); err != nil {
				return err
			}
			if r.post.running != nil || r.last == nil || r.last.ID != int64(v) || r.last.Level != levels.L2 {
				return fmt.Errorf("rank %d: checkpoint %d not committed on the solver's path", c.Rank(), v)
			}
			if tm := r.CheckpointTimes(); tm.ID != 0 {
				return fmt.Errorf("rank %d: a fallback checkpoint reported snapshot times %+v", c.Rank(), tm)
			}
		}
		return nil
	}, comm.WithTimeout(30*time.Second)))
	var said int
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "snapshot_budget") {
			said++
			assert.Contains(t, e.Message, "checkpoint 1")
			assert.Contains(t, e.Message, "64")
		}
	}
	assert.Equal(t, 1, said, "the fallback is said once: %v", logs.All())
	lose(t, core, cfg, 2)
	got, err := recoverAll(t, 4, cfg, core)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 3, 3, 3}, got)
}

// TestSnapshotENOSPC fails every write on global storage while
// checkpoint 2 (L4, snapshot mode) is written in the background: the
// failure reaches every rank at CheckpointWait, then once at the next
// Checkpoint, which takes nothing; checkpoint 1 stays committed at L4
// and a restart after losing every node recovers it.
func TestSnapshotENOSPC(t *testing.T) {
	core := vfd.NewCore()
	cfg := snapConfig(false)
	var broken sync.Mutex
	failing := false
	global := vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
		broken.Lock()
		defer broken.Unlock()
		if failing && op.Kind == vfd.OpWrite {
			return fmt.Errorf("write %s: no space left on device", op.Path)
		}
		return nil
	}))
	setFailing := func(c comm.Comm, on bool) error {
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			broken.Lock()
			failing = on
			broken.Unlock()
		}
		return c.Barrier()
	}
	errs := make([]error, 4)
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDrivers(core, global, core), WithLogger(zap.NewNop()))
		if err != nil {
			return err
		}
		defer r.Close()
		var x []uint64
		ver := []int64{0}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
			return err
		}
		x, ver[0] = version(c.Rank(), 1), 1
		if err := errors.Join(r.Checkpoint(1, 4), r.CheckpointWait(), setFailing(c, true)); err != nil {
			return err
		}
		x, ver[0] = version(c.Rank(), 2), 2
		if err := r.Checkpoint(2, 4); err != nil {
			return fmt.Errorf("rank %d: the copy itself failed: %w", c.Rank(), err)
		}
		errs[c.Rank()] = r.CheckpointWait()
		if err := setFailing(c, false); err != nil {
			return err
		}
		cm := r.eng.Committed()
		if len(cm) != 1 || cm[0].ID != 1 || cm[0].Level != levels.L4 {
			return fmt.Errorf("rank %d: committed %d checkpoints after the failure", c.Rank(), len(cm))
		}
		x, ver[0] = version(c.Rank(), 3), 3
		if err := r.Checkpoint(3, 4); !errors.Is(err, ErrBackground) {
			return fmt.Errorf("rank %d: Checkpoint after the failure: %v", c.Rank(), err)
		}
		if r.post.running != nil {
			return fmt.Errorf("rank %d: a checkpoint was taken with the failure report", c.Rank())
		}
		return nil // killed here: checkpoint 1 must be what a restart finds
	}, comm.WithTimeout(30*time.Second)))
	for rank, err := range errs {
		require.ErrorIs(t, err, ErrBackground, "rank %d", rank)
		assert.Equal(t, errs[0].Error(), err.Error(), "rank %d: the same error everywhere", rank)
		assert.Contains(t, err.Error(), "checkpoint 2")
		assert.Contains(t, err.Error(), "no space left on device")
	}
	lose(t, core, cfg, 4)
	got, err := recoverAll(t, 4, cfg, core)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 1, 1, 1}, got)
}

// TestSnapshotConfigKeys reads ckpt_snapshot and snapshot_budget and
// writes them back.
func TestSnapshotConfigKeys(t *testing.T) {
	cfg, err := ParseConfig("cfg", []byte("[basic]\nckpt_snapshot = 1\nsnapshot_budget = 1048576\n"))
	require.NoError(t, err)
	assert.True(t, cfg.Snapshot)
	assert.Equal(t, int64(1<<20), cfg.SnapshotBudget)
	_, err = ParseConfig("cfg", []byte("[basic]\nsnapshot_budget = -1\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "snapshot_budget")
	assert.Positive(t, defaultSnapBudget(4))
}
