package ckpt

import (
	"errors"
	"fmt"
	"path"
	"strings"
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

// manifestCrash takes a crash clone of core at the first operation on
// checkpoint seq's manifest: the job dies once every data file is durable,
// before the checkpoint commits. Every later operation fails.
type manifestCrash struct {
	core  *vfd.Core
	seq   uint64
	mu    sync.Mutex
	clone *vfd.Core
}

func (m *manifestCrash) MaybeError(op vfd.Op) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.clone != nil {
		return errCrash
	}
	if strings.Contains(op.Path, levels.ManifestName(m.seq)) {
		m.clone = m.core.CrashClone()
		return errCrash
	}
	return nil
}

// TestStrayOnNodeOutsideTheJob is chaos seed 0x135003b6c7d99eb7: two
// launches on 4 nodes die while writing checkpoint 1; a launch on 3
// nodes commits; files of checkpoint 1 stay on node0003, which it does
// not have. Its intent marker must stay, naming node0003, so that a scan
// of every node (ftigo verify) finds no lost metadata, and a launch on 4
// nodes again removes them and restarts bit for bit. The rank count stays
// 12; node_size changes the node count.
func TestStrayOnNodeOutsideTheJob(t *testing.T) {
	const ranks = 12
	cfg4, cfg3 := testConfig("/", 3), testConfig("/", 4) // 4 nodes, 3 nodes
	core := vfd.NewCore()
	launch := func(d vfd.Driver, cfg Config, ver int, check func(r *Runtime, c comm.Comm, x *[]uint64, v *[]int64) error) error {
		return comm.Run(ranks, func(c comm.Comm) error {
			r, err := Init(cfg, c, WithDriver(d), WithLogger(zap.NewNop()), WithWarnings(tbWriter{t}))
			if err != nil {
				return err
			}
			defer r.Close()
			var x []uint64
			v := []int64{0}
			if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &v)); err != nil {
				return err
			}
			if check != nil {
				if err := check(r, c, &x, &v); err != nil {
					return err
				}
			}
			x, v[0] = version(c.Rank(), ver), int64(ver) // x protected by pointer: the new slice is written
			return r.Checkpoint(int64(ver), 1)           // its id is the version
		}, comm.WithTimeout(30*time.Second))
	}
	fresh := func(r *Runtime, c comm.Comm, _ *[]uint64, _ *[]int64) error {
		if r.Status() != Fresh {
			return fmt.Errorf("rank %d: status %v, want a fresh start (nothing was committed)", c.Rank(), r.Status())
		}
		return nil
	}
	// Launches 0 and 1: 4 nodes, killed while writing checkpoint 1.
	for i := range 2 {
		inj := &manifestCrash{core: core, seq: 1}
		err := launch(vfd.NewFault(core, inj), cfg4, 1, fresh)
		require.Error(t, err, "launch %d", i)
		require.NotNil(t, inj.clone, "launch %d never reached checkpoint 1's manifest", i)
		core = inj.clone
	}
	run := runOf(t, cfg4, core)
	stray := path.Join(cfg4.NodeDir(3, run), levels.CheckpointDir(1))
	ents, err := core.ReadDir(stray)
	require.NoError(t, err, "the killed launches leave checkpoint 1's files on node0003")
	require.NotEmpty(t, ents)
	marker := path.Join(cfg4.MetaDir, levels.PendingName(1))

	// Launch 2: 3 nodes, commits.
	require.NoError(t, launch(core, cfg3, 2, fresh))
	_, err = core.Stat(path.Join(cfg3.NodeDir(2, run), levels.CheckpointDir(1)))
	assert.Error(t, err, "its own nodes' leftovers of checkpoint 1 are removed")
	ents, err = core.ReadDir(stray)
	require.NoError(t, err, "node0003 is not the job's: its files stay")
	require.NotEmpty(t, ents)
	raw, err := vfd.ReadFile(core, marker)
	require.NoError(t, err, "the intent marker stays while node0003 holds files")
	assert.Equal(t, "ftigo-pending 1\nnodes 3-3\n", string(raw))

	// What ftigo verify does: every node's directory scanned.
	locals := make([]levels.Store, 4)
	for n := range locals {
		locals[n] = levels.Store{Driver: core, Dir: cfg4.NodeDir(n, run)}
	}
	meta := levels.Store{Driver: core, Dir: cfg4.MetaDir}
	global := levels.Store{Driver: core, Dir: cfg4.GlobalDir(run)}
	scan, err := levels.ScanRun(run, meta, global, locals...)
	require.NoError(t, err)
	require.NoError(t, levels.LostError(scan), "a stray of an uncommitted checkpoint is not lost metadata")
	states := map[uint64]levels.SeqState{}
	for _, s := range scan {
		states[s.Seq] = s.State()
	}
	assert.Equal(t, levels.SeqUncommitted, states[1])
	assert.Equal(t, levels.SeqCommitted, states[2], "checkpoint 1's number is not reused over its files")

	// Launch 3: 3 nodes again, restarts; the marker still names node0003.
	restart := func(want int) func(r *Runtime, c comm.Comm, x *[]uint64, v *[]int64) error {
		return func(r *Runtime, c comm.Comm, x *[]uint64, v *[]int64) error {
			if r.Status() != Restart {
				return fmt.Errorf("rank %d: status %v, want a restart", c.Rank(), r.Status())
			}
			if err := r.Recover(); err != nil {
				return err
			}
			if (*v)[0] != int64(want) || !assert.ObjectsAreEqual(version(c.Rank(), want), *x) {
				return fmt.Errorf("rank %d: recovered version %d, not exactly version %d", c.Rank(), (*v)[0], want)
			}
			return nil
		}
	}
	require.NoError(t, launch(core, cfg3, 3, restart(2)))
	raw, err = vfd.ReadFile(core, marker)
	require.NoError(t, err)
	assert.Equal(t, "ftigo-pending 1\nnodes 3-3\n", string(raw))

	// Launch 4: 4 nodes again; node0003's leftovers and the marker go.
	require.NoError(t, launch(core, cfg4, 4, restart(3)))
	_, err = core.Stat(stray)
	assert.Error(t, err, "a job on node0003 removes checkpoint 1's files there")
	_, err = core.Stat(marker)
	assert.Error(t, err, "then the intent marker goes")
	scan, err = levels.ScanRun(run, meta, global, locals...)
	require.NoError(t, err)
	require.NoError(t, levels.LostError(scan))
	for _, s := range scan {
		assert.NotEqual(t, uint64(1), s.Seq, "nothing of checkpoint 1 is left: %+v", s)
	}
	require.NoError(t, launch(core, cfg4, 5, restart(4)))
}
