package ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/policy"
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
				if _, err := (vfd.Sec2{}).Stat(filepath.Join(r.env.Local.Dir, df.Name)); !errors.Is(err, fs.ErrNotExist) {
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
					m := r.recoveredManifest()
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

// TestKeepLastFlushFailureKeepsStorage: when the flush to L4 fails (rank
// 1's L2 data file was damaged after the checkpoint), Finalize returns
// the error on every rank and leaves storage exactly as it was: nothing
// deleted, no manifest rewritten, no half-made L4 directory. The next run
// restarts from the L2 checkpoint as after a kill, rebuilding rank 1's
// file from its partner copy, bit for bit.
func TestKeepLastFlushFailureKeepsStorage(t *testing.T) {
	const n = 4
	root := t.TempDir()
	cfg := testConfig(root, 1)
	cfg.GroupSize, cfg.KeepLastCkpt = 2, true
	var mu sync.Mutex
	var finErrs []error
	var before map[string]string
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
			corruptFile(t, filepath.Join(cfg.NodeDir(r.topo.NodeOf(1), r.Run()), df.Name))
		}
		if err := r.c.Barrier(); err != nil {
			return err
		}
		if r.c.Rank() == 0 {
			before = tree(t, root)
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
		assert.Contains(t, err.Error(), "flush checkpoint 3 (L2) to L4 failed; nothing was deleted, checkpoint 3 stays at L2 for the next run")
		assert.Equal(t, finErrs[0].Error(), err.Error())
	}
	assert.Equal(t, withoutIntent(before), withoutIntent(tree(t, root)), "a failed flush leaves storage as it was")
	require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
		m := r.recoveredManifest()
		if r.Status() != Restart || m.Level != levels.L2 || m.ID != 3 {
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

// tree returns every file under root with a hash of its content, and
// every directory (value "dir").
// withoutIntent is tr without the intent markers (meta_dir's
// *.pending): the engine writes the next checkpoint's ahead, and a
// failed checkpoint that took it removes it; they belong to no
// checkpoint.
func withoutIntent(tr map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range tr {
		// The run history (and its temporary file) records each launch's end:
		// it changes by design.
		if !strings.HasSuffix(k, levels.PendingSuffix) && !strings.HasPrefix(path.Base(k), policy.HistoryName) {
			out[k] = v
		}
	}
	return out
}

// tree maps every path under root to its size and digest ("dir" for a
// directory, "lock" for a lock file).
func tree(t testing.TB, root string) map[string]string {
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if d != nil && strings.HasPrefix(d.Name(), policy.HistoryName) {
			return nil // the run history changes by design (withoutIntent)
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir():
			out[rel] = "dir"
			return nil
		case d.Name() == levels.LockName:
			// A lock's content is its holder's record, rewritten by
			// every job that takes it: not checkpoint state.
			out[rel] = "lock"
			return nil
		}
		b, err := vfd.ReadFile(vfd.Sec2{}, p)
		if err != nil {
			return err
		}
		sum := blake3.Sum256(b)
		out[rel] = fmt.Sprintf("%d:%x", len(b), sum[:8])
		return nil
	}))
	return out
}

// TestKeepLastAfterFallback is issue 14's scenario: keep_last_ckpt, 16
// ranks on 4 nodes; run 1 takes checkpoints 1-4 at L4, L3, L2, L1 and
// ends without Finalize; checkpoint 4's L1 files are erased (or one byte
// of one is flipped). Run 2 restarts from checkpoint 3, warning on
// standard error that checkpoint 4 was skipped, and Finalizes: it must
// flush checkpoint 3 (the one it recovered), not the unrecoverable 4, and
// keep it. Run 3 restarts from that kept L4 copy, bit for bit.
func TestKeepLastAfterFallback(t *testing.T) {
	const n = 16
	for _, how := range []string{"erase", "flip"} {
		t.Run(how, func(t *testing.T) {
			root := t.TempDir()
			cfg := testConfig(root, 4)
			cfg.GroupSize, cfg.KeepLastCkpt = 4, true
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				for id, lvl := range []int{4, 3, 2, 1} {
					s := makeState(r.c.Rank(), id+1, 10+r.c.Rank())
					if err := s.protect(r); err != nil {
						return err
					}
					if err := r.Checkpoint(int64(id+1), lvl); err != nil {
						return err
					}
				}
				return nil // no Finalize
			}))
			files, err := filepath.Glob(filepath.Join(cfg.CkptDir, "node*", runOf(t, cfg), levels.CheckpointDir(4), "data*.fti"))
			require.NoError(t, err)
			require.Len(t, files, n)
			if how == "erase" {
				for _, f := range files {
					require.NoError(t, vfd.Sec2{}.Remove(f))
				}
			} else {
				require.NoError(t, flipData(files[5], 1))
			}
			var warn bytes.Buffer
			require.NoError(t, world(t, n, cfg, []Option{WithWarnings(&warn)}, func(r *Runtime) error {
				m := r.recoveredManifest()
				if r.Status() != Restart || m.ID != 3 || m.Level != levels.L2 {
					return fmt.Errorf("run 2: status %v from %+v", r.Status(), m)
				}
				s := &state{Map: &mapVar{}}
				if err := s.protect(r); err != nil {
					return err
				}
				if err := r.Recover(); err != nil {
					return err
				}
				if want := makeState(r.c.Rank(), 3, 10+r.c.Rank()); !assert.ObjectsAreEqual(want, s) {
					return fmt.Errorf("run 2, rank %d: data differs", r.c.Rank())
				}
				return r.Finalize()
			}))
			assert.Contains(t, warn.String(), "ftigo: warning: checkpoint 4 (L1, ckpt00000004) is unrecoverable and was skipped: ")
			assert.Contains(t, warn.String(), "ftigo: warning: restarting from the older checkpoint 3 (L2, ckpt00000003)")
			assert.Equal(t, 2, strings.Count(warn.String(), "\n"), "printed once, by rank 0: %q", warn.String())
			// Only the kept L4 copy of checkpoint 3 is left.
			ms, err := filepath.Glob(filepath.Join(root, "meta", "*.manifest"))
			require.NoError(t, err)
			assert.Equal(t, []string{filepath.Join(root, "meta", levels.ManifestName(5))}, ms)
			for run := 3; run <= 4; run++ {
				require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
					m := r.recoveredManifest()
					if r.Status() != RestartKept || m.ID != 3 || m.Level != levels.L4 || !m.Kept {
						return fmt.Errorf("run %d: status %v from %+v", run, r.Status(), m)
					}
					s := &state{Map: &mapVar{}}
					if err := s.protect(r); err != nil {
						return err
					}
					if err := r.Recover(); err != nil {
						return err
					}
					if want := makeState(r.c.Rank(), 3, 10+r.c.Rank()); !assert.ObjectsAreEqual(want, s) {
						return fmt.Errorf("run %d, rank %d: data differs", run, r.c.Rank())
					}
					return r.Finalize()
				}), "run %d", run)
			}
		})
	}
}

// TestRetentionSkipsUnrecoverable: keep_last_n = 2 keeps two checkpoints
// to fall back on. When the restart finds the newest unrecoverable, that
// one no longer counts: the next checkpoint drops it and keeps the one
// the run restarted from, so after losing the new one too the following
// restart still has a checkpoint (before, retention kept the useless
// checkpoint and dropped the good one).
func TestRetentionSkipsUnrecoverable(t *testing.T) {
	const n = 2
	root := t.TempDir()
	cfg := testConfig(root, 1)
	cfg.KeepLast = 2
	run := func(fn func(r *Runtime) error) {
		require.NoError(t, world(t, n, cfg, nil, fn))
	}
	take := func(r *Runtime, id int64) error {
		x := []int64{int64(r.c.Rank()), id}
		return errors.Join(Protect(r, 0, &x), r.Checkpoint(id, 1))
	}
	run(func(r *Runtime) error { return errors.Join(take(r, 1), take(r, 2)) })
	damage := func(seq uint64) {
		require.NoError(t, flipData(filepath.Join(cfg.NodeDir(1, runOf(t, cfg)), levels.RankFileName(levels.CheckpointDir(seq), levels.RoleData, 1)), 0))
	}
	damage(2)
	run(func(r *Runtime) error {
		if r.Recovered().ID != 1 {
			return fmt.Errorf("restarted from %d", r.Recovered().ID)
		}
		if err := take(r, 3); err != nil {
			return err
		}
		r.Wait()
		var ids []int64
		for _, m := range r.eng.Committed() {
			ids = append(ids, m.ID)
		}
		if fmt.Sprint(ids) != "[1 3]" {
			return fmt.Errorf("kept %v", ids)
		}
		return nil
	})
	damage(3)
	run(func(r *Runtime) error {
		var x []int64
		if err := errors.Join(Protect(r, 0, &x), r.Recover()); err != nil {
			return err
		}
		if r.Recovered().ID != 1 || x[1] != 1 {
			return fmt.Errorf("restarted from %d: %v", r.Recovered().ID, x)
		}
		return nil
	})
}

// driverTree lists every file under root through d with a hash of its
// content, and every directory, but the run history.
func driverTree(t testing.TB, d vfd.Driver, root string) map[string]string {
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := d.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			p := path.Join(dir, e.Name())
			if strings.HasPrefix(e.Name(), policy.HistoryName) {
				continue // rewritten by its own goroutine, by design (withoutIntent)
			}
			if e.IsDir() {
				out[p] = "dir"
				walk(p)
				continue
			}
			b, err := vfd.ReadFile(d, p)
			require.NoError(t, err)
			sum := blake3.Sum256(b)
			out[p] = fmt.Sprintf("%d:%x", len(b), sum[:8])
		}
	}
	walk(root)
	return out
}

// TestFinalizeFailAtEveryOp fails, one at a time, every file operation of
// a Finalize with keep_last_ckpt that flushes an L2 checkpoint to L4:
// every rank gets the same result; when the flush is what failed, storage
// is exactly as before Finalize; and whatever failed, the next run
// restarts from that checkpoint, bit for bit.
func TestFinalizeFailAtEveryOp(t *testing.T) {
	const n = 2
	cfg := testConfig("/", 1)
	cfg.GroupSize, cfg.KeepLastCkpt = 2, true
	flushFailures := 0
	for k := 0; ; k++ {
		core := vfd.NewCore()
		commitVersion1(t, n, cfg, core, 1)
		inj := &crashInjector{core: core, k: k}
		inj.base.Store(-1)
		fault := vfd.NewFault(core, inj)
		var before map[string]string
		finErrs := make([]error, n)
		require.NoError(t, comm.Run(n, func(c comm.Comm) error {
			r, err := Init(cfg, c, WithDriver(fault), WithLogger(zap.NewNop()))
			if err != nil {
				return err
			}
			defer r.Close()
			var x []uint64
			ver := []int64{0}
			if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Recover()); err != nil {
				return err
			}
			x, ver[0] = version(c.Rank(), 2), 2
			if err := errors.Join(r.Checkpoint(2, 2), c.Barrier()); err != nil {
				return err
			}
			r.Wait()
			if err := c.Barrier(); err != nil {
				return err
			}
			if c.Rank() == 0 {
				before = driverTree(t, core, "/")
				inj.base.Store(int64(fault.Ops()))
			}
			if err := c.Barrier(); err != nil {
				return err
			}
			finErrs[c.Rank()] = r.Finalize()
			return nil
		}, comm.WithTimeout(20*time.Second)))
		if !inj.hit {
			require.NoError(t, finErrs[0])
			t.Logf("%d operations in Finalize, %d of them in a flush that failed cleanly", k, flushFailures)
			break
		}
		for _, err := range finErrs {
			if finErrs[0] == nil {
				require.NoError(t, err, "op %d: ranks disagree", k)
			} else {
				require.Error(t, err, "op %d: ranks disagree", k)
				assert.Equal(t, finErrs[0].Error(), err.Error(), "op %d", k)
			}
		}
		if finErrs[0] != nil && strings.Contains(finErrs[0].Error(), "flush checkpoint 2 (L2) to L4 failed") {
			flushFailures++
			require.Equal(t, withoutIntent(before), withoutIntent(driverTree(t, core, "/")), "op %d: a failed flush changed storage", k)
		}
		got, err := recoverAll(t, n, cfg, core)
		require.NoError(t, err, "op %d", k)
		require.Equal(t, []int{2, 2}, got, "op %d", k)
	}
	assert.Positive(t, flushFailures)
}
