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
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/vfd"
)

var world *mpi.Comm

func TestMain(m *testing.M) {
	w, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpi.Init:", err)
		os.Exit(2)
	}
	world = w
	code := m.Run()
	if code != 0 {
		_ = w.Abort(code)
		os.Exit(code)
	}
	if err := w.Finalize(); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

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
