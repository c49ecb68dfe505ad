package h5ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

func testDatasets() []dataset.Dataset {
	return []dataset.Dataset{
		{ID: 1, Name: "field/temperature", Shape: []int64{37, 29}, Type: fileformat.Float64},
		{ID: 2, Name: "ids", Shape: []int64{101}, Type: fileformat.Int32},
		{ID: 3, Name: "vol", Shape: []int64{7, 5, 9}, Type: fileformat.Complex64},
		{ID: 4, Name: "field/rec", Shape: []int64{13}, Type: fileformat.Struct, ElemSize: 12},
	}
}

func TestWriteRead(t *testing.T) {
	j := blockJob(4, testDatasets(), 1)
	name := Name(filepath.Join(t.TempDir(), "vpr"), "VPR-h5", 3)
	assert.Equal(t, "VPR-h5-ID00000003.h5", filepath.Base(name))
	require.NoError(t, j.write(t, vfd.Sec2{}, name, 3))

	f, err := Open(vfd.Sec2{}, name)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, Meta{CkptID: 3, Level: 9, Timestamp: 1700000000123456789, Ranks: 4, BlockSize: fileformat.DefaultBlockSize}, f.Meta())
	require.NoError(t, f.Verify())
	dec := f.Decomposition()
	require.Equal(t, 4, dec.Ranks())
	for _, want := range testDatasets() {
		got, ok := dec.Dataset(want.ID)
		require.True(t, ok)
		want.ElemSize = want.Elem()
		assert.Equal(t, want, got)
	}
	for r := 0; r < 4; r++ {
		assert.Equal(t, j.subsets[r], dec.Subsets(r), "rank %d", r)
		for _, v := range j.vars[r] {
			got := make([]byte, len(v.Data))
			require.NoError(t, f.ReadVar(r, v.ID, got))
			assert.Equal(t, v.Data, got, "rank %d variable %d", r, v.ID)
		}
		vs := f.Vars(r)
		require.Len(t, vs, 6)
		assert.Equal(t, "step", vs[0].Name)
		assert.Equal(t, int64(24*(r+1)), vs[1].Size)
	}
	for _, ds := range testDatasets() {
		all := make([]byte, ds.Elements()*int64(ds.Elem()))
		require.NoError(t, f.ReadSlab(ds.ID, make([]int64, len(ds.Shape)), ds.Shape, all))
		assert.Equal(t, j.globals[ds.ID], all, "dataset %d", ds.ID)
	}
	// A hyperslab across ranks.
	ds := testDatasets()[0]
	part := make([]byte, 20*3*8)
	require.NoError(t, f.ReadSlab(1, []int64{10, 13}, []int64{20, 3}, part))
	assert.Equal(t, slabOf(ds, j.globals[1], []int64{10, 13}, []int64{20, 3}), part)
	_, err = f.find(0, 99)
	assert.ErrorIs(t, err, ErrNoVar)
	ids, err := List(vfd.Sec2{}, filepath.Dir(name), "VPR-h5")
	require.NoError(t, err)
	assert.Equal(t, []int64{3}, ids)
}

// TestRedistributeFromFile writes checkpoints on N ranks and restores
// them on M ranks from the HDF5 file, for the pairs, with random
// uneven decompositions in 1-D, 2-D and 3-D on both sides: every element
// bit for bit.
func TestRedistributeFromFile(t *testing.T) {
	pairs := [][2]int{{4, 3}, {4, 8}, {16, 5}, {8, 1}, {3, 7}}
	shapes := [][]int64{{1001}, {45, 37}, {11, 13, 9}}
	rng := rand.New(rand.NewPCG(7, 8))
	dir := t.TempDir()
	for _, pr := range pairs {
		for _, shape := range shapes {
			t.Run(fmt.Sprintf("%dto%d/%dD", pr[0], pr[1], len(shape)), func(t *testing.T) {
				ds := dataset.Dataset{ID: 5, Name: "u", Shape: shape, Type: fileformat.Float64}
				g := global(ds, uint64(pr[0]*100+pr[1]))
				old := randomSubsets(rng, ds, pr[0], 3)
				name := Name(dir, fmt.Sprintf("p%d-%d-%d", pr[0], pr[1], len(shape)), 1)
				err := comm.Run(pr[0], func(c comm.Comm) error {
					s := old[c.Rank()]
					v := fileformat.Var{ID: 3, Name: "u", Type: fileformat.Float64, Data: slabOf(ds, g, s.Offset, s.Count)}
					return Write(c, vfd.Sec2{}, name, Meta{CkptID: 1}, []fileformat.Var{v}, []dataset.Dataset{ds}, []dataset.Subset{s},
						WithBlockSize(fileformat.MinBlockSize))
				}, comm.WithTimeout(time.Minute))
				require.NoError(t, err)
				f, err := Open(vfd.Sec2{}, name)
				require.NoError(t, err)
				defer f.Close()
				// The restart: M ranks, another random decomposition, other var ids.
				nw := randomSubsets(rng, ds, pr[1], 8)
				views := make([]dataset.View, pr[1])
				for q := range views {
					views[q] = dataset.View{Datasets: []dataset.Dataset{ds}, Subsets: []dataset.Subset{nw[q]}}
				}
				dec, err := dataset.NewDecomposition(views)
				require.NoError(t, err)
				p, err := dataset.NewPlan(f.Decomposition(), dec)
				require.NoError(t, err)
				for q := 0; q < pr[1]; q++ {
					buf := bytes.Repeat([]byte{0xcc}, int(nw[q].Elements()*8))
					require.NoError(t, p.Execute(q, f, map[int32][]byte{8: buf}))
					if !bytes.Equal(slabOf(ds, g, nw[q].Offset, nw[q].Count), buf) {
						t.Fatalf("new rank %d (offset %v count %v): bytes differ", q, nw[q].Offset, nw[q].Count)
					}
				}
			})
		}
	}
}

// TestWriteInvalid checks that inputs the ranks cannot store together
// fail on every rank with the same message, naming the problem.
func TestWriteInvalid(t *testing.T) {
	ds := []dataset.Dataset{{ID: 1, Name: "a", Shape: []int64{10}, Type: fileformat.Uint8}}
	whole := func(off, n int64) []dataset.Subset {
		return []dataset.Subset{{VarID: 0, Dataset: 1, Offset: []int64{off}, Count: []int64{n}}}
	}
	tests := []struct {
		name   string
		subs   func(r int) []dataset.Subset
		ds     func(r int) []dataset.Dataset
		size   func(r int) int
		target error
		msg    string
	}{
		{"overlap", func(r int) []dataset.Subset { return whole(int64(r*4), 6) }, nil, func(int) int { return 6 },
			dataset.ErrOverlap, "share the elements at offset [4] count [2]"},
		{"gap", func(r int) []dataset.Subset { return whole(int64(r*5), 4) }, nil, func(int) int { return 4 },
			dataset.ErrGap, "element [4] is in no subset"},
		{"id twice", func(r int) []dataset.Subset { return whole(int64(r*5), 5) }, func(r int) []dataset.Dataset {
			if r == 1 {
				return []dataset.Dataset{{ID: 1, Name: "b", Shape: []int64{10}, Type: fileformat.Uint8}}
			}
			return ds
		}, func(int) int { return 5 }, dataset.ErrDuplicate, `dataset id 1 is 1 "a" [10] uint8 on rank 0 but 1 "b" [10] uint8 on rank 1`},
		{"size on one rank", func(r int) []dataset.Subset { return whole(int64(r*5), 5) }, nil, func(r int) int { return 5 + r },
			ErrInvalid, "rank 1: variable 0 has 6 bytes but its subset [5]"},
		{"reserved name", func(r int) []dataset.Subset { return whole(int64(r*5), 5) }, func(int) []dataset.Dataset {
			return []dataset.Dataset{{ID: 1, Name: "ftigo/x", Shape: []int64{10}, Type: fileformat.Uint8}}
		}, func(int) int { return 5 }, ErrInvalid, `name "ftigo/x" is inside the reserved group`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			name := Name(dir, "x", 1)
			errs := make([]error, 2)
			_ = comm.Run(2, func(c comm.Comm) error {
				r := c.Rank()
				d := ds
				if tc.ds != nil {
					d = tc.ds(r)
				}
				errs[r] = Write(c, vfd.Sec2{}, name, Meta{}, []fileformat.Var{{ID: 0, Type: fileformat.Uint8, Data: make([]byte, tc.size(r))}}, d, tc.subs(r))
				return nil
			})
			for r, err := range errs {
				require.Error(t, err, "rank %d", r)
				assert.ErrorIs(t, err, ErrInvalid, "rank %d", r)
				assert.ErrorIs(t, err, tc.target, "rank %d", r)
				assert.Contains(t, err.Error(), tc.msg)
				assert.Equal(t, errs[0].Error(), err.Error(), "same message on every rank")
			}
			ents, err := vfd.Sec2{}.ReadDir(dir)
			if err == nil {
				assert.Empty(t, ents, "nothing written")
			}
		})
	}
}

// TestCorruptionDetected damages a data byte, a table byte and an object
// header byte of a written file.
func TestCorruptionDetected(t *testing.T) {
	j := blockJob(3, testDatasets()[:2], 5)
	name := filepath.Join(t.TempDir(), "c.h5")
	require.NoError(t, j.write(t, vfd.Sec2{}, name, 1, WithBlockSize(fileformat.MinBlockSize)))
	orig, err := vfd.ReadFile(vfd.Sec2{}, name)
	require.NoError(t, err)
	f, err := Open(vfd.Sec2{}, name)
	require.NoError(t, err)
	// Where rank 1's temperature variable starts in the file.
	v, err := f.find(1, 10)
	require.NoError(t, err)
	var at int64
	require.Equal(t, int64(12*29*8), v.size)
	require.NoError(t, v.slab.runs(2000, 2001, func(fileOff, _, _ int64) error { at = fileOff; return nil }))
	require.NoError(t, f.Close())

	bad := append([]byte(nil), orig...)
	bad[at] ^= 0x20
	require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, name, bad))
	f, err = Open(vfd.Sec2{}, name)
	require.NoError(t, err, "data is checked when read")
	dst := bytes.Repeat([]byte{1}, 100)
	err = f.ReadVarAt(1, 10, dst, 1990)
	require.ErrorIs(t, err, ErrHashMismatch)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 1, ce.Rank)
	assert.Equal(t, int32(10), ce.VarID)
	assert.Equal(t, make([]byte, 100), dst, "zeroed")
	require.NoError(t, f.ReadVarAt(1, 10, make([]byte, 1000), 0), "other blocks still read")
	require.NoError(t, f.ReadVarAt(1, 10, make([]byte, 100), 2048))
	assert.ErrorIs(t, f.Verify(), ErrHashMismatch)
	assert.NoError(t, f.VerifyRank(0), "rank 0's blocks are intact")
	assert.NoError(t, f.VerifyRank(2))
	assert.ErrorIs(t, f.VerifyRank(1), ErrHashMismatch)
	assert.ErrorIs(t, f.VerifyRank(3), ErrInvalid)
	all := make([]byte, 37*29*8)
	assert.ErrorIs(t, f.ReadSlab(1, []int64{0, 0}, []int64{37, 29}, all), ErrHashMismatch)
	require.NoError(t, f.Close())

	// A byte of the names table (raw data, not covered by HDF5 checksums).
	h, err := Open(vfd.Sec2{}, Name(t.TempDir(), "none", 1))
	require.Error(t, err)
	assert.Nil(t, h)
	i := bytes.Index(orig, []byte("field/temperature@0"))
	require.Positive(t, i)
	bad = append([]byte(nil), orig...)
	bad[i] = 'F'
	require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, name, bad))
	_, err = Open(vfd.Sec2{}, name)
	assert.ErrorIs(t, err, ErrHashMismatch)

	// Not a checkpoint at all, and a torn HDF5 header.
	require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, name, []byte("hello")))
	_, err = Open(vfd.Sec2{}, name)
	assert.Error(t, err)
	bad = append([]byte(nil), orig...)
	bad[len(bad)-10] ^= 1 // inside the root object header (written last)
	require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, name, bad))
	_, err = Open(vfd.Sec2{}, name)
	assert.Error(t, err)
}

// TestFaultEveryOp fails each operation of a checkpoint write in turn:
// every rank returns an error, the previous checkpoint is untouched and
// no temporary file is left behind.
func TestFaultEveryOp(t *testing.T) {
	j := blockJob(3, testDatasets()[:2], 9)
	core := vfd.NewCore()
	name := Name("/glbl", "VPR-h5", 1)
	require.NoError(t, j.write(t, core, name, 1))
	before, err := vfd.ReadFile(core, name)
	require.NoError(t, err)
	j2 := blockJob(3, testDatasets()[:2], 10)
	next := Name("/glbl", "VPR-h5", 2)
	// Count the operations of a successful write.
	probe := vfd.NewFault(core.CrashClone())
	require.NoError(t, j2.write(t, probe, next, 2))
	total := probe.Ops()
	require.Greater(t, total, 10)
	failed := 0
	for k := 0; k < total+5; k++ {
		c := core.CrashClone() // a fresh copy with checkpoint 1 only
		fd := vfd.NewFault(c, vfd.OnIndex(k, errors.New("boom")))
		err := j2.write(t, fd, next, 2)
		if err == nil {
			// Nothing injected, or a failure the write tolerates (a
			// Stat): the new checkpoint must be complete.
			f, oerr := Open(c, next)
			require.NoError(t, oerr, "op %d", k)
			require.NoError(t, f.Verify(), "op %d", k)
			require.NoError(t, f.Close())
			continue
		}
		require.Positive(t, fd.Injected(), "op %d: %v", k, err)
		assert.ErrorIs(t, err, ErrFailed, "op %d", k)
		failed++
		got, rerr := vfd.ReadFile(c, name)
		require.NoError(t, rerr)
		require.Equal(t, before, got, "op %d: previous checkpoint changed", k)
		ents, rerr := c.ReadDir("/glbl")
		require.NoError(t, rerr)
		for _, e := range ents {
			assert.NotContains(t, e.Name(), ".tmp", "op %d: temporary file left", k)
		}
		if _, serr := c.Stat(next); serr == nil {
			f, oerr := Open(c, next)
			require.NoError(t, oerr, "op %d: a new file exists, it must be complete", k)
			require.NoError(t, f.Verify())
			require.NoError(t, f.Close())
		}
	}
	t.Logf("%d operations, %d failures made the write fail", total, failed)
	assert.Greater(t, failed, total*3/4, "most operations matter")
}

// TestCrashEveryOp takes a crash image after each operation of a
// checkpoint write: the previous checkpoint always opens and verifies,
// and the new one is either absent or complete (never a mix).
func TestCrashEveryOp(t *testing.T) {
	j := blockJob(3, testDatasets(), 11)
	core := vfd.NewCore()
	name := Name("/glbl", "VPR-h5", 1)
	require.NoError(t, j.write(t, core, name, 1))
	j2 := blockJob(3, testDatasets(), 12)
	next := Name("/glbl", "VPR-h5", 2)
	check := func(c *vfd.Core, k int) bool {
		f, err := Open(c, name)
		require.NoError(t, err, "op %d: previous checkpoint", k)
		require.NoError(t, f.Verify(), "op %d", k)
		require.NoError(t, f.Close())
		if _, err := c.Stat(next); err != nil {
			return false
		}
		f, err = Open(c, next)
		require.NoError(t, err, "op %d: the new file under its final name must be complete", k)
		require.NoError(t, f.Verify(), "op %d", k)
		for r := 0; r < 3; r++ {
			for _, v := range j2.vars[r] {
				got := make([]byte, len(v.Data))
				require.NoError(t, f.ReadVar(r, v.ID, got))
				require.Equal(t, v.Data, got, "op %d", k)
			}
		}
		require.NoError(t, f.Close())
		return true
	}
	for k := 0; ; k++ {
		base := core.CrashClone()
		var crashed, torn *vfd.Core
		fd := vfd.NewFault(base, vfd.CrashCloneAt(base, k, &crashed), vfd.InjectorFunc(func(op vfd.Op) error {
			if op.Index == k {
				// Half of the pages written since their file's last sync
				// reached the device anyway.
				torn = base.CrashCloneWith(vfd.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(k), 1)), UnsyncedPages: 0.5})
			}
			return nil
		}))
		require.NoError(t, j2.write(t, fd, next, 2))
		if crashed == nil {
			// k is past the last operation: the finished write is durable.
			require.True(t, check(base.CrashClone(), k), "a finished write must survive a crash")
			break
		}
		check(crashed, k)
		check(torn, k)
	}
}

// TestWithResult: every rank learns the committed file's tables hash and
// size, equal to what Open reads back.
func TestWithResult(t *testing.T) {
	j := blockJob(3, testDatasets()[:2], 9)
	name := filepath.Join(t.TempDir(), "r.h5")
	res := make([]Result, 3)
	require.NoError(t, comm.Run(3, func(c comm.Comm) error {
		r := c.Rank()
		return Write(c, vfd.Sec2{}, name, Meta{CkptID: 4}, j.vars[r], j.datasets, j.subsets[r], WithResult(&res[r]))
	}))
	f, err := Open(vfd.Sec2{}, name)
	require.NoError(t, err)
	defer f.Close()
	fi, err := vfd.Sec2{}.Stat(name)
	require.NoError(t, err)
	for r := range res {
		assert.Equal(t, f.TablesHash(), res[r].TablesHash, "rank %d", r)
		assert.Equal(t, fi.Size(), res[r].Size, "rank %d", r)
	}
	assert.NotEqual(t, [32]byte{}, f.TablesHash())
}
