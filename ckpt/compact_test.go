package ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// dcpRun runs fn on n in-process ranks (the application ranks, with
// heads), each with dcpBuffers(rank, size) protected as variables 0..4.
func dcpRun(n int, cfg Config, size int, opts []Option, fn func(r *Runtime, me int, bufs [][]byte) error) error {
	return comm.Run(n, func(c comm.Comm) error {
		r, err := Init(cfg, c, opts...)
		if errors.Is(err, ErrHead) {
			return nil
		}
		if err != nil {
			return err
		}
		defer r.Close()
		me := r.Comm().Rank()
		bufs := dcpBuffers(me, size)
		for i := range bufs {
			if err := Protect(r, i, &bufs[i]); err != nil {
				return err
			}
		}
		return fn(r, me, bufs)
	}, comm.WithTimeout(60*time.Second))
}

// recoverBuffers recovers into bufs, cleared first, and checks them
// against want bit for bit.
func recoverBuffers(r *Runtime, me int, bufs, want [][]byte) error {
	for i := range bufs {
		clear(bufs[i])
	}
	if err := r.Recover(); err != nil {
		return err
	}
	for i := range bufs {
		if !bytes.Equal(bufs[i], want[i]) {
			return fmt.Errorf("rank %d: buffer %d differs after the restart", me, i)
		}
	}
	return nil
}

// TestBackgroundCompaction: with a background worker (inline_l4 = 0) a
// chain of differential checkpoints that reaches dcp_stack_size (3) is
// compacted off the solver's path: every checkpoint the solver takes
// after the first is a delta (never the full write FTI's rule would put
// on its path), the compacted checkpoint replaces the chain once the
// background work is done, the next delta builds on it, and a restart
// recovers the last state bit for bit. At L1 the poster compacts in
// place; at an asynchronous L2 or L4 the image is committed at L1 and
// raised in the background like any checkpoint.
func TestBackgroundCompaction(t *testing.T) {
	const n = 4
	for _, lvl := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			core := vfd.NewCore()
			cfg := dcpConfig("/", n)
			cfg.GroupSize = 2
			cfg.DCPStackSize = 3
			cfg.Async[4] = true // the poster exists, whatever the chain's level
			if lvl == 2 {
				cfg.Async[2] = true
			}
			final := make([][][]byte, n)
			opts := []Option{WithDriver(core), WithLogger(zap.NewNop())}
			require.NoError(t, dcpRun(n, cfg, 256<<10, opts, func(r *Runtime, me int, bufs [][]byte) error {
				rnd := rand.New(rand.NewPCG(uint64(me), 9))
				// Layers: 1 full, 2, 3 (stack reached: compacted), then
				// 4 and 5 on the compacted 3 (layers 2 and 3: compacted
				// again), 6 on that one.
				wantLayers := map[int64]int{1: 1, 2: 2, 3: 3, 4: 2, 5: 3, 6: 2}
				for id := int64(1); id <= 6; id++ {
					if id > 1 {
						touch(bufs, 0.05, cfg.DCPBlockSize, rnd)
					}
					if err := r.Checkpoint(id, lvl+dcpLevelOffset); err != nil {
						return err
					}
					if err := checkCompaction(r, me, id, wantLayers[id], lvl); err != nil {
						return err
					}
				}
				final[me] = bufs
				return nil
			}))
			require.NoError(t, dcpRun(n, cfg, 256<<10, opts, func(r *Runtime, me int, bufs [][]byte) error {
				if m := r.recoveredManifest(); m == nil || m.ID != 6 || m.Layers() != 2 {
					return fmt.Errorf("rank %d: restarted from %+v, want checkpoint 6, layer 2", me, m)
				}
				return recoverBuffers(r, me, bufs, final[me])
			}))
		})
	}
}

// checkCompaction checks checkpoint id, just taken at lvl as layer want
// of its chain (a delta unless it is the first), then its background
// work: a chain it completed (dcp_stack_size) is replaced by one full
// checkpoint with its id, which Recover would read.
func checkCompaction(r *Runtime, me int, id int64, want, lvl int) error {
	taken := r.last
	if taken.Layers() != want || (id > 1) != (taken.DCP != nil) {
		return fmt.Errorf("rank %d: checkpoint %d taken as layer %d (dcp %v), want layer %d", me, id, taken.Layers(), taken.DCP != nil, want)
	}
	if id > 1 && taken.DCP.Share() > 0.2 {
		return fmt.Errorf("rank %d: checkpoint %d wrote %.0f%% of the data on the solver's path", me, id, 100*taken.DCP.Share())
	}
	if err := r.CheckpointWait(); err != nil {
		return err
	}
	cm := r.eng.Committed()
	newest := cm[len(cm)-1]
	compacted := taken.Layers() == r.cfg.DCPStackSize
	switch {
	case newest.ID != id || newest.Level != levels.ID(lvl):
		return fmt.Errorf("rank %d: after checkpoint %d the newest is %d at %v", me, id, newest.ID, newest.Level)
	case compacted && (newest.DCP != nil || len(cm) != 1 || newest.Seq <= taken.Seq):
		return fmt.Errorf("rank %d: checkpoint %d's chain not compacted: %d committed, newest layer %d", me, id, len(cm), newest.Layers())
	case !compacted && newest.Layers() != taken.Layers():
		return fmt.Errorf("rank %d: checkpoint %d changed by its background work", me, id)
	case r.last.Seq != newest.Seq:
		return fmt.Errorf("rank %d: Recover would read seq %d, not the newest %d", me, r.last.Seq, newest.Seq)
	}
	return nil
}

// TestCompactionOffTheSolversPath: Checkpoint returns while the
// compaction it started is held in the background, CheckpointDone says
// it is running, and the solver's data may change meanwhile: the
// compacted checkpoint holds the state of the checkpoint, not the
// solver's later one.
func TestCompactionOffTheSolversPath(t *testing.T) {
	const n = 2
	core := vfd.NewCore()
	cfg := dcpConfig("/", n)
	cfg.DCPStackSize = 2
	cfg.Async[4] = true
	release := make(chan struct{})
	var started atomic.Int32
	hold := func(o *options) {
		o.postStart = func() {
			started.Add(1)
			<-release
		}
	}
	var once sync.Once
	want := make([][]uint64, n)
	require.NoError(t, comm.Run(n, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()), hold)
		if err != nil {
			return err
		}
		defer r.Close()
		x, ver := dversion(c.Rank(), 1), []int64{1}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Checkpoint(1, 5)); err != nil {
			return err
		}
		x, ver[0] = dversion(c.Rank(), 2), 2
		want[c.Rank()] = dversion(c.Rank(), 2)
		if err := r.Checkpoint(2, 5); err != nil {
			return err
		}
		// Checkpoint returned: the compaction waits in the background.
		if done, err := r.CheckpointDone(); done || err != nil {
			return fmt.Errorf("rank %d: CheckpointDone = %v, %v while the compaction is held", c.Rank(), done, err)
		}
		x, ver[0] = dversion(c.Rank(), 7), 7 // the solver goes on
		if err := c.Barrier(); err != nil {
			return err
		}
		once.Do(func() { close(release) })
		if err := r.CheckpointWait(); err != nil {
			return err
		}
		cm := r.eng.Committed()
		if len(cm) != 1 || cm[0].DCP != nil || cm[0].ID != 2 {
			return fmt.Errorf("rank %d: %d committed, newest %+v: not compacted", c.Rank(), len(cm), cm[len(cm)-1])
		}
		return nil
	}, comm.WithTimeout(30*time.Second)))
	require.Equal(t, int32(n), started.Load(), "one background job per rank: the compaction")
	got, err := dcpRecoverAll(t, n, cfg, core, 5)
	require.NoError(t, err)
	require.Equal(t, []int{2, 2}, got, "the compacted checkpoint holds version 2")
}

// TestCrashDuringBackgroundCompaction kills the job (the storage's crash
// model) before every operation that makes something durable, or fails
// every 7th file operation in turn, from the moment the background work of
// the checkpoint that completes a chain (dcp_stack_size 2) starts: its
// raise, when the level is asynchronous, then the compaction. A restart
// always recovers version 2 bit for bit, from the chain, the compacted
// copy at L1 or the compacted checkpoint; a failed compaction leaves the
// run able to checkpoint on.
func TestCrashDuringBackgroundCompaction(t *testing.T) {
	for _, tc := range []struct {
		n, level int
		crash    bool
	}{{1, 1, true}, {4, 1, true}, {4, 1, false}, {4, 2, true}, {4, 4, true}, {4, 4, false}} {
		name := fmt.Sprintf("ranks=%d/L%d/crash=%v", tc.n, tc.level, tc.crash)
		t.Run(name, func(t *testing.T) {
			n, level, crash := tc.n, tc.level+dcpLevelOffset, tc.crash
			cfg := testConfig("/", 1)
			cfg.GroupSize = n
			cfg.EnableDCP, cfg.DCPBlockSize, cfg.DCPStackSize = true, 4096, 2
			cfg.Async[4] = true
			if tc.level > 1 {
				cfg.Async[tc.level] = true
			}
			// Every durable operation when crashing; every 7th file
			// operation when failing them (hundreds of them).
			stride := 1
			if !crash {
				stride = 7
			}
			if raceEnabled {
				stride *= 5
			}
			outcomes := map[string]int{}
			for k := 0; ; k += stride {
				core := vfd.NewCore()
				inj := newInjector(core, crash, false, k)
				fault := vfd.NewFault(core, inj)
				// Armed by the first rank starting checkpoint 2's job. At
				// L1 checkpoint 1 has no job; at an asynchronous level its
				// raise is one per rank.
				before := int32(0)
				if tc.level > 1 {
					before = int32(n)
				}
				var jobs atomic.Int32
				arm := func(o *options) {
					o.postStart = func() {
						if jobs.Add(1) == before+1 {
							inj.arm(fault)
						}
					}
				}
				var mu sync.Mutex
				left, v3 := -1, false
				runErr := comm.Run(n, func(c comm.Comm) error {
					r, err := Init(cfg, c, WithDriver(fault), WithLogger(zap.NewNop()), arm)
					if err != nil {
						return err
					}
					defer r.Close()
					x, ver := dversion(c.Rank(), 1), []int64{1}
					if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Checkpoint(1, level), r.CheckpointWait()); err != nil {
						return err
					}
					x, ver[0] = dversion(c.Rank(), 2), 2
					if err := r.Checkpoint(2, level); err != nil {
						return err
					}
					werr := r.CheckpointWait()
					cm := r.eng.Committed()
					if c.Rank() == 0 && len(cm) > 0 {
						mu.Lock()
						left = len(cm)
						if cm[len(cm)-1].DCP != nil {
							left = -len(cm)
						}
						mu.Unlock()
					}
					if crash {
						return werr
					}
					// A failed raise or compaction: the run goes on. The one
					// injected failure may land in checkpoint 3 too (it fails
					// on every rank alike: take it again), or in its raise
					// (it stays committed at L1).
					x, ver[0] = dversion(c.Rank(), 3), 3
					for try := 0; try < 3; try++ {
						if err = r.Checkpoint(3, level); err == nil {
							break
						}
					}
					if err == nil {
						if werr := r.CheckpointWait(); !errors.Is(werr, ErrBackground) {
							err = werr
						}
					}
					if err == nil && c.Rank() == 0 {
						mu.Lock()
						v3 = true
						mu.Unlock()
					}
					return err
				}, comm.WithTimeout(30*time.Second))
				if !inj.wasHit() {
					require.NoError(t, runErr)
					require.Equal(t, 1, left, "the compaction left one full checkpoint")
					t.Logf("%s: %d points, outcomes %v", name, k, outcomes)
					break
				}
				after := vfd.Driver(core)
				want := 3
				if crash {
					after, want = inj.crashClone(), 2
				} else {
					require.NoError(t, runErr, "op %d: the run goes on after a failed background operation", k)
					require.True(t, v3, "op %d", k)
				}
				got, err := dcpRecoverAll(t, n, cfg, after, level)
				require.NoError(t, err, "op %d", k)
				for _, v := range got {
					require.Equal(t, want, v, "op %d: recovered %v", k, got)
				}
				outcomes[fmt.Sprintf("v%d", want)]++
			}
		})
	}
}
