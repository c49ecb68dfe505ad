//go:build mpi

package mpitest

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/mpi"
	"github.com/ftigo/ftigo/comm/mpi/mpimain"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/vfd"
)

var world *mpi.Comm

// TestMain runs the tests under MPI at MPI_THREAD_MULTIPLE, or at the
// level FTIGO_MPI_THREAD names (see mpimain.Main).
func TestMain(m *testing.M) { mpimain.Main(m, &world) }

var shape = []int64{61, 37}

func value(i, j int64) float64 { return float64(i)*1000 + float64(j) + math.Pi }

// slab returns the field's elements in the block (off, cnt).
func slab(off, cnt []int64) []float64 {
	var out []float64
	for i := off[0]; i < off[0]+cnt[0]; i++ {
		for j := off[1]; j < off[1]+cnt[1]; j++ {
			out = append(out, value(i, j))
		}
	}
	return out
}

// nodeLocal hides every node directory of ckpt_dir but this node's, as a
// node-local disk would.
type nodeLocal struct {
	vfd.Driver
	root, own string
}

func (d nodeLocal) hidden(name string) bool {
	rel, err := filepath.Rel(d.root, name)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	first := strings.SplitN(rel, string(filepath.Separator), 2)[0]
	return strings.HasPrefix(first, "node") && first != d.own
}

func (d nodeLocal) Open(name string, flag vfd.Flag) (vfd.File, error) {
	if d.hidden(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return d.Driver.Open(name, flag)
}

func (d nodeLocal) Stat(name string) (fs.FileInfo, error) {
	if d.hidden(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return d.Driver.Stat(name)
}

func (d nodeLocal) ReadDir(name string) ([]fs.DirEntry, error) {
	if d.hidden(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return d.Driver.ReadDir(name)
}

// sharedTempDir is a test directory made by world rank 0 and broadcast:
// every process of the job gets the same path.
func sharedTempDir(t *testing.T, c comm.Comm) string {
	t.Helper()
	var dir []byte
	if c.Rank() == 0 {
		dir = []byte(t.TempDir())
	}
	dir, err := comm.BcastBytes(c, 0, dir)
	require.NoError(t, err)
	return string(dir)
}

func config(root string, groupSize int) ckpt.Config {
	c := ckpt.DefaultConfig()
	c.CkptDir, c.GlblDir, c.MetaDir = filepath.Join(root, "local"), filepath.Join(root, "global"), filepath.Join(root, "meta")
	c.LocalTest, c.GroupSize, c.BlockSize = true, groupSize, 16<<10
	return c
}

// declare protects this rank's block of the field (rows split over the
// ranks, uneven), and a counter outside the datasets.
func declare(r *ckpt.Runtime, rank, size int, field *[]float64, step *[]int64) ([]int64, []int64, error) {
	off, cnt, err := dataset.Block(shape, []int{size, 1}, rank)
	if err != nil {
		return nil, nil, err
	}
	return off, cnt, errors.Join(
		ckpt.Protect(r, 1, field, "field"),
		ckpt.Protect(r, 2, step, "step"),
		ckpt.DefineDataset[float64](r, 0, "field", shape),
		r.AddSubset(1, 0, off, cnt),
	)
}

// TestRestartOnOtherRanksUnderMPI: 4 in-process ranks checkpoint at L2
// and node 1 is lost; the MPI processes (3 or 6 of them, each seeing only
// its node's disk) restart from it: old rank 1's data comes from its
// partner copy on node 0, old rank 3's from node 3, which only some
// processes see, and everything a process cannot read arrives over MPI.
func TestRestartOnOtherRanksUnderMPI(t *testing.T) {
	c := comm.Comm(world)
	if c.Size() < 3 {
		t.Skipf("needs at least 3 processes (nodes 0-2 hold a copy of every old rank's data); mpirun started %d", c.Size())
	}
	root := sharedTempDir(t, c)
	var werr error
	if c.Rank() == 0 {
		werr = comm.Run(4, func(oc comm.Comm) error {
			r, err := ckpt.Init(config(root, 2), oc, ckpt.WithLogger(zap.NewNop()))
			if err != nil {
				return err
			}
			defer r.Close()
			var field []float64
			step := []int64{int64(100 + oc.Rank())}
			off, cnt, err := declare(r, oc.Rank(), 4, &field, &step)
			if err != nil {
				return err
			}
			field = slab(off, cnt)
			return r.Checkpoint(5, 2)
		}, comm.WithTimeout(60*time.Second))
		if werr == nil {
			werr = os.RemoveAll(filepath.Join(root, "local", "node0001"))
		}
	}
	ok, err := c.AllreduceInt64(map[bool]int64{true: 1, false: 0}[werr == nil], comm.Min)
	require.NoError(t, err)
	require.NoError(t, werr)
	require.Equal(t, int64(1), ok, "rank 0 could not write the old checkpoint")

	cfg := config(root, 1)
	local := nodeLocal{Driver: vfd.Sec2{}, root: cfg.CkptDir, own: fmt.Sprintf("node%04d", c.Rank())}
	r, err := ckpt.Init(cfg, c, ckpt.WithDrivers(local, vfd.Sec2{}, vfd.Sec2{}), ckpt.WithLogger(zap.NewNop()))
	require.NoError(t, err)
	defer r.Close()
	require.True(t, r.Reshaped())
	require.Equal(t, 4, r.OldRanks())
	var field []float64
	var step []int64
	off, cnt, err := declare(r, c.Rank(), c.Size(), &field, &step)
	require.NoError(t, err)
	if 4%c.Size() != 0 && c.Size()%4 != 0 {
		// step maps onto no dataset and the counts do not divide: it is
		// not restored; the field is.
		r.Unprotect(2)
	}
	require.NoError(t, r.Recover())
	want := slab(off, cnt)
	require.Len(t, field, len(want))
	for i := range want {
		require.Equal(t, math.Float64bits(want[i]), math.Float64bits(field[i]), "rank %d element %d", c.Rank(), i)
	}
	if 4%c.Size() == 0 || c.Size()%4 == 0 {
		require.Equal(t, []int64{int64(100 + c.Rank()*4/c.Size())}, step)
	}
	// The run checkpoints in its own shape.
	require.NoError(t, r.Checkpoint(6, 1))
}

// TestAsyncUnderMPI takes checkpoints at L2, L3 and L4 with their
// post-processing in the background (inline_lL = 0): while each rank's
// poster copies, encodes and votes over its private communicator, the
// solver keeps calling collectives on the world; then every rank loses
// its node-local directory's newest data file and the restart (same
// processes, same shape) recovers the last checkpoint at L4 from global
// storage.
func TestAsyncUnderMPI(t *testing.T) {
	c := comm.Comm(world)
	if c.Size() < 2 {
		t.Skipf("needs at least 2 processes; mpirun started %d", c.Size())
	}
	root := sharedTempDir(t, c)
	cfg := config(root, 2)
	if c.Size()%2 != 0 {
		cfg.GroupSize = c.Size()
	}
	cfg.Async = [5]bool{2: true, 3: true, 4: true}
	r, err := ckpt.Init(cfg, c, ckpt.WithLogger(zap.NewNop()))
	require.NoError(t, err)
	x := make([]float64, 100000)
	step := []int64{0}
	require.NoError(t, errors.Join(ckpt.Protect(r, 1, &x), ckpt.Protect(r, 2, &step)))
	for id := int64(1); id <= 3; id++ {
		for i := range x {
			x[i] = value(id, int64(i*c.Size()+c.Rank()))
		}
		step[0] = id
		require.NoError(t, r.Checkpoint(id, int(id)+1))
		// The solver communicates while the background work runs.
		for done := false; !done; {
			_, err := c.AllreduceInt64(id, comm.Sum)
			require.NoError(t, err)
			d, err := r.CheckpointDone()
			require.NoError(t, err)
			all, err := c.AllreduceInt64(map[bool]int64{true: 1, false: 0}[d], comm.Min)
			require.NoError(t, err)
			done = all == 1
		}
	}
	require.NoError(t, r.CheckpointWait())
	require.NoError(t, r.Close())
	require.NoError(t, c.Barrier())
	if c.Rank() == 0 {
		require.NoError(t, os.RemoveAll(cfg.CkptDir))
	}
	require.NoError(t, c.Barrier())
	r, err = ckpt.Init(cfg, c, ckpt.WithLogger(zap.NewNop()))
	require.NoError(t, err)
	defer r.Close()
	require.NotNil(t, r.Recovered())
	require.Equal(t, int64(3), r.Recovered().ID)
	require.Equal(t, 4, int(r.Recovered().Level))
	got := make([]float64, len(x))
	gstep := []int64{0}
	require.NoError(t, errors.Join(ckpt.Protect(r, 1, &got), ckpt.Protect(r, 2, &gstep), r.Recover()))
	for i := range got {
		require.Equal(t, math.Float64bits(value(3, int64(i*c.Size()+c.Rank()))), math.Float64bits(got[i]), "rank %d element %d", c.Rank(), i)
	}
	require.Equal(t, int64(3), gstep[0])
}

// TestHeadsUnderMPI runs head = 1 on nodes of 2 processes (local_test):
// the even ranks are heads, which post-process checkpoints at L2, L3 and
// L4 (inline_lN = 0) and return ckpt.ErrHead when the application ranks
// close; the application ranks work on their own communicator, and a
// restart with heads after every node-local directory is lost recovers
// the L4 checkpoint bit for bit.
func TestHeadsUnderMPI(t *testing.T) {
	c := comm.Comm(world)
	if c.Size() < 4 || c.Size()%2 != 0 {
		t.Skipf("needs an even number of processes, at least 4 (nodes of a head and an application rank); mpirun started %d", c.Size())
	}
	dir := sharedTempDir(t, c)
	cfg := config(dir, c.Size()/2)
	cfg.NodeSize, cfg.Head = 2, true
	cfg.Async = [5]bool{2: true, 3: true, 4: true}
	appSize := c.Size() / 2
	for run := range 2 {
		r, err := ckpt.Init(cfg, c, ckpt.WithLogger(zap.NewNop()))
		if c.Rank()%2 == 0 {
			require.ErrorIs(t, err, ckpt.ErrHead, "rank %d, run %d", c.Rank(), run)
		} else {
			require.NoError(t, err)
			app := r.Comm()
			require.Equal(t, appSize, app.Size())
			require.Equal(t, c.Rank()/2, app.Rank())
			me := app.Rank()
			x := make([]float64, 100000)
			step := []int64{0}
			require.NoError(t, errors.Join(ckpt.Protect(r, 1, &x), ckpt.Protect(r, 2, &step)))
			if run == 0 {
				for id := int64(1); id <= 3; id++ {
					for i := range x {
						x[i] = value(id, int64(i*appSize+me))
					}
					step[0] = id
					require.NoError(t, r.Checkpoint(id, int(id)+1))
					// The application communicates while the heads work.
					_, err := app.AllreduceInt64(id, comm.Sum)
					require.NoError(t, err)
				}
				require.NoError(t, r.CheckpointWait())
			} else {
				require.NotNil(t, r.Recovered())
				require.Equal(t, int64(3), r.Recovered().ID)
				require.Equal(t, 4, int(r.Recovered().Level))
				require.NoError(t, r.Recover())
				for i := range x {
					require.Equal(t, math.Float64bits(value(3, int64(i*appSize+me))), math.Float64bits(x[i]), "rank %d element %d", me, i)
				}
				require.Equal(t, int64(3), step[0])
			}
			require.NoError(t, r.Close()) // stops the heads
		}
		require.NoError(t, c.Barrier())
		if c.Rank() == 0 && run == 0 {
			require.NoError(t, os.RemoveAll(cfg.CkptDir))
		}
		require.NoError(t, c.Barrier())
	}
}

// TestHeadKilledUnderMPI (only with FTIGO_HEAD_KILL=1: the job must not
// pass, it must die): world rank 2, a head, is SIGKILLed once the first
// background checkpoint was handed to the heads, while the application
// ranks go on checkpointing for a minute. The MPI launcher must end the
// whole job with a non-zero status and a message naming the killed
// process; .ci/run checks that it does so well before the minute is
// over (a hang would run into its timeout).
func TestHeadKilledUnderMPI(t *testing.T) {
	if os.Getenv("FTIGO_HEAD_KILL") != "1" {
		t.Skip("FTIGO_HEAD_KILL=1 runs it (.ci/run): it kills a process of the job on purpose")
	}
	c := comm.Comm(world)
	if c.Size() < 4 || c.Size()%2 != 0 {
		t.Skipf("needs an even number of processes, at least 4; mpirun started %d", c.Size())
	}
	dir := sharedTempDir(t, c)
	marker := filepath.Join(dir, "kill-the-head")
	if c.Rank() == 2 {
		go func() {
			for {
				if _, err := os.Stat(marker); err == nil {
					fmt.Fprintln(os.Stderr, "TestHeadKilledUnderMPI: world rank 2 (a head) kills itself with SIGKILL")
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	cfg := config(dir, c.Size()/2)
	cfg.NodeSize, cfg.Head = 2, true
	cfg.Async = [5]bool{2: true, 3: true, 4: true}
	r, err := ckpt.Init(cfg, c, ckpt.WithLogger(zap.NewNop()))
	if c.Rank()%2 == 0 {
		t.Fatalf("head rank %d returned from Init (%v): the job should have been ended by the launcher", c.Rank(), err)
	}
	require.NoError(t, err)
	x := make([]float64, 1<<20)
	require.NoError(t, ckpt.Protect(r, 1, &x))
	deadline := time.Now().Add(time.Minute)
	for id := int64(1); time.Now().Before(deadline); id++ {
		x[0] = float64(id)
		_ = r.Checkpoint(id, 4) // errors are expected once the head is gone
		if id == 1 && c.Rank() == 1 {
			require.NoError(t, os.WriteFile(marker, nil, 0o644))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("rank %d ran for a minute after the head was killed: the job should have been ended by the launcher", c.Rank())
}

// headLaunch runs one launch of a job with heads on nodes of 2
// processes (local_test), each process seeing only its node's directory
// of ckpt_dir: the even world ranks are heads, whose Init must return
// ckpt.ErrHead once the application ranks closed; fn runs on the odd
// ones with their rank in the application communicator. A failure on
// any rank fails the launch on every rank, after every process is done
// with the job (no rank is left waiting in a collective call).
func headLaunch(t *testing.T, c comm.Comm, cfg ckpt.Config, fn func(r *ckpt.Runtime, me int) error) {
	t.Helper()
	local := nodeLocal{Driver: vfd.Sec2{}, root: cfg.CkptDir, own: fmt.Sprintf("node%04d", c.Rank()/2)}
	r, err := ckpt.Init(cfg, c, ckpt.WithDrivers(local, vfd.Sec2{}, vfd.Sec2{}), ckpt.WithLogger(zap.NewNop()))
	switch {
	case c.Rank()%2 == 0:
		if !errors.Is(err, ckpt.ErrHead) {
			err = fmt.Errorf("head %d: Init returned %v, want ckpt.ErrHead", c.Rank(), err)
		} else {
			err = nil
		}
	case err == nil:
		err = fn(r, r.Comm().Rank())
		err = errors.Join(err, r.Close()) // stops the heads
	}
	ok, aerr := c.AllreduceInt64(map[bool]int64{true: 1, false: 0}[err == nil], comm.Min)
	require.NoError(t, aerr)
	require.NoError(t, err, "world rank %d", c.Rank())
	require.Equal(t, int64(1), ok, "the launch failed on another rank")
}

// loseNodes has world rank 0 delete the node-local directories of nodes
// (replaced by fresh nodes), between barriers.
func loseNodes(t *testing.T, c comm.Comm, cfg ckpt.Config, nodes ...int) {
	t.Helper()
	require.NoError(t, c.Barrier())
	if c.Rank() == 0 {
		for _, n := range nodes {
			require.NoError(t, os.RemoveAll(filepath.Join(cfg.CkptDir, fmt.Sprintf("node%04d", n))))
		}
	}
	require.NoError(t, c.Barrier())
}

// headsConfig is the configuration of the heads tests: nodes of 2
// processes, one group of all application ranks, inline_lN = 0.
func headsConfig(root string, c comm.Comm) ckpt.Config {
	cfg := config(root, c.Size()/2)
	cfg.NodeSize, cfg.Head = 2, true
	cfg.Async = [5]bool{2: true, 3: true, 4: true}
	return cfg
}

// icpField is application rank me's data at version v.
func icpField(me, v int) ([]float64, []int64) {
	x := make([]float64, 20000+me)
	for i := range x {
		x[i] = value(int64(v), int64(i*10+me))
	}
	return x, []int64{int64(v*100 + me)}
}

// TestHeadsICPUnderMPI takes incremental checkpoints (BeginICP, AddVarICP
// in a different order on every rank, FinalizeICP) at L2, L3 and L4 with
// heads, each raised by the heads, a launch per level: the next launch,
// after losing what the level protects against (a node's directory, then
// every node's), recovers it bit for bit from the level. A variable
// missing on one rank at FinalizeICP fails it on every rank (ErrICP on
// that rank) and commits nothing: the launch that follows restarts from
// the checkpoint before it.
func TestHeadsICPUnderMPI(t *testing.T) {
	c := comm.Comm(world)
	if c.Size() < 4 || c.Size()%2 != 0 {
		t.Skipf("needs an even number of processes, at least 4 (nodes of a head and an application rank); mpirun started %d", c.Size())
	}
	cfg := headsConfig(sharedTempDir(t, c), c)
	nodes := c.Size() / 2
	// icp takes incremental checkpoint v at lvl; rank skip leaves out
	// variable 2.
	icp := func(r *ckpt.Runtime, me, v, lvl, skip int) error {
		x, step := icpField(me, v)
		if err := errors.Join(ckpt.Protect(r, 1, &x), ckpt.Protect(r, 2, &step)); err != nil {
			return err
		}
		if err := r.BeginICP(int64(v), lvl, true); err != nil {
			return err
		}
		ids := []int{1, 2}
		if (me+v)%2 == 1 {
			ids = []int{2, 1}
		}
		for _, id := range ids {
			if id == 2 && me == skip {
				continue
			}
			if err := r.AddVarICP(id); err != nil {
				return err
			}
			// The solver goes on with the variable just added.
			if id == 1 {
				x[0] = -1
			} else {
				step[0] = -1
			}
		}
		if err := r.FinalizeICP(); err != nil {
			return err
		}
		return r.CheckpointWait()
	}
	// check recovers checkpoint v at lvl.
	check := func(r *ckpt.Runtime, me, v, lvl int) error {
		if m := r.Recovered(); m == nil || m.ID != int64(v) || int(m.Level) != lvl {
			return fmt.Errorf("rank %d: restarted from %v, want checkpoint %d at L%d", me, m, v, lvl)
		}
		var x []float64
		var step []int64
		if err := errors.Join(ckpt.Protect(r, 1, &x), ckpt.Protect(r, 2, &step), r.Recover()); err != nil {
			return err
		}
		wx, ws := icpField(me, v)
		if len(x) != len(wx) || step[0] != ws[0] {
			return fmt.Errorf("rank %d: recovered %d elements and step %d, want %d and %d", me, len(x), step[0], len(wx), ws[0])
		}
		for i := range wx {
			if math.Float64bits(x[i]) != math.Float64bits(wx[i]) {
				return fmt.Errorf("rank %d: element %d is %v, want %v", me, i, x[i], wx[i])
			}
		}
		r.Unprotect(1)
		r.Unprotect(2)
		return nil
	}
	headLaunch(t, c, cfg, func(r *ckpt.Runtime, me int) error {
		if err := icp(r, me, 1, 2, -1); err != nil {
			return err
		}
		r.Unprotect(1)
		r.Unprotect(2)
		err := icp(r, me, 2, 3, 0)
		if err == nil || !strings.Contains(err.Error(), "protected variables [2] were not added") {
			return fmt.Errorf("rank %d: FinalizeICP with variable 2 missing on rank 0: %v", me, err)
		}
		if me == 0 && !errors.Is(err, ckpt.ErrICP) {
			return fmt.Errorf("rank 0: %v, want ckpt.ErrICP", err)
		}
		return nil
	})
	loseNodes(t, c, cfg, 0)
	headLaunch(t, c, cfg, func(r *ckpt.Runtime, me int) error {
		return errors.Join(check(r, me, 1, 2), icp(r, me, 2, 3, -1))
	})
	loseNodes(t, c, cfg, nodes-1)
	headLaunch(t, c, cfg, func(r *ckpt.Runtime, me int) error {
		return errors.Join(check(r, me, 2, 3), icp(r, me, 3, 4, -1))
	})
	loseNodes(t, c, cfg, nodesUpTo(nodes)...)
	headLaunch(t, c, cfg, func(r *ckpt.Runtime, me int) error {
		return check(r, me, 3, 4)
	})
}

// nodesUpTo returns 0..n-1.
func nodesUpTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestHeadsReplacementUnderMPI: a job with heads checkpoints at L2,
// raised by the heads; a node is replaced by a fresh one (its directory
// deleted) and the relaunch with heads recovers the checkpoint bit for
// bit from the partner copy, then checkpoints at L3, raised by the heads
// on the replacement node too; two nodes are replaced (one when the
// group of the application ranks is smaller than 4: l3_parity =
// group_size survives losing half the group) and the next relaunch
// rebuilds their files from the parity, recovers bit for bit, and its
// heads raise its next checkpoint.
func TestHeadsReplacementUnderMPI(t *testing.T) {
	c := comm.Comm(world)
	if c.Size() < 4 || c.Size()%2 != 0 {
		t.Skipf("needs an even number of processes, at least 4 (nodes of a head and an application rank); mpirun started %d", c.Size())
	}
	cfg := headsConfig(sharedTempDir(t, c), c)
	nodes := c.Size() / 2
	data := func(me, v int) []float64 {
		x := make([]float64, 30000+me)
		for i := range x {
			x[i] = value(int64(v), int64(i*nodes+me))
		}
		return x
	}
	// launch recovers checkpoint from (0: none) at level from/10 and takes
	// checkpoint next at level lvl, waiting for the heads to raise it.
	launch := func(from, fromLvl, next, lvl int) {
		headLaunch(t, c, cfg, func(r *ckpt.Runtime, me int) error {
			var x []float64
			step := []int64{0}
			if err := errors.Join(ckpt.Protect(r, 1, &x), ckpt.Protect(r, 2, &step)); err != nil {
				return err
			}
			if from != 0 {
				if m := r.Recovered(); m == nil || m.ID != int64(from) || int(m.Level) != fromLvl {
					return fmt.Errorf("rank %d: restarted from %v, want checkpoint %d at L%d", me, m, from, fromLvl)
				}
				if err := r.Recover(); err != nil {
					return err
				}
				want := data(me, from)
				if len(x) != len(want) || step[0] != int64(from) {
					return fmt.Errorf("rank %d: recovered %d elements, step %d; want %d, %d", me, len(x), step[0], len(want), from)
				}
				for i := range want {
					if math.Float64bits(x[i]) != math.Float64bits(want[i]) {
						return fmt.Errorf("rank %d: element %d is %v, want %v", me, i, x[i], want[i])
					}
				}
			}
			x, step[0] = data(me, next), int64(next)
			return errors.Join(r.Checkpoint(int64(next), lvl), r.CheckpointWait())
		})
	}
	launch(0, 0, 1, 2)
	loseNodes(t, c, cfg, 1)
	launch(1, 2, 2, 3)
	lost := []int{0}
	if nodes >= 4 {
		lost = []int{0, 2}
	}
	loseNodes(t, c, cfg, lost...)
	launch(2, 3, 3, 2)
	loseNodes(t, c, cfg, 0)
	launch(3, 2, 4, 2)
}
