package ckpt

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

var errCrash = errors.New("simulated power cut")

// crashInjector arms at a base op index: at op base+k it takes a crash
// clone of the core (what a power cut at that instant leaves) and from
// then on fails every operation; in fail mode it fails op base+k only.
type crashInjector struct {
	core    *vfd.Core
	crash   bool
	k       int
	base    atomic.Int64 // -1: not armed
	clone   *vfd.Core
	crashed bool
	hit     bool
}

func (ci *crashInjector) MaybeError(op vfd.Op) error {
	base := int(ci.base.Load())
	if base < 0 {
		return nil
	}
	if ci.crashed {
		return errCrash
	}
	if op.Index == base+ci.k {
		ci.hit = true
		if ci.crash {
			ci.clone = ci.core.CrashClone()
			ci.crashed = true
			return errCrash
		}
		return fmt.Errorf("injected failure of %v %s", op.Kind, op.Path)
	}
	return nil
}

// version is the state of checkpoint v on rank r.
func version(r, v int) []uint64 {
	out := make([]uint64, 40+v*7+r)
	for i := range out {
		out[i] = uint64(v)<<56 | uint64(r)<<40 | uint64(i)
	}
	return out
}

// recoverAll restarts on d and returns which version every rank recovered
// (0 for a fresh run), checking the data bit for bit.
func recoverAll(t *testing.T, n int, cfg Config, d vfd.Driver) ([]int, error) {
	got := make([]int, n)
	err := comm.Run(n, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithDriver(d), WithLogger(zap.NewNop()))
		if err != nil {
			return err
		}
		defer r.Close()
		var x []uint64
		ver := []int64{0}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
			return err
		}
		if r.Status() == Fresh {
			return nil
		}
		if err := r.Recover(); err != nil {
			return err
		}
		v := int(ver[0])
		if !assert.ObjectsAreEqual(version(c.Rank(), v), x) {
			return fmt.Errorf("rank %d: data is not exactly version %d", c.Rank(), v)
		}
		got[c.Rank()] = v
		// The restarted run can checkpoint again.
		x, ver[0] = version(c.Rank(), 9), 9
		return r.Checkpoint(9, 1)
	}, comm.WithTimeout(20*time.Second))
	return got, err
}

// TestCrashAtEveryOp crashes (or fails) at every file operation of a
// checkpoint and checks that a restart recovers exactly the previous
// committed checkpoint or exactly the new one, on every rank.
func TestCrashAtEveryOp(t *testing.T) {
	type tc struct {
		n, level int
		crash    bool
	}
	var cases []tc
	for _, n := range []int{1, 4, 8} {
		cases = append(cases, tc{n, 1, true})
		if n < 8 {
			cases = append(cases, tc{n, 1, false}) // 8 ranks: crash mode only, to keep the suite fast
		}
	}
	for _, l := range []int{2, 3, 4} {
		cases = append(cases, tc{4, l, true}, tc{4, l, false})
	}
	for _, tc := range cases {
		n, level, crash := tc.n, tc.level, tc.crash
		{
			name := fmt.Sprintf("ranks=%d/L%d/crash=%v", n, level, crash)
			t.Run(name, func(t *testing.T) {
				cfg := testConfig("/", min(n, 2))
				if level == 2 || level == 3 {
					cfg.NodeSize, cfg.GroupSize = 1, 2
				}
				outcomes := map[string]int{}
				stride := 1
				if raceEnabled && (level > 1 || n > 4) {
					stride = 7 // every 7th op under -race; every op otherwise
				}
				for k := 0; ; k += stride {
					core := vfd.NewCore()
					// Run 1 commits version 1.
					require.NoError(t, comm.Run(n, func(c comm.Comm) error {
						r, err := Init(cfg, c, WithDriver(core))
						if err != nil {
							return err
						}
						defer r.Close()
						x, ver := version(c.Rank(), 1), []int64{1}
						if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
							return err
						}
						return r.Checkpoint(1, level)
					}))
					inj := &crashInjector{core: core, crash: crash, k: k}
					inj.base.Store(-1)
					fault := vfd.NewFault(core, inj)
					var mu sync.Mutex
					var ckptErrs []error
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
						err = r.Checkpoint(2, level)
						mu.Lock()
						ckptErrs = append(ckptErrs, err)
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
						// A crash after the commit point (while deleting the
						// superseded checkpoint) leaves Checkpoint successful.
						after = inj.clone
					} else {
						require.NoError(t, runErr, "op %d", k)
						require.Len(t, ckptErrs, n)
						for _, e := range ckptErrs {
							if ckptErrs[0] == nil {
								require.NoError(t, e, "op %d: ranks disagree", k)
							} else {
								require.Error(t, e, "op %d: ranks disagree", k)
								assert.Equal(t, ckptErrs[0].Error(), e.Error(), "op %d", k)
							}
						}
					}
					got, err := recoverAll(t, n, cfg, after)
					require.NoError(t, err, "op %d", k)
					for _, v := range got {
						require.Equal(t, got[0], v, "op %d: ranks recovered different versions %v", k, got)
					}
					require.Contains(t, []int{1, 2}, got[0], "op %d", k)
					if crash && runErr == nil {
						require.Equal(t, 2, got[0], "op %d: checkpoint reported success but restart found version %d", k, got[0])
					}
					if !crash && ckptErrs[0] == nil {
						require.Equal(t, 2, got[0], "op %d: checkpoint reported success but restart found version %d", k, got[0])
					}
					if !crash && ckptErrs[0] != nil {
						require.Equal(t, 1, got[0], "op %d: checkpoint reported failure but restart found version 2", k)
					}
					outcomes[fmt.Sprintf("v%d", got[0])]++
				}
			})
		}
	}
}
