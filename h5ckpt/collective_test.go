package h5ckpt

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// TestSlabVarAt checks varAt against the runs of random hyperslabs: for
// every file offset x around every run boundary, varAt(x) is the
// variable offset of the first byte stored at or after x.
func TestSlabVarAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, shape := range [][]int64{{50}, {9, 13}, {5, 6, 7}, {3, 4, 5, 6}} {
		ds := dataset.Dataset{ID: 1, Name: "x", Shape: shape, Type: fileformat.Int32}
		for _, sub := range randomSubsets(rng, ds, 6, 1) {
			s := newSlab(1000, shape, sub.Offset, sub.Count, 4)
			if s.size == 0 {
				continue
			}
			// Every stored byte: file offset -> variable offset.
			type pos struct{ file, v int64 }
			var all []pos
			require.NoError(t, s.runs(0, s.size, func(f, v, n int64) error {
				for i := int64(0); i < n; i++ {
					all = append(all, pos{f + i, v + i})
				}
				return nil
			}))
			last := all[len(all)-1].file
			for x := int64(990); x <= last+2; x++ {
				want := s.size
				for _, p := range all {
					if p.file >= x {
						want = p.v
						break
					}
				}
				require.Equal(t, want, s.varAt(x), "shape %v subset %v/%v x %d", shape, sub.Offset, sub.Count, x)
			}
		}
	}
}

// TestCollectiveBuffering writes checkpoints whose slabs have short runs
// (random decompositions of 2-D and 3-D datasets whose rows are not a
// multiple of a page, some ranks holding nothing, several datasets at
// once) with collective buffering windows from one page (many rounds, runs
// cut at window edges) to the default, and checks every element of every
// dataset and variable read back, and every block hash.
func TestCollectiveBuffering(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	dir := t.TempDir()
	datasets := []dataset.Dataset{
		{ID: 1, Name: "a", Shape: []int64{61, 1033}, Type: fileformat.Float64},
		{ID: 2, Name: "b", Shape: []int64{17, 23, 45}, Type: fileformat.Int32},
		{ID: 3, Name: "c", Shape: []int64{5000}, Type: fileformat.Uint8},
	}
	for _, ranks := range []int{3, 5} {
		for _, win := range []int64{align, 3 * align, 1 << 20, 0} {
			t.Run(fmt.Sprintf("%dranks/window%d", ranks, win), func(t *testing.T) {
				globals := map[int32][]byte{}
				subs := make([][]dataset.Subset, ranks)
				for k, ds := range datasets {
					globals[ds.ID] = global(ds, uint64(ranks*10+k))
					for r, s := range randomSubsets(rng, ds, ranks, int32(10+k)) {
						subs[r] = append(subs[r], s)
					}
				}
				name := Name(dir, fmt.Sprintf("cb%d-%d", ranks, win), 1)
				err := comm.Run(ranks, func(c comm.Comm) error {
					r := c.Rank()
					vars := []fileformat.Var{{ID: 1, Name: "own", Type: fileformat.Uint8, Data: bytes.Repeat([]byte{byte(r + 1)}, 100*r)}}
					for k, s := range subs[r] {
						ds := datasets[k]
						vars = append(vars, fileformat.Var{ID: s.VarID, Type: ds.Type, Data: slabOf(ds, globals[ds.ID], s.Offset, s.Count)})
					}
					return Write(c, vfd.Sec2{}, name, Meta{CkptID: 1}, vars, datasets, subs[r],
						WithBlockSize(fileformat.MinBlockSize), func(o *options) { o.cbWindow = win })
				}, comm.WithTimeout(time.Minute))
				require.NoError(t, err)
				f, err := Open(vfd.Sec2{}, name)
				require.NoError(t, err)
				defer f.Close()
				require.NoError(t, f.Verify())
				for _, ds := range datasets {
					all := make([]byte, ds.Elements()*int64(ds.Elem()))
					require.NoError(t, f.ReadSlab(ds.ID, make([]int64, len(ds.Shape)), ds.Shape, all))
					require.True(t, bytes.Equal(globals[ds.ID], all), "dataset %d differs", ds.ID)
				}
				for r := 0; r < ranks; r++ {
					got := make([]byte, 100*r)
					require.NoError(t, f.ReadVar(r, 1, got))
					require.Equal(t, bytes.Repeat([]byte{byte(r + 1)}, 100*r), got)
				}
			})
		}
	}
}

// TestCollectiveBufferingSameFile writes the same checkpoint with and
// without collective buffering and compares the two files byte for byte.
func TestCollectiveBufferingSameFile(t *testing.T) {
	j := blockJob(4, testDatasets(), 5)
	dir := t.TempDir()
	var files [2][]byte
	for i, off := range []bool{false, true} {
		name := Name(dir, fmt.Sprintf("same%d", i), 1)
		require.NoError(t, j.write(t, vfd.Sec2{}, name, 1, WithBlockSize(fileformat.MinBlockSize),
			func(o *options) { o.cbOff, o.cbWindow = off, 2*align }))
		b, err := vfd.ReadFile(vfd.Sec2{}, name)
		require.NoError(t, err)
		files[i] = b
	}
	require.True(t, bytes.Equal(files[0], files[1]), "the files differ (%d and %d bytes)", len(files[0]), len(files[1]))
}
