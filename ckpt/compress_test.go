package ckpt

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// compState is makeState's variables of every type plus a smooth field
// (compresses well) and random bytes (do not compress).
type compState struct {
	*state
	Field []float64
	Noise []byte
}

func makeCompState(rank, step int) *compState {
	s := &compState{state: makeState(rank, step, 300+rank)}
	s.Field = make([]float64, 8192)
	for i := range s.Field {
		s.Field[i] = float64((i/512)%4) + float64(step) // long runs
	}
	rnd := rand.New(rand.NewPCG(uint64(rank), uint64(step)))
	s.Noise = make([]byte, 16<<10)
	for i := range s.Noise {
		s.Noise[i] = byte(rnd.Uint32())
	}
	return s
}

func (s *compState) protect(r *Runtime) error {
	return errors.Join(s.state.protect(r), Protect(r, 20, &s.Field, "field"), Protect(r, 21, &s.Noise, "noise"))
}

// TestCompressionLevels checkpoints every type with [basic] compression
// = zstd at every level, whole and as a dCP chain, loses what the level
// protects against and restarts bit for bit. The field is stored at a
// fraction of its size, the random bytes at their own size (each block
// kept raw), and the hashes stay those of the logical bytes.
func TestCompressionLevels(t *testing.T) {
	for _, dcp := range []bool{false, true} {
		for lvl := 1; lvl <= 4; lvl++ {
			t.Run(fmt.Sprintf("L%d/dcp=%v", lvl, dcp), func(t *testing.T) {
				core := vfd.NewCore()
				cfg := testConfig("/", 1)
				cfg.GroupSize = 2
				cfg.Compression = fileformat.CodecZstd
				req := lvl
				if dcp {
					cfg.EnableDCP, cfg.DCPBlockSize, cfg.DCPStackSize = true, 4096, 10
					req = lvl + 4
				}
				var mu sync.Mutex
				want := map[int]*compState{}
				require.NoError(t, comm.Run(4, func(c comm.Comm) error {
					r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
					if err != nil {
						return err
					}
					defer r.Close()
					s := makeCompState(c.Rank(), 1)
					if err := s.protect(r); err != nil {
						return err
					}
					for step := 1; step <= 3; step++ {
						n := makeCompState(c.Rank(), step)
						copy(s.Field, n.Field)
						s.Noise[step*100] ^= 0xff // one dCP block changes
						if err := r.Checkpoint(int64(step), req); err != nil {
							return err
						}
					}
					if dcp && (r.last.DCP == nil || r.last.Layers() != 3) {
						return fmt.Errorf("rank %d: not a dCP chain of 3: %+v", c.Rank(), r.last.DCP)
					}
					mu.Lock()
					want[c.Rank()] = s
					mu.Unlock()
					return nil
				}, comm.WithTimeout(30*time.Second)))
				if lvl > 1 {
					lose(t, core, cfg, lvl)
				}
				got := map[int]*compState{}
				infos := map[int][2]fileformat.VarInfo{}
				require.NoError(t, comm.Run(4, func(c comm.Comm) error {
					r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
					if err != nil {
						return err
					}
					defer r.Close()
					if r.Status() == Fresh {
						return fmt.Errorf("rank %d: fresh start", c.Rank())
					}
					s := &compState{state: &state{Map: &mapVar{}}}
					if err := s.protect(r); err != nil {
						return err
					}
					if err := r.Recover(); err != nil {
						return err
					}
					fi, err := r.StoredInfo(20)
					if err != nil {
						return err
					}
					ni, err := r.StoredInfo(21)
					if err != nil {
						return err
					}
					mu.Lock()
					got[c.Rank()], infos[c.Rank()] = s, [2]fileformat.VarInfo{fi, ni}
					mu.Unlock()
					return nil
				}, comm.WithTimeout(30*time.Second)))
				for rank := 0; rank < 4; rank++ {
					require.Equal(t, want[rank], got[rank], "rank %d", rank)
					fi, ni := infos[rank][0], infos[rank][1]
					assert.Equal(t, fileformat.CodecZstd, fi.Codec)
					assert.Equal(t, int64(8192*8), fi.Size)
					assert.Less(t, fi.Stored*10, fi.Size, "the field compresses 10x or more")
					assert.Equal(t, ni.Size, ni.Stored, "random bytes are stored raw")
					assert.True(t, fi.Exact() && ni.Exact())
				}
			})
		}
	}
}

// TestCompressionPerVariable: a variable set to none is stored raw in a
// run compressing by default; SetCompression refuses unprotected ids and
// lossy modes that do not apply to the type; the setting survives a new
// Protect of the id and Unprotect drops it.
func TestCompressionPerVariable(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.Compression = fileformat.CodecZstd
	require.NoError(t, world(t, 1, cfg, nil, func(r *Runtime) error {
		a, b := make([]float64, 4096), make([]float64, 4096)
		ints := make([]int32, 10)
		if err := errors.Join(Protect(r, 1, &a), ProtectWith(r, 2, &b, WithName("raw"), WithCompression(Compression{})), Protect(r, 3, &ints)); err != nil {
			return err
		}
		if err := r.SetCompression(9, Compression{Codec: fileformat.CodecZstd}); !errors.Is(err, ErrNotProtected) {
			return fmt.Errorf("unprotected id: %v", err)
		}
		if err := r.SetCompression(3, Compression{Lossy: fileformat.Lossy{Mode: fileformat.ToFloat32}}); !errors.Is(err, ErrBadType) {
			return fmt.Errorf("float32 of int32: %v", err)
		}
		if err := Protect(r, 2, &b); err != nil { // keeps the setting
			return err
		}
		if err := r.Checkpoint(1, 1); err != nil {
			return err
		}
		ia, err := r.StoredInfo(1)
		if err != nil {
			return err
		}
		ib, err := r.StoredInfo(2)
		if err != nil {
			return err
		}
		if ia.Codec != fileformat.CodecZstd || ia.Stored >= ia.Size/10 {
			return fmt.Errorf("default variable: %+v", ia)
		}
		if ib.Codec != fileformat.CodecNone || ib.Stored != ib.Size {
			return fmt.Errorf("variable set to none: %+v", ib)
		}
		r.Unprotect(2)
		if _, ok := r.comp[2]; ok {
			return fmt.Errorf("Unprotect kept the setting")
		}
		return nil
	}))
}

// TestLossyRecover stores float64 variables as float32, float16 and with
// 10 mantissa bits: Recover restores values within the recorded bound,
// StoredInfo reports the mode and the bound, and a warning names each.
func TestLossyRecover(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	modes := []fileformat.Lossy{{Mode: fileformat.ToFloat32}, {Mode: fileformat.ToFloat16}, {Mode: fileformat.Mantissa, Bits: 10}}
	vals := func() []float64 {
		x := make([]float64, 1000)
		for i := range x {
			x[i] = math.Sin(float64(i)/37) * 100
		}
		return x
	}
	require.NoError(t, world(t, 1, cfg, nil, func(r *Runtime) error {
		for i, m := range modes {
			x := vals()
			if err := ProtectWith(r, i, &x, WithCompression(Compression{Codec: fileformat.CodecZstd, Lossy: m})); err != nil {
				return err
			}
		}
		return r.Checkpoint(1, 1)
	}))
	obs, logs := observer.New(zapcore.WarnLevel)
	require.NoError(t, world(t, 1, cfg, []Option{WithLogger(zap.New(obs))}, func(r *Runtime) error {
		xs := make([][]float64, len(modes))
		for i := range modes {
			if err := Protect(r, i, &xs[i]); err != nil {
				return err
			}
		}
		if err := r.Recover(); err != nil {
			return err
		}
		ref := vals()
		for i, m := range modes {
			info, err := r.StoredInfo(i)
			if err != nil {
				return err
			}
			if info.Exact() || info.Lossy != m || info.Bound.Abs <= 0 || info.Bound.Rel <= 0 {
				return fmt.Errorf("var %d: info %+v", i, info)
			}
			exact := true
			for j := range ref {
				d := math.Abs(xs[i][j] - ref[j])
				if d > info.Bound.Abs || (ref[j] != 0 && d/math.Abs(ref[j]) > info.Bound.Rel*(1+1e-12)) {
					return fmt.Errorf("var %d (%v) element %d: error %g beyond the bound %+v", i, m, j, d, info.Bound)
				}
				exact = exact && d == 0
			}
			if exact {
				return fmt.Errorf("var %d (%v) restored exactly: the mode did nothing", i, m)
			}
		}
		return nil
	}))
	for i, m := range modes {
		lines := logs.FilterMessageSnippet(fmt.Sprintf("Variable %d restored with lossy compression (%v)", i, m)).All()
		assert.Len(t, lines, 1, "one warning for variable %d", i)
	}
}
