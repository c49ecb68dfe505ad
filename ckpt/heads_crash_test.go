package ckpt

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// headRecoverAll relaunches the job of cfg with heads on d and returns
// the version every application rank recovered (checked bit for bit).
func headRecoverAll(t *testing.T, cfg Config, d vfd.Driver) []int {
	t.Helper()
	got := make([]int, 4)
	headJob(t, cfg, d, func(r *Runtime, me int) error {
		defer r.Close()
		var x []uint64
		ver := []int64{0}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
			return err
		}
		if r.Status() == Fresh {
			return fmt.Errorf("rank %d: fresh start with checkpoints on storage", me)
		}
		if err := r.Recover(); err != nil {
			return err
		}
		if !assert.ObjectsAreEqual(version(me, int(ver[0])), x) {
			return fmt.Errorf("rank %d: data is not exactly version %d", me, ver[0])
		}
		got[me] = int(ver[0])
		return nil
	})
	return got
}

// TestHeadsCrash crashes (power cut: what was synced stays) or fails at
// every file operation of the heads' raise of checkpoint 2, after its L1
// commit, with checkpoint 1 committed at the level. A relaunch with
// heads after losing what the level protects against recovers
// checkpoint 2 when the raise committed and checkpoint 1 otherwise, the
// same on every rank, bit for bit; a failure (not a crash) is reported
// to every application rank alike, and decides which.
func TestHeadsCrash(t *testing.T) {
	for _, lvl := range []int{2, 3, 4} {
		for _, crash := range []bool{true, false} {
			name := fmt.Sprintf("L%d/crash=%v", lvl, crash)
			t.Run(name, func(t *testing.T) {
				cfg := headConfig(lvl)
				stride := 1
				if raceEnabled {
					stride = 7
				}
				outcomes := map[string]int{}
				// The number of operations varies by a few between runs
				// (the heads' goroutines interleave): the loop ends after
				// a few runs in a row that never reached operation k, so
				// that the last operations of every order are hit.
				misses := 0
				for k := 0; misses < 4; k += stride {
					core := vfd.NewCore()
					sync1 := cfg
					sync1.Async = [5]bool{}
					headJob(t, sync1, core, func(r *Runtime, me int) error {
						x, ver := version(me, 1), []int64{1}
						return errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Checkpoint(1, lvl), r.Close())
					})
					inj := &crashInjector{core: core, crash: crash, k: k}
					inj.base.Store(-1)
					fault := vfd.NewFault(core, inj)
					var mu sync.Mutex
					var waitErrs []error
					armed := make(chan struct{})
					// Hold the posters until the injector is armed: the
					// operations counted from there are the heads'.
					hold := func(o *options) { o.postStart = func() { <-armed } }
					headJob(t, cfg, fault, func(r *Runtime, me int) error {
						defer r.Close()
						x, ver := version(me, 2), []int64{2}
						if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Checkpoint(2, lvl)); err != nil {
							return err
						}
						if err := r.Comm().Barrier(); err != nil {
							return err
						}
						if me == 0 {
							inj.base.Store(int64(fault.Ops()))
							close(armed)
						}
						werr := r.CheckpointWait()
						mu.Lock()
						waitErrs = append(waitErrs, werr)
						mu.Unlock()
						return nil
					}, hold)
					if !inj.hit {
						if misses++; misses == 1 {
							t.Logf("%s: %d operations of the heads, outcomes %v", name, k, outcomes)
						}
						continue
					}
					misses = 0
					after := vfd.Driver(core)
					if crash {
						after = inj.clone
					} else {
						for _, e := range waitErrs {
							if waitErrs[0] == nil {
								require.NoError(t, e, "op %d: ranks disagree", k)
							} else {
								require.ErrorIs(t, e, ErrBackground, "op %d", k)
								assert.Equal(t, waitErrs[0].Error(), e.Error(), "op %d", k)
							}
						}
					}
					lose(t, after, cfg, lvl)
					got := headRecoverAll(t, cfg, after)
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
				if stride == 1 { // every operation was hit
					assert.NotZero(t, outcomes["v1"], "no operation left checkpoint 1")
					assert.NotZero(t, outcomes["v2"], "no operation left checkpoint 2")
				}
			})
		}
	}
}
