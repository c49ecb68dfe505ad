package ckpt

import (
	"errors"
	"fmt"
	"math/rand/v2"
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

// dversion is the state of version v on rank r: 48 KiB (12 dCP blocks of
// 4 KiB) of which each version changes two blocks and keeps the rest.
func dversion(r, v int) []uint64 {
	out := make([]uint64, 6144)
	for i := range out {
		out[i] = uint64(r)<<40 | uint64(i)
	}
	for k := 1; k <= v; k++ {
		out[(k*1700)%len(out)] = uint64(k) << 56
		out[(k*2900+13)%len(out)] ^= uint64(k)
	}
	return out
}

// durableCrash crashes before the k-th operation that changes what is
// durable (a Sync or a SyncDir) after it is armed: by the Core's crash
// model (vfd.Core.CrashClone) a crash anywhere between two such
// operations leaves the same durable state as a crash just before the
// second, so crashing before each of them covers every state a crash at
// any file operation can leave. It then fails every operation.
type durableCrash struct {
	core *vfd.Core
	k    int
	// torn crashes before every operation instead, keeping at random
	// half of the pages written since their file's last sync (a device
	// that wrote some of them before the power went).
	torn    bool
	armed   atomic.Bool
	n       atomic.Int64
	clone   *vfd.Core
	crashed atomic.Bool
	hit     atomic.Bool
	mu      sync.Mutex
}

func (d *durableCrash) MaybeError(op vfd.Op) error {
	if !d.armed.Load() {
		return nil
	}
	if d.crashed.Load() {
		return errCrash
	}
	if !d.torn && op.Kind != vfd.OpSync && op.Kind != vfd.OpSyncDir {
		return nil
	}
	if int(d.n.Add(1)-1) == d.k {
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.crashed.Load() {
			if d.torn {
				d.clone = d.core.CrashCloneWith(vfd.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(d.k), 7)), UnsyncedPages: 0.5})
			} else {
				d.clone = d.core.CrashClone()
			}
			d.crashed.Store(true)
			d.hit.Store(true)
		}
		return errCrash
	}
	return nil
}

// injector is what the dCP crash tests arm: a durableCrash in crash mode,
// a crashInjector failing every operation in fail mode.
type injector interface {
	vfd.Injector
	arm(fault *vfd.Fault)
	wasHit() bool
	crashClone() *vfd.Core
}

func (d *durableCrash) arm(*vfd.Fault)          { d.armed.Store(true) }
func (d *durableCrash) wasHit() bool            { return d.hit.Load() }
func (d *durableCrash) crashClone() *vfd.Core   { return d.clone }
func (ci *crashInjector) arm(f *vfd.Fault)      { ci.base.Store(int64(f.Ops())) }
func (ci *crashInjector) wasHit() bool          { return ci.hit }
func (ci *crashInjector) crashClone() *vfd.Core { return ci.clone }

func newInjector(core *vfd.Core, crash, torn bool, k int) injector {
	if crash {
		return &durableCrash{core: core, k: k, torn: torn}
	}
	ci := &crashInjector{core: core, k: k}
	ci.base.Store(-1)
	return ci
}

// dcpRecoverAll restarts on d and returns which version every rank
// recovered, checking the data bit for bit; the restarted run then takes
// a differential checkpoint.
func dcpRecoverAll(t *testing.T, n int, cfg Config, d vfd.Driver, level int) ([]int, error) {
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
		if !assert.ObjectsAreEqual(dversion(c.Rank(), v), x) {
			return fmt.Errorf("rank %d: data is not exactly version %d", c.Rank(), v)
		}
		got[c.Rank()] = v
		x, ver[0] = dversion(c.Rank(), 9), 9
		return r.Checkpoint(9, level)
	}, comm.WithTimeout(20*time.Second))
	return got, err
}

// TestDCPCrashAtEveryOp crashes at every file operation (see
// durableCrash), or fails every file operation in turn, of a
// differential checkpoint — a delta on a restarted chain, at L1-L4, with 1
// and 4 ranks, and with dcp_stack_size reached (the checkpoint is written
// full and the chain dropped) — and checks that a restart recovers
// exactly the previous committed state or exactly the new one, and can
// take a differential checkpoint again.
func TestDCPCrashAtEveryOp(t *testing.T) {
	type tc struct {
		n, level, stack int
		crash, torn     bool
	}
	cases := []tc{{1, 1, 10, false, false}, {1, 4, 10, false, false}, {4, 1, 10, false, false}, {4, 3, 10, false, false}, {4, 1, 2, false, false}}
	for l := 1; l <= 4; l++ {
		cases = append(cases, tc{4, l, 10, true, false})
	}
	cases = append(cases, tc{1, 1, 10, true, false}, tc{1, 4, 10, true, false}, tc{4, 1, 2, true, false}, tc{4, 3, 2, true, false})
	// Torn writes, a crash before every operation: L1 and L4.
	cases = append(cases, tc{4, 1, 10, true, true}, tc{4, 4, 10, true, true})
	for _, tc := range cases {
		name := fmt.Sprintf("ranks=%d/L%d/stack=%d/crash=%v/torn=%v", tc.n, tc.level, tc.stack, tc.crash, tc.torn)
		t.Run(name, func(t *testing.T) {
			n, level, crash := tc.n, tc.level+4, tc.crash
			cfg := testConfig("/", 1)
			cfg.GroupSize = n
			cfg.EnableDCP, cfg.DCPBlockSize, cfg.DCPStackSize = true, 4096, tc.stack
			outcomes := map[string]int{}
			stride := 1
			if raceEnabled {
				stride = 7
			}
			// Run 1 commits version 1 (full) and 2 (a delta), once; every
			// iteration starts from a copy of what it made durable.
			base := vfd.NewCore()
			{
				core := base
				require.NoError(t, comm.Run(n, func(c comm.Comm) error {
					r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
					if err != nil {
						return err
					}
					defer r.Close()
					x, ver := dversion(c.Rank(), 1), []int64{1}
					if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Checkpoint(1, level)); err != nil {
						return err
					}
					x, ver[0] = dversion(c.Rank(), 2), 2
					if err := r.Checkpoint(2, level); err != nil {
						return err
					}
					if r.last.DCP == nil {
						return errors.New("version 2 is not differential")
					}
					return nil
				}))
			}
			if tc.torn && raceEnabled {
				stride = 11
			}
			for k := 0; ; k += stride {
				core := base.CrashClone()
				inj := newInjector(core, crash, tc.torn, k)
				fault := vfd.NewFault(core, inj)
				var mu sync.Mutex
				var ckptErrs []error
				diff := false
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
						inj.arm(fault)
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					x, ver[0] = dversion(c.Rank(), 3), 3
					err = r.Checkpoint(3, level)
					mu.Lock()
					ckptErrs = append(ckptErrs, err)
					if err == nil && c.Rank() == 0 {
						diff = r.last.DCP != nil
					}
					mu.Unlock()
					if crash {
						return err
					}
					return nil
				}, comm.WithTimeout(20*time.Second))
				if !inj.wasHit() {
					require.NoError(t, runErr)
					require.Equal(t, tc.stack > 2, diff, "version 3 is differential unless the stack is full")
					t.Logf("%s: %d points per checkpoint, outcomes %v", name, k, outcomes)
					break
				}
				after := vfd.Driver(core)
				if crash {
					after = inj.crashClone()
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
				got, err := dcpRecoverAll(t, n, cfg, after, level)
				require.NoError(t, err, "op %d", k)
				requireSameVersion(t, got, k)
				require.Contains(t, []int{2, 3}, got[0], "op %d", k)
				if (crash && runErr == nil) || (!crash && ckptErrs[0] == nil) {
					require.Equal(t, 3, got[0], "op %d: checkpoint reported success but restart found version %d", k, got[0])
				}
				if !crash && ckptErrs[0] != nil {
					require.Equal(t, 2, got[0], "op %d: checkpoint reported failure but restart found version 3", k)
				}
				outcomes[fmt.Sprintf("v%d", got[0])]++
			}
		})
	}
}

// TestDCPCrashWhileCompacting crashes at every file operation (see
// durableCrash), or fails every file operation in turn, of a compaction (the chain's image written as a full checkpoint, then
// the chain dropped): the restart always finds version 2 bit for bit,
// from the chain or from the full checkpoint, and a compaction that
// succeeded leaves one full checkpoint.
func TestDCPCrashWhileCompacting(t *testing.T) {
	for _, tc := range []struct {
		n, level int
		crash    bool
	}{{1, 1, true}, {1, 1, false}, {1, 4, true}, {4, 1, true}, {4, 1, false}, {4, 2, true}, {4, 3, true}, {4, 4, true}} {
		name := fmt.Sprintf("ranks=%d/L%d/crash=%v", tc.n, tc.level, tc.crash)
		t.Run(name, func(t *testing.T) {
			n, level, crash := tc.n, tc.level+4, tc.crash
			cfg := testConfig("/", 1)
			cfg.GroupSize = n
			cfg.EnableDCP, cfg.DCPBlockSize = true, 4096
			outcomes := map[string]int{}
			stride := 1
			if raceEnabled {
				stride = 7
			}
			base := vfd.NewCore()
			require.NoError(t, comm.Run(n, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithDriver(base), WithLogger(zap.NewNop()))
				if err != nil {
					return err
				}
				defer r.Close()
				x, ver := dversion(c.Rank(), 1), []int64{1}
				if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Checkpoint(1, level)); err != nil {
					return err
				}
				x, ver[0] = dversion(c.Rank(), 2), 2
				return r.Checkpoint(2, level)
			}))
			for k := 0; ; k += stride {
				core := base.CrashClone()
				inj := newInjector(core, crash, false, k)
				fault := vfd.NewFault(core, inj)
				var mu sync.Mutex
				var errs []error
				left := 0
				runErr := comm.Run(n, func(c comm.Comm) error {
					r, err := Init(cfg, c, WithDriver(fault), WithLogger(zap.NewNop()))
					if err != nil {
						return err
					}
					defer r.Close()
					if err := c.Barrier(); err != nil {
						return err
					}
					if c.Rank() == 0 {
						inj.arm(fault)
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					m := r.recoveredManifest()
					_, _, err = r.eng.Compact(m, m.Level, nil)
					mu.Lock()
					errs = append(errs, err)
					if c.Rank() == 0 && err == nil {
						left = len(r.eng.Committed())
						if r.eng.Committed()[0].DCP != nil {
							left = -1
						}
					}
					mu.Unlock()
					if crash {
						return err
					}
					return nil
				}, comm.WithTimeout(20*time.Second))
				if !inj.wasHit() {
					require.NoError(t, runErr)
					require.Equal(t, 1, left, "one full checkpoint after compaction")
					t.Logf("%s: %d points per compaction, outcomes %v", name, k, outcomes)
					break
				}
				after := vfd.Driver(core)
				if crash {
					after = inj.crashClone()
				} else {
					require.NoError(t, runErr, "op %d", k)
					for _, e := range errs {
						if errs[0] == nil {
							require.NoError(t, e, "op %d: ranks disagree", k)
						} else {
							require.Error(t, e, "op %d: ranks disagree", k)
						}
					}
				}
				got, err := dcpRecoverAll(t, n, cfg, after, level)
				require.NoError(t, err, "op %d", k)
				for _, v := range got {
					require.Equal(t, 2, v, "op %d: recovered %v", k, got)
				}
				outcomes["v2"]++
			}
		})
	}
}
