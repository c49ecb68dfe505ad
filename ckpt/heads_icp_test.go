package ckpt

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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

// headJob runs the 8-rank job of cfg (4 nodes of a head and an
// application rank) on d, each rank seeing only its own node's directory
// of ckpt_dir, as with node-local disks: fn runs on the 4 application
// ranks with their rank in the application communicator; every head must
// return ErrHead from Init, which headJob checks. opts are more options
// of Init.
func headJob(t *testing.T, cfg Config, d vfd.Driver, fn func(r *Runtime, me int) error, opts ...Option) {
	t.Helper()
	headJobOn(t, cfg, func(bool) vfd.Driver { return d }, fn, opts...)
}

// headJobOn is headJob with the driver of the heads (head true) and of
// the application ranks given by drv.
func headJobOn(t *testing.T, cfg Config, drv func(head bool) vfd.Driver, fn func(r *Runtime, me int) error, opts ...Option) {
	t.Helper()
	var heads atomic.Int32
	require.NoError(t, comm.Run(8, func(c comm.Comm) error {
		d := drv(c.Rank()%2 == 0)
		local := nodeLocal{Driver: d, root: cfg.CkptDir, own: fmt.Sprintf("node%04d", c.Rank()/2)}
		r, err := Init(cfg, c, append([]Option{WithDrivers(local, d, d), WithLogger(zap.NewNop())}, opts...)...)
		if c.Rank()%2 == 0 {
			if !errors.Is(err, ErrHead) {
				return fmt.Errorf("head %d: Init returned %v, want ErrHead", c.Rank(), err)
			}
			heads.Add(1)
			return nil
		}
		if err != nil {
			return err
		}
		return fn(r, r.Comm().Rank())
	}, comm.WithTimeout(60*time.Second)))
	require.Equal(t, int32(4), heads.Load(), "heads that returned ErrHead")
}

// protectICPVars protects icpVars' three variables and a version number
// (ids 0..3) on r.
func protectICPVars(r *Runtime, a *[]uint64, b *[]float64, x *[]int32, ver *[]int64) error {
	return errors.Join(Protect(r, 0, a), Protect(r, 1, b), Protect(r, 2, x), Protect(r, 3, ver))
}

// headICPRecover restarts the job of cfg with heads on d and checks that
// every application rank restarts from checkpoint want at lvl and
// recovers icpVars' version want bit for bit. Then, unless next is 0, it
// takes incremental checkpoint next at cfg's asynchronous level and
// checks the heads raise it.
func headICPRecover(t *testing.T, cfg Config, d vfd.Driver, want int, lvl levels.ID, next int) {
	t.Helper()
	headJob(t, cfg, d, func(r *Runtime, me int) error {
		defer r.Close()
		var a []uint64
		var b []float64
		var x []int32
		ver := []int64{0}
		if err := protectICPVars(r, &a, &b, &x, &ver); err != nil {
			return err
		}
		if m := r.recoveredManifest(); m == nil || m.ID != int64(want) || m.Level != lvl {
			return fmt.Errorf("rank %d: restarted from %v, want checkpoint %d at %v", me, m, want, lvl)
		}
		if err := r.Recover(); err != nil {
			return err
		}
		wa, wb, wc := icpVars(me, want)
		if !slices.Equal(a, wa) || !slices.Equal(b, wb) || !slices.Equal(x, wc) || ver[0] != int64(want) {
			return fmt.Errorf("rank %d: recovered data is not version %d", me, want)
		}
		if next == 0 {
			return nil
		}
		a, b, x = icpVars(me, next)
		ver[0] = int64(next)
		if err := r.BeginICP(int64(next), int(lvl), true); err != nil {
			return err
		}
		for _, id := range []int{3, 1, 0, 2} {
			if err := r.AddVarICP(id); err != nil {
				return err
			}
		}
		if err := errors.Join(r.FinalizeICP(), r.CheckpointWait()); err != nil {
			return err
		}
		if r.last.ID != int64(next) || r.last.Level != lvl {
			return fmt.Errorf("rank %d: checkpoint %d at %v after the restart, want %d at %v", me, r.last.ID, r.last.Level, next, lvl)
		}
		return nil
	})
}

// TestHeadsICP takes incremental checkpoints at L2, L3 and L4 with head =
// 1 and inline_lL = 0: each commits at L1 on the application ranks
// (variables added in a different order on every rank and at every
// version, and changed by the solver right after being added) and is
// raised to its level by the heads, which alone write the level's files.
// A variable missing on one rank at FinalizeICP fails it on every rank
// with the same error, ErrICP on that rank, and commits nothing: the
// previous checkpoint stays, raised, and the next iCP works. A restart
// with heads after losing what the level protects against recovers the
// last version bit for bit, and the heads raise the restarted run's
// next incremental checkpoint too. With ckpt_io = 5 the L4 HDF5 file is
// written by the application ranks from the L1 file, in FinalizeICP
// (the heads write nothing), and the rest holds the same.
func TestHeadsICP(t *testing.T) {
	orders := [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}, {0, 2, 1, 3}, {3, 1, 2, 0}}
	for _, tc := range []struct {
		lvl int
		h5  bool
	}{{2, false}, {3, false}, {4, false}, {4, true}} {
		lvl := tc.lvl
		t.Run(fmt.Sprintf("L%d/h5=%v", lvl, tc.h5), func(t *testing.T) {
			core := vfd.NewCore()
			cfg := headConfig(lvl)
			first := levels.L1 // the level FinalizeICP commits at
			if tc.h5 {
				cfg.CkptIO, first = 5, levels.L4
			}
			headW, appW := &writes{paths: map[string]bool{}}, &writes{paths: map[string]bool{}}
			errs := make([]error, 4)
			var world atomic.Int32
			drv := func(head bool) vfd.Driver {
				if head {
					return headW.driver(core)
				}
				return appW.driver(core)
			}
			headJobOn(t, cfg, drv, func(r *Runtime, me int) error {
				defer r.Close()
				a, b, x := icpVars(me, 0)
				ver := []int64{0}
				if err := protectICPVars(r, &a, &b, &x, &ver); err != nil {
					return err
				}
				icp := func(v int, skip int) error {
					a, b, x = icpVars(me, v)
					ver[0] = int64(v)
					if err := r.BeginICP(int64(v), lvl, true); err != nil {
						return err
					}
					for _, id := range orders[(me+v)%len(orders)] {
						if id == skip {
							continue
						}
						if err := r.AddVarICP(id); err != nil {
							return err
						}
						switch id { // the solver goes on with the variable
						case 0:
							a[0]++
						case 1:
							b[1]++
						case 2:
							x[2]++
						case 3:
							ver[0] = 99
						}
					}
					return r.FinalizeICP()
				}
				for v := 1; v <= 2; v++ {
					if err := icp(v, -1); err != nil {
						return err
					}
					if got := r.last; got.ID != int64(v) || got.Level != first {
						return fmt.Errorf("rank %d: incremental checkpoint %d committed at %v, want %v first", me, got.ID, got.Level, first)
					}
					if v == 1 {
						continue // BeginICP waits for it and adopts it
					}
					if err := r.CheckpointWait(); err != nil {
						return err
					}
					if got := r.last; got.ID != int64(v) || got.Level != levels.ID(lvl) {
						return fmt.Errorf("rank %d: incremental checkpoint %d at %v after CheckpointWait, want L%d", me, got.ID, got.Level, lvl)
					}
				}
				// Rank 2 forgets variable 1 at checkpoint 3: nothing is
				// committed, nothing is sent to the heads.
				skip := -1
				if me == 2 {
					skip = 1
				}
				errs[me] = icp(3, skip)
				if err := r.CheckpointWait(); err != nil {
					return fmt.Errorf("rank %d: CheckpointWait after the failed iCP: %w", me, err)
				}
				// BeginICP(3) adopted checkpoint 2 as the heads raised it,
				// which superseded checkpoint 1.
				cm := r.eng.Committed()
				if r.last.ID != 2 || len(cm) != 1 || cm[0].ID != 2 || cm[0].Level != levels.ID(lvl) {
					var s []string
					for _, m := range cm {
						s = append(s, fmt.Sprintf("%d@%v", m.ID, m.Level))
					}
					return fmt.Errorf("rank %d: committed %v after the failed iCP, want [2@L%d]", me, s, lvl)
				}
				// The next one works.
				if err := errors.Join(icp(4, -1), r.CheckpointWait()); err != nil {
					return fmt.Errorf("rank %d: iCP after the failed one: %w", me, err)
				}
				if r.last.ID != 4 || r.last.Level != levels.ID(lvl) {
					return fmt.Errorf("rank %d: checkpoint %d at %v, want 4 at L%d", me, r.last.ID, r.last.Level, lvl)
				}
				world.Add(1)
				return nil
			})
			require.Equal(t, int32(4), world.Load())
			for rank, err := range errs {
				require.Error(t, err, "rank %d: FinalizeICP with variable 1 missing on rank 2", rank)
				assert.Equal(t, errs[0].Error(), err.Error(), "rank %d", rank)
				assert.Contains(t, err.Error(), "failed on rank 2: ")
				assert.Contains(t, err.Error(), "protected variables [1] were not added")
			}
			assert.ErrorIs(t, errs[2], ErrICP)
			if tc.h5 {
				assert.True(t, appW.any("l4.h5"), "the application ranks wrote no L4 HDF5 file")
				assert.False(t, headW.any("ckpt"), "the heads wrote checkpoint files")
			} else {
				assert.True(t, headW.any(roleWord[lvl]), "the heads wrote no %s file", roleWord[lvl])
				assert.False(t, appW.any(roleWord[lvl]), "the application ranks wrote %s files", roleWord[lvl])
			}
			// Nothing of the failed checkpoint 3 is left.
			for n := range 4 {
				ents, err := core.ReadDir(fmt.Sprintf("/local/node%04d", n))
				require.NoError(t, err)
				for _, e := range ents {
					assert.NotContains(t, e.Name(), "00000003", "node %d", n)
				}
			}

			lose(t, core, cfg, lvl)
			headICPRecover(t, cfg, core, 4, levels.ID(lvl), 5)
			lose(t, core, cfg, lvl)
			headICPRecover(t, cfg, core, 5, levels.ID(lvl), 0)
		})
	}
}

// TestHeadsICPFinalize: with keep_last_ckpt, Finalize right after an
// incremental checkpoint at L3 (its raise by the heads in flight) waits
// for the heads, flushes it to L4 and keeps only that: a restart with
// heads after losing every node recovers it bit for bit from L4.
func TestHeadsICPFinalize(t *testing.T) {
	core := vfd.NewCore()
	cfg := headConfig(3)
	cfg.KeepLastCkpt = true
	headJob(t, cfg, core, func(r *Runtime, me int) error {
		a, b, x := icpVars(me, 1)
		ver := []int64{1}
		if err := errors.Join(protectICPVars(r, &a, &b, &x, &ver), r.BeginICP(1, 3, true)); err != nil {
			return err
		}
		for _, id := range orders4[me] {
			if err := r.AddVarICP(id); err != nil {
				return err
			}
		}
		return errors.Join(r.FinalizeICP(), r.Finalize())
	})
	lose(t, core, cfg, 4)
	headICPRecover(t, cfg, core, 1, levels.L4, 0)
}

// orders4 are the orders in which the 4 application ranks add icpVars'
// variables.
var orders4 = [][]int{{2, 0, 3, 1}, {3, 2, 1, 0}, {0, 1, 2, 3}, {1, 3, 0, 2}}

// TestHeadsICPBackgroundFailure: the heads cannot write the L4 container
// of incremental checkpoint 1; CheckpointWait reports it (ErrBackground,
// naming the checkpoint and the level) and the checkpoint stays at L1;
// the next BeginICP reports it once more and opens nothing (AddVarICP
// and FinalizeICP then fail with ErrICP, committing nothing); the one
// after works, is raised, and a relaunch after losing every node
// recovers it from L4.
func TestHeadsICPBackgroundFailure(t *testing.T) {
	core := vfd.NewCore()
	cfg := headConfig(4)
	var failing atomic.Bool
	failing.Store(true)
	headDriver := vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpWrite && strings.Contains(op.Path, "l4.sion") && failing.Load() {
			return errors.New("no space left on the global file system")
		}
		return nil
	}))
	drv := func(head bool) vfd.Driver {
		if head {
			return headDriver
		}
		return core
	}
	headJobOn(t, cfg, drv, func(r *Runtime, me int) error {
		defer r.Close()
		a, b, x := icpVars(me, 1)
		ver := []int64{1}
		if err := protectICPVars(r, &a, &b, &x, &ver); err != nil {
			return err
		}
		icp := func(v int) error {
			a, b, x = icpVars(me, v)
			ver[0] = int64(v)
			if err := r.BeginICP(int64(v), 4, true); err != nil {
				return err
			}
			for _, id := range orders4[(me+v)%4] {
				if err := r.AddVarICP(id); err != nil {
					return err
				}
			}
			return r.FinalizeICP()
		}
		if err := icp(1); err != nil {
			return err
		}
		err := r.CheckpointWait()
		if !errors.Is(err, ErrBackground) || !strings.Contains(err.Error(), "checkpoint 1") || !strings.Contains(err.Error(), "L4") {
			return fmt.Errorf("rank %d: CheckpointWait: %v, want ErrBackground naming checkpoint 1 and L4", me, err)
		}
		if r.last.ID != 1 || r.last.Level != levels.L1 {
			return fmt.Errorf("rank %d: checkpoint %d at %v, want 1 at L1", me, r.last.ID, r.last.Level)
		}
		if err := r.BeginICP(2, 4, true); !errors.Is(err, ErrBackground) {
			return fmt.Errorf("rank %d: BeginICP after the failure: %v, want ErrBackground", me, err)
		}
		if err := r.AddVarICP(0); !errors.Is(err, ErrICP) {
			return fmt.Errorf("rank %d: AddVarICP after a failed BeginICP: %v, want ErrICP", me, err)
		}
		if err := r.FinalizeICP(); !errors.Is(err, ErrICP) {
			return fmt.Errorf("rank %d: FinalizeICP after a failed BeginICP: %v, want ErrICP", me, err)
		}
		if r.last.ID != 1 {
			return fmt.Errorf("rank %d: checkpoint %d committed after the failed BeginICP", me, r.last.ID)
		}
		failing.Store(false)
		if err := r.Comm().Barrier(); err != nil {
			return err
		}
		if err := errors.Join(icp(3), r.CheckpointWait()); err != nil {
			return fmt.Errorf("rank %d: iCP after the failure: %w", me, err)
		}
		if r.last.ID != 3 || r.last.Level != levels.L4 {
			return fmt.Errorf("rank %d: checkpoint %d at %v, want 3 at L4", me, r.last.ID, r.last.Level)
		}
		return nil
	})
	lose(t, core, cfg, 4)
	headICPRecover(t, cfg, core, 3, levels.L4, 0)
}

// TestHeadsICPThenDCP: with dCP enabled, an incremental checkpoint raised
// by the heads at L2, L3 or L4 is the base of the differential
// checkpoints that follow (the image kept from FinalizeICP), which the
// heads raise too; a relaunch after losing what the level protects
// against recovers the newest bit for bit, and its heads raise its next
// incremental checkpoint.
func TestHeadsICPThenDCP(t *testing.T) {
	for _, lvl := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			core := vfd.NewCore()
			cfg := headConfig(lvl)
			cfg.EnableDCP, cfg.DCPBlockSize, cfg.DCPStackSize = true, 4096, 4
			headJob(t, cfg, core, func(r *Runtime, me int) error {
				defer r.Close()
				a, b, x := icpVars(me, 1)
				ver := []int64{1}
				if err := protectICPVars(r, &a, &b, &x, &ver); err != nil {
					return err
				}
				if err := r.BeginICP(1, lvl, true); err != nil {
					return err
				}
				for _, id := range orders4[me] {
					if err := r.AddVarICP(id); err != nil {
						return err
					}
				}
				if err := errors.Join(r.FinalizeICP(), r.CheckpointWait()); err != nil {
					return err
				}
				for v := 2; v <= 4; v++ {
					a, b, x = icpVars(me, v)
					ver[0] = int64(v)
					if err := r.Checkpoint(int64(v), lvl+dcpLevelOffset); err != nil {
						return err
					}
					if r.last.DCP == nil || r.last.Layers() != v {
						return fmt.Errorf("rank %d: checkpoint %d not layer %d of the chain: %+v", me, v, v, r.last.DCP)
					}
					if err := r.CheckpointWait(); err != nil {
						return err
					}
					if r.last.Level != levels.ID(lvl) || r.last.ID != int64(v) {
						return fmt.Errorf("rank %d: checkpoint %d at %v, want L%d", me, v, r.last.Level, lvl)
					}
					// The chain reached dcp_stack_size (4): the poster
					// compacted it, and the heads raised the copy.
					if full := r.last.DCP == nil; full != (v == 4) {
						return fmt.Errorf("rank %d: checkpoint %d full %v after the background work", me, v, full)
					}
				}
				return nil
			})
			lose(t, core, cfg, lvl)
			headICPRecover(t, cfg, core, 4, levels.ID(lvl), 5)
		})
	}
}
