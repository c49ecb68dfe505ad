package ckpt

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// Two jobs that share storage (issue 27, item 1). Job A and job B share
// glbl_dir (and, in some cases, ckpt_dir); each has its own meta_dir.

// sharedConfigs returns the configurations of jobs A and B under root:
// glbl_dir shared, and ckpt_dir too when sharedLocal.
func sharedConfigs(root string, sharedLocal bool) (a, b Config) {
	a, b = testConfig(root, 1), testConfig(root, 1)
	a.MetaDir, b.MetaDir = filepath.Join(root, "meta-a"), filepath.Join(root, "meta-b")
	if !sharedLocal {
		a.CkptDir, b.CkptDir = filepath.Join(root, "local-a"), filepath.Join(root, "local-b")
	}
	return a, b
}

// treeDigests returns the BLAKE3 of every regular file under the roots,
// by path, and "dir" for every directory.
func treeDigests(t testing.TB, roots ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				out[p] = "dir"
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := blake3.Sum256(b)
			out[p] = hex.EncodeToString(sum[:])
			return nil
		})
		require.NoError(t, err)
	}
	return out
}

// assertUntouched checks that every file of before is still there with
// the same bytes in after (directories may have gained entries).
func assertUntouched(t testing.TB, before, after map[string]string, who string) {
	t.Helper()
	var changed []string
	for p, d := range before {
		if d == "dir" {
			if after[p] != "dir" {
				changed = append(changed, p+" (directory removed)")
			}
			continue
		}
		switch got, ok := after[p]; {
		case !ok:
			changed = append(changed, p+" (removed)")
		case got != d:
			changed = append(changed, p+" (changed)")
		}
	}
	assert.Empty(t, changed, "%s touched files it does not own", who)
}

// jobData is the protected state of job j on rank r at step s: jobs A
// and B protect different lengths, so a restart from the other's
// checkpoint shows.
func jobData(job string, rank, step int) []int64 {
	n := map[string]int{"A": 1000, "B": 5000}[job]
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(job[0])<<40 | int64(rank)<<32 | int64(step)<<20 | int64(i)
	}
	return out
}

// runJob runs job j on n ranks: on a restart it recovers and checks the
// data of the step it restarted from (returned through *restarted), then
// checkpoints steps at the given levels, and ends with Finalize when
// finalize is set (else Close: the checkpoints stay).
func runJob(t testing.TB, cfg Config, job string, n int, levels []int, finalize bool, restarted *int) error {
	var mu sync.Mutex
	return world(t, n, cfg, nil, func(r *Runtime) error {
		rank := r.c.Rank()
		x := make([]int64, len(jobData(job, rank, 0)))
		if err := Protect(r, 1, &x); err != nil {
			return err
		}
		step := 0
		if r.Status() != Fresh {
			if err := r.Recover(); err != nil {
				return err
			}
			step = int(r.Recovered().ID)
			if want := jobData(job, rank, step); !assert.ObjectsAreEqual(want, x) {
				return fmt.Errorf("job %s rank %d: restart from checkpoint %d: %d elements, not job %s's data of that step (%d elements)",
					job, rank, step, len(x), job, len(want))
			}
		}
		if rank == 0 && restarted != nil {
			mu.Lock()
			*restarted = step
			mu.Unlock()
		}
		for _, l := range levels {
			step++
			copy(x, jobData(job, rank, step))
			if err := r.Checkpoint(int64(step), l); err != nil {
				return err
			}
		}
		if finalize {
			return r.Finalize()
		}
		return nil
	})
}

// TestRunsSharedGlobalKept: job A keeps its last checkpoint at L4
// (keep_last_ckpt) in the shared glbl_dir; job B, with its own ckpt_dir
// and meta_dir, starts fresh. It does not restart from A's checkpoint
// (which would resize B's slice to A's length), and A's files are
// untouched. A's relaunch still restarts from its kept checkpoint.
func TestRunsSharedGlobalKept(t *testing.T) {
	root := t.TempDir()
	a, b := sharedConfigs(root, false)
	a.GroupSize, b.GroupSize = 2, 2
	a.KeepLastCkpt = true
	require.NoError(t, runJob(t, a, "A", 2, []int{1, 2, 4}, true, nil))
	before := treeDigests(t, root)
	restarted := -1
	require.NoError(t, runJob(t, b, "B", 2, []int{1}, false, &restarted))
	assert.Equal(t, 0, restarted, "job B must start fresh")
	assertUntouched(t, before, treeDigests(t, root), "job B")
	restarted = -1
	require.NoError(t, runJob(t, a, "A", 2, nil, false, &restarted))
	assert.Equal(t, 3, restarted, "job A restarts from its kept checkpoint")
}

// TestRunsSharedStorageInTurn: jobs A and B share glbl_dir and ckpt_dir
// and run one after the other. B starts fresh and neither touches the
// other's files: B's retention leaves A's checkpoints, and A's relaunch
// leaves B's. Each relaunch restarts from its own newest checkpoint, bit
// for bit.
func TestRunsSharedStorageInTurn(t *testing.T) {
	for _, lvls := range [][]int{{1, 1}, {2, 3}, {4, 1}} {
		t.Run(fmt.Sprint(lvls), func(t *testing.T) {
			root := t.TempDir()
			a, b := sharedConfigs(root, true)
			a.GroupSize, b.GroupSize = 2, 2
			const n = 4
			require.NoError(t, runJob(t, a, "A", n, lvls, false, nil))
			beforeB := treeDigests(t, root)
			restarted := -1
			require.NoError(t, runJob(t, b, "B", n, append(lvls, 1, 2), false, &restarted))
			assert.Equal(t, 0, restarted, "job B must start fresh")
			afterB := treeDigests(t, root)
			assertUntouched(t, beforeB, afterB, "job B")
			// B's own files, which A's relaunch must leave alone.
			bFiles := map[string]string{}
			for p, d := range afterB {
				if _, ok := beforeB[p]; !ok {
					bFiles[p] = d
				}
			}
			restarted = -1
			require.NoError(t, runJob(t, a, "A", n, []int{1, 4}, false, &restarted))
			assert.Equal(t, len(lvls), restarted, "job A restarts from its newest checkpoint")
			assertUntouched(t, bFiles, treeDigests(t, root), "job A's relaunch")
			restarted = -1
			require.NoError(t, runJob(t, b, "B", n, nil, true, &restarted))
			assert.Equal(t, len(lvls)+2, restarted, "job B restarts from its newest checkpoint")
		})
	}
}

// TestRunsSharedStorageAtOnce: jobs A and B run at the same time on the
// same glbl_dir and ckpt_dir (each its own meta_dir). Both work, and
// each relaunch restarts from its own newest checkpoint bit for bit.
func TestRunsSharedStorageAtOnce(t *testing.T) {
	root := t.TempDir()
	a, b := sharedConfigs(root, true)
	a.GroupSize, b.GroupSize = 2, 2
	const n = 4
	lvls := []int{4, 1, 2, 3, 4, 1, 4, 2}
	var wg sync.WaitGroup
	errs := map[string]error{}
	var mu sync.Mutex
	for _, j := range []struct {
		name string
		cfg  Config
	}{{"A", a}, {"B", b}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := runJob(t, j.cfg, j.name, n, lvls, false, nil)
			mu.Lock()
			errs[j.name] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	for j, err := range errs {
		if err != nil && strings.Contains(err.Error(), "metadata lost") && len(err.Error()) > 300 {
			t.Logf("job %s: a %d-character error", j, len(err.Error()))
		}
		require.NoError(t, err, "job %s", j)
	}
	for _, j := range []struct {
		name string
		cfg  Config
	}{{"A", a}, {"B", b}} {
		restarted := -1
		require.NoError(t, runJob(t, j.cfg, j.name, n, nil, true, &restarted), "relaunch of job %s", j.name)
		assert.Equal(t, len(lvls), restarted, "job %s restarts from its newest checkpoint", j.name)
	}
}

// TestRunsSharedGlobalInFlight: job B starts while job A, on the same
// glbl_dir, has published the files of an L4 checkpoint and not yet its
// manifest replica. B starts fresh (today it failed with a long "metadata
// lost"), takes checkpoints of its own, and both relaunches restart from
// their own newest checkpoint.
func TestRunsSharedGlobalInFlight(t *testing.T) {
	root := t.TempDir()
	a, b := sharedConfigs(root, false)
	a.GroupSize, b.GroupSize = 2, 2
	const n = 2
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	aGlobal := vfd.NewFault(vfd.Sec2{}, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpOpen && strings.HasSuffix(op.Path, levels.ReplicaName(2)) {
			once.Do(func() { close(paused); <-resume })
		}
		return nil
	}))
	aDone := make(chan error, 1)
	go func() {
		aDone <- world(t, n, a, []Option{WithDrivers(vfd.Sec2{}, aGlobal, vfd.Sec2{})}, func(r *Runtime) error {
			x := jobData("A", r.c.Rank(), 1)
			return errors.Join(Protect(r, 1, &x), r.Checkpoint(1, 4), r.Checkpoint(2, 4))
		})
	}()
	select {
	case <-paused:
	case err := <-aDone:
		t.Fatalf("job A ended before its second checkpoint's manifest: %v", err)
	}
	restarted := -1
	errB := runJob(t, b, "B", n, []int{4, 4}, false, &restarted)
	close(resume)
	require.NoError(t, <-aDone)
	require.NoError(t, errB, "job B, started while job A was committing")
	assert.Equal(t, 0, restarted, "job B must start fresh")
	restarted = -1
	require.NoError(t, runJob(t, b, "B", n, nil, true, &restarted))
	assert.Equal(t, 2, restarted)
}

// runOf returns the run cfg's meta_dir names ("" for none), read
// through d (vfd.Sec2 when not given).
func runOf(t testing.TB, cfg Config, d ...vfd.Driver) string {
	t.Helper()
	drv := vfd.Driver(vfd.Sec2{})
	if len(d) > 0 {
		drv = d[0]
	}
	id, _, err := levels.ReadRun(levels.Store{Driver: drv, Dir: cfg.MetaDir})
	require.NoError(t, err)
	return id
}
