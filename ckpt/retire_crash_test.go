package ckpt

import (
	"errors"
	"fmt"
	"path"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// TestCrashWhileRetiring kills (a power cut: only what was synced
// survives) at every file operation of a run whose checkpoints retire
// older ones: checkpoint 2 supersedes 1 (its primary manifest renamed to
// the deletion marker, its replica removed, its directories removed in
// the background), checkpoint 3 supersedes 2 and removes 1's marker at
// its commit, then the runtime closes. The restart must never lose the
// newest committed checkpoint: it recovers, bit for bit, the one
// committed before the step the kill landed in or the one that step was
// taking, and never fails, nor starts fresh.
//
// With primary=missing the primary manifest of checkpoint 1 is gone when
// it retires (lost after start-up: only the replica holds it), so the
// deletion marker is written afresh: the replica may go only once that
// marker is durable, or a kill in between leaves checkpoint 1's files
// with no manifest and no marker, which start-up must refuse as lost
// metadata — the run could not restart though checkpoint 2 is intact.
func TestCrashWhileRetiring(t *testing.T) {
	const n = 2
	for _, tc := range []struct {
		level   int
		missing bool
	}{{1, false}, {1, true}, {2, false}, {2, true}, {4, true}} {
		t.Run(fmt.Sprintf("L%d/primary-missing=%v", tc.level, tc.missing), func(t *testing.T) {
			cfg := testConfig("/", 1)
			cfg.GroupSize = 2
			stride := 1
			if raceEnabled {
				stride = 5
			}
			outcomes := map[string]int{}
			for k := 0; ; k += stride {
				core := vfd.NewCore()
				commitVersion1(t, n, cfg, core, tc.level, WithLogger(zap.NewNop()))
				inj := &stageInjector{core: core, k: k}
				inj.base.Store(-1)
				fault := vfd.NewFault(core, inj)
				runErr := comm.Run(n, func(c comm.Comm) error {
					r, err := Init(cfg, c, WithDriver(fault), WithLogger(zap.NewNop()))
					if err != nil {
						return err
					}
					defer r.Close()
					var x []uint64
					ver := []int64{0}
					if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Recover(), c.Barrier()); err != nil {
						return err
					}
					if c.Rank() == 0 {
						if tc.missing {
							// Lost after start-up repaired it: only the replica is left.
							primary := path.Join(cfg.MetaDir, levels.ManifestName(1))
							if err := errors.Join(core.Remove(primary), core.SyncDir(cfg.MetaDir)); err != nil {
								return err
							}
						}
						// Armed at stage 2: once past the barrier, rank 1 may
						// start checkpoint 2 before rank 0 labels it.
						inj.stage.Store(2)
						inj.base.Store(int64(fault.Ops()))
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					for v := 2; v <= 3; v++ {
						if c.Rank() == 0 {
							inj.stage.Store(int64(v))
						}
						x, ver[0] = version(c.Rank(), v), int64(v)
						if err := r.Checkpoint(int64(v), tc.level); err != nil {
							return err
						}
					}
					if c.Rank() == 0 {
						inj.stage.Store(4) // closing: checkpoint 3 is committed
					}
					return nil
				}, comm.WithTimeout(20*time.Second))
				if !inj.crashed.Load() {
					require.NoError(t, runErr)
					t.Logf("%d operations, outcomes %v", k, outcomes)
					break
				}
				got, err := recoverAll(t, n, cfg, inj.clone)
				require.NoError(t, err, "kill at op %d (stage %d): the restart must find the newest committed checkpoint", k, inj.at)
				requireSameVersion(t, got, k)
				require.Contains(t, []int{int(inj.at) - 1, int(inj.at)}, got[0], "op %d: kill while checkpointing %d", k, inj.at)
				outcomes[fmt.Sprintf("stage%d/v%d", inj.at, got[0])]++
			}
		})
	}
}

// TestCrashWhileFinalizing kills at every file operation of a Finalize
// (without keep_last_ckpt) that deletes four committed checkpoints, one
// per level. Finalize deletes oldest first, so the restart gets the
// newest checkpoint, or starts fresh once every checkpoint is gone —
// never an older one (deleting newest first, a kill in the middle
// silently rolled the job back to an older checkpoint).
func TestCrashWhileFinalizing(t *testing.T) {
	const n = 2
	cfg := testConfig("/", 1)
	cfg.GroupSize = 2
	stride := 1
	if raceEnabled {
		stride = 5
	}
	outcomes := map[int]int{}
	for k := 0; ; k += stride {
		core := vfd.NewCore()
		inj := &stageInjector{core: core, k: k}
		inj.base.Store(-1)
		fault := vfd.NewFault(core, inj)
		runErr := comm.Run(n, func(c comm.Comm) error {
			r, err := Init(cfg, c, WithDriver(fault), WithLogger(zap.NewNop()))
			if err != nil {
				return err
			}
			defer r.Close()
			var x []uint64
			ver := []int64{0}
			if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
				return err
			}
			for v := 1; v <= 4; v++ {
				x, ver[0] = version(c.Rank(), v), int64(v)
				if err := r.Checkpoint(int64(v), 5-v); err != nil { // L4, L3, L2, L1: each newer one at a lower level, all kept
					return err
				}
			}
			if got := len(r.eng.Committed()); got != 4 {
				return fmt.Errorf("%d checkpoints committed before Finalize, want one per level", got)
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
			return r.Finalize()
		}, comm.WithTimeout(20*time.Second))
		if !inj.crashed.Load() {
			require.NoError(t, runErr)
			got, err := recoverAll(t, n, cfg, core)
			require.NoError(t, err)
			require.Equal(t, []int{0, 0}, got, "after a whole Finalize nothing is left")
			t.Logf("%d operations in Finalize, restarts %v", k, outcomes)
			break
		}
		got, err := recoverAll(t, n, cfg, inj.clone)
		require.NoError(t, err, "kill at op %d of Finalize", k)
		require.Contains(t, []int{0, 4}, got[0], "kill at op %d of Finalize: restarted from an older checkpoint than the newest", k)
		require.Equal(t, got[0], got[1])
		outcomes[got[0]]++
	}
}
