package ckpt

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// Global arrays of the redistribution tests, by number of dimensions:
// extents that no rank count divides evenly.
var reshapeShapes = map[int][]int64{1: {1003}, 2: {37, 29}, 3: {13, 11, 7}}

// unevenBlock is a decomposition of shape over grid in which part j of a
// dimension split g ways is about j+1 times the first: as uneven as a
// load-balanced code gets.
func unevenBlock(shape []int64, grid []int, rank int) (offset, count []int64) {
	offset = make([]int64, len(shape))
	count = make([]int64, len(shape))
	r := rank
	for k := len(shape) - 1; k >= 0; k-- {
		g := grid[k]
		c := r % g
		r /= g
		// Cut points proportional to 1+2+...+j, each part at least 1.
		total := int64(g * (g + 1) / 2)
		cut := func(j int) int64 {
			x := shape[k] * int64(j*(j+1)/2) / total
			return max(x, int64(j)) // every part non-empty
		}
		lo, hi := cut(c), cut(c+1)
		if c == g-1 {
			hi = shape[k]
		}
		offset[k], count[k] = lo, hi-lo
	}
	return offset, count
}

// fieldValue is the element at linear index i of the field.
func fieldValue(i int64) float64 { return float64(i)*0.25 + 1e6 + math.Pi }

// linear returns the row-major index of point x in shape.
func linear(shape, x []int64) int64 {
	var i int64
	for k := range shape {
		i = i*shape[k] + x[k]
	}
	return i
}

// slabValues returns the field's elements in the hyperslab, row-major.
func slabValues(shape, offset, count []int64) []float64 {
	n := int64(1)
	for _, c := range count {
		n *= c
	}
	out := make([]float64, 0, n)
	x := slices.Clone(offset)
	for range n {
		out = append(out, fieldValue(linear(shape, x)))
		for k := len(x) - 1; k >= 0; k-- {
			x[k]++
			if x[k] < offset[k]+count[k] {
				break
			}
			x[k] = offset[k]
		}
	}
	return out
}

// idsLen is the length of the second dataset, a 1-D int32 array.
const idsLen = 101

func idsSlab(rank, ranks int) (off, cnt int64) {
	o, c, _ := dataset.Block([]int64{idsLen}, []int{ranks}, rank)
	return o[0], c[0]
}

// reshapeWriter protects rank's part of both datasets, with the old
// decomposition (uneven), and a variable outside them.
func reshapeWriter(r *Runtime, nd int) (field []float64, ids []int32, owner []int64, err error) {
	q, n := r.c.Rank(), r.c.Size()
	shape := reshapeShapes[nd]
	grid, err := dataset.Dims(n, nd)
	if err != nil {
		return nil, nil, nil, err
	}
	off, cnt := unevenBlock(shape, grid, q)
	field = slabValues(shape, off, cnt)
	io, ic := idsSlab(q, n)
	for i := range ic {
		ids = append(ids, int32(io+i)*7-3)
	}
	owner = []int64{int64(q), 4242}
	err = errors.Join(
		Protect(r, 1, &field, "field"),
		Protect(r, 2, &ids, "ids"),
		Protect(r, 3, &owner, "owner"),
		DefineDataset[float64](r, 10, "fields/temperature", shape),
		DefineDataset[int32](r, 11, "ids", []int64{idsLen}),
		r.AddSubset(1, 10, off, cnt),
		r.AddSubset(2, 11, []int64{io}, []int64{ic}),
	)
	return field, ids, owner, err
}

// reshapeReader declares this run's decomposition (balanced blocks) and
// recovers; it checks every element and, where defined, the variable
// outside the datasets.
func reshapeReader(r *Runtime, nd, oldRanks int, plain bool) error {
	q, m := r.c.Rank(), r.c.Size()
	shape := reshapeShapes[nd]
	grid, err := dataset.Dims(m, nd)
	if err != nil {
		return err
	}
	off, cnt, err := dataset.Block(shape, grid, q)
	if err != nil {
		return err
	}
	io, ic := idsSlab(q, m)
	var field []float64
	var ids []int32
	var owner []int64
	if err := errors.Join(
		Protect(r, 1, &field, "field"),
		Protect(r, 2, &ids, "ids"),
		DefineDataset[float64](r, 10, "fields/temperature", shape),
		DefineDataset[int32](r, 11, "ids", []int64{idsLen}),
		r.AddSubset(1, 10, off, cnt),
		r.AddSubset(2, 11, []int64{io}, []int64{ic}),
	); err != nil {
		return err
	}
	if plain {
		if err := Protect(r, 3, &owner, "owner"); err != nil {
			return err
		}
	}
	if !r.Reshaped() || r.OldRanks() != oldRanks {
		return fmt.Errorf("rank %d: Reshaped %v, OldRanks %d, want %d", q, r.Reshaped(), r.OldRanks(), oldRanks)
	}
	if err := r.Recover(); err != nil {
		return err
	}
	want := slabValues(shape, off, cnt)
	if len(field) != len(want) {
		return fmt.Errorf("rank %d: field has %d elements, want %d", q, len(field), len(want))
	}
	for i := range want {
		if math.Float64bits(field[i]) != math.Float64bits(want[i]) {
			return fmt.Errorf("rank %d: field element %d (slab %v+%v) is %v, want %v", q, i, off, cnt, field[i], want[i])
		}
	}
	if int64(len(ids)) != ic {
		return fmt.Errorf("rank %d: ids has %d elements, want %d", q, len(ids), ic)
	}
	for i := range ids {
		if ids[i] != int32(io+int64(i))*7-3 {
			return fmt.Errorf("rank %d: ids[%d] = %d", q, i, ids[i])
		}
	}
	if plain {
		src := q * oldRanks / m
		if !slices.Equal(owner, []int64{int64(src), 4242}) {
			return fmt.Errorf("rank %d: owner %v, want old rank %d's", q, owner, src)
		}
	}
	if r.Status() != Fresh {
		return fmt.Errorf("rank %d: status %v after Recover", q, r.Status())
	}
	return nil
}

// reshapeGroup returns a group size that divides n nodes (>= 2 when n >= 2).
func reshapeGroup(n int) int {
	for _, g := range []int{4, 3, 2} {
		if n%g == 0 && n >= g {
			return g
		}
	}
	return 1
}

// TestReshapeMatrix: a checkpoint written by N ranks is recovered on M
// with another, uneven-to-balanced decomposition, in 1-D, 2-D and 3-D, at
// every level (L2 and L3 after losing a node): every element bit for
// bit, the variable outside the datasets where N and M divide.
func TestReshapeMatrix(t *testing.T) {
	pairs := [][2]int{{4, 3}, {4, 8}, {16, 5}, {8, 1}, {3, 7}}
	if testing.Short() || raceEnabled {
		pairs = [][2]int{{4, 3}, {3, 7}} // the whole matrix runs without -race
	}
	for _, p := range pairs {
		for nd := 1; nd <= 3; nd++ {
			for _, lvl := range []int{1, 2, 3, 4} {
				n, m := p[0], p[1]
				t.Run(fmt.Sprintf("%d-to-%d/%dD/L%d", n, m, nd, lvl), func(t *testing.T) {
					root := t.TempDir()
					cfg := testConfig(root, 1)
					cfg.GroupSize = reshapeGroup(n)
					require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
						if _, _, _, err := reshapeWriter(r, nd); err != nil {
							return err
						}
						return r.Checkpoint(7, lvl)
					}))
					if lvl == 2 || lvl == 3 {
						// A node is lost with everything on it.
						require.NoError(t, vfd.Sec2{}.RemoveAll(filepath.Join(cfg.NodeDir(1, runOf(t, cfg)))))
					}
					cfg.GroupSize = 1
					plain := n%m == 0 || m%n == 0
					require.NoError(t, world(t, m, cfg, nil, func(r *Runtime) error {
						return reshapeReader(r, nd, n, plain)
					}))
				})
			}
		}
	}
}

// TestReshapeThenCheckpoint: after a 4 -> 3 restart the run checkpoints
// in its own shape and a further restart on 3 ranks is an ordinary one;
// the old checkpoint's files leave every node directory once superseded.
func TestReshapeThenCheckpoint(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		if _, _, _, err := reshapeWriter(r, 2); err != nil {
			return err
		}
		return r.Checkpoint(1, 1)
	}))
	require.NoError(t, world(t, 3, cfg, nil, func(r *Runtime) error {
		if err := reshapeReader(r, 2, 4, false); err != nil {
			return err
		}
		return r.Checkpoint(2, 1) // supersedes checkpoint 1 (FTI's rule)
	}))
	_, err := vfd.Sec2{}.Stat(filepath.Join(cfg.NodeDir(3, runOf(t, cfg)), "ckpt00000001"))
	assert.Error(t, err, "the old checkpoint's directory on a node this run does not have is removed")
	require.NoError(t, world(t, 3, cfg, nil, func(r *Runtime) error {
		if r.Reshaped() || r.OldRanks() != 3 || r.Status() != Restart {
			return fmt.Errorf("rank %d: reshaped %v, old ranks %d, status %v", r.c.Rank(), r.Reshaped(), r.OldRanks(), r.Status())
		}
		var field []float64
		var ids []int32
		shape := reshapeShapes[2]
		grid, _ := dataset.Dims(3, 2)
		off, cnt, _ := dataset.Block(shape, grid, r.c.Rank())
		io, ic := idsSlab(r.c.Rank(), 3)
		if err := errors.Join(Protect(r, 1, &field), Protect(r, 2, &ids),
			DefineDataset[float64](r, 10, "fields/temperature", shape), DefineDataset[int32](r, 11, "ids", []int64{idsLen}),
			r.AddSubset(1, 10, off, cnt), r.AddSubset(2, 11, []int64{io}, []int64{ic})); err != nil {
			return err
		}
		if err := r.Recover(); err != nil { // local: its own file
			return err
		}
		if !slices.Equal(field, slabValues(shape, off, cnt)) {
			return fmt.Errorf("rank %d: field differs after the second restart", r.c.Rank())
		}
		return nil
	}))
}

// TestReshapeErrors: the clear errors of a redistributing restart.
func TestReshapeErrors(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		if _, _, _, err := reshapeWriter(r, 2); err != nil {
			return err
		}
		return r.Checkpoint(1, 1)
	}))
	t.Run("variable outside the datasets, counts do not divide", func(t *testing.T) {
		err := world(t, 3, cfg, nil, func(r *Runtime) error {
			var owner []int64
			if err := Protect(r, 3, &owner, "owner"); err != nil {
				return err
			}
			return r.RecoverVar(3)
		})
		require.ErrorIs(t, err, ErrVarMismatch)
		assert.Contains(t, err.Error(), `variable 3 ("owner") maps onto no global dataset`)
		assert.Contains(t, err.Error(), "written by 4 ranks: with 3 ranks now, neither count divides the other")
	})
	t.Run("dataset variable without its subset", func(t *testing.T) {
		err := world(t, 2, cfg, nil, func(r *Runtime) error {
			var field []float64
			if err := Protect(r, 1, &field, "field"); err != nil {
				return err
			}
			return r.Recover()
		})
		require.ErrorIs(t, err, ErrDataset)
		assert.Contains(t, err.Error(), "was part of global dataset 10")
		assert.Contains(t, err.Error(), "AddSubset")
	})
	t.Run("shape mismatch at restart", func(t *testing.T) {
		err := world(t, 2, cfg, nil, func(r *Runtime) error {
			var field []float64
			shape := []int64{37, 30} // the checkpoint's is 37x29
			off, cnt, _ := dataset.Block(shape, []int{2, 1}, r.c.Rank())
			if err := errors.Join(Protect(r, 1, &field), DefineDataset[float64](r, 10, "fields/temperature", shape),
				r.AddSubset(1, 10, off, cnt)); err != nil {
				return err
			}
			return r.Recover()
		})
		require.ErrorIs(t, err, ErrDataset)
		require.ErrorIs(t, err, dataset.ErrMismatch)
		assert.Contains(t, err.Error(), "[37 29]")
		assert.Contains(t, err.Error(), "[37 30]")
	})
	t.Run("element type mismatch at restart", func(t *testing.T) {
		err := world(t, 2, cfg, nil, func(r *Runtime) error {
			var field []float32
			shape := reshapeShapes[2]
			off, cnt, _ := dataset.Block(shape, []int{2, 1}, r.c.Rank())
			if err := errors.Join(Protect(r, 1, &field), DefineDataset[float32](r, 10, "fields/temperature", shape),
				r.AddSubset(1, 10, off, cnt)); err != nil {
				return err
			}
			return r.Recover()
		})
		require.ErrorIs(t, err, dataset.ErrMismatch)
	})
	t.Run("overlapping subsets at restart", func(t *testing.T) {
		err := world(t, 2, cfg, nil, func(r *Runtime) error {
			var field []float64
			shape := reshapeShapes[2]
			off, cnt := []int64{int64(r.c.Rank()) * 10, 0}, []int64{20, 29} // rows 10..19 twice
			if r.c.Rank() == 1 {
				cnt[0] = 27
			}
			if err := errors.Join(Protect(r, 1, &field), DefineDataset[float64](r, 10, "fields/temperature", shape),
				r.AddSubset(1, 10, off, cnt)); err != nil {
				return err
			}
			return r.Recover()
		})
		require.ErrorIs(t, err, dataset.ErrOverlap)
		assert.Contains(t, err.Error(), "share the elements at offset [10 0] count [10 29]")
	})
	t.Run("gapped subsets at restart", func(t *testing.T) {
		err := world(t, 2, cfg, nil, func(r *Runtime) error {
			var field []float64
			shape := reshapeShapes[2]
			off, cnt := []int64{int64(r.c.Rank()) * 20, 0}, []int64{16, 29} // rows 16..19 and 36 in no subset
			if err := errors.Join(Protect(r, 1, &field), DefineDataset[float64](r, 10, "fields/temperature", shape),
				r.AddSubset(1, 10, off, cnt)); err != nil {
				return err
			}
			return r.Recover()
		})
		require.ErrorIs(t, err, dataset.ErrGap)
		assert.Contains(t, err.Error(), "is in no subset")
	})
	t.Run("a rank that does not call Recover's collective", func(t *testing.T) {
		err := world(t, 2, cfg, nil, func(r *Runtime) error {
			var owner []int64
			if err := Protect(r, 3, &owner, "owner"); err != nil {
				return err
			}
			if r.c.Rank() == 1 {
				return r.RecoverVar(99) // not protected, still takes part
			}
			return r.RecoverVar(3)
		})
		require.Error(t, err) // every rank: the same message; rank 1's also wraps ErrNotProtected
		assert.Contains(t, err.Error(), "failed on rank 1: ckpt: variable not protected: id 99")
	})
	t.Run("local calls refuse what needs other ranks", func(t *testing.T) {
		err := world(t, 2, cfg, nil, func(r *Runtime) error {
			var owner []int64
			if err := Protect(r, 3, &owner, "owner"); err != nil {
				return err
			}
			n, err := r.StoredSize(3)
			if err != nil || n != 16 {
				return fmt.Errorf("StoredSize %d, %v", n, err)
			}
			id, err := r.IDByName("owner")
			if err != nil || id != 3 {
				return fmt.Errorf("IDByName %d, %v", id, err)
			}
			if err := r.Realloc(3); err != nil || len(owner) != 2 {
				return fmt.Errorf("Realloc: %d elements, %v", len(owner), err)
			}
			return r.RecoverVarByName("owner")
		})
		require.NoError(t, err)
	})
}

// TestDatasetDeclarationErrors: DefineDataset and AddSubset refuse bad
// declarations at once, and the checkpoint refuses decompositions that
// overlap, leave gaps or define one id twice across ranks.
func TestDatasetDeclarationErrors(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	require.NoError(t, world(t, 1, cfg, nil, func(r *Runtime) error {
		x := make([]float64, 10)
		require.NoError(t, Protect(r, 1, &x))
		require.NoError(t, DefineDataset[float64](r, 5, "a", []int64{10}))
		err := DefineDataset[float64](r, 5, "b", []int64{10})
		assert.ErrorIs(t, err, ErrDataset)
		assert.ErrorIs(t, err, dataset.ErrDuplicate)
		assert.Contains(t, err.Error(), "dataset id 5 is already defined")
		err = DefineDataset[float64](r, 6, "a", []int64{10})
		assert.ErrorIs(t, err, dataset.ErrDuplicate)
		assert.Contains(t, err.Error(), `dataset name "a" is already dataset 5`)
		assert.ErrorIs(t, DefineDataset[float64](r, 7, "", []int64{10}), dataset.ErrInvalid)
		assert.ErrorIs(t, DefineDataset[float64](r, 7, "c", []int64{0}), dataset.ErrInvalid)
		assert.ErrorIs(t, r.AddSubset(2, 5, []int64{0}, []int64{10}), ErrNotProtected)
		assert.ErrorIs(t, r.AddSubset(1, 9, []int64{0}, []int64{10}), dataset.ErrUnknown)
		err = r.AddSubset(1, 5, []int64{5}, []int64{10})
		assert.ErrorIs(t, err, dataset.ErrInvalid)
		assert.Contains(t, err.Error(), "lies outside dataset 5")
		assert.ErrorIs(t, r.AddSubset(1, 5, []int64{0, 0}, []int64{10, 1}), dataset.ErrInvalid)
		require.NoError(t, DefineDataset[int32](r, 8, "i32", []int64{10}))
		err = r.AddSubset(1, 8, []int64{0}, []int64{10})
		assert.ErrorIs(t, err, dataset.ErrInvalid)
		assert.Contains(t, err.Error(), "8-byte elements")
		require.NoError(t, r.AddSubset(1, 5, []int64{0}, []int64{10}))
		// The variable shrinks: the checkpoint names it.
		x = x[:7]
		err = r.Checkpoint(1, 1)
		assert.ErrorIs(t, err, ErrDataset)
		assert.Contains(t, err.Error(), "variable 1 has 56 bytes but its subset [10]")
		return nil
	}))
	cases := []struct {
		name string
		decl func(r *Runtime, x *[]float64) error
		want error
		msg  string
	}{
		{"overlap", func(r *Runtime, x *[]float64) error {
			*x = make([]float64, 6)
			return r.AddSubset(1, 5, []int64{int64(r.c.Rank()) * 4}, []int64{6})
		}, dataset.ErrOverlap, "share the elements at offset [4] count [2]"},
		{"gap", func(r *Runtime, x *[]float64) error {
			*x = make([]float64, 4)
			return r.AddSubset(1, 5, []int64{int64(r.c.Rank()) * 5}, []int64{4})
		}, dataset.ErrGap, "element [4] is in no subset"},
		{"id used twice", func(r *Runtime, x *[]float64) error {
			*x = make([]float64, 5)
			return r.AddSubset(1, 5, []int64{int64(r.c.Rank()) * 5}, []int64{5})
		}, dataset.ErrDuplicate, `dataset id 5 is 5 "a" [10] float64 on rank 0 but 5 "b" [10] float64 on rank 1`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 1)
			err := world(t, 2, cfg, nil, func(r *Runtime) error {
				var x []float64
				name := "a"
				if tc.name == "id used twice" && r.c.Rank() == 1 {
					name = "b" // dataset 5 under another name on rank 1
				}
				if err := errors.Join(Protect(r, 1, &x), DefineDataset[float64](r, 5, name, []int64{10})); err != nil {
					return err
				}
				if err := tc.decl(r, &x); err != nil {
					return err
				}
				return r.Checkpoint(1, 1)
			})
			require.ErrorIs(t, err, ErrDataset)
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.msg)
			// Nothing was committed.
			ms, _ := levels.ScanManifests(levels.Store{Driver: vfd.Sec2{}, Dir: cfg.MetaDir})
			assert.Empty(t, ms)
		})
	}
}

// TestDatasetsRecordedInFiles: every checkpoint file records the
// datasets and the rank's subsets (FTI-FF version 2).
func TestDatasetsRecordedInFiles(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	require.NoError(t, world(t, 3, cfg, nil, func(r *Runtime) error {
		if _, _, _, err := reshapeWriter(r, 3); err != nil {
			return err
		}
		return r.Checkpoint(5, 1)
	}))
	grid, _ := dataset.Dims(3, 3)
	for q := range 3 {
		p := filepath.Join(cfg.NodeDir(q, runOf(t, cfg)), "ckpt00000001", fmt.Sprintf("data%06d.fti", q))
		f, err := vfd.OpenRead(vfd.Sec2{}, p)
		require.NoError(t, err)
		rd, err := fileformat.Open(f)
		require.NoError(t, err)
		assert.Equal(t, fileformat.VersionExt, rd.Version())
		ds := rd.Datasets()
		require.Len(t, ds, 2)
		assert.Equal(t, "fields/temperature", ds[0].Name)
		assert.Equal(t, reshapeShapes[3], ds[0].Shape)
		s, ok := rd.SubsetOf(1)
		require.True(t, ok)
		off, cnt := unevenBlock(reshapeShapes[3], grid, q)
		assert.Equal(t, off, s.Offset)
		assert.Equal(t, cnt, s.Count)
		_, ok = rd.SubsetOf(3)
		assert.False(t, ok, "owner maps onto no dataset")
		f.Close()
	}
}

// nodeLocal is the local area as one node sees it under MPI with
// node-local disks: another node's directory under ckpt_dir does not
// exist for it.
type nodeLocal struct {
	vfd.Driver
	root string // ckpt_dir
	own  string // this node's directory name
}

func (d nodeLocal) hidden(name string) bool {
	rel, err := filepath.Rel(d.root, name)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	first := strings.SplitN(rel, string(filepath.Separator), 2)[0]
	return strings.HasPrefix(first, "node") && first != d.own
}

func (d nodeLocal) refuse(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

func (d nodeLocal) Open(name string, flag vfd.Flag) (vfd.File, error) {
	if d.hidden(name) {
		return nil, d.refuse("open", name)
	}
	return d.Driver.Open(name, flag)
}

func (d nodeLocal) Stat(name string) (fs.FileInfo, error) {
	if d.hidden(name) {
		return nil, d.refuse("stat", name)
	}
	return d.Driver.Stat(name)
}

func (d nodeLocal) ReadDir(name string) ([]fs.DirEntry, error) {
	if d.hidden(name) {
		return nil, d.refuse("readdir", name)
	}
	return d.Driver.ReadDir(name)
}

func (d nodeLocal) Remove(name string) error {
	if d.hidden(name) {
		return d.refuse("remove", name)
	}
	return d.Driver.Remove(name)
}

func (d nodeLocal) RemoveAll(name string) error {
	if d.hidden(name) {
		return nil
	}
	return d.Driver.RemoveAll(name)
}

func (d nodeLocal) SyncDir(name string) error {
	if d.hidden(name) {
		return d.refuse("sync", name)
	}
	return d.Driver.SyncDir(name)
}

// nodeLocalWorld runs fn on n ranks, each seeing only its own node's
// directory of ckpt_dir (node r/node_size).
func nodeLocalWorld(t *testing.T, n int, cfg Config, fn func(r *Runtime) error, extra ...Option) error {
	var mu sync.Mutex
	opts := func(rank int) []Option {
		mu.Lock()
		defer mu.Unlock()
		local := nodeLocal{Driver: vfd.Sec2{}, root: cfg.CkptDir, own: fmt.Sprintf("node%04d", rank/cfg.NodeSize)}
		return []Option{WithDrivers(local, vfd.Sec2{}, vfd.Sec2{})}
	}
	return comm.Run(n, func(c comm.Comm) error {
		o := append([]Option{WithLogger(zaptest.NewLogger(t)), WithWarnings(tbWriter{t})}, opts(c.Rank())...)
		o = append(o, extra...)
		r, err := Init(cfg, c, o...)
		if err != nil {
			return err
		}
		defer r.Close()
		return fn(r)
	}, comm.WithTimeout(30*time.Second))
}

// TestReshapeShipsOverComm: with node-local disks, a new rank cannot
// read the old files of other nodes; the ranks that can verify them and
// send the runs over the communicator. 4 -> 3 and 4 -> 8 at L1 and L2,
// and 16 -> 5 at L2 with a lost node (its data read from partner copies
// on other nodes). At L4 every rank sees the container: the rank that
// verified a task keeps it in memory and sends the others what they need
// of it (each byte read from storage once), or, without restart images,
// every rank reads the container itself.
func TestReshapeShipsOverComm(t *testing.T) {
	for _, tc := range []struct {
		n, m, lvl, nd, oldNodeSize, nodeSize int
		lose, noImage                        bool
	}{
		{4, 8, 1, 2, 1, 2, false, false},  // the same 4 hosts, 2 ranks each now
		{8, 4, 1, 3, 2, 1, false, false},  // 4 hosts, 2 ranks each before, 1 now
		{4, 3, 2, 2, 1, 1, false, false},  // old rank 3's data only in its partner copy on node 2
		{16, 8, 2, 2, 4, 2, true, false},  // node 1 lost: old ranks 4..7 from partner copies on node 0
		{16, 5, 4, 2, 4, 1, false, false}, // L4: the verifying ranks send from memory
		{16, 5, 4, 2, 4, 1, false, true},  // L4 without images: every rank reads the container itself
		{4, 4, 2, 1, 1, 1, true, false},   // the same ranks, group_size 4 -> 1, node 1 lost
	} {
		t.Run(fmt.Sprintf("%d-to-%d/L%d/image=%v", tc.n, tc.m, tc.lvl, !tc.noImage), func(t *testing.T) {
			root := t.TempDir()
			cfg := testConfig(root, tc.oldNodeSize)
			cfg.GroupSize = reshapeGroup(tc.n / tc.oldNodeSize)
			require.NoError(t, world(t, tc.n, cfg, nil, func(r *Runtime) error {
				if _, _, _, err := reshapeWriter(r, tc.nd); err != nil {
					return err
				}
				return r.Checkpoint(3, tc.lvl)
			}))
			if tc.lose {
				require.NoError(t, vfd.Sec2{}.RemoveAll(filepath.Join(cfg.NodeDir(1, runOf(t, cfg)))))
			}
			cfg.GroupSize, cfg.NodeSize = 1, tc.nodeSize
			plain := tc.n%tc.m == 0 || tc.m%tc.n == 0
			var extra []Option
			if tc.noImage {
				extra = append(extra, WithRestartImage(0))
			}
			var shipped atomic.Int64
			require.NoError(t, nodeLocalWorld(t, tc.m, cfg, func(r *Runtime) error {
				if err := reshapeReader(r, tc.nd, tc.n, plain); err != nil {
					return err
				}
				shipped.Add(r.reshape.received)
				return nil
			}, extra...))
			if tc.noImage {
				assert.Zero(t, shipped.Load(), "every rank reads the L4 container itself")
			} else {
				assert.Positive(t, shipped.Load(), "ranks that cannot see a node's files receive them")
			}
		})
	}
	// At L1 a node whose disk no new rank has is lost: an error naming
	// the old rank, never a fresh start.
	root := t.TempDir()
	cfg := testConfig(root, 1)
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		if _, _, _, err := reshapeWriter(r, 1); err != nil {
			return err
		}
		return r.Checkpoint(3, 1)
	}))
	err := nodeLocalWorld(t, 3, cfg, func(r *Runtime) error { return nil })
	require.ErrorIs(t, err, ErrUnrecoverable)
	assert.Contains(t, err.Error(), "no readable copy of the data of old rank 3")
}

// TestMovedHostsRestart: the same 8 ranks relaunched with ranks on other
// hosts (the nodes swapped in pairs) restart from L1, L2 and L4 with
// their global datasets and variables, bit for bit; at L1 and L2 the
// files are read where they are (the restart is redistributing), at L4
// from the container as before. So does a relaunch on 6 ranks on three
// of the hosts.
func TestMovedHostsRestart(t *testing.T) {
	hosts := []string{"a", "a", "b", "b", "c", "c", "d", "d"}
	moved := []string{"b", "b", "a", "a", "d", "d", "c", "c"}
	for _, lvl := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			root := t.TempDir()
			cfg := testConfig(root, 2)
			cfg.LocalTest, cfg.GroupSize = false, 2
			require.NoError(t, world(t, 8, cfg, []Option{WithNodeID(func(r int) string { return hosts[r] })}, func(r *Runtime) error {
				if _, _, _, err := reshapeWriter(r, 2); err != nil {
					return err
				}
				return r.Checkpoint(4, lvl)
			}))
			ncfg := cfg
			ncfg.GroupSize = 1
			require.NoError(t, world(t, 8, ncfg, []Option{WithNodeID(func(r int) string { return moved[r] })}, func(r *Runtime) error {
				if r.Status() != Restart {
					return fmt.Errorf("status %v", r.Status())
				}
				if lvl == 4 {
					field, ids, owner, err := reshapeWriter(r, 2)
					if err != nil {
						return err
					}
					want := []any{slices.Clone(field), slices.Clone(ids), slices.Clone(owner)}
					clear(field)
					if err := r.Recover(); err != nil {
						return err
					}
					if !assert.ObjectsAreEqual(want, []any{field, ids, owner}) {
						return fmt.Errorf("rank %d: data differs", r.c.Rank())
					}
					return nil
				}
				return reshapeReader(r, 2, 8, true)
			}))
			six := []string{"c", "c", "a", "a", "b", "b"}
			require.NoError(t, world(t, 6, ncfg, []Option{WithNodeID(func(r int) string { return six[r] })}, func(r *Runtime) error {
				return reshapeReader(r, 2, 8, false)
			}))
		})
	}
}

// TestReshapeKeepLast: a run restarted from a checkpoint of 4 ranks on 3
// that never checkpoints and finalizes with keep_last_ckpt keeps that
// checkpoint where it is (it cannot copy another shape's files rank by
// rank); the next run restarts from it, kept, on any count.
func TestReshapeKeepLast(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	cfg.GroupSize = 2
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		if _, _, _, err := reshapeWriter(r, 1); err != nil {
			return err
		}
		return r.Checkpoint(1, 2)
	}))
	cfg.KeepLastCkpt, cfg.GroupSize = true, 1
	require.NoError(t, world(t, 3, cfg, nil, func(r *Runtime) error {
		if err := reshapeReader(r, 1, 4, false); err != nil {
			return err
		}
		return r.Finalize()
	}))
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		if r.Status() != RestartKept {
			return fmt.Errorf("status %v, want restart-kept", r.Status())
		}
		return reshapeReader(r, 1, 4, true)
	}))
}

// FuzzVPRRecord: whatever a level-9 record holds, start-up neither panics
// nor restarts from a record that does not name a valid file: it is
// ignored (with a warning) or refused.
func FuzzVPRRecord(f *testing.F) {
	f.Add([]byte(`{"magic":"ftigo-h5single","path":"/g/VPR-h5-ID00000001.h5","id":1,"ranks":2,"time":5,"size":9,"tables_blake3":"00","name":"VPR-h5-ID00000001.h5.json"}`))
	f.Add([]byte(`{"magic":"ftigo-h5single","path":"","ranks":0}`))
	f.Add([]byte(`not json`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, rec []byte) {
		core := vfd.NewCore()
		cfg := testConfig("/", 1)
		require.NoError(t, core.MkdirAll(path.Join(cfg.MetaDir, vprDir), 0o755))
		require.NoError(t, vfd.WriteFileAtomic(core, path.Join(cfg.MetaDir, vprDir, "VPR-h5-ID00000001.h5.json"), rec))
		err := comm.Run(2, func(c comm.Comm) error {
			r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()), WithWarnings(nil))
			if err != nil {
				return err
			}
			defer r.Close()
			if r.Status() != Fresh {
				return fmt.Errorf("status %v from a record without a file", r.Status())
			}
			return nil
		}, comm.WithTimeout(20*time.Second))
		if err != nil {
			assert.ErrorIs(t, err, ErrUnrecoverable, "a record of a missing file is no checkpoint to restart from")
		}
	})
}

// TestReshapeImageFlippedByte: a restart on another number of ranks reads
// each old rank's file once, into the memory of the rank that verifies
// it, which sends the others what they need. A byte flipped in the data of
// old rank 1's file fails that check (never restored): at L2 its partner
// copy is verified next and the data comes back bit for bit; at L1 there
// is nothing else and the restart fails naming old rank 1 and the
// corruption, never starting fresh.
func TestReshapeImageFlippedByte(t *testing.T) {
	for _, lvl := range []int{2, 1} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			root := t.TempDir()
			cfg := testConfig(root, 1)
			cfg.GroupSize = 4
			require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
				if _, _, _, err := reshapeWriter(r, 2); err != nil {
					return err
				}
				return r.Checkpoint(3, lvl)
			}))
			files, err := filepath.Glob(filepath.Join(cfg.NodeDir(1, runOf(t, cfg)), "ckpt*", "*"))
			require.NoError(t, err)
			var data string
			for _, f := range files {
				if !strings.Contains(filepath.Base(f), "partner") {
					data = f
				}
			}
			require.NotEmpty(t, data, "old rank 1's data file among %v", files)
			b, err := os.ReadFile(data)
			require.NoError(t, err)
			b[len(b)/2] ^= 0x10
			require.NoError(t, os.WriteFile(data, b, 0o644))
			var received atomic.Int64
			cfg.GroupSize = 1
			err = world(t, 3, cfg, nil, func(r *Runtime) error {
				if err := reshapeReader(r, 2, 4, false); err != nil {
					return err
				}
				received.Add(r.reshape.received)
				for o, s := range r.reshape.sources {
					if s.Image != nil {
						return fmt.Errorf("rank %d still holds the image of old rank %d after Recover", r.c.Rank(), o)
					}
				}
				return nil
			})
			if lvl == 2 {
				require.NoError(t, err)
				assert.Positive(t, received.Load(), "the verifying ranks send from memory")
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrUnrecoverable)
			assert.Contains(t, err.Error(), "no readable copy of the data of old rank 1")
			assert.Contains(t, err.Error(), "checkpoint file digest mismatch") // the verification's levels.ErrDigestMismatch, agreed as text
		})
	}
}
