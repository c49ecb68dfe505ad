package ckpt

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// icpVars are a rank's three variables at version v.
func icpVars(rank, v int) ([]uint64, []float64, []int32) {
	a := version(rank, v)
	b := make([]float64, 300+rank)
	c := make([]int32, 5000)
	for i := range b {
		b[i] = float64(v*1000+rank) + float64(i)/8
	}
	for i := range c {
		c[i] = int32(v<<20 | rank<<12 | i)
	}
	return a, b, c
}

// icpRecover restarts on d and checks every rank recovers version want
// (and the checkpoint's level).
func icpRecover(t *testing.T, cfg Config, d vfd.Driver, want int, lvl levels.ID) {
	t.Helper()
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDriver(d), WithLogger(zap.NewNop()))
		if err != nil {
			return err
		}
		defer r.Close()
		var a []uint64
		var b []float64
		var x []int32
		ver := []int64{0}
		if err := errors.Join(Protect(r, 0, &a), Protect(r, 1, &b), Protect(r, 2, &x), Protect(r, 3, &ver)); err != nil {
			return err
		}
		if m := r.recoveredManifest(); m == nil || m.ID != int64(want) || m.Level != lvl {
			return fmt.Errorf("rank %d: restarted from %v, want checkpoint %d at %v", c.Rank(), m, want, lvl)
		}
		if err := r.Recover(); err != nil {
			return err
		}
		wa, wb, wc := icpVars(c.Rank(), want)
		if !slices.Equal(a, wa) || !slices.Equal(b, wb) || !slices.Equal(x, wc) || ver[0] != int64(want) {
			return fmt.Errorf("rank %d: recovered data is not version %d", c.Rank(), want)
		}
		return nil
	}, comm.WithTimeout(30*time.Second)))
}

// TestICP takes incremental checkpoints at every level, the variables
// added in every order (each rank its own), changed by the solver right
// after being added, and checks the restart gives the added data bit for
// bit; an inactive BeginICP makes the calls do nothing. With ckpt_io = 5
// the L4 is the HDF5 file, written from the committed L1 file.
func TestICP(t *testing.T) {
	orders := [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}, {0, 2, 1, 3}, {3, 1, 2, 0}}
	for _, async := range []bool{false, true} {
		for l := 1; l <= 5; l++ {
			lvl, h5 := l, l == 5 // 5: L4 with ckpt_io = 5
			if h5 {
				lvl = 4
			}
			if async && lvl == 1 {
				continue
			}
			t.Run(fmt.Sprintf("L%d/async=%v/h5=%v", lvl, async, h5), func(t *testing.T) {
				core := vfd.NewCore()
				cfg := testConfig("/", 1)
				cfg.GroupSize = 2
				cfg.Async[lvl] = async
				if h5 {
					cfg.CkptIO = 5
				}
				require.NoError(t, comm.Run(4, func(c comm.Comm) error {
					r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
					if err != nil {
						return err
					}
					defer r.Close()
					a, b, x := icpVars(c.Rank(), 0)
					ver := []int64{0}
					if err := errors.Join(Protect(r, 0, &a), Protect(r, 1, &b), Protect(r, 2, &x), Protect(r, 3, &ver)); err != nil {
						return err
					}
					for v := 1; v <= 3; v++ {
						// Inactive: nothing happens.
						if err := errors.Join(r.BeginICP(int64(v), lvl, false), r.AddVarICP(0), r.FinalizeICP()); err != nil {
							return err
						}
						a, b, x = icpVars(c.Rank(), v)
						ver[0] = int64(v)
						if err := r.BeginICP(int64(v), lvl, true); err != nil {
							return err
						}
						for _, id := range orders[(c.Rank()+v)%len(orders)] {
							if err := r.AddVarICP(id); err != nil {
								return err
							}
							// The solver goes on with the variable.
							switch id {
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
						if err := r.FinalizeICP(); err != nil {
							return err
						}
						if err := r.CheckpointWait(); err != nil {
							return err
						}
					}
					if cm := r.eng.Committed(); len(cm) != 1 || cm[0].ID != 3 || cm[0].Level != levels.ID(lvl) {
						return fmt.Errorf("rank %d: %d checkpoints committed, want the last one only, at L%d", c.Rank(), len(cm), lvl)
					}
					return nil
				}, comm.WithTimeout(30*time.Second)))
				icpRecover(t, cfg, core, 3, levels.ID(lvl))
				lose(t, core, cfg, lvl)
				if lvl > 1 {
					icpRecover(t, cfg, core, 3, levels.ID(lvl))
				}
			})
		}
	}
}

// TestICPErrors: a variable missing on one rank at FinalizeICP fails it
// on every rank, commits nothing and leaves the previous checkpoint; the
// misuses are refused with ErrICP; an iCP left open by Close leaves the
// previous checkpoint for the restart and no file behind.
func TestICPErrors(t *testing.T) {
	core := vfd.NewCore()
	cfg := testConfig("/", 1)
	cfg.GroupSize = 2
	errs := make([]error, 4)
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
		if err != nil {
			return err
		}
		defer r.Close()
		a, b, x := icpVars(c.Rank(), 1)
		ver := []int64{1}
		if err := errors.Join(Protect(r, 0, &a), Protect(r, 1, &b), Protect(r, 2, &x), Protect(r, 3, &ver)); err != nil {
			return err
		}
		if err := r.Checkpoint(1, 2); err != nil {
			return err
		}
		if err := r.AddVarICP(0); !errors.Is(err, ErrICP) {
			return fmt.Errorf("AddVarICP without BeginICP: %v", err)
		}
		if err := r.FinalizeICP(); !errors.Is(err, ErrICP) {
			return fmt.Errorf("FinalizeICP without BeginICP: %v", err)
		}
		a, b, x = icpVars(c.Rank(), 2)
		ver[0] = 2
		if err := r.BeginICP(2, 2, true); err != nil {
			return err
		}
		if err := r.Checkpoint(3, 1); !errors.Is(err, ErrICP) {
			return fmt.Errorf("Checkpoint with an iCP open: %v", err)
		}
		if err := r.BeginICP(3, 1, true); !errors.Is(err, ErrICP) {
			return fmt.Errorf("BeginICP twice: %v", err)
		}
		var late []int
		if err := Protect(r, 9, &late); err != nil {
			return err
		}
		if err := r.AddVarICP(9); !errors.Is(err, ErrICP) {
			return fmt.Errorf("AddVarICP of a variable protected later: %v", err)
		}
		r.Unprotect(9)
		for _, id := range []int{0, 1, 2, 3} {
			if id == 2 && c.Rank() == 1 {
				continue // rank 1 forgets variable 2
			}
			if err := r.AddVarICP(id); err != nil {
				return err
			}
		}
		errs[c.Rank()] = r.FinalizeICP()
		if cm := r.eng.Committed(); len(cm) != 1 || cm[0].ID != 1 {
			return fmt.Errorf("rank %d: the failed iCP changed what is committed", c.Rank())
		}
		// Open, then the job stops.
		if err := r.BeginICP(4, 1, true); err != nil {
			return err
		}
		return r.AddVarICP(0)
	}, comm.WithTimeout(30*time.Second)))
	for rank, err := range errs {
		require.Error(t, err, "rank %d", rank)
		assert.Equal(t, errs[0].Error(), err.Error(), "rank %d", rank)
		assert.Contains(t, err.Error(), "failed on rank 1: ")
		assert.Contains(t, err.Error(), "protected variables [2] were not added")
	}
	assert.ErrorIs(t, errs[1], ErrICP)
	icpRecover(t, cfg, core, 1, levels.L2)
	// Nothing of checkpoints 2 and 4 is left on any node.
	for n := range 4 {
		ents, err := core.ReadDir(cfg.NodeDir(n, runOf(t, cfg, core)))
		require.NoError(t, err)
		for _, e := range ents {
			assert.Equal(t, "ckpt00000001", e.Name(), "node %d", n)
		}
	}
}
