package ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// headConfig is an 8-rank job on 4 nodes of 2 ranks with heads: 4
// application ranks, one per node, groups of 2 nodes; level lvl is
// post-processed by the heads.
func headConfig(lvl int) Config {
	cfg := testConfig("/", 2)
	cfg.GroupSize = 2
	cfg.Head = true
	cfg.Async[lvl] = true
	return cfg
}

// writes records the paths a set of ranks writes to.
type writes struct {
	mu    sync.Mutex
	paths map[string]bool
}

func (w *writes) driver(d vfd.Driver) vfd.Driver {
	return vfd.NewFault(d, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpWrite {
			w.mu.Lock()
			w.paths[op.Path] = true
			w.mu.Unlock()
		}
		return nil
	}))
}

func (w *writes) any(word string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p := range w.paths {
		if strings.Contains(p, word) {
			return true
		}
	}
	return false
}

// roleWord is in the name of the files level lvl's post-processing writes.
var roleWord = map[int]string{2: levels.RolePartner, 3: levels.RoleParity, 4: "l4"}

// TestHeadsLevels takes checkpoints at L2, L3 and L4 with head = 1 and
// inline_lL = 0: the application ranks get a communicator without the
// heads, the heads (and only they) write the level's files, Init returns
// ErrHead on the heads once the application has finalized, and a
// restart after losing what the level protects against recovers the
// newest checkpoint bit for bit, with heads and without.
func TestHeadsLevels(t *testing.T) {
	for _, lvl := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			core := vfd.NewCore()
			cfg := headConfig(lvl)
			headW, appW := &writes{paths: map[string]bool{}}, &writes{paths: map[string]bool{}}
			var heads atomic.Int32
			require.NoError(t, comm.Run(8, func(c comm.Comm) error {
				d := appW.driver(core)
				if c.Rank()%2 == 0 {
					d = headW.driver(core)
				}
				r, err := Init(cfg, c, WithDriver(d), WithLogger(zap.NewNop()))
				if errors.Is(err, ErrHead) {
					if c.Rank()%2 != 0 {
						return fmt.Errorf("rank %d was a head, want node-local rank 0 only", c.Rank())
					}
					heads.Add(1)
					return nil
				}
				if err != nil {
					return err
				}
				if c.Rank()%2 == 0 {
					return fmt.Errorf("rank %d is an application rank, want a head", c.Rank())
				}
				if app := r.Comm(); app.Size() != 4 || app.Rank() != c.Rank()/2 {
					return fmt.Errorf("world rank %d: application rank %d of %d, want %d of 4", c.Rank(), app.Rank(), app.Size(), c.Rank()/2)
				}
				me := r.Comm().Rank()
				var x []uint64
				ver := []int64{0}
				if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
					return err
				}
				for v := 1; v <= 3; v++ {
					x, ver[0] = version(me, v), int64(v)
					if err := r.Checkpoint(int64(v), lvl); err != nil {
						return err
					}
					if got := r.last; got.ID != int64(v) || got.Level != levels.L1 {
						return fmt.Errorf("rank %d: checkpoint %d committed at %v, want L1 first", me, got.ID, got.Level)
					}
					x[0] = 0xdead // the heads copy the committed file
					if v == 3 {
						// Checkpoint adopted checkpoint 2 as the heads raised
						// it, and retention dropped checkpoint 1.
						cm := r.eng.Committed()
						if len(cm) != 2 || cm[0].ID != 2 || cm[0].Level != levels.ID(lvl) || cm[1].ID != 3 || cm[1].Level != levels.L1 {
							var s []string
							for _, m := range cm {
								s = append(s, fmt.Sprintf("%d@%v", m.ID, m.Level))
							}
							return fmt.Errorf("rank %d: committed %v, want [2@L%d 3@L1]", me, s, lvl)
						}
					}
					if v == 2 {
						continue // the next Checkpoint waits for it
					}
					if err := r.CheckpointWait(); err != nil {
						return err
					}
					if r.last.Level != levels.ID(lvl) || r.last.ID != int64(v) {
						return fmt.Errorf("rank %d: checkpoint %d at %v after CheckpointWait, want L%d", me, r.last.ID, r.last.Level, lvl)
					}
				}
				// A job that ends without Finalize: Close stops the heads
				// (Finalize would remove the checkpoints).
				return r.Close()
			}, comm.WithTimeout(60*time.Second)))
			assert.Equal(t, int32(4), heads.Load(), "heads that returned ErrHead")
			assert.True(t, headW.any(roleWord[lvl]), "the heads wrote no %s file", roleWord[lvl])
			assert.False(t, appW.any(roleWord[lvl]), "the application ranks wrote %s files", roleWord[lvl])

			lose(t, core, cfg, lvl)
			// Restart with heads: the application ranks recover version 3.
			got := make([]int, 4)
			require.NoError(t, comm.Run(8, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
				if errors.Is(err, ErrHead) {
					return nil
				}
				if err != nil {
					return err
				}
				me := r.Comm().Rank()
				var x []uint64
				ver := []int64{0}
				if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
					return err
				}
				if r.Status() == Fresh {
					return fmt.Errorf("rank %d: fresh start", me)
				}
				if err := r.Recover(); err != nil {
					return err
				}
				if !assert.ObjectsAreEqual(version(me, int(ver[0])), x) {
					return fmt.Errorf("rank %d: data is not exactly version %d", me, ver[0])
				}
				got[me] = int(ver[0])
				return r.Finalize()
			}, comm.WithTimeout(60*time.Second)))
			assert.Equal(t, []int{3, 3, 3, 3}, got)
		})
	}
}

// TestHeadsNoHeadRestart restarts a job that had heads on 4 ranks without
// heads (the same 4 application ranks, one per node).
func TestHeadsNoHeadRestart(t *testing.T) {
	core := vfd.NewCore()
	cfg := headConfig(2)
	require.NoError(t, comm.Run(8, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
		if errors.Is(err, ErrHead) {
			return nil
		}
		if err != nil {
			return err
		}
		me := r.Comm().Rank()
		x, ver := version(me, 5), []int64{5}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Checkpoint(5, 2)); err != nil {
			return err
		}
		return r.Close() // without Finalize: Close stops the heads too
	}, comm.WithTimeout(60*time.Second)))
	eraseNode(t, core, cfg, 1)
	plain := cfg
	plain.Head, plain.NodeSize = false, 1
	got, err := recoverAll(t, 4, plain, core)
	require.NoError(t, err)
	assert.Equal(t, []int{5, 5, 5, 5}, got)
}

// TestHeadsInline: with head = 1 and every level inline the heads only
// wait for Finalize; the checkpoints are taken by the application ranks.
func TestHeadsInline(t *testing.T) {
	core := vfd.NewCore()
	cfg := testConfig("/", 3)
	cfg.GroupSize, cfg.Head, cfg.KeepHeadsAlive = 2, true, true
	var heads atomic.Int32
	require.NoError(t, comm.Run(6, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
		if errors.Is(err, ErrHead) {
			heads.Add(1)
			return nil
		}
		if err != nil {
			return err
		}
		if r.Comm().Size() != 4 {
			return fmt.Errorf("application communicator of %d ranks, want 4", r.Comm().Size())
		}
		x := version(r.Comm().Rank(), 1)
		if err := errors.Join(Protect(r, 0, &x), r.Checkpoint(1, 2)); err != nil {
			return err
		}
		if r.last.Level != levels.L2 {
			return fmt.Errorf("inline L2 committed at %v", r.last.Level)
		}
		return r.Finalize()
	}, comm.WithTimeout(60*time.Second)))
	assert.Equal(t, int32(2), heads.Load())
}

// TestHeadsErrors: head = 1 needs node_size >= 2 and full nodes.
func TestHeadsErrors(t *testing.T) {
	cfg := testConfig("/", 1)
	cfg.Head = true
	err := comm.Run(2, func(c comm.Comm) error {
		_, err := Init(cfg, c, WithDriver(vfd.NewCore()), WithLogger(zap.NewNop()))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "node_size") {
			return fmt.Errorf("rank %d: %v, want ErrConfig naming node_size", c.Rank(), err)
		}
		return nil
	})
	require.NoError(t, err)
	assert.ErrorIs(t, cfg.Validate(2), ErrConfig)
	assert.ErrorContains(t, cfg.Validate(2), "head = 1 with node_size 1")

	// Ranks placed by node id so that one node has 3 ranks, another 1.
	cfg = testConfig("/", 2)
	cfg.Head, cfg.LocalTest = true, false
	core := vfd.NewCore()
	err = comm.Run(4, func(c comm.Comm) error {
		id := func(rank int) string { return map[bool]string{true: "a", false: "b"}[rank < 3] }
		_, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()), WithNodeID(id))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "node_size is 2") {
			return fmt.Errorf("rank %d: %v, want ErrConfig about the node's ranks", c.Rank(), err)
		}
		return nil
	})
	require.NoError(t, err)
}

// TestHeadsInitFails: when Init fails on the application ranks (a restart
// with nothing recoverable), the heads end too, with ErrHeadAppFailed,
// instead of waiting for ever.
func TestHeadsInitFails(t *testing.T) {
	core := vfd.NewCore()
	cfg := headConfig(2)
	cfg.Async[2] = false
	require.NoError(t, comm.Run(8, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
		if errors.Is(err, ErrHead) {
			return nil
		}
		if err != nil {
			return err
		}
		x := version(r.Comm().Rank(), 1)
		return errors.Join(Protect(r, 0, &x), r.Checkpoint(1, 1), r.Close())
	}, comm.WithTimeout(60*time.Second)))
	eraseNode(t, core, cfg, 0) // an L1 checkpoint does not survive it
	var appFailed, headFailed atomic.Int32
	require.NoError(t, comm.Run(8, func(c comm.Comm) error {
		_, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()), WithWarnings(io.Discard))
		switch {
		case c.Rank()%2 == 0 && errors.Is(err, ErrHeadAppFailed):
			headFailed.Add(1)
		case c.Rank()%2 == 1 && errors.Is(err, ErrUnrecoverable):
			appFailed.Add(1)
		default:
			return fmt.Errorf("rank %d: %v", c.Rank(), err)
		}
		return nil
	}, comm.WithTimeout(60*time.Second)))
	assert.Equal(t, int32(4), headFailed.Load())
	assert.Equal(t, int32(4), appFailed.Load())
}

// TestHeadsBackgroundFailure: the L4 container cannot be written by the
// heads; the application ranks learn it from CheckpointWait and once
// from the next Checkpoint (ErrBackground, naming the checkpoint and the
// level), the checkpoint stays committed at L1, and the next one works.
func TestHeadsBackgroundFailure(t *testing.T) {
	core := vfd.NewCore()
	cfg := headConfig(4)
	var failing atomic.Bool
	failing.Store(true)
	headDriver := vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpWrite && strings.Contains(op.Path, "l4.sion") && failing.Load() {
			return errors.New("no space left on the global file system")
		}
		return nil
	}))
	require.NoError(t, comm.Run(8, func(c comm.Comm) error {
		d := vfd.Driver(core)
		if c.Rank()%2 == 0 {
			d = headDriver
		}
		r, err := Init(cfg, c, WithDriver(d), WithLogger(zap.NewNop()))
		if errors.Is(err, ErrHead) {
			return nil
		}
		if err != nil {
			return err
		}
		me := r.Comm().Rank()
		x := version(me, 1)
		if err := errors.Join(Protect(r, 0, &x), r.Checkpoint(1, 4)); err != nil {
			return err
		}
		err = r.CheckpointWait()
		if !errors.Is(err, ErrBackground) || !strings.Contains(err.Error(), "checkpoint 1") || !strings.Contains(err.Error(), "L4") {
			return fmt.Errorf("rank %d: CheckpointWait: %v, want ErrBackground naming checkpoint 1 and L4", me, err)
		}
		if r.last.Level != levels.L1 {
			return fmt.Errorf("rank %d: checkpoint 1 at %v, want L1", me, r.last.Level)
		}
		if err := r.Checkpoint(2, 4); !errors.Is(err, ErrBackground) {
			return fmt.Errorf("rank %d: next Checkpoint: %v, want the background failure", me, err)
		}
		failing.Store(false)
		if err := r.Comm().Barrier(); err != nil {
			return err
		}
		x = version(me, 3)
		if err := errors.Join(r.Checkpoint(3, 4), r.CheckpointWait()); err != nil {
			return fmt.Errorf("rank %d: checkpoint after the failure: %w", me, err)
		}
		if r.last.ID != 3 || r.last.Level != levels.L4 {
			return fmt.Errorf("rank %d: checkpoint %d at %v, want 3 at L4", me, r.last.ID, r.last.Level)
		}
		return r.Close()
	}, comm.WithTimeout(60*time.Second)))
}

// TestHeadsDCP: differential checkpoints raised by the heads restart bit
// for bit after losing what the level protects against.
func TestHeadsDCP(t *testing.T) {
	for _, lvl := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			core := vfd.NewCore()
			cfg := headConfig(lvl)
			cfg.EnableDCP, cfg.DCPBlockSize, cfg.DCPStackSize = true, 4096, 4
			final := make([][][]byte, 4)
			diffs := make([]int, 4)
			job := func(fn func(r *Runtime, me int, bufs [][]byte) error) error {
				return comm.Run(8, func(c comm.Comm) error {
					r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
					if errors.Is(err, ErrHead) {
						return nil
					}
					if err != nil {
						return err
					}
					defer r.Close()
					me := r.Comm().Rank()
					bufs := dcpBuffers(me, 256<<10)
					for i := range bufs {
						if err := Protect(r, i, &bufs[i]); err != nil {
							return err
						}
					}
					return fn(r, me, bufs)
				}, comm.WithTimeout(60*time.Second))
			}
			require.NoError(t, job(func(r *Runtime, me int, bufs [][]byte) error {
				rnd := rand.New(rand.NewPCG(uint64(me), 5))
				for id := int64(1); id <= 6; id++ {
					if id > 1 {
						touch(bufs, 0.05, cfg.DCPBlockSize, rnd)
					}
					if err := r.Checkpoint(id, lvl+dcpLevelOffset); err != nil {
						return err
					}
					if r.last.DCP != nil {
						diffs[me]++
					}
					if err := r.CheckpointWait(); err != nil {
						return err
					}
					if r.last.Level != levels.ID(lvl) {
						return fmt.Errorf("rank %d: checkpoint %d at %v", me, id, r.last.Level)
					}
				}
				final[me] = bufs
				return nil
			}))
			for me, d := range diffs {
				// Checkpoint 4 completes the chain (dcp_stack_size 4): it is
				// compacted in the background, so 5 and 6 are deltas too,
				// and the solver never writes a full checkpoint after 1.
				assert.Equal(t, 5, d, "rank %d: differential checkpoints", me)
			}
			lose(t, core, cfg, lvl)
			require.NoError(t, job(func(r *Runtime, me int, bufs [][]byte) error {
				if r.Recovered() == nil || r.Recovered().ID != 6 {
					return fmt.Errorf("rank %d: restarted from %v, want checkpoint 6", me, r.Recovered())
				}
				for i := range bufs {
					clear(bufs[i])
				}
				if err := r.Recover(); err != nil {
					return err
				}
				for i := range bufs {
					if !bytes.Equal(bufs[i], final[me][i]) {
						return fmt.Errorf("rank %d: buffer %d differs after the restart", me, i)
					}
				}
				return nil
			}))
		})
	}
}
