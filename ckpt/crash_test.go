package ckpt

import (
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

var errCrash = errors.New("simulated power cut")

// crashInjector arms at a base op index: at op base+k it takes a crash
// clone of the core (what a power cut at that instant leaves) and from
// then on fails every operation; in fail mode it fails op base+k only.
type crashInjector struct {
	core    *vfd.Core
	crash   bool
	k       int
	base    atomic.Int64 // -1: not armed
	clone   *vfd.Core
	crashed bool
	hit     bool
}

func (ci *crashInjector) MaybeError(op vfd.Op) error {
	base := int(ci.base.Load())
	if base < 0 {
		return nil
	}
	if ci.crashed {
		return errCrash
	}
	if op.Index == base+ci.k {
		ci.hit = true
		if ci.crash {
			ci.clone = ci.core.CrashClone()
			ci.crashed = true
			return errCrash
		}
		return fmt.Errorf("injected failure of %v %s", op.Kind, op.Path)
	}
	return nil
}

// version is the state of checkpoint v on rank r.
func version(r, v int) []uint64 {
	out := make([]uint64, 40+v*7+r)
	for i := range out {
		out[i] = uint64(v)<<56 | uint64(r)<<40 | uint64(i)
	}
	return out
}

// commitVersion1 runs n ranks on d that protect version 1 (the data
// and the version number, as recoverAll reads them) and commit it as
// checkpoint 1 at level; every crash-at-op test starts from it.
func commitVersion1(t *testing.T, n int, cfg Config, d vfd.Driver, level int, opts ...Option) {
	t.Helper()
	opts = append([]Option{WithDriver(d)}, opts...)
	require.NoError(t, comm.Run(n, func(c comm.Comm) error {
		r, err := Init(cfg, c, opts...)
		if err != nil {
			return err
		}
		defer r.Close()
		x, ver := version(c.Rank(), 1), []int64{1}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
			return err
		}
		return r.Checkpoint(1, level)
	}))
}

// requireSameVersion fails the test unless every rank recovered the same
// version (got as recoverAll returns it) after the crash at op k.
func requireSameVersion(t *testing.T, got []int, k int) {
	t.Helper()
	for _, v := range got {
		require.Equal(t, got[0], v, "op %d: ranks recovered different versions %v", k, got)
	}
}

// recoverAll restarts on d and returns which version every rank recovered
// (0 for a fresh run), checking the data bit for bit.
func recoverAll(t *testing.T, n int, cfg Config, d vfd.Driver) ([]int, error) {
	got := make([]int, n)
	err := comm.Run(n, func(c comm.Comm) error {
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
		if r.Status() == Fresh {
			return nil
		}
		if err := r.Recover(); err != nil {
			return err
		}
		v := int(ver[0])
		if !assert.ObjectsAreEqual(version(c.Rank(), v), x) {
			return fmt.Errorf("rank %d: data is not exactly version %d", c.Rank(), v)
		}
		got[c.Rank()] = v
		// The restarted run can checkpoint again.
		x, ver[0] = version(c.Rank(), 9), 9
		return r.Checkpoint(9, 1)
	}, comm.WithTimeout(20*time.Second))
	return got, err
}

// TestCrashAtEveryOp crashes (or fails) at every file operation of a
// checkpoint and checks that a restart recovers exactly the previous
// committed checkpoint or exactly the new one, on every rank.
func TestCrashAtEveryOp(t *testing.T) {
	type tc struct {
		n, level int
		crash    bool
	}
	var cases []tc
	for _, n := range []int{1, 4, 8} {
		cases = append(cases, tc{n, 1, true})
		if n < 8 {
			cases = append(cases, tc{n, 1, false}) // 8 ranks: crash mode only, to keep the suite fast
		}
	}
	for _, l := range []int{2, 3, 4} {
		cases = append(cases, tc{4, l, true}, tc{4, l, false})
	}
	for _, tc := range cases {
		n, level, crash := tc.n, tc.level, tc.crash
		{
			name := fmt.Sprintf("ranks=%d/L%d/crash=%v", n, level, crash)
			t.Run(name, func(t *testing.T) {
				cfg := testConfig("/", min(n, 2))
				if level == 2 || level == 3 {
					cfg.NodeSize, cfg.GroupSize = 1, 2
				}
				outcomes := map[string]int{}
				stride := 1
				if raceEnabled && (level > 1 || n > 4) {
					stride = 7 // every 7th op under -race; every op otherwise
				}
				for k := 0; ; k += stride {
					core := vfd.NewCore()
					// Run 1 commits version 1.
					commitVersion1(t, n, cfg, core, level)
					inj := &crashInjector{core: core, crash: crash, k: k}
					inj.base.Store(-1)
					fault := vfd.NewFault(core, inj)
					var mu sync.Mutex
					var ckptErrs []error
					runErr := comm.Run(n, func(c comm.Comm) error {
						r, err := Init(cfg, c, WithDriver(fault), WithLogger(zap.NewNop()))
						if err != nil {
							return err
						}
						defer r.Close()
						x, ver := version(c.Rank(), 2), []int64{2}
						if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
							return err
						}
						if err := c.Barrier(); err != nil {
							return err
						}
						if c.Rank() == 0 {
							inj.base.Store(int64(fault.Ops()))
						}
						if err := c.Barrier(); err != nil {
							return err
						}
						err = r.Checkpoint(2, level)
						mu.Lock()
						ckptErrs = append(ckptErrs, err)
						mu.Unlock()
						if crash {
							return err
						}
						return nil
					}, comm.WithTimeout(20*time.Second))
					if !inj.hit {
						require.NoError(t, runErr)
						t.Logf("%s: %d operations per checkpoint, outcomes %v", name, k, outcomes)
						break
					}
					after := vfd.Driver(core)
					if crash {
						// A crash after the commit point (while deleting the
						// superseded checkpoint) leaves Checkpoint successful.
						after = inj.clone
					} else {
						require.NoError(t, runErr, "op %d", k)
						require.Len(t, ckptErrs, n)
						for _, e := range ckptErrs {
							if ckptErrs[0] == nil {
								require.NoError(t, e, "op %d: ranks disagree", k)
							} else {
								require.Error(t, e, "op %d: ranks disagree", k)
								assert.Equal(t, ckptErrs[0].Error(), e.Error(), "op %d", k)
							}
						}
					}
					got, err := recoverAll(t, n, cfg, after)
					require.NoError(t, err, "op %d", k)
					requireSameVersion(t, got, k)
					require.Contains(t, []int{1, 2}, got[0], "op %d", k)
					if crash && runErr == nil {
						require.Equal(t, 2, got[0], "op %d: checkpoint reported success but restart found version %d", k, got[0])
					}
					if !crash && ckptErrs[0] == nil {
						require.Equal(t, 2, got[0], "op %d: checkpoint reported success but restart found version %d", k, got[0])
					}
					if !crash && ckptErrs[0] != nil {
						require.Equal(t, 1, got[0], "op %d: checkpoint reported failure but restart found version 2", k)
					}
					outcomes[fmt.Sprintf("v%d", got[0])]++
				}
			})
		}
	}
}

// stageInjector crashes at op k (counted from when it is armed) and
// records the stage the run was in: the version being checkpointed, or
// finalizeStage.
type stageInjector struct {
	core    *vfd.Core
	fail    bool // fail op k only, instead of crashing
	k       int
	base    atomic.Int64 // -1: not armed
	stage   atomic.Int64
	crashed atomic.Bool
	failed  atomic.Bool
	clone   *vfd.Core
	at      int64 // stage at the crash
}

const (
	finalizeStage = 100
	finalizeDone  = 101
)

func (si *stageInjector) MaybeError(op vfd.Op) error {
	base := int(si.base.Load())
	if base < 0 {
		return nil
	}
	if si.crashed.Load() {
		return errCrash
	}
	if op.Index == base+si.k {
		si.at = si.stage.Load()
		if si.fail {
			si.failed.Store(true)
			return fmt.Errorf("injected failure of %v %s", op.Kind, op.Path)
		}
		si.clone = si.core.CrashClone()
		si.crashed.Store(true)
		return errCrash
	}
	return nil
}

// TestCrashAtEveryOpOfARun crashes at every file operation of a whole
// run that restarts from version 1 and checkpoints versions 2, 3 (L1,
// superseding) and 4 (L2), then Finalizes — with and without
// keep_last_ckpt — so that crashes land in commits, in retention
// deletions and their markers, in the L4 flush, the keeping and the
// deletions of Finalize. The restart after the crash never fails, never
// starts fresh while a checkpoint exists, and recovers, bit for bit, the
// version committed before the crashed step or the one it was taking.
//
// In fail mode every file operation fails once instead: every rank gets
// the same error from the call it hit (none hangs), and the restart on
// what is left obeys the same rules.
func TestCrashAtEveryOpOfARun(t *testing.T) {
	const n = 2
	for _, tc := range []struct{ keep, fail bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
		keep, fail := tc.keep, tc.fail
		t.Run(fmt.Sprintf("keep_last=%v/fail=%v", keep, fail), func(t *testing.T) {
			cfg := testConfig("/", 1)
			cfg.GroupSize = 2
			cfg.KeepLastCkpt = keep
			levelOf := map[int]int{1: 1, 2: 1, 3: 1, 4: 2}
			stride := 1
			if raceEnabled {
				stride = 5
			}
			outcomes := map[string]int{}
			for k := 0; ; k += stride {
				core := vfd.NewCore()
				commitVersion1(t, n, cfg, core, 1)
				inj := &stageInjector{core: core, k: k, fail: fail}
				inj.base.Store(-1)
				fault := vfd.NewFault(core, inj)
				var mu sync.Mutex
				var stepErrs []string
				runErr := comm.Run(n, func(c comm.Comm) (err error) {
					defer func() {
						if fail && err != nil {
							mu.Lock()
							stepErrs = append(stepErrs, err.Error())
							mu.Unlock()
							err = nil
						}
					}()
					r, err := Init(cfg, c, WithDriver(fault), WithLogger(zap.NewNop()))
					if err != nil {
						return err
					}
					defer r.Close()
					var x []uint64
					ver := []int64{0}
					if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Recover(), c.Barrier()); err != nil {
						return err
					}
					if c.Rank() == 0 {
						// Armed at stage 2: once past the barrier, rank 1 may
						// start checkpoint 2 before rank 0 labels it.
						inj.stage.Store(2)
						inj.base.Store(int64(fault.Ops()))
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					for v := 2; v <= 4; v++ {
						if c.Rank() == 0 {
							inj.stage.Store(int64(v))
						}
						x, ver[0] = version(c.Rank(), v), int64(v)
						if err := r.Checkpoint(int64(v), levelOf[v]); err != nil {
							return err
						}
					}
					if c.Rank() == 0 {
						inj.stage.Store(finalizeStage)
					}
					return r.Finalize()
				}, comm.WithTimeout(20*time.Second))
				if !inj.crashed.Load() && !inj.failed.Load() {
					require.NoError(t, runErr)
					require.Empty(t, stepErrs)
					t.Logf("%d operations after the restart, outcomes %v", k, outcomes)
					break
				}
				after := inj.clone
				if fail {
					require.NoError(t, runErr, "op %d: a rank hung or failed alone", k)
					for _, e := range stepErrs {
						require.Equal(t, stepErrs[0], e, "op %d: ranks disagree", k)
					}
					after = core
					// The run went on after a failure it was not told about
					// (a logged cleanup), or stopped in the step that failed.
					inj.at = inj.stage.Load()
					if len(stepErrs) == 0 {
						inj.at = finalizeDone
					}
				}
				got, err := recoverAll(t, n, cfg, after)
				require.NoError(t, err, "crash at op %d (stage %d)", k, inj.at)
				requireSameVersion(t, got, k)
				switch {
				case inj.at == finalizeDone && keep:
					require.Equal(t, 4, got[0], "op %d: after a Finalize with keep_last_ckpt", k)
				case inj.at == finalizeDone:
					require.Equal(t, 0, got[0], "op %d: after a Finalize", k)
				case inj.at == finalizeStage && keep:
					require.Equal(t, 4, got[0], "op %d: crash in Finalize with keep_last_ckpt", k)
				case inj.at == finalizeStage:
					require.Contains(t, []int{0, 4}, got[0], "op %d: crash in Finalize", k)
				default:
					require.Contains(t, []int{int(inj.at) - 1, int(inj.at)}, got[0], "op %d: crash while checkpointing %d", k, inj.at)
				}
				outcomes[fmt.Sprintf("stage%d/v%d", inj.at, got[0])]++
			}
		})
	}
}

// TestCrashWhileRepairing crashes at every file operation of a restart
// that repairs a damaged manifest copy (and removes the intent marker
// left beside it): the next restart still finds the checkpoint.
func TestCrashWhileRepairing(t *testing.T) {
	const n = 2
	cfg := testConfig("/", 1)
	for _, target := range []string{"primary", "replica"} {
		t.Run(target, func(t *testing.T) {
			for k := 0; ; k++ {
				core := vfd.NewCore()
				commitVersion1(t, n, cfg, core, 1)
				p := path.Join(cfg.MetaDir, levels.ManifestName(1))
				if target == "replica" {
					p = path.Join(cfg.GlobalDir(runOf(t, cfg, core)), levels.ReplicaName(1))
				}
				require.NoError(t, vfd.WriteFileAtomic(core, p, []byte("ftigo-manifest 1\ngarbage\n")))
				require.NoError(t, vfd.WriteFileAtomic(core, path.Join(cfg.MetaDir, levels.PendingName(1)), nil))
				inj := &stageInjector{core: core, k: k}
				inj.base.Store(0)
				fault := vfd.NewFault(core, inj)
				runErr := comm.Run(n, func(c comm.Comm) error {
					r, err := Init(cfg, c, WithDriver(fault), WithLogger(zap.NewNop()))
					if err != nil {
						return err
					}
					return r.Close()
				}, comm.WithTimeout(20*time.Second))
				if !inj.crashed.Load() {
					require.NoError(t, runErr)
					t.Logf("%d operations in the repairing restart", k)
					break
				}
				got, err := recoverAll(t, n, cfg, inj.clone)
				require.NoError(t, err, "crash at op %d", k)
				require.Equal(t, []int{1, 1}, got, "crash at op %d", k)
			}
		})
	}
}
