package ckpt

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// TestSnapshotCallPath checks what a checkpoint in snapshot mode costs
// the solver, at L1..L4, full and differential: one collective call on
// its path, the stop check's reduction (stop.go) with the snapshot vote
// folded in (the poster is held, so only the call path is counted), and
// the copy into the staging slot that Protect allocated, the same memory
// at every checkpoint.
func TestSnapshotCallPath(t *testing.T) {
	for _, dcp := range []bool{false, true} {
		for lvl := 1; lvl <= 4; lvl++ {
			t.Run(fmt.Sprintf("L%d/dcp=%v", lvl, dcp), func(t *testing.T) {
				cfg := snapConfig(dcp)
				level := lvl
				if dcp {
					level += dcpLevelOffset
				}
				gate := newPosterGate()
				colls := make([][]int64, 4)
				core := vfd.NewCore()
				require.NoError(t, comm.Run(4, func(c comm.Comm) error {
					r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()), gate.option())
					if err != nil {
						return err
					}
					defer r.Close()
					x := make([]uint64, 4096)
					if err := Protect(r, 0, &x); err != nil {
						return err
					}
					slot := r.scopy.slots[0]
					if len(slot) != 8*len(x) || r.scopy.held != int64(8*len(x)) {
						return fmt.Errorf("rank %d: after Protect the slot has %d bytes, %d held; want %d", c.Rank(), len(slot), r.scopy.held, 8*len(x))
					}
					for v := 1; v <= 3; v++ {
						for i := range x {
							x[i] = uint64(v)<<32 | uint64(c.Rank())<<16 | uint64(i)
						}
						if v == 3 {
							x[7]++ // a dCP layer writes one block
						}
						if c.Rank() == 0 {
							gate.shut()
						}
						if err := c.Barrier(); err != nil {
							return err
						}
						before := comm.CountsOf(c)
						if err := r.Checkpoint(int64(v), level); err != nil {
							return err
						}
						colls[c.Rank()] = append(colls[c.Rank()], comm.CountsOf(c).Sub(before).Collectives)
						if got := r.scopy.slots[0]; unsafe.SliceData(got) != unsafe.SliceData(slot) {
							return fmt.Errorf("rank %d: checkpoint %d copied into new memory", c.Rank(), v)
						}
						if err := c.Barrier(); err != nil {
							return err
						}
						if c.Rank() == 0 {
							gate.open()
						}
						if err := r.CheckpointWait(); err != nil {
							return err
						}
						cm := r.eng.Committed()
						if m := cm[len(cm)-1]; m.ID != int64(v) || m.Level != levels.ID(lvl) || (dcp && v > 1 && m.DCP == nil) {
							return fmt.Errorf("rank %d: newest committed %d at %v (dCP %v)", c.Rank(), m.ID, m.Level, m.DCP != nil)
						}
					}
					return nil
				}, comm.WithTimeout(60*time.Second)))
				for rank, cs := range colls {
					assert.Equal(t, []int64{1, 1, 1}, cs, "rank %d: collective calls on the path of each checkpoint", rank)
				}
			})
		}
	}
}

// TestSnapshotFallbackPaths checks that what the fast path only votes on
// is reported by the full path: ids that differ between ranks fail on
// every rank with ErrMismatchedCall and commit nothing; a checkpoint
// over the budget is taken on the solver's path and committed.
func TestSnapshotFallbackPaths(t *testing.T) {
	cfg := snapConfig(false)
	errs := make([]error, 4)
	core := vfd.NewCore()
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
		if err != nil {
			return err
		}
		defer r.Close()
		x := version(c.Rank(), 1)
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		id := int64(1)
		if c.Rank() == 2 {
			id = 5
		}
		errs[c.Rank()] = r.Checkpoint(id, 2)
		if n := len(r.eng.Committed()); n != 0 {
			return fmt.Errorf("rank %d: %d checkpoints committed after a mismatched call", c.Rank(), n)
		}
		r.scopy.budget = 8 // nothing fits
		if err := r.Checkpoint(2, 2); err != nil {
			return err
		}
		if r.post.running != nil {
			return fmt.Errorf("rank %d: a checkpoint over the budget went to the background", c.Rank())
		}
		if cm := r.eng.Committed(); len(cm) != 1 || cm[0].ID != 2 || cm[0].Level != levels.L2 {
			return fmt.Errorf("rank %d: committed %v", c.Rank(), cm)
		}
		return nil
	}, comm.WithTimeout(30*time.Second)))
	for rank, err := range errs {
		assert.True(t, errors.Is(err, ErrMismatchedCall), "rank %d: %v", rank, err)
	}
}

// TestSnapshotDatasets takes checkpoints of variables in global datasets
// in snapshot mode at L1 and L4. The first (the datasets just defined)
// takes the full path, which checks the decomposition; the second the
// one-reduction path. The poster is held until every rank overwrote its
// variables after the call. A restart on another rank count
// redistributes checkpoint 2, every element as at the call.
func TestSnapshotDatasets(t *testing.T) {
	for _, lvl := range []int{1, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 1)
			cfg.Snapshot = true
			gate := newPosterGate()
			gate.open()
			require.NoError(t, world(t, 4, cfg, []Option{gate.option()}, func(r *Runtime) error {
				field, ids, owner, err := reshapeWriter(r, 2)
				if err != nil {
					return err
				}
				if err := r.Checkpoint(1, lvl); err != nil {
					return err
				}
				if err := r.CheckpointWait(); err != nil {
					return err
				}
				if r.c.Rank() == 0 {
					gate.shut()
				}
				if err := r.c.Barrier(); err != nil {
					return err
				}
				before := comm.CountsOf(r.c)
				if err := r.Checkpoint(2, lvl); err != nil {
					return err
				}
				if n := comm.CountsOf(r.c).Sub(before).Collectives; n != 1 {
					return fmt.Errorf("rank %d: checkpoint 2 made %d collective calls on its path, want 1 (the stop check with the snapshot vote)", r.c.Rank(), n)
				}
				if tm := r.CheckpointTimes(); tm.ID != 2 {
					return fmt.Errorf("rank %d: checkpoint 2 was not taken in snapshot mode (times %+v)", r.c.Rank(), tm)
				}
				for i := range field {
					field[i] = -1
				}
				for i := range ids {
					ids[i] = -1
				}
				for i := range owner {
					owner[i] = -1
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
				if m := r.Recovered(); m == nil || m.ID != 2 || int(m.Level) != lvl {
					return fmt.Errorf("rank %d restarted from %v, want checkpoint 2 at L%d", r.c.Rank(), m, lvl)
				}
				return reshapeReader(r, 2, 4, false)
			}))
		})
	}
}

// posterGate holds the background posters of every rank of a test: a
// poster that starts while the gate is shut waits until it opens. It
// starts shut.
type posterGate struct {
	mu sync.Mutex
	ch chan struct{}
}

func newPosterGate() *posterGate { return &posterGate{ch: make(chan struct{})} }

// option makes a runtime's posters wait at the gate.
func (g *posterGate) option() Option {
	return func(o *options) {
		o.postStart = func() {
			g.mu.Lock()
			ch := g.ch
			g.mu.Unlock()
			<-ch
		}
	}
}

// shut makes the posters that start from now on wait.
func (g *posterGate) shut() {
	g.mu.Lock()
	g.ch = make(chan struct{})
	g.mu.Unlock()
}

// open lets every waiting poster go.
func (g *posterGate) open() {
	g.mu.Lock()
	close(g.ch)
	g.mu.Unlock()
}
