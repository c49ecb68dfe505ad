package ckpt

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/levels"
	"github.com/ftigo/ftigo/vfd"
)

// TestKeepLastFlushesToL4: with keep_last_ckpt, Finalize flushes the last
// checkpoint to L4 (FTI's behaviour) and keeps that copy: after every
// node-local directory is erased the next run restarts from it (status
// RestartKept) with the data bit for bit. A last checkpoint at L4 is kept
// as it is, and a kept checkpoint survives a second run that takes no
// checkpoint of its own.
func TestKeepLastFlushesToL4(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ranks int
		lvls  []int // levels of the run's checkpoints, in order
	}{
		{"L1", 4, []int{1}},
		{"L4-then-L1", 4, []int{4, 1}},
		{"L2", 4, []int{2}},
		{"L3", 8, []int{1, 3}},
		{"already-L4", 4, []int{1, 4}},
		{"one-rank", 1, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			cfg := testConfig(root, max(tc.ranks/4, 1))
			cfg.GroupSize = min(tc.ranks, 2)
			cfg.KeepLastCkpt = true
			last := int64(len(tc.lvls))
			var seqs []uint64
			require.NoError(t, world(t, tc.ranks, cfg, nil, func(r *Runtime) error {
				var s *state
				for i, l := range tc.lvls {
					s = makeState(r.c.Rank(), i+1, 20+r.c.Rank())
					if err := s.protect(r); err != nil {
						return err
					}
					if err := r.Checkpoint(int64(i+1), l); err != nil {
						return err
					}
				}
				if err := r.Finalize(); err != nil {
					return err
				}
				if r.c.Rank() == 0 {
					for _, m := range r.eng.Committed() {
						seqs = append(seqs, m.Seq)
					}
				}
				// The default L4 is the inline one: the data is only the
				// rank's task of the global container, no local file.
				c := r.eng.Committed()
				df, ok := c[len(c)-1].DataFile(r.c.Rank())
				if !ok || df.Attrs[levels.AttrInContainer] != "1" {
					return fmt.Errorf("rank %d: data entry %+v is not sion-only", r.c.Rank(), df)
				}
				if _, err := (vfd.Sec2{}).Stat(filepath.Join(cfg.CkptDir, r.topo.NodeDir(r.topo.NodeOf(r.c.Rank())), df.Name)); !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("rank %d: local data file of an inline L4 checkpoint: %v", r.c.Rank(), err)
				}
				return nil
			}))
			// One checkpoint is left: the L4 copy of the last one.
			require.Len(t, seqs, 1)
			wantSeq := uint64(len(tc.lvls)) + 1 // the flush is a new commit
			if tc.lvls[len(tc.lvls)-1] == 4 {
				wantSeq--
			}
			assert.Equal(t, wantSeq, seqs[0])
			require.NoError(t, vfd.Sec2{}.RemoveAll(cfg.CkptDir))
			for run := range 2 {
				require.NoError(t, world(t, tc.ranks, cfg, nil, func(r *Runtime) error {
					m := r.Recovered()
					if r.Status() != RestartKept || m == nil || m.Level != levels.L4 || m.ID != last || !m.Kept {
						return fmt.Errorf("run %d: status %v from %+v", run, r.Status(), m)
					}
					s := &state{Map: &mapVar{}}
					if err := s.protect(r); err != nil {
						return err
					}
					if err := r.Recover(); err != nil {
						return err
					}
					if want := makeState(r.c.Rank(), int(last), 20+r.c.Rank()); !assert.ObjectsAreEqual(want, s) {
						return fmt.Errorf("rank %d: data differs", r.c.Rank())
					}
					return r.Finalize() // no checkpoint of its own: the kept one stays
				}), "run %d", run)
			}
		})
	}
}

// TestKeepLastFlushFailureKeepsLocal: when the flush to L4 fails (rank 1's
// L2 data file was damaged after the checkpoint), Finalize returns the
// error on every rank and keeps the L2 checkpoint instead; the next run
// restarts from it (RestartKept), rebuilding rank 1's file from its
// partner copy, bit for bit.
func TestKeepLastFlushFailureKeepsLocal(t *testing.T) {
	const n = 4
	root := t.TempDir()
	cfg := testConfig(root, 1)
	cfg.GroupSize, cfg.KeepLastCkpt = 2, true
	var mu sync.Mutex
	var finErrs []error
	require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
		s := makeState(r.c.Rank(), 3, 25)
		if err := s.protect(r); err != nil {
			return err
		}
		if err := r.Checkpoint(3, 2); err != nil {
			return err
		}
		if r.c.Rank() == 1 {
			c := r.eng.Committed()
			df, _ := c[len(c)-1].DataFile(1)
			corruptFile(t, filepath.Join(cfg.CkptDir, r.topo.NodeDir(r.topo.NodeOf(1)), df.Name))
		}
		if err := r.c.Barrier(); err != nil {
			return err
		}
		err := r.Finalize()
		mu.Lock()
		finErrs = append(finErrs, err)
		mu.Unlock()
		return nil
	}))
	require.Len(t, finErrs, n)
	for _, err := range finErrs {
		require.ErrorIs(t, err, levels.ErrVoteFailed)
		assert.Contains(t, err.Error(), "flush checkpoint 3 (L2) to L4 failed, it stays kept at L2")
		assert.Equal(t, finErrs[0].Error(), err.Error())
	}
	require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
		m := r.Recovered()
		if r.Status() != RestartKept || m.Level != levels.L2 || m.ID != 3 {
			return fmt.Errorf("status %v from %+v", r.Status(), m)
		}
		s := &state{Map: &mapVar{}}
		if err := s.protect(r); err != nil {
			return err
		}
		if err := r.Recover(); err != nil {
			return err
		}
		if want := makeState(r.c.Rank(), 3, 25); !assert.ObjectsAreEqual(want, s) {
			return fmt.Errorf("rank %d: data differs", r.c.Rank())
		}
		return nil
	}))
}
