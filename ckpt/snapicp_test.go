package ckpt

import (
	"errors"
	"fmt"
	"strings"
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

// snapICPRound takes incremental checkpoint v at lvl on r: it sets
// icpVars' version v, adds the variables in a rank's own order (variable
// 0 added once before with another value) and changes each one right
// after its AddVarICP. FinalizeICP must return
// before the poster runs (gate shut): nothing is committed then. The
// variables are overwritten again before the gate opens. The checkpoint
// must then be durable at lvl.
func snapICPRound(r *Runtime, c comm.Comm, g *posterGate, v int, lvl int, a *[]uint64, b *[]float64, x *[]int32, ver []int64) error {
	orders := [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}}
	*a, *b, *x = icpVars(c.Rank(), v)
	ver[0] = int64(v)
	if err := r.BeginICP(int64(v), lvl, true); err != nil {
		return err
	}
	if r.icp == nil || !r.icp.snap {
		return fmt.Errorf("rank %d: BeginICP(%d) did not stage in snapshot mode", c.Rank(), v)
	}
	// An early add of variable 0 with another value: the second add
	// copies it again.
	orig := (*a)[0]
	(*a)[0] = 77
	if err := r.AddVarICP(0); err != nil {
		return err
	}
	(*a)[0] = orig
	for _, id := range orders[(c.Rank()+v)%len(orders)] {
		if err := r.AddVarICP(id); err != nil {
			return err
		}
		switch id { // the solver goes on with the variable at once
		case 0:
			(*a)[0]++
		case 1:
			(*b)[1]++
		case 2:
			(*x)[2]++
		case 3:
			ver[0] = 99
		}
	}
	if err := r.FinalizeICP(); err != nil {
		return err
	}
	if r.post.running == nil || (r.last != nil && r.last.ID == int64(v)) {
		return fmt.Errorf("rank %d: checkpoint %d was committed on the solver's path", c.Rank(), v)
	}
	for i := range *a {
		(*a)[i] = 0xdeadbeef
	}
	for i := range *x {
		(*x)[i] = -1
	}
	(*b)[0], ver[0] = -1, 999
	if err := c.Barrier(); err != nil {
		return err
	}
	if c.Rank() == 0 {
		g.open()
	}
	if err := r.CheckpointWait(); err != nil {
		return err
	}
	tm := r.CheckpointTimes()
	if tm.ID != int64(v) || tm.Level != lvl || !tm.Durable || tm.Copy <= 0 || tm.Blocked < tm.Copy || tm.ToDurable < tm.Blocked {
		return fmt.Errorf("rank %d: times %+v", c.Rank(), tm)
	}
	if r.last == nil || r.last.ID != int64(v) || r.last.Level != levels.ID(lvl) {
		return fmt.Errorf("rank %d: newest committed %v, want %d at L%d", c.Rank(), r.last, v, lvl)
	}
	// Every poster has run before the gate shuts again.
	if err := c.Barrier(); err != nil {
		return err
	}
	if c.Rank() == 0 {
		g.shut()
	}
	return c.Barrier()
}

// TestSnapshotICP takes incremental checkpoints at L1..L4 in snapshot
// mode: each AddVarICP copies its variable, FinalizeICP returns before
// anything is written, and the solver's changes after each AddVarICP
// and after FinalizeICP never reach the checkpoint. A restart recovers
// the values at each AddVarICP bit for bit, at the level, and again
// after losing what the level protects against. With ckpt_io = 5 the L4
// is the HDF5 file, written in the background from the copies too.
func TestSnapshotICP(t *testing.T) {
	for _, lvl := range []int{1, 2, 3, 4, 5} {
		h5 := lvl == 5 // L4 with ckpt_io = 5: the HDF5 file from the copies
		if h5 {
			lvl = 4
		}
		t.Run(fmt.Sprintf("L%d/h5=%v", lvl, h5), func(t *testing.T) {
			core := vfd.NewCore()
			cfg := snapConfig(false)
			if h5 {
				cfg.CkptIO = 5
			}
			g := newPosterGate()
			require.NoError(t, comm.Run(4, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()), g.option())
				if err != nil {
					return err
				}
				defer r.Close()
				a, b, x := icpVars(c.Rank(), 0)
				ver := []int64{0}
				if err := protectICPVars(r, &a, &b, &x, &ver); err != nil {
					return err
				}
				for v := 1; v <= 2; v++ {
					if err := snapICPRound(r, c, g, v, lvl, &a, &b, &x, ver); err != nil {
						return err
					}
				}
				return nil
			}, comm.WithTimeout(60*time.Second)))
			icpRecover(t, cfg, core, 2, levels.ID(lvl))
			if lvl > 1 {
				lose(t, core, cfg, lvl)
				icpRecover(t, cfg, core, 2, levels.ID(lvl))
			}
		})
	}
}

// A variable missing at FinalizeICP: TestICPMissingModes (icpstop_test.go).

// TestSnapshotICPBudget gives a budget smaller than the data: BeginICP
// says so once and takes today's file path, FinalizeICP commits on the
// solver's path, and the restart recovers the last checkpoint.
func TestSnapshotICPBudget(t *testing.T) {
	core := vfd.NewCore()
	cfg := snapConfig(false)
	cfg.SnapshotBudget = 64 // bytes: icpVars are tens of KiB
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
		a, b, x := icpVars(c.Rank(), 0)
		ver := []int64{0}
		if err := protectICPVars(r, &a, &b, &x, &ver); err != nil {
			return err
		}
		for v := 1; v <= 2; v++ {
			a, b, x = icpVars(c.Rank(), v)
			ver[0] = int64(v)
			if err := r.BeginICP(int64(v), 2, true); err != nil {
				return err
			}
			if r.icp.snap || r.icp.f == nil {
				return fmt.Errorf("rank %d: iCP %d over the budget did not open its file", c.Rank(), v)
			}
			for _, id := range []int{3, 0, 2, 1} {
				if err := r.AddVarICP(id); err != nil {
					return err
				}
			}
			a[0]++
			if err := r.FinalizeICP(); err != nil {
				return err
			}
			if r.post.running != nil || r.last == nil || r.last.ID != int64(v) || r.last.Level != levels.L2 {
				return fmt.Errorf("rank %d: iCP %d not committed on the solver's path", c.Rank(), v)
			}
		}
		return nil
	}, comm.WithTimeout(30*time.Second)))
	var said int
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "snapshot_budget") {
			said++
			assert.Contains(t, e.Message, "checkpoint 1")
		}
	}
	assert.Equal(t, 1, said, "the fallback is said once: %v", logs.All())
	icpRecover(t, cfg, core, 2, levels.L2)
}

// TestSnapshotICPHeads takes incremental checkpoints at L2 in snapshot
// mode with head = 1 and inline_l2 = 0: the staged copies are written
// at L1 in the background and the heads raise them. A restart with heads
// after losing a node recovers the values at each AddVarICP.
func TestSnapshotICPHeads(t *testing.T) {
	core := vfd.NewCore()
	cfg := headConfig(2)
	cfg.Snapshot = true
	g := newPosterGate()
	headJob(t, cfg, core, func(r *Runtime, me int) error {
		defer r.Close()
		a, b, x := icpVars(me, 0)
		ver := []int64{0}
		if err := protectICPVars(r, &a, &b, &x, &ver); err != nil {
			return err
		}
		for v := 1; v <= 2; v++ {
			if err := snapICPRound(r, r.Comm(), g, v, 2, &a, &b, &x, ver); err != nil {
				return err
			}
		}
		return nil
	}, g.option())
	headICPRecover(t, cfg, core, 2, levels.L2, 0)
}

// TestSnapshotICPDatasets takes an incremental checkpoint of variables in
// global datasets in snapshot mode at L1 and L4, every variable
// overwritten right after its AddVarICP and the poster held until then.
// A restart on 3 ranks redistributes it, every element as at the add.
func TestSnapshotICPDatasets(t *testing.T) {
	for _, lvl := range []int{1, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 1)
			cfg.Snapshot = true
			gate := newPosterGate()
			require.NoError(t, world(t, 4, cfg, []Option{gate.option()}, func(r *Runtime) error {
				field, ids, owner, err := reshapeWriter(r, 2)
				if err != nil {
					return err
				}
				if err := r.BeginICP(1, lvl, true); err != nil {
					return err
				}
				if !r.icp.snap {
					return fmt.Errorf("rank %d: the iCP was not staged", r.c.Rank())
				}
				for _, id := range []int{3, 1, 2} {
					if err := r.AddVarICP(id); err != nil {
						return err
					}
					switch id {
					case 1:
						for i := range field {
							field[i] = -1
						}
					case 2:
						for i := range ids {
							ids[i] = -1
						}
					case 3:
						for i := range owner {
							owner[i] = -1
						}
					}
				}
				if err := r.FinalizeICP(); err != nil {
					return err
				}
				if err := r.c.Barrier(); err != nil {
					return err
				}
				if r.c.Rank() == 0 {
					gate.open()
				}
				return r.CheckpointWait()
			}))
			require.NoError(t, world(t, 3, cfg, nil, func(r *Runtime) error {
				if m := r.Recovered(); m == nil || m.ID != 1 || int(m.Level) != lvl {
					return fmt.Errorf("rank %d restarted from %v, want checkpoint 1 at L%d", r.c.Rank(), m, lvl)
				}
				return reshapeReader(r, 2, 4, false)
			}))
		})
	}
}

// TestSnapshotICPThenDCP: with dCP on, an incremental checkpoint staged
// in snapshot mode is written whole in the background, and the next
// differential snapshot checkpoint builds on it; a restart recovers the
// last one.
func TestSnapshotICPThenDCP(t *testing.T) {
	core := vfd.NewCore()
	cfg := snapConfig(true)
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
		if err := r.BeginICP(1, 2, true); err != nil {
			return err
		}
		for _, id := range []int{2, 0, 3, 1} {
			if err := r.AddVarICP(id); err != nil {
				return err
			}
		}
		if err := errors.Join(r.FinalizeICP(), r.CheckpointWait()); err != nil {
			return err
		}
		if r.last.ID != 1 || r.last.DCP != nil {
			return fmt.Errorf("rank %d: iCP committed as %+v, want checkpoint 1, whole", c.Rank(), r.last)
		}
		a, b, x = icpVars(c.Rank(), 2)
		ver[0] = 2
		if err := errors.Join(r.Checkpoint(2, 2+dcpLevelOffset), r.CheckpointWait()); err != nil {
			return err
		}
		if r.last.ID != 2 || r.last.DCP == nil || r.last.Layers() != 2 {
			return fmt.Errorf("rank %d: checkpoint 2 not layer 2 over the iCP: %+v", c.Rank(), r.last.DCP)
		}
		return nil
	}, comm.WithTimeout(30*time.Second)))
	icpRecover(t, cfg, core, 2, levels.L2)
}
