package ckpt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/testutil"
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

// treeDigests is testutil.TreeDigests: every file's digest, and "dir"
// for every directory.
func treeDigests(t testing.TB, roots ...string) map[string]string {
	t.Helper()
	return testutil.TreeDigests(t, roots...)
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

// initErr runs Init on n ranks with cfg and returns rank 0's error
// (every rank's must be the same).
func initErr(t *testing.T, n int, cfg Config) error {
	t.Helper()
	errs := initErrors(t, n, cfg)
	for _, err := range errs {
		require.Error(t, err)
		assert.Equal(t, errs[0].Error(), err.Error())
	}
	return errs[0]
}

// TestRunNamed: a job names a run to restart (Config.Run, [restart]
// exec_id with failure = 1 or 2). On the run's own meta_dir that is a
// plain relaunch. From a new meta_dir it is refused while the run's
// meta_dir still names it, and once that meta_dir is lost it takes the
// run over: it restarts from the run's newest checkpoint bit for bit,
// and its meta_dir names the run from then on. A run glbl_dir does not
// hold, another run than meta_dir's, and a meta_dir from before run ids
// are refused on every rank.
func TestRunNamed(t *testing.T) {
	root := t.TempDir()
	a, _ := sharedConfigs(root, true)
	a.GroupSize = 2
	const n = 4
	require.NoError(t, runJob(t, a, "A", n, []int{1, 2, 3}, false, nil))
	run := runOf(t, a)
	require.NotEmpty(t, run)

	named := a
	named.Run = run
	restarted := -1
	require.NoError(t, runJob(t, named, "A", n, nil, false, &restarted), "the run's own meta_dir")
	assert.Equal(t, 3, restarted)

	other := named
	other.MetaDir = filepath.Join(root, "meta-x")
	err := initErr(t, n, other)
	require.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), "run "+run+" belongs to meta_dir "+a.MetaDir+", which still names it")
	require.NoError(t, os.RemoveAll(a.MetaDir)) // the run's meta_dir is lost
	restarted = -1
	require.NoError(t, runJob(t, other, "A", n, []int{1}, false, &restarted), "taken over from glbl_dir")
	assert.Equal(t, 3, restarted)
	assert.Equal(t, run, runOf(t, other))
	restarted = -1
	other.Run = ""
	require.NoError(t, runJob(t, other, "A", n, nil, true, &restarted), "the new meta_dir names the run")
	assert.Equal(t, 4, restarted)

	missing := other
	missing.MetaDir, missing.Run = filepath.Join(root, "meta-y"), "2000-01-01_00-00-00_nothing"
	err = initErr(t, n, missing)
	require.ErrorIs(t, err, ErrUnrecoverable)
	assert.Contains(t, err.Error(), "glbl_dir "+a.GlblDir+" holds no such run")

	b, _ := sharedConfigs(t.TempDir(), true)
	require.NoError(t, runJob(t, b, "B", 1, []int{1}, false, nil))
	b.Run = run
	err = initErr(t, 1, b)
	require.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), "meta_dir "+b.MetaDir+" belongs to run "+runOf(t, b))

	// A damaged run file is refused on every rank, naming it; nothing
	// starts fresh beside the run's checkpoints.
	b.Run = ""
	runFile := filepath.Join(b.MetaDir, levels.RunFile)
	require.NoError(t, os.WriteFile(runFile, []byte("ftigo-run ../elsewhere\n"), 0o644))
	err = initErr(t, 2, b)
	require.ErrorIs(t, err, levels.ErrBadRun)
	assert.Contains(t, err.Error(), runFile)
}

// TestRunLockNamesHolder: a job that takes over a run another job still
// runs (its meta_dir lost under it) is refused by the run directory's
// lock, naming the holder and its meta_dir.
func TestRunLockNamesHolder(t *testing.T) {
	root := t.TempDir()
	a, _ := sharedConfigs(root, true)
	held, release := make(chan string), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- world(t, 1, a, nil, func(r *Runtime) error {
			x := []int64{1}
			if err := errors.Join(Protect(r, 1, &x), r.Checkpoint(1, 1)); err != nil {
				return err
			}
			held <- r.Run()
			<-release
			return nil
		})
	}()
	run := <-held
	require.NoError(t, os.Rename(a.MetaDir, a.MetaDir+".lost")) // lost under the running job
	x := a
	x.MetaDir, x.Run = filepath.Join(root, "meta-x"), run
	err := initErr(t, 1, x)
	close(release)
	require.NoError(t, <-done)
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), fmt.Sprintf("run %s in glbl_dir %s is in use by %s (pid %d on host ", run, filepath.Join(a.GlblDir, run), filepath.Base(os.Args[0]), os.Getpid()))
	assert.Contains(t, err.Error(), "meta_dir "+a.MetaDir+")", "the holder's meta_dir, as it recorded it")
}

// TestRunFromBeforeRunIDs: a meta_dir written before runs existed (no
// run file, manifests without a run, checkpoints in glbl_dir and
// ckpt_dir/node%04d themselves) belongs to the run that owns it: a
// restart recovers its checkpoint bit for bit and keeps the flat
// directories while it has checkpoints; a job on its own meta_dir beside
// it starts fresh and leaves its files alone. Once Finalize has deleted
// them, the next start begins a run with an id.
func TestRunFromBeforeRunIDs(t *testing.T) {
	root := t.TempDir()
	a, b := sharedConfigs(root, true)
	a.GroupSize, b.GroupSize = 2, 2
	const n = 4
	require.NoError(t, runJob(t, a, "A", n, []int{1, 4, 2}, false, nil))
	flatten(t, a, n)
	before := treeDigests(t, root)
	restarted := -1
	require.NoError(t, runJob(t, b, "B", n, []int{1, 2}, false, &restarted))
	assert.Equal(t, 0, restarted, "job B starts fresh")
	assertUntouched(t, before, treeDigests(t, root), "job B")

	restarted = -1
	require.NoError(t, world(t, n, a, nil, func(r *Runtime) error {
		if r.Run() != "" || r.env.Global.Dir != a.GlblDir {
			return fmt.Errorf("run %q in %s: not the flat directories", r.Run(), r.env.Global.Dir)
		}
		return nil
	}))
	require.NoError(t, runJob(t, a, "A", n, []int{3}, false, &restarted))
	assert.Equal(t, 3, restarted)
	assert.Empty(t, runOf(t, a))
	_, err := os.Stat(filepath.Join(a.NodeDir(0, ""), levels.CheckpointDir(4)))
	require.NoError(t, err, "the run keeps the flat directories")
	restarted = -1
	require.NoError(t, runJob(t, a, "A", n, nil, true, &restarted))
	assert.Equal(t, 4, restarted)
	restarted = -1
	require.NoError(t, runJob(t, a, "A", n, []int{1}, false, &restarted))
	assert.Equal(t, 0, restarted)
	assert.NotEmpty(t, runOf(t, a), "a new run, with an id")
}

// flatten turns cfg's run into what versions before run ids wrote: its
// directories' contents moved to glbl_dir and ckpt_dir/node%04d, its
// manifests without the run, and no run file.
func flatten(t *testing.T, cfg Config, nodes int) {
	t.Helper()
	run := runOf(t, cfg)
	move := func(from, to string) {
		ents, err := os.ReadDir(from)
		require.NoError(t, err)
		for _, e := range ents {
			if e.Name() != levels.LockName {
				require.NoError(t, os.Rename(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())))
			}
		}
		require.NoError(t, os.RemoveAll(from))
	}
	move(cfg.GlobalDir(run), cfg.GlblDir)
	for n := range nodes {
		move(cfg.NodeDir(n, run), cfg.NodeDir(n, ""))
	}
	for _, dir := range []string{cfg.MetaDir, filepath.Join(cfg.GlblDir, levels.ReplicaDir)} {
		ms, err := levels.ScanManifests(levels.Store{Driver: vfd.Sec2{}, Dir: dir})
		require.NoError(t, err)
		for _, sm := range ms {
			require.NoError(t, sm.Err)
			sm.M.Run = ""
			b, err := sm.M.Marshal()
			require.NoError(t, err)
			assert.NotContains(t, string(b), `"run"`)
			require.NoError(t, os.WriteFile(filepath.Join(dir, sm.Name), b, 0o644))
		}
	}
	require.NoError(t, os.Remove(filepath.Join(cfg.MetaDir, levels.RunFile)))
}

// TestRunConfigKeys: [restart] exec_id names the run to restart when
// failure is 1 or 2, as FTI reads it, and is ignored otherwise (FTI
// starts a new execution then). FormatConfig writes it back. An exec_id
// that cannot name a directory is refused with the file and line.
func TestRunConfigKeys(t *testing.T) {
	const base = "[basic]\nckpt_dir = /l\nglbl_dir = /g\nmeta_dir = /m\n[restart]\n"
	for _, tc := range []struct {
		text, run, warning string
	}{
		{"failure = 1\nexec_id = 2017-03-14_11-08-52", "2017-03-14_11-08-52", ""},
		{"exec_id = 2017-03-14_11-08-52_ab\nfailure = 2", "2017-03-14_11-08-52_ab", ""},
		{"failure = 0\nexec_id = 2017-03-14_11-08-52", "", ""},
		{"failure = 3\nexec_id = 2017-03-14_11-08-52", "", "failure = 3 ignored"},
		{"failure = 1", "", "failure = 1 ignored"},
		{"failure = 1\nexec_id =", "", "failure = 1 ignored"},
	} {
		c, err := ParseConfig("cfg", []byte(base+tc.text))
		require.NoError(t, err, tc.text)
		assert.Equal(t, tc.run, c.Run, tc.text)
		if tc.warning == "" {
			assert.Empty(t, c.Warnings, tc.text)
		} else {
			require.Len(t, c.Warnings, 1, tc.text)
			assert.Contains(t, c.Warnings[0], tc.warning)
		}
		if c.Run != "" {
			b, err := FormatConfig(c)
			require.NoError(t, err)
			back, err := ParseConfig("back", b)
			require.NoError(t, err)
			assert.Equal(t, c.Run, back.Run)
		}
	}
	for _, bad := range []string{"../up", "manifests", "ckpt00000001", "a b", "-x"} {
		_, err := ParseConfig("cfg", []byte(base+"failure = 1\nexec_id = "+bad))
		require.ErrorIs(t, err, ErrConfig, bad)
		assert.Contains(t, err.Error(), "cfg:7: [restart] exec_id = "+bad)
		require.ErrorIs(t, err, levels.ErrBadRun, bad)
	}
	c := testConfig(t.TempDir(), 1)
	c.Run = "x/y"
	require.ErrorIs(t, c.Validate(1), ErrConfig)
}
