package ckpt

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// TestWaitEndsBackgroundRemoval: after Wait, the superseded checkpoint's
// directory is gone from every node, and a run that ends without Finalize
// restarts from its last checkpoint.
func TestWaitEndsBackgroundRemoval(t *testing.T) {
	const n = 4
	cfg := testConfig(t.TempDir(), 1)
	require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
		x := []int64{int64(r.c.Rank()), 1}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		if err := r.Checkpoint(1, 1); err != nil {
			return err
		}
		x[1] = 2
		if err := r.Checkpoint(2, 1); err != nil {
			return err
		}
		r.Wait()
		old := filepath.Join(r.env.Local.Dir, levels.CheckpointDir(1))
		if _, err := (vfd.Sec2{}).Stat(old); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rank %d: %s after Wait: %v", r.c.Rank(), old, err)
		}
		return nil
	}))
	require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
		if r.Status() != Restart || r.Recovered().ID != 2 {
			return fmt.Errorf("status %v from %+v", r.Status(), r.Recovered())
		}
		var x []int64
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		if err := r.Recover(); err != nil {
			return err
		}
		if len(x) != 2 || x[0] != int64(r.c.Rank()) || x[1] != 2 {
			return fmt.Errorf("rank %d recovered %v", r.c.Rank(), x)
		}
		r.Wait() // nothing pending: returns at once
		return nil
	}))
}
