//go:build mpi

package mpitest

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// TestL2L3DamageUnderMPI: the MPI processes (one node each) checkpoint
// at L2 and at L3 (entries recording the FTI-FF checksum: the partner
// copies checked as they arrive, with the preamble sent ahead over MPI);
// node 1 is lost and one byte of another rank's data file flipped; the
// restart recovers every rank's values bit for bit (the lost data from
// its partner copy or from parity, the damaged file restored the same
// way), each process seeing only its own node's disk.
func TestL2L3DamageUnderMPI(t *testing.T) {
	c := comm.Comm(world)
	if c.Size() < 4 {
		t.Skipf("needs at least 4 processes (a lost node and a damaged file on nodes that are not neighbours); mpirun started %d", c.Size())
	}
	n := c.Size()
	for _, lvl := range []int{2, 3} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			root := sharedTempDir(t, c)
			cfg := config(root, n)
			local := nodeLocal{Driver: vfd.Sec2{}, root: cfg.CkptDir, own: fmt.Sprintf("node%04d", c.Rank())}
			x := make([]float64, 20000+313*c.Rank())
			for i := range x {
				x[i] = value(int64(c.Rank()), int64(i))
			}
			step := []int64{int64(7 + c.Rank())}
			r, err := ckpt.Init(cfg, c, ckpt.WithDrivers(local, vfd.Sec2{}, vfd.Sec2{}), ckpt.WithLogger(zap.NewNop()))
			require.NoError(t, err)
			require.NoError(t, errors.Join(ckpt.Protect(r, 1, &x), ckpt.Protect(r, 2, &step)))
			require.NoError(t, r.Checkpoint(1, lvl))
			require.NoError(t, r.Close())
			require.NoError(t, c.Barrier())
			if c.Rank() == 0 {
				m, err := filepath.Glob(filepath.Join(cfg.CkptDir, "node0001", "*", "ckpt*", "*")) // node, run, checkpoint
				require.NoError(t, err)
				require.NotEmpty(t, m)
				require.NoError(t, os.RemoveAll(filepath.Join(cfg.CkptDir, "node0001")))
				// Rank 3's data file (its copy is on node 3+1, its parity on node 3).
				d, err := filepath.Glob(filepath.Join(cfg.CkptDir, "node0003", "*", "ckpt*", "data*.fti"))
				require.NoError(t, err)
				require.Len(t, d, 1)
				b, err := os.ReadFile(d[0])
				require.NoError(t, err)
				b[len(b)/3] ^= 0x04
				require.NoError(t, os.WriteFile(d[0], b, 0o644))
			}
			require.NoError(t, c.Barrier())
			r, err = ckpt.Init(cfg, c, ckpt.WithDrivers(local, vfd.Sec2{}, vfd.Sec2{}), ckpt.WithLogger(zap.NewNop()))
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, ckpt.Restart, r.Status())
			require.Equal(t, ckpt.Level(lvl), r.Recovered().Level)
			got := make([]float64, 0)
			gstep := []int64{0}
			require.NoError(t, errors.Join(ckpt.Protect(r, 1, &got), ckpt.Protect(r, 2, &gstep), r.Recover()))
			require.Len(t, got, len(x))
			for i := range x {
				require.Equal(t, math.Float64bits(x[i]), math.Float64bits(got[i]), "rank %d element %d", c.Rank(), i)
			}
			require.Equal(t, step, gstep)
		})
	}
}

// TestL2DamagedCopyUnderMPI: an L2 checkpoint loses node 1 and the
// partner copy of rank 1 (on node 2) is damaged in its file block, so
// that its holder cannot read its preamble: the restart fails on every
// process (it never starts fresh), each naming the damaged copy and
// saying that rank 1's data and copy are both lost.
func TestL2DamagedCopyUnderMPI(t *testing.T) {
	c := comm.Comm(world)
	if c.Size() < 4 {
		t.Skipf("needs at least 4 processes; mpirun started %d", c.Size())
	}
	root := sharedTempDir(t, c)
	cfg := config(root, c.Size())
	local := nodeLocal{Driver: vfd.Sec2{}, root: cfg.CkptDir, own: fmt.Sprintf("node%04d", c.Rank())}
	x := make([]float64, 5000+17*c.Rank())
	for i := range x {
		x[i] = value(int64(c.Rank()), int64(i))
	}
	r, err := ckpt.Init(cfg, c, ckpt.WithDrivers(local, vfd.Sec2{}, vfd.Sec2{}), ckpt.WithLogger(zap.NewNop()))
	require.NoError(t, err)
	require.NoError(t, ckpt.Protect(r, 1, &x))
	require.NoError(t, r.Checkpoint(1, 2))
	require.NoError(t, r.Close())
	require.NoError(t, c.Barrier())
	var damaged string
	if c.Rank() == 0 {
		require.NoError(t, os.RemoveAll(filepath.Join(cfg.CkptDir, "node0001")))
		p, err := filepath.Glob(filepath.Join(cfg.CkptDir, "node0002", "*", "ckpt*", "partner000001.fti"))
		require.NoError(t, err)
		require.Len(t, p, 1)
		b, err := os.ReadFile(p[0])
		require.NoError(t, err)
		b[len(b)-40] ^= 0x01
		require.NoError(t, os.WriteFile(p[0], b, 0o644))
		damaged = p[0]
	}
	name, err := comm.BcastBytes(c, 0, []byte(damaged))
	require.NoError(t, err)
	require.NoError(t, c.Barrier())
	r, err = ckpt.Init(cfg, c, ckpt.WithDrivers(local, vfd.Sec2{}, vfd.Sec2{}), ckpt.WithLogger(zap.NewNop()))
	if err == nil {
		defer r.Close()
		var got []float64
		err = errors.Join(ckpt.Protect(r, 1, &got), r.Recover())
		require.NotEqual(t, ckpt.Fresh, r.Status(), "rank %d started fresh", c.Rank())
	}
	require.Error(t, err, "rank %d", c.Rank())
	require.ErrorIs(t, err, ckpt.ErrUnrecoverable, "rank %d", c.Rank())
	require.Contains(t, err.Error(), "its data file and its partner copy on rank 2 (node 2) are both lost", "rank %d", c.Rank())
	require.Contains(t, err.Error(), "corrupt file of rank 2 at offset ", "rank %d", c.Rank())
	require.Contains(t, err.Error(), string(name)+": ", "rank %d", c.Rank())
}
