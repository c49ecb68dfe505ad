package ckpt

import (
	"errors"
	"fmt"

	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/h5ckpt"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/testutil"
	"github.com/ftigo/ftigo/vfd"
)

// h5pyCheck has h5py read the HDF5 checkpoint at path: every element of
// both datasets of reshapeWriter (the field computed here from its
// formula, the ids from theirs) and each rank's variable outside them.
func h5pyCheck(t *testing.T, path string, nd, ranks int) {
	py := testutil.NeedPython(t, "h5py", "numpy")
	shape := fmt.Sprint(reshapeShapes[nd])
	out, err := exec.Command(py, "-c", `
import sys, math, h5py, numpy as np
path, shape, ranks = sys.argv[1], tuple(int(x) for x in sys.argv[2].strip('[]').split()), int(sys.argv[3])
f = h5py.File(path, 'r')
x = f['fields/temperature'][...]
assert x.shape == shape and x.dtype == np.dtype('<f8'), (x.shape, x.dtype)
want = np.arange(x.size, dtype=np.float64).reshape(shape) * 0.25 + 1e6 + math.pi
assert x.tobytes() == want.tobytes(), 'field differs'
ids = f['ids'][...]
assert ids.dtype == np.dtype('<i4') and ids.tolist() == [i * 7 - 3 for i in range(101)], ids
for r in range(ranks):
    assert f['ftigo/rank%d/3' % r][...].tolist() == [r, 4242], r
print('h5py ok', x.shape)
`, path, shape, fmt.Sprint(ranks)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "h5py ok")
}

// TestL4AsHDF5: with ckpt_io = 5, L4 checkpoints are one HDF5 file in the
// checkpoint's global directory; h5py reads the global datasets equal to
// what the ranks wrote; a restart on the same ranks recovers locally,
// one on another count redistributes from the file.
func TestL4AsHDF5(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	cfg.CkptIO = 5
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		if _, _, _, err := reshapeWriter(r, 2); err != nil {
			return err
		}
		return r.Checkpoint(3, 4)
	}))
	h5 := filepath.Join(cfg.GlobalDir(runOf(t, cfg)), "ckpt00000001", levels.H5Name)
	h5pyCheck(t, h5, 2, 4)
	// h5dump parses the whole file.
	h5dump := testutil.NeedTool(t, "h5dump", "check that libhdf5 reads the HDF5 L4 checkpoint")
	out, err := exec.Command(h5dump, "--enable-error-stack", "-H", h5).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), `DATASET "temperature"`)
	ms, err := levels.ScanManifests(levels.Store{Driver: vfd.Sec2{}, Dir: cfg.MetaDir})
	require.NoError(t, err)
	require.Len(t, ms, 1)
	m := ms[0].M
	require.NotNil(t, m)
	f, ok := m.DataFile(2)
	require.True(t, ok)
	assert.Equal(t, levels.DigestH5, f.Attrs[levels.AttrDigest])
	hf, err := h5ckpt.Open(vfd.Sec2{}, h5)
	require.NoError(t, err)
	th := hf.TablesHash()
	assert.Equal(t, levels.Digest(th), f.Digest, "the manifest records the tables hash")
	require.NoError(t, hf.Close())

	// Same count: a local Recover from the file.
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		field, ids, owner, err := reshapeWriter(r, 2)
		if err != nil {
			return err
		}
		if r.Reshaped() || r.Status() != Restart {
			return fmt.Errorf("reshaped %v, status %v", r.Reshaped(), r.Status())
		}
		want := []any{slicesClone(field), slicesClone(ids), slicesClone(owner)}
		clear(field)
		clear(ids)
		owner[0] = -1
		if r.c.Rank() != 1 { // local: rank 1 does not take part
			if err := r.Recover(); err != nil {
				return err
			}
			if !assert.ObjectsAreEqual(want, []any{field, ids, owner}) {
				return fmt.Errorf("rank %d: data differs", r.c.Rank())
			}
		}
		return nil
	}))
	// Another count: from the same file.
	require.NoError(t, world(t, 6, cfg, nil, func(r *Runtime) error { return reshapeReader(r, 2, 4, false) }))
	// ckpt_io changed back: the HDF5 L4 checkpoint is still recovered.
	cfg.CkptIO = 3
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		field, _, _, err := reshapeWriter(r, 2)
		if err != nil {
			return err
		}
		want := slicesClone(field)
		clear(field)
		if err := r.Recover(); err != nil {
			return err
		}
		if !assert.ObjectsAreEqual(want, field) {
			return fmt.Errorf("rank %d: field differs", r.c.Rank())
		}
		return r.Checkpoint(4, 4) // and the next L4 is a SIONlib container again
	}))
	// ckpt_io = 5 again: the SIONlib L4 checkpoint is recovered.
	cfg.CkptIO = 5
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		field, _, _, err := reshapeWriter(r, 2)
		if err != nil {
			return err
		}
		want := slicesClone(field)
		clear(field)
		if err := r.Recover(); err != nil {
			return err
		}
		if !assert.ObjectsAreEqual(want, field) {
			return fmt.Errorf("rank %d: field differs", r.c.Rank())
		}
		return nil
	}))
}

func slicesClone[T any](s []T) []T { return append([]T(nil), s...) }

// TestLevel9: level 9 writes the HDF5 single file (h5_single_file_dir,
// _prefix), replacing the previous one unless h5_single_file_keep; a
// restart on any number of ranks recovers from the newest (status
// RestartVPR) when it is newer than every committed checkpoint; Finalize
// leaves the files but restarts no more from them.
func TestLevel9(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	cfg.H5SingleFileDir = filepath.Join(root, "vpr")
	cfg.H5SingleFilePrefix = "heat"
	// Without h5_single_file_enable, level 9 is unavailable.
	err := world(t, 2, cfg, nil, func(r *Runtime) error {
		if _, _, _, err := reshapeWriter(r, 1); err != nil {
			return err
		}
		return r.Checkpoint(1, LevelH5Single)
	})
	require.ErrorIs(t, err, ErrLevelUnavailable)
	assert.Contains(t, err.Error(), "h5_single_file_enable = 1")

	cfg.H5SingleFileEnable = true
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			root := t.TempDir()
			cfg := cfg
			cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(root, "local"), filepath.Join(root, "global"), filepath.Join(root, "meta")
			cfg.H5SingleFileDir, cfg.H5SingleFileKeep = filepath.Join(root, "vpr"), keep
			require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
				if _, _, _, err := reshapeWriter(r, 3); err != nil {
					return err
				}
				if err := r.Checkpoint(1, 1); err != nil {
					return err
				}
				if err := r.Checkpoint(2, LevelH5Single); err != nil {
					return err
				}
				return r.Checkpoint(3, LevelH5Single)
			}))
			name2, name3 := h5ckpt.Name(cfg.H5SingleFileDir, "heat", 2), h5ckpt.Name(cfg.H5SingleFileDir, "heat", 3)
			_, err := vfd.Sec2{}.Stat(name2)
			assert.Equal(t, keep, err == nil, "the previous level-9 file stays only with h5_single_file_keep")
			h5pyCheck(t, name3, 3, 4)
			// Restart on 7 ranks: from the level-9 file, the newest.
			require.NoError(t, world(t, 7, cfg, nil, func(r *Runtime) error {
				if r.Status() != RestartVPR || r.Recovered().ID != 3 {
					return fmt.Errorf("status %v, recovered %d", r.Status(), r.Recovered().ID)
				}
				if err := reshapeReader(r, 3, 4, false); err != nil {
					return err
				}
				return r.Finalize()
			}))
			_, err = vfd.Sec2{}.Stat(name3)
			require.NoError(t, err, "Finalize leaves the level-9 file (the run's HDF5 output)")
			require.NoError(t, world(t, 3, cfg, nil, func(r *Runtime) error {
				if r.Status() != Fresh {
					return fmt.Errorf("status %v after a finalized run", r.Status())
				}
				return nil
			}))
		})
	}
	t.Run("older than a committed checkpoint", func(t *testing.T) {
		root := t.TempDir()
		cfg := cfg
		cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(root, "local"), filepath.Join(root, "global"), filepath.Join(root, "meta")
		cfg.H5SingleFileDir = filepath.Join(root, "vpr")
		require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
			x := []int64{1}
			if err := Protect(r, 0, &x); err != nil {
				return err
			}
			if err := r.Checkpoint(1, LevelH5Single); err != nil {
				return err
			}
			time.Sleep(2 * time.Millisecond)
			x[0] = 2
			return r.Checkpoint(2, 1)
		}))
		require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
			var x []int64
			if err := Protect(r, 0, &x); err != nil {
				return err
			}
			if r.Status() != Restart || r.Reshaped() {
				return fmt.Errorf("status %v, reshaped %v", r.Status(), r.Reshaped())
			}
			if err := r.Recover(); err != nil {
				return err
			}
			if len(x) != 1 || x[0] != 2 {
				return fmt.Errorf("recovered %v, want the L1 checkpoint's [2]", x)
			}
			return nil
		}))
		// The L1 files are lost: the older level-9 file is the fallback.
		require.NoError(t, vfd.Sec2{}.RemoveAll(filepath.Join(root, "local")))
		require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
			var x []int64
			if err := Protect(r, 0, &x); err != nil {
				return err
			}
			if r.Status() != RestartVPR {
				return fmt.Errorf("status %v", r.Status())
			}
			if err := r.Recover(); err != nil {
				return err
			}
			if len(x) != 1 || x[0] != 1 {
				return fmt.Errorf("recovered %v, want the level-9 file's [1]", x)
			}
			return nil
		}))
	})
	t.Run("damaged file", func(t *testing.T) {
		root := t.TempDir()
		cfg := cfg
		cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(root, "local"), filepath.Join(root, "global"), filepath.Join(root, "meta")
		cfg.H5SingleFileDir = filepath.Join(root, "vpr")
		require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
			x := make([]float64, 50000)
			for i := range x {
				x[i] = float64(i)
			}
			if err := Protect(r, 0, &x); err != nil {
				return err
			}
			return r.Checkpoint(1, LevelH5Single)
		}))
		name := h5ckpt.Name(cfg.H5SingleFileDir, "heat", 1)
		corruptAt(t, name, 100000) // inside rank 0's variable
		err := world(t, 2, cfg, nil, func(r *Runtime) error { return nil })
		require.ErrorIs(t, err, ErrUnrecoverable)
		assert.Contains(t, err.Error(), name)
		assert.Contains(t, err.Error(), "hash mismatch: block 1 of the variable")
	})
}

// corruptAt flips a byte of the file at off.
func corruptAt(t *testing.T, p string, off int64) {
	t.Helper()
	f, err := vfd.Sec2{}.Open(p, vfd.ReadWrite)
	require.NoError(t, err)
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x40
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestCrashAtEveryOpHDF5: a crash (or a failure) at every file
// operation of an HDF5 checkpoint — L4 with ckpt_io = 5, and level 9 —
// leaves a restart with exactly the previous checkpoint or exactly the
// new one, on every rank; a failed checkpoint reports the same error
// everywhere and changes nothing a restart sees.
func TestCrashAtEveryOpHDF5(t *testing.T) {
	for _, lvl := range []int{4, LevelH5Single} {
		for _, crash := range []bool{true, false} {
			name := fmt.Sprintf("L%d/crash=%v", lvl, crash)
			t.Run(name, func(t *testing.T) {
				const n = 3
				cfg := testConfig("/", 1)
				if lvl == 4 {
					cfg.CkptIO = 5
				} else {
					cfg.H5SingleFileEnable = true
				}
				stride := 1
				if raceEnabled {
					stride = 5
				}
				outcomes := map[int]int{}
				for k := 0; ; k += stride {
					core := vfd.NewCore()
					commitVersion1(t, n, cfg, core, 1, WithLogger(zap.NewNop()))
					time.Sleep(time.Millisecond) // the new checkpoint is strictly newer
					inj := &crashInjector{core: core, crash: crash, k: k}
					inj.base.Store(-1)
					fault := vfd.NewFault(core, inj)
					var mu sync.Mutex
					var errs []error
					runErr := comm.Run(n, func(c comm.Comm) error {
						r, err := Init(cfg, c, WithDriver(fault), WithLogger(zap.NewNop()))
						if err != nil {
							return err
						}
						defer r.Close()
						x, ver := version(c.Rank(), 2), []int64{2}
						if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
							return err
						}
						if err := c.Barrier(); err != nil {
							return err
						}
						if c.Rank() == 0 {
							inj.base.Store(int64(fault.Ops()))
						}
						if err := c.Barrier(); err != nil {
							return err
						}
						err = r.Checkpoint(2, lvl)
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						if crash {
							return err
						}
						return nil
					}, comm.WithTimeout(20*time.Second))
					if !inj.hit {
						require.NoError(t, runErr)
						t.Logf("%s: %d operations per checkpoint, outcomes %v", name, k, outcomes)
						break
					}
					after := vfd.Driver(core)
					if crash {
						after = inj.clone
					} else {
						require.NoError(t, runErr, "op %d", k)
						for _, e := range errs {
							if errs[0] == nil {
								require.NoError(t, e, "op %d: ranks disagree", k)
							} else {
								require.Error(t, e, "op %d", k)
								assert.Equal(t, errs[0].Error(), e.Error(), "op %d: ranks disagree", k)
							}
						}
					}
					got, err := recoverAll(t, n, cfg, after)
					require.NoError(t, err, "op %d", k)
					requireSameVersion(t, got, k)
					require.Contains(t, []int{1, 2}, got[0], "op %d", k)
					if (crash && runErr == nil) || (!crash && errs[0] == nil) {
						require.Equal(t, 2, got[0], "op %d: the checkpoint succeeded but restart found version %d", k, got[0])
					}
					if !crash && errs[0] != nil {
						require.Equal(t, 1, got[0], "op %d: the checkpoint failed but restart found version 2", k)
					}
					outcomes[got[0]]++
				}
				assert.Positive(t, outcomes[1], "some crashes lose the new checkpoint")
			})
		}
	}
}

// TestLevel9OtherRun: two runs sharing h5_single_file_dir (each its own
// meta_dir, so its own run id): the second one's level-9 checkpoint of
// the same id refuses to overwrite the first one's file, naming the file
// and both runs, and the first run still restarts from its file.
func TestLevel9OtherRun(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	cfg.H5SingleFileEnable, cfg.H5SingleFileDir = true, filepath.Join(root, "vpr")
	a, b := cfg, cfg
	a.MetaDir, b.MetaDir = filepath.Join(root, "meta-a"), filepath.Join(root, "meta-b")
	var runA string
	require.NoError(t, world(t, 2, a, nil, func(r *Runtime) error {
		if r.c.Rank() == 0 {
			runA = r.run
		}
		if _, _, _, err := reshapeWriter(r, 1); err != nil {
			return err
		}
		return r.Checkpoint(1, LevelH5Single)
	}))
	name := h5ckpt.Name(cfg.H5SingleFileDir, "VPR-h5", 1)
	before, err := os.ReadFile(name)
	require.NoError(t, err)
	var runB string
	err = world(t, 2, b, nil, func(r *Runtime) error {
		if r.c.Rank() == 0 {
			runB = r.run
		}
		if _, _, _, err := reshapeWriter(r, 1); err != nil {
			return err
		}
		return r.Checkpoint(1, LevelH5Single)
	})
	// (rank 0 found it; the world returns another rank's copy of the text)
	require.Error(t, err)
	require.NotEqual(t, runA, runB)
	for _, s := range []string{ErrOtherRun.Error(), "will not overwrite " + name, "run " + runA, "run " + runB} {
		assert.Contains(t, err.Error(), s)
	}
	after, rerr := os.ReadFile(name)
	require.NoError(t, rerr)
	assert.Equal(t, before, after, "run B changed run A's level-9 file")
	require.NoError(t, world(t, 3, a, nil, func(r *Runtime) error {
		if r.Status() != RestartVPR || r.Recovered().ID != 1 {
			return fmt.Errorf("status %v, recovered %d", r.Status(), r.Recovered().ID)
		}
		return reshapeReader(r, 1, 2, false)
	}))
}
