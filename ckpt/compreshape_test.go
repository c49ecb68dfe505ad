package ckpt

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// compGlobalLen is the global dataset of the compressed reshape test:
// no rank count of the test divides it.
const compGlobalLen = 100_003

// tempShape is its second, lossy dataset.
var tempShape = []int64{4001}

// compGlobalValue is element i: long runs of equal values, so that zstd
// shrinks every block.
func compGlobalValue(i int64) float64 { return float64(i/700) + 0.5 }

// TestCompressionReshape: 4 ranks write a global dataset (uneven
// blocks) compressed with zstd beside a lossy float32 variable at L1
// and at L3; 3 and 6 ranks restart from it (at L3 after node 1 is lost,
// its blocks rebuilt from the parity of the compressed files), read
// their balanced blocks through the compressed chunks bit for bit, and
// the lossy variable within its recorded bound, StoredInfo saying so.
func TestCompressionReshape(t *testing.T) {
	for _, lvl := range []int{1, 3} {
		for _, m := range []int{3, 6} {
			t.Run(fmt.Sprintf("L%d/4-to-%d", lvl, m), func(t *testing.T) {
				cfg := testConfig(t.TempDir(), 1)
				cfg.GroupSize = 4
				cfg.Compression = fileformat.CodecZstd
				shape := []int64{compGlobalLen}
				var mu sync.Mutex
				var logical, stored int64
				require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
					off, cnt := unevenBlock(shape, []int{4}, r.c.Rank())
					field := make([]float64, cnt[0])
					for i := range field {
						field[i] = compGlobalValue(off[0] + int64(i))
					}
					to, tc := unevenBlock(tempShape, []int{4}, r.c.Rank())
					temp := make([]float64, tc[0])
					for i := range temp {
						temp[i] = math.Sin(float64(to[0]+int64(i)) / 9)
					}
					if err := errors.Join(
						Protect(r, 1, &field, "field"),
						ProtectWith(r, 2, &temp, WithName("temp"), WithCompression(Compression{Lossy: fileformat.Lossy{Mode: fileformat.ToFloat32}})),
						DefineDataset[float64](r, 10, "field", shape),
						DefineDataset[float64](r, 11, "temp", tempShape),
						r.AddSubset(1, 10, off, cnt),
						r.AddSubset(2, 11, to, tc),
					); err != nil {
						return err
					}
					if err := r.Checkpoint(5, lvl); err != nil {
						return err
					}
					info, err := r.StoredInfo(1)
					if err != nil {
						return err
					}
					mu.Lock()
					logical, stored = logical+info.Size, stored+info.Stored
					mu.Unlock()
					return nil
				}))
				require.Less(t, stored*10, logical, "the dataset is stored compressed")
				if lvl == 3 {
					require.NoError(t, vfd.Sec2{}.RemoveAll(filepath.Join(cfg.NodeDir(1, runOf(t, cfg)))))
				}
				cfg.GroupSize = 1
				require.NoError(t, world(t, m, cfg, nil, func(r *Runtime) error {
					grid := []int{m}
					off, cnt, err := dataset.Block(shape, grid, r.c.Rank())
					if err != nil {
						return err
					}
					to, tc, err := dataset.Block(tempShape, grid, r.c.Rank())
					if err != nil {
						return err
					}
					var field, temp []float64
					if err := errors.Join(
						Protect(r, 1, &field, "field"),
						Protect(r, 2, &temp, "temp"),
						DefineDataset[float64](r, 10, "field", shape),
						DefineDataset[float64](r, 11, "temp", tempShape),
						r.AddSubset(1, 10, off, cnt),
						r.AddSubset(2, 11, to, tc),
					); err != nil {
						return err
					}
					if !r.Reshaped() || r.OldRanks() != 4 {
						return fmt.Errorf("rank %d: Reshaped %v, OldRanks %d", r.c.Rank(), r.Reshaped(), r.OldRanks())
					}
					if err := r.Recover(); err != nil {
						return err
					}
					if int64(len(field)) != cnt[0] {
						return fmt.Errorf("rank %d: %d elements, want %d", r.c.Rank(), len(field), cnt[0])
					}
					for i, v := range field {
						if want := compGlobalValue(off[0] + int64(i)); math.Float64bits(v) != math.Float64bits(want) {
							return fmt.Errorf("rank %d: element %d is %v, want %v", r.c.Rank(), off[0]+int64(i), v, want)
						}
					}
					info, err := r.StoredInfo(2)
					if err != nil {
						return err
					}
					if info.Lossy.Mode != fileformat.ToFloat32 || info.Bound.Abs <= 0 || int64(len(temp)) != tc[0] {
						return fmt.Errorf("rank %d: temp info %+v, %d elements", r.c.Rank(), info, len(temp))
					}
					exact := true
					for i, v := range temp {
						want := math.Sin(float64(to[0]+int64(i)) / 9)
						// float32's rounding to nearest: half a unit in the last place.
						if d := math.Abs(v - want); d > math.Abs(want)*0x1p-24 {
							return fmt.Errorf("rank %d: temp[%d] off by %g", r.c.Rank(), to[0]+int64(i), d)
						}
						exact = exact && v == want
					}
					if exact {
						return fmt.Errorf("rank %d: temp restored exactly: not through its float32 copy", r.c.Rank())
					}
					return nil
				}))
				assert.Positive(t, logical)
			})
		}
	}
}

// TestCompressionHDF5Exact: with compression = zstd and a float32-lossy
// variable, an HDF5 L4 checkpoint (ckpt_io = 5) is written uncompressed
// and exact, as documented: the manifest has no ratio and a restart
// restores every value bit for bit.
func TestCompressionHDF5Exact(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.CkptIO = 5
	cfg.Compression = fileformat.CodecZstd
	vals := func(rank int) []float64 {
		x := make([]float64, 5000)
		for i := range x {
			x[i] = math.Sin(float64(i+rank) / 7)
		}
		return x
	}
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		x := vals(r.c.Rank())
		if err := ProtectWith(r, 1, &x, WithCompression(Compression{Codec: fileformat.CodecZstd, Lossy: fileformat.Lossy{Mode: fileformat.ToFloat32}})); err != nil {
			return err
		}
		if err := r.Checkpoint(1, 4); err != nil {
			return err
		}
		if r.last.Compressed != nil {
			return fmt.Errorf("rank %d: an HDF5 checkpoint's manifest says compressed %+v", r.c.Rank(), *r.last.Compressed)
		}
		return nil
	}))
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		var x []float64
		if err := Protect(r, 1, &x); err != nil {
			return err
		}
		if err := r.Recover(); err != nil {
			return err
		}
		want := vals(r.c.Rank())
		if len(x) != len(want) {
			return fmt.Errorf("rank %d: %d values", r.c.Rank(), len(x))
		}
		for i := range want {
			if math.Float64bits(x[i]) != math.Float64bits(want[i]) {
				return fmt.Errorf("rank %d: value %d is %v, want %v exactly", r.c.Rank(), i, x[i], want[i])
			}
		}
		return nil
	}))
}
