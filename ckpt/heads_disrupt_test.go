package ckpt

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// headTake takes checkpoint v (version v of the data) at lvl on an
// application rank, with Checkpoint or, icp set, as an incremental
// checkpoint (the two variables added in an order of the rank's), and
// waits for the heads to raise it.
func headTake(r *Runtime, me, v, lvl int, icp bool, x *[]uint64, ver []int64) error {
	*x, ver[0] = version(me, v), int64(v)
	if icp {
		if err := r.BeginICP(int64(v), lvl, true); err != nil {
			return err
		}
		ids := []int{0, 1}
		if (me+v)%2 == 1 {
			ids = []int{1, 0}
		}
		for _, id := range ids {
			if err := r.AddVarICP(id); err != nil {
				return err
			}
		}
		if err := r.FinalizeICP(); err != nil {
			return err
		}
	} else if err := r.Checkpoint(int64(v), lvl); err != nil {
		return err
	}
	if err := r.CheckpointWait(); err != nil {
		return err
	}
	if r.last.ID != int64(v) || r.last.Level != levels.ID(lvl) {
		return fmt.Errorf("rank %d: checkpoint %d at %v, want %d at L%d", me, r.last.ID, r.last.Level, v, lvl)
	}
	return nil
}

// headRestartVersion relaunches the job of cfg with heads on d: every
// application rank recovers (checked bit for bit) and, unless next is 0,
// takes checkpoint next at lvl (icp: incrementally), raised by the heads.
// It returns the version recovered, the same on every rank, or the
// error of Init on the application ranks (the same everywhere), after
// checking that the heads then ended with ErrHeadAppFailed.
func headRestartVersion(t *testing.T, cfg Config, d vfd.Driver, next, lvl int, icp bool) (int, error) {
	t.Helper()
	got := make([]int, 4)
	errs, headErrs := make([]error, 4), make([]error, 4)
	require.NoError(t, comm.Run(8, func(c comm.Comm) error {
		local := nodeLocal{Driver: d, root: cfg.CkptDir, own: fmt.Sprintf("node%04d", c.Rank()/2)}
		r, err := Init(cfg, c, WithDrivers(local, d, d), WithLogger(zap.NewNop()), WithWarnings(nopWriter{}))
		me := c.Rank() / 2
		if c.Rank()%2 == 0 {
			headErrs[me] = err
			return nil
		}
		if err != nil {
			errs[me] = err
			return nil
		}
		defer r.Close()
		var x []uint64
		ver := []int64{0}
		if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver), r.Recover()); err != nil {
			return err
		}
		if !assert.ObjectsAreEqual(version(me, int(ver[0])), x) {
			return fmt.Errorf("rank %d: data is not exactly version %d", me, ver[0])
		}
		got[me] = int(ver[0])
		if next == 0 {
			return nil
		}
		return headTake(r, me, next, lvl, icp, &x, ver)
	}, comm.WithTimeout(60*time.Second)))
	if errs[0] != nil {
		for me, err := range errs {
			require.Error(t, err, "rank %d restarted while rank 0 failed", me)
			assert.Equal(t, errs[0].Error(), err.Error(), "rank %d", me)
			assert.ErrorIs(t, headErrs[me], ErrHeadAppFailed, "head of node %d", me)
		}
		return 0, errs[0]
	}
	for me, err := range headErrs {
		assert.ErrorIs(t, err, ErrHead, "head of node %d", me)
	}
	requireSameVersion(t, got, -1)
	return got[0], nil
}

// nopWriter discards the restart warnings.
type nopWriter struct{}

func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }

// TestHeadsDisruptionMatrix runs the rows of FTI's disruption matrix
// (multiLevelCkpt's ckpt_disruption: head = 1, iCP on and off) with
// heads: 4 nodes of a head and an application rank, one group of 4,
// three checkpoints at L2 or L3 raised by the heads; then files erased
// or corrupted on the non-consecutive nodes 0 and 2, their partner or
// parity files erased, whole node directories of consecutive and
// non-consecutive nodes erased, and one node more than L3 tolerates.
// Where the level allows, the relaunch with heads recovers the newest
// checkpoint bit for bit and its heads raise the next one, which
// survives the same damage again (the heads rebuilt the redundancy on
// the replaced nodes); where it does not, Init fails on every
// application rank with ErrUnrecoverable (never a fresh start) and the
// heads end with ErrHeadAppFailed.
func TestHeadsDisruptionMatrix(t *testing.T) {
	type disruption struct {
		name  string
		apply func(t *testing.T, d *vfd.Core, cfg Config)
		ok    map[int]bool // level -> recoverable
	}
	// each applies fn to the files of role held on nodes, in every
	// checkpoint on storage (those a former disruption erased excepted),
	// and returns how many.
	each := func(t *testing.T, d *vfd.Core, cfg Config, nodes []int, role string, fn func(p string)) int {
		scanned, err := levels.ScanManifests(levels.Store{Driver: d, Dir: cfg.MetaDir})
		require.NoError(t, err)
		n := 0
		for _, sm := range scanned {
			require.NoError(t, sm.Err)
			for _, nd := range nodes {
				for _, f := range sm.M.Files[nd] { // one application rank per node
					p := path.Join(cfg.NodeDir(nd, sm.M.Run), f.Name)
					if f.Role != role || f.Where != levels.Local {
						continue
					}
					if _, err := d.Stat(p); errors.Is(err, fs.ErrNotExist) {
						continue
					}
					fn(p)
					n++
				}
			}
		}
		return n
	}
	erase := func(d *vfd.Core, cfg Config, nodes ...int) {
		for _, n := range nodes {
			eraseNode(t, d, cfg, n)
		}
	}
	cases := []disruption{
		{"erase data files on nodes 0,2", func(t *testing.T, d *vfd.Core, cfg Config) {
			n := each(t, d, cfg, []int{0, 2}, levels.RoleData, func(p string) { require.NoError(t, d.Remove(p)) })
			require.NotZero(t, n)
		}, map[int]bool{2: true, 3: true}},
		{"corrupt data files on nodes 0,2", func(t *testing.T, d *vfd.Core, cfg Config) {
			n := each(t, d, cfg, []int{0, 2}, levels.RoleData, func(p string) {
				f, err := d.Open(p, vfd.ReadWrite)
				require.NoError(t, err)
				_, err = f.WriteAt([]byte("TextForCorruption"), 0)
				require.NoError(t, errors.Join(err, f.Close()))
			})
			require.NotZero(t, n)
		}, map[int]bool{2: true, 3: true}},
		{"erase partner or parity files on nodes 0,2", func(t *testing.T, d *vfd.Core, cfg Config) {
			n := 0
			for _, role := range []string{levels.RolePartner, levels.RoleParity} {
				n += each(t, d, cfg, []int{0, 2}, role, func(p string) { require.NoError(t, d.Remove(p)) })
			}
			require.NotZero(t, n)
		}, map[int]bool{2: true, 3: true}},
		{"erase node dirs 0,1 (consecutive)", func(t *testing.T, d *vfd.Core, cfg Config) { erase(d, cfg, 0, 1) },
			map[int]bool{2: false, 3: true}},
		{"erase node dirs 0,2 (non-consecutive)", func(t *testing.T, d *vfd.Core, cfg Config) { erase(d, cfg, 0, 2) },
			map[int]bool{2: true, 3: true}},
		{"erase node dirs 0,1,2 (k+1 losses)", func(t *testing.T, d *vfd.Core, cfg Config) { erase(d, cfg, 0, 1, 2) },
			map[int]bool{2: false, 3: false}},
	}
	for _, lvl := range []int{2, 3} {
		for _, icp := range []bool{false, true} {
			for _, dc := range cases {
				t.Run(fmt.Sprintf("L%d/icp=%v/%s", lvl, icp, dc.name), func(t *testing.T) {
					core := vfd.NewCore()
					cfg := headConfig(lvl)
					cfg.GroupSize = 4
					headJob(t, cfg, core, func(r *Runtime, me int) error {
						defer r.Close()
						var x []uint64
						ver := []int64{0}
						if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
							return err
						}
						for v := 1; v <= 3; v++ {
							if err := headTake(r, me, v, lvl, icp, &x, ver); err != nil {
								return err
							}
						}
						return nil
					})
					dc.apply(t, core, cfg)
					v, err := headRestartVersion(t, cfg, core, 4, lvl, icp)
					if !dc.ok[lvl] {
						require.ErrorIs(t, err, ErrUnrecoverable)
						assert.True(t, strings.Contains(err.Error(), "unrecoverable") || strings.Contains(err.Error(), "lost"), err.Error())
						return
					}
					require.NoError(t, err)
					require.Equal(t, 3, v, "the newest checkpoint")
					dc.apply(t, core, cfg)
					v, err = headRestartVersion(t, cfg, core, 0, lvl, icp)
					require.NoError(t, err, "the same damage after the heads raised checkpoint 4")
					assert.Equal(t, 4, v)
				})
			}
		}
	}
}
