package ckpt

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// failingL2 is an L2 whose post-processing always fails after the data
// file was written: the checkpoint is rejected on every rank.
type failingL2 struct{ levels.Local1 }

var errInjectedProtect = errors.New("injected protect failure")

func (failingL2) ID() levels.ID                              { return levels.L2 }
func (failingL2) Protect(*levels.Env, *levels.Pending) error { return errInjectedProtect }

// growVals is the content of variable 0 at step s with n elements.
func growVals(rank, step, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(rank*1_000_000+step*10_000+i) + 0.25
	}
	return x
}

// TestLayoutChaining: a variable that grows and shrinks over checkpoints,
// with restarts in between, keeps its containers in place; each growth adds
// one container with the extra part only (FTI-FF's data blocks), a failed
// checkpoint does not advance the layout, and every restart recovers bit
// for bit.
func TestLayoutChaining(t *testing.T) {
	const n = 4
	root := t.TempDir()
	cfg := testConfig(root, 1)
	cfg.GroupSize = 2
	opts := []Option{WithLevels(failingL2{})}

	// containers returns the container sizes of variable id in rank's data
	// file of the newest committed checkpoint, in file order.
	containers := func(r *Runtime, id int32) ([]int64, error) {
		c := r.eng.Committed()
		m := c[len(c)-1]
		df, ok := m.DataFile(r.c.Rank())
		if !ok {
			return nil, fmt.Errorf("no data file")
		}
		var f vfd.File
		var err error
		if df.Attrs[levels.AttrInContainer] != "" {
			// The inline L4 writes the data only as the rank's task of
			// the global container: read it there.
			f, err = levels.OpenTask(r.env.Global, df)
		} else {
			f, err = vfd.OpenRead(vfd.Sec2{}, filepath.Join(r.env.Local.Dir, df.Name))
		}
		if err != nil {
			return nil, err
		}
		defer f.Close()
		rd, err := fileformat.Open(f)
		if err != nil {
			return nil, err
		}
		var sizes []int64
		for _, b := range rd.Layout().Blocks {
			for _, ct := range b.Containers {
				if ct.VarID == id {
					sizes = append(sizes, ct.Size)
				}
			}
		}
		return sizes, nil
	}
	var mu sync.Mutex
	got := map[string][]int64{} // "rank/ckpt" -> container sizes
	record := func(r *Runtime, ck int64) error {
		s, err := containers(r, 0)
		if err != nil {
			return err
		}
		mu.Lock()
		got[fmt.Sprintf("%d/%d", r.c.Rank(), ck)] = s
		mu.Unlock()
		return nil
	}
	// recoverStep restores variable 0 and checks it against step's values.
	recoverStep := func(r *Runtime, x *[]float64, step, size int) error {
		if err := Protect(r, 0, x); err != nil {
			return err
		}
		if err := r.Recover(); err != nil {
			return err
		}
		if want := growVals(r.c.Rank(), step, size); !assert.ObjectsAreEqual(want, *x) {
			return fmt.Errorf("rank %d: step %d recovered %d values, not bit for bit", r.c.Rank(), step, len(*x))
		}
		return nil
	}
	ckpt := func(r *Runtime, x *[]float64, step, size int, id int64, lvl int) error {
		*x = growVals(r.c.Rank(), step, size)
		if err := r.Checkpoint(id, lvl); err != nil {
			return err
		}
		return record(r, id)
	}

	// Run 1: 100 values, then 150.
	require.NoError(t, world(t, n, cfg, opts, func(r *Runtime) error {
		var x []float64
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		if err := ckpt(r, &x, 1, 100, 1, 1); err != nil {
			return err
		}
		return ckpt(r, &x, 2, 150, 2, 1)
	}))
	// Run 2: restart from 150, shrink to 120 (same containers), grow to 200
	// at L4 (one more container).
	require.NoError(t, world(t, n, cfg, opts, func(r *Runtime) error {
		var x []float64
		if err := recoverStep(r, &x, 2, 150); err != nil {
			return err
		}
		if err := ckpt(r, &x, 3, 120, 3, 1); err != nil {
			return err
		}
		return ckpt(r, &x, 4, 200, 4, 4)
	}))
	// Run 3: restart from L4 with 200 values; a failed checkpoint with 300
	// values must not advance the layout; then 210 values.
	require.NoError(t, world(t, n, cfg, opts, func(r *Runtime) error {
		var x []float64
		if err := recoverStep(r, &x, 4, 200); err != nil {
			return err
		}
		x = growVals(r.c.Rank(), 5, 300)
		if err := r.Checkpoint(5, 2); !errors.Is(err, levels.ErrVoteFailed) {
			return fmt.Errorf("failing L2 checkpoint returned %v", err)
		}
		return ckpt(r, &x, 6, 210, 6, 1)
	}))
	// Run 4: the last checkpoint restores 210 values.
	require.NoError(t, world(t, n, cfg, opts, func(r *Runtime) error {
		var x []float64
		return recoverStep(r, &x, 6, 210)
	}))

	for rank := range n {
		at := func(ck int) []int64 { return got[fmt.Sprintf("%d/%d", rank, ck)] }
		assert.Equal(t, []int64{800}, at(1), "rank %d ckpt 1: one container", rank)
		assert.Equal(t, []int64{800, 400}, at(2), "rank %d ckpt 2: growth adds the extra 50 values", rank)
		assert.Equal(t, []int64{800, 400}, at(3), "rank %d ckpt 3: shrinking keeps the containers (after a restart)", rank)
		assert.Equal(t, []int64{800, 400, 400}, at(4), "rank %d ckpt 4: growth to 200", rank)
		assert.Equal(t, []int64{800, 400, 400, 80}, at(6), "rank %d ckpt 6: continues the recovered layout, not the failed one", rank)
	}
}
