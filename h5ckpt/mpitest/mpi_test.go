//go:build mpi

package mpitest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/mpi"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/h5ckpt"
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

// value is element (i, j) of the test array.
func value(i, j int64) float64 { return float64(i)*1000 + float64(j) + 0.25 }

// TestWriteAndRedistribute: every MPI rank writes its block of a 2-D
// array into one HDF5 checkpoint; then every rank reads the blocks of a
// 5-rank decomposition (new ranks q = rank, rank+size, ...) from the file,
// every block hash checked, and compares them element by element.
func TestWriteAndRedistribute(t *testing.T) {
	c := comm.Comm(world)
	// One directory for all ranks: rank 0's, broadcast.
	var dir []byte
	if c.Rank() == 0 {
		dir = []byte(t.TempDir())
	}
	dir, err := comm.BcastBytes(c, 0, dir)
	require.NoError(t, err)
	ds := dataset.Dataset{ID: 1, Name: "field/u", Shape: []int64{301, 157}, Type: fileformat.Float64}
	grid, err := dataset.Dims(c.Size(), 2)
	require.NoError(t, err)
	off, cnt, err := dataset.Block(ds.Shape, grid, c.Rank())
	require.NoError(t, err)
	data := make([]byte, 0, cnt[0]*cnt[1]*8)
	for i := off[0]; i < off[0]+cnt[0]; i++ {
		for j := off[1]; j < off[1]+cnt[1]; j++ {
			data = binary.LittleEndian.AppendUint64(data, mathBits(value(i, j)))
		}
	}
	name := h5ckpt.Name(string(dir), "VPR-h5", 4)
	sub := dataset.Subset{VarID: 7, Dataset: 1, Offset: off, Count: cnt}
	err = h5ckpt.Write(c, vfd.Sec2{}, name, h5ckpt.Meta{CkptID: 4, Level: 9},
		[]fileformat.Var{{ID: 7, Name: "u", Type: fileformat.Float64, Data: data}, {ID: 8, Name: "step", Type: fileformat.Int64, Data: make([]byte, 8)}},
		[]dataset.Dataset{ds}, []dataset.Subset{sub}, h5ckpt.WithBlockSize(fileformat.MinBlockSize))
	require.NoError(t, err)

	f, err := h5ckpt.Open(vfd.Sec2{}, name)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, c.Size(), f.Ranks())
	const m = 5
	views := make([]dataset.View, m)
	ngrid, _ := dataset.Dims(m, 2)
	for q := range views {
		o, n, err := dataset.Block(ds.Shape, ngrid, q)
		require.NoError(t, err)
		views[q] = dataset.View{Datasets: []dataset.Dataset{ds}, Subsets: []dataset.Subset{{VarID: 3, Dataset: 1, Offset: o, Count: n}}}
	}
	nw, err := dataset.NewDecomposition(views)
	require.NoError(t, err)
	p, err := dataset.NewPlan(f.Decomposition(), nw)
	require.NoError(t, err)
	for q := c.Rank(); q < m; q += c.Size() {
		s := views[q].Subsets[0]
		buf := make([]byte, s.Elements()*8)
		require.NoError(t, p.Execute(q, f, map[int32][]byte{3: buf}))
		want := make([]byte, 0, len(buf))
		for i := s.Offset[0]; i < s.Offset[0]+s.Count[0]; i++ {
			for j := s.Offset[1]; j < s.Offset[1]+s.Count[1]; j++ {
				want = binary.LittleEndian.AppendUint64(want, mathBits(value(i, j)))
			}
		}
		require.True(t, bytes.Equal(want, buf), "new rank %d", q)
	}
	require.NoError(t, c.Barrier())
}
