package ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// asyncConfig is a 4-rank, 4-node configuration (groups of 2) with level
// lvl post-processed in the background.
func asyncConfig(root string, lvl int) Config {
	cfg := testConfig(root, 1)
	cfg.GroupSize = 2
	cfg.Async[lvl] = true
	return cfg
}

// eraseNode removes node n's local directory from d.
func eraseNode(t *testing.T, d vfd.Driver, cfg Config, n int) {
	require.NoError(t, d.RemoveAll(path.Join(cfg.CkptDir, fmt.Sprintf("node%04d", n))))
}

// lose erases what a restart at lvl must survive: node 0 for L2 and L3,
// every node for L4.
func lose(t *testing.T, d vfd.Driver, cfg Config, lvl int) {
	nodes := []int{0}
	if lvl == 4 {
		nodes = []int{0, 1, 2, 3}
	}
	for _, n := range nodes {
		eraseNode(t, d, cfg, n)
	}
}

// TestAsyncLevels takes checkpoints at L2, L3 and L4 with their
// post-processing in the background: Checkpoint commits at L1, the
// raise commits at the level, the next Checkpoint waits for it, and a
// restart after losing what the level protects against recovers the
// newest checkpoint bit for bit.
func TestAsyncLevels(t *testing.T) {
	for _, lvl := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			core := vfd.NewCore()
			cfg := asyncConfig("/", lvl)
			require.NoError(t, comm.Run(4, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
				if err != nil {
					return err
				}
				var x []uint64
				ver := []int64{0}
				if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
					return err
				}
				for v := 1; v <= 3; v++ {
					x, ver[0] = version(c.Rank(), v), int64(v)
					if err := r.Checkpoint(int64(v), lvl); err != nil {
						return err
					}
					// Committed at L1 on the solver's path. (The engine
					// belongs to the poster until CheckpointWait: r.last
					// is the rank's view.)
					if got := r.last; got.ID != int64(v) || got.Level != levels.L1 {
						return fmt.Errorf("rank %d: checkpoint %d committed at %v, want L1 first", c.Rank(), got.ID, got.Level)
					}
					// The solver changes its data meanwhile: the background
					// copy is made from the committed file.
					x[0] = 0xdead
					if v == 2 {
						continue // the next Checkpoint waits for it
					}
					if err := r.CheckpointWait(); err != nil {
						return err
					}
					if done, err := r.CheckpointDone(); !done || err != nil {
						return fmt.Errorf("rank %d: done %v, %v after CheckpointWait", c.Rank(), done, err)
					}
					cm := r.eng.Committed()
					if len(cm) != 1 || cm[0].ID != int64(v) || cm[0].Level != levels.ID(lvl) {
						return fmt.Errorf("rank %d: after the raise committed %d checkpoints, newest %d at %v", c.Rank(), len(cm), cm[len(cm)-1].ID, cm[len(cm)-1].Level)
					}
					if r.last.Level != levels.ID(lvl) {
						return fmt.Errorf("rank %d: Recover does not read the raised checkpoint", c.Rank())
					}
				}
				return r.Close()
			}, comm.WithTimeout(30*time.Second)))
			lose(t, core, cfg, lvl)
			got, err := recoverAll(t, 4, cfg, core)
			require.NoError(t, err)
			assert.Equal(t, []int{3, 3, 3, 3}, got)
		})
	}
}

// TestAsyncFailure fails the L4 container write on global storage: the
// failure surfaces on every rank at CheckpointWait and CheckpointDone
// (naming the checkpoint, the level and the rank), then once at the next
// Checkpoint, which takes nothing; the checkpoint stays committed at L1
// and the previous L4 one is kept; the next checkpoint works again.
func TestAsyncFailure(t *testing.T) {
	core := vfd.NewCore()
	cfg := asyncConfig("/", 4)
	var broken sync.Mutex
	failing := false
	global := vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
		broken.Lock()
		defer broken.Unlock()
		if failing && op.Kind == vfd.OpWrite && path.Base(op.Path) == "l4.sion.tmp" {
			return errors.New("no space left on device")
		}
		return nil
	}))
	errs := make([]error, 4)
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDrivers(core, global, core), WithLogger(zap.NewNop()))
		if err != nil {
			return err
		}
		defer r.Close()
		var x []uint64
		ver := []int64{0}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
			return err
		}
		x, ver[0] = version(c.Rank(), 1), 1
		if err := r.Checkpoint(1, 4); err != nil {
			return err
		}
		if err := r.CheckpointWait(); err != nil {
			return err
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			broken.Lock()
			failing = true
			broken.Unlock()
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		x, ver[0] = version(c.Rank(), 2), 2
		if err := r.Checkpoint(2, 4); err != nil {
			return err
		}
		errs[c.Rank()] = r.CheckpointWait()
		if done, err := r.CheckpointDone(); !done || err == nil || err.Error() != errs[c.Rank()].Error() {
			return fmt.Errorf("rank %d: CheckpointDone gives %v, %v", c.Rank(), done, err)
		}
		cm := r.eng.Committed()
		if len(cm) != 2 || cm[0].Level != levels.L4 || cm[0].ID != 1 || cm[1].Level != levels.L1 || cm[1].ID != 2 {
			return fmt.Errorf("rank %d: committed %d checkpoints after the failure", c.Rank(), len(cm))
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			broken.Lock()
			failing = false
			broken.Unlock()
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		// Reported once, by the next Checkpoint, which takes nothing.
		x, ver[0] = version(c.Rank(), 3), 3
		if err := r.Checkpoint(3, 4); !errors.Is(err, ErrBackground) {
			return fmt.Errorf("rank %d: Checkpoint after the failure: %v", c.Rank(), err)
		}
		if n := len(r.eng.Committed()); n != 2 {
			return fmt.Errorf("rank %d: a checkpoint was taken with the failure report (%d committed)", c.Rank(), n)
		}
		if err := r.Checkpoint(3, 4); err != nil {
			return err
		}
		return r.CheckpointWait()
	}, comm.WithTimeout(30*time.Second)))
	for rank, err := range errs {
		require.ErrorIs(t, err, ErrBackground, "rank %d", rank)
		assert.Equal(t, errs[0].Error(), err.Error(), "rank %d: the same error everywhere", rank)
		assert.Contains(t, err.Error(), "checkpoint 2")
		assert.Contains(t, err.Error(), "L4")
		assert.Contains(t, err.Error(), "rank 0")
		assert.Contains(t, err.Error(), "no space left on device")
	}
	lose(t, core, cfg, 4)
	got, err := recoverAll(t, 4, cfg, core)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 3, 3, 3}, got)
}

// TestAsyncCrash crashes (or fails) at every file operation of the
// background post-processing of checkpoint 2, after its L1 commit, with
// checkpoint 1 committed at the level. A restart after losing what the
// level protects against must recover checkpoint 2 when the raise
// committed and checkpoint 1 otherwise: the last checkpoint committed at
// the level is never deleted before the new one is committed there.
func TestAsyncCrash(t *testing.T) {
	for _, lvl := range []int{2, 3, 4} {
		for _, crash := range []bool{true, false} {
			name := fmt.Sprintf("L%d/crash=%v", lvl, crash)
			t.Run(name, func(t *testing.T) {
				cfg := asyncConfig("/", lvl)
				stride := 1
				if raceEnabled {
					stride = 7
				}
				outcomes := map[string]int{}
				for k := 0; ; k += stride {
					core := vfd.NewCore()
					sync1 := cfg
					sync1.Async = [5]bool{}
					commitVersion1(t, 4, sync1, core, lvl, WithLogger(zap.NewNop()))
					inj := &crashInjector{core: core, crash: crash, k: k}
					inj.base.Store(-1)
					fault := vfd.NewFault(core, inj)
					var mu sync.Mutex
					var waitErrs []error
					armed := make(chan struct{})
					hold := func(o *options) { o.postStart = func() { <-armed } }
					runErr := comm.Run(4, func(c comm.Comm) error {
						r, err := Init(cfg, c, WithDriver(fault), WithLogger(zap.NewNop()), hold)
						if err != nil {
							return err
						}
						defer r.Close()
						x, ver := version(c.Rank(), 2), []int64{2}
						if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
							return err
						}
						// Hold the poster until the injector is armed: the
						// operations counted from there are the background's.
						if err := r.Checkpoint(2, lvl); err != nil {
							return err
						}
						_ = c.Barrier()
						if c.Rank() == 0 {
							inj.base.Store(int64(fault.Ops()))
							close(armed)
						}
						werr := r.CheckpointWait()
						mu.Lock()
						waitErrs = append(waitErrs, werr)
						mu.Unlock()
						return nil
					}, comm.WithTimeout(30*time.Second))
					require.NoError(t, runErr)
					if !inj.hit {
						t.Logf("%s: %d operations in the background, outcomes %v", name, k, outcomes)
						break
					}
					after := vfd.Driver(core)
					if crash {
						after = inj.clone
					} else {
						for _, e := range waitErrs {
							if waitErrs[0] == nil {
								require.NoError(t, e, "op %d: ranks disagree", k)
							} else {
								require.Error(t, e, "op %d: ranks disagree", k)
								assert.Equal(t, waitErrs[0].Error(), e.Error(), "op %d", k)
							}
						}
					}
					lose(t, after, cfg, lvl)
					got, err := recoverAll(t, 4, cfg, after)
					require.NoError(t, err, "op %d", k)
					requireSameVersion(t, got, k)
					require.Contains(t, []int{1, 2}, got[0], "op %d", k)
					if !crash {
						want := 2
						if waitErrs[0] != nil {
							want = 1
						}
						require.Equal(t, want, got[0], "op %d: background result %v", k, waitErrs[0])
					}
					outcomes[fmt.Sprintf("v%d", got[0])]++
				}
			})
		}
	}
}

// TestAsyncDCP takes differential checkpoints at L2, L3 and L4 with
// their post-processing in the background: each is written at L1 as a
// delta on the newest checkpoint at its level, the raise keeps its
// chain and dCP totals, background retention keeps the layers the chain
// needs, and a restart after losing what the level protects against
// recovers the last state bit for bit.
func TestAsyncDCP(t *testing.T) {
	const n = 4
	for _, lvl := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			core := vfd.NewCore()
			cfg := dcpConfig("/", n)
			cfg.GroupSize = 2
			cfg.DCPStackSize = 4
			cfg.Async[lvl] = true
			final := make([][][]byte, n)
			require.NoError(t, comm.Run(n, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
				if err != nil {
					return err
				}
				defer r.Close()
				bufs := dcpBuffers(c.Rank(), 256<<10)
				for i := range bufs {
					if err := Protect(r, i, &bufs[i]); err != nil {
						return err
					}
				}
				rnd := rand.New(rand.NewPCG(uint64(c.Rank()), 5))
				for id := int64(1); id <= 6; id++ {
					if id > 1 {
						touch(bufs, 0.05, cfg.DCPBlockSize, rnd)
					}
					if err := r.Checkpoint(id, lvl+dcpLevelOffset); err != nil {
						return err
					}
					l1 := r.last
					if err := r.CheckpointWait(); err != nil {
						return err
					}
					cm := r.eng.Committed()
					up := cm[len(cm)-1]
					if id == 4 {
						// Layer 4 of 4 (dcp_stack_size): raised, then the
						// chain compacted in the background into a full
						// checkpoint with the same id, and the chain dropped.
						if l1.Layers() != 4 || up.ID != 4 || up.Level != levels.ID(lvl) || up.DCP != nil || up.Seq <= l1.Seq {
							return fmt.Errorf("rank %d: checkpoint 4 (layer %d) not compacted: newest %+v", c.Rank(), l1.Layers(), up)
						}
						if len(cm) != 1 {
							return fmt.Errorf("rank %d: %d checkpoints left after the compaction, want 1", c.Rank(), len(cm))
						}
						continue
					}
					if up.Seq != l1.Seq || up.Level != levels.ID(lvl) {
						return fmt.Errorf("rank %d: checkpoint %d not raised (%v)", c.Rank(), id, up.Level)
					}
					if !assert.ObjectsAreEqual(l1.DCP, up.DCP) {
						return fmt.Errorf("rank %d: checkpoint %d: dCP info changed by the raise", c.Rank(), id)
					}
					// Full at 1, differential otherwise: 5 and 6 build on
					// the compacted checkpoint 4.
					if diff := up.DCP != nil; diff != (id != 1) {
						return fmt.Errorf("rank %d: checkpoint %d differential = %v", c.Rank(), id, diff)
					}
					if id >= 5 && up.Layers() != int(id)-3 {
						return fmt.Errorf("rank %d: checkpoint %d is layer %d, want %d on the compacted 4", c.Rank(), id, up.Layers(), id-3)
					}
					var chain []uint64
					if up.DCP != nil {
						chain = up.DCP.Chain
					}
					for _, s := range chain {
						found := false
						for _, m := range cm {
							found = found || (m.Seq == s && m.Level == levels.ID(lvl))
						}
						if !found {
							return fmt.Errorf("rank %d: checkpoint %d: layer %d of its chain is gone or not at L%d", c.Rank(), id, s, lvl)
						}
					}
				}
				final[c.Rank()] = bufs
				return nil
			}, comm.WithTimeout(60*time.Second)))
			lose(t, core, cfg, lvl)
			require.NoError(t, comm.Run(n, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
				if err != nil {
					return err
				}
				defer r.Close()
				if r.Recovered() == nil || r.Recovered().ID != 6 {
					return fmt.Errorf("rank %d: restarted from %v, want checkpoint 6", c.Rank(), r.Recovered())
				}
				bufs := dcpBuffers(c.Rank(), 256<<10)
				for i := range bufs {
					clear(bufs[i])
					if err := Protect(r, i, &bufs[i]); err != nil {
						return err
					}
				}
				if err := r.Recover(); err != nil {
					return err
				}
				for i := range bufs {
					if !bytes.Equal(bufs[i], final[c.Rank()][i]) {
						return fmt.Errorf("rank %d: buffer %d differs after the restart", c.Rank(), i)
					}
				}
				return nil
			}, comm.WithTimeout(60*time.Second)))
		})
	}
}

// TestAsyncFinalize: Finalize right after an asynchronous checkpoint
// waits for its post-processing and keeps it (keep_last_ckpt) for the
// next run; a background failure is reported by Finalize after it kept
// the L1 commit.
func TestAsyncFinalize(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			core := vfd.NewCore()
			cfg := asyncConfig("/", 2)
			cfg.KeepLastCkpt = true
			local := vfd.Driver(core)
			if fail {
				local = vfd.NewFault(core, vfd.OnPath("*partner*", []vfd.OpKind{vfd.OpOpen}, errors.New("partner node gone")))
			}
			errs := make([]error, 4)
			require.NoError(t, comm.Run(4, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithDrivers(local, core, core), WithLogger(zap.NewNop()))
				if err != nil {
					return err
				}
				x, ver := version(c.Rank(), 5), []int64{5}
				if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
					return err
				}
				if err := r.Checkpoint(5, 2); err != nil {
					return err
				}
				errs[c.Rank()] = r.Finalize()
				return nil
			}, comm.WithTimeout(30*time.Second)))
			for rank, err := range errs {
				if fail {
					require.ErrorIs(t, err, ErrBackground, "rank %d", rank)
					assert.Contains(t, err.Error(), "partner node gone")
				} else {
					require.NoError(t, err, "rank %d", rank)
				}
			}
			// Kept at L4 either way: every node-local directory may go.
			lose(t, core, cfg, 4)
			require.NoError(t, comm.Run(4, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
				if err != nil {
					return err
				}
				defer r.Close()
				if r.Status() != RestartKept || r.recoveredManifest().Level != levels.L4 || r.recoveredManifest().ID != 5 {
					return fmt.Errorf("rank %d: status %v from %v", c.Rank(), r.Status(), r.Recovered())
				}
				var x []uint64
				ver := []int64{0}
				if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Recover()); err != nil {
					return err
				}
				if !assert.ObjectsAreEqual(version(c.Rank(), 5), x) || ver[0] != 5 {
					return fmt.Errorf("rank %d: kept data differs", c.Rank())
				}
				return nil
			}, comm.WithTimeout(30*time.Second)))
		})
	}
}

// TestAsyncDamagedL1 damages one byte of rank 1's L1 data file (inside
// its data, not its metadata) after Checkpoint returned and before the
// background post-processing reads it: the raise, which verifies the
// file in the read pass of its partner copy, encoding or container copy,
// fails on every rank (ErrBackground; on rank 1 wrapping
// levels.ErrDigestMismatch), the checkpoint stays at L1, and a restart
// gets the previous checkpoint, raised to the level before, bit for bit.
func TestAsyncDamagedL1(t *testing.T) {
	for _, lvl := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			cfg := asyncConfig(t.TempDir(), lvl)
			errs := make([]error, 4)
			require.NoError(t, comm.Run(4, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithLogger(zap.NewNop()))
				if err != nil {
					return err
				}
				defer r.Close()
				var x []uint64
				ver := []int64{0}
				if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
					return err
				}
				x, ver[0] = version(c.Rank(), 1), 1
				if err := r.Checkpoint(1, lvl); err != nil {
					return err
				}
				if err := r.CheckpointWait(); err != nil {
					return err
				}
				if c.Rank() == 1 {
					r.post.hook = func() { // in the poster, before the raise
						df, _ := r.post.job.DataFile(1)
						name := filepath.Join(cfg.NodeDir(r.topo.NodeOf(1), r.Run()), df.Name)
						b, err := os.ReadFile(name)
						if err == nil {
							b[100] ^= 1 // in variable 0's chunk (the header is 64 bytes)
							err = os.WriteFile(name, b, 0o644)
						}
						if err != nil {
							panic(err)
						}
					}
				}
				x, ver[0] = version(c.Rank(), 2), 2
				if err := r.Checkpoint(2, lvl); err != nil {
					return err
				}
				errs[c.Rank()] = r.CheckpointWait()
				cm := r.eng.Committed()
				if len(cm) != 2 || cm[0].ID != 1 || cm[0].Level != levels.ID(lvl) || cm[1].ID != 2 || cm[1].Level != levels.L1 {
					return fmt.Errorf("rank %d: committed %v after the failure", c.Rank(), cm)
				}
				return nil
			}, comm.WithTimeout(30*time.Second)))
			for rank, err := range errs {
				require.ErrorIs(t, err, ErrBackground, "rank %d", rank)
				assert.Contains(t, err.Error(), "changed since its L1 commit", "rank %d", rank)
			}
			if lvl == 2 {
				// L2 keeps the FTI-FF checksum: the receiver of rank 1's
				// copy finds the damage as the bytes arrive.
				require.True(t, slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, levels.ErrDigestMismatch) }))
			} else {
				require.ErrorIs(t, errs[1], levels.ErrDigestMismatch)
			}
			got, err := recoverAll(t, 4, cfg, vfd.Sec2{})
			require.NoError(t, err)
			assert.Equal(t, []int{1, 1, 1, 1}, got)
		})
	}
}
