package ckpt

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

func testConfig(root string, nodeSize int) Config {
	c := DefaultConfig()
	c.NodeSize = nodeSize
	c.CkptDir = filepath.Join(root, "local")
	c.GlblDir = filepath.Join(root, "global")
	c.MetaDir = filepath.Join(root, "meta")
	c.LocalTest = true
	c.BlockSize = 16 << 10 // small transfers: tests move kilobytes
	return c
}

// world runs fn on n in-process ranks, each with its own Runtime.
func world(t testing.TB, n int, cfg Config, opts []Option, fn func(r *Runtime) error) error {
	return comm.Run(n, func(c comm.Comm) error {
		o := append([]Option{WithLogger(zaptest.NewLogger(t)), WithWarnings(tbWriter{t})}, opts...)
		r, err := Init(cfg, c, o...)
		if err != nil {
			return err
		}
		defer r.Close() // a job that ends without Finalize: waits for background work, releases meta_dir
		return fn(r)
	}, comm.WithTimeout(30*time.Second))
}

// tbWriter sends what is written to the test's log.
type tbWriter struct{ t testing.TB }

func (w tbWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

type particle struct {
	X, Y, Z float32
	ID      int64
	Alive   bool
	Tag     [3]uint16
}

// state is every kind of variable a rank protects.
type state struct {
	F64  []float64
	I32  []int32
	U8   []byte
	C128 []complex128
	Part []particle
	Arr  [][4]int16
	Int  []int
	Map  *mapVar
}

type mapVar struct{ M map[string]int }

func (m *mapVar) MarshalBinary() ([]byte, error) {
	var b []byte
	for _, k := range []string{"a", "b", "c"} {
		b = append(b, byte(m.M[k]))
	}
	return b, nil
}

func (m *mapVar) UnmarshalBinary(b []byte) error {
	if len(b) != 3 {
		return fmt.Errorf("bad map blob of %d bytes", len(b))
	}
	m.M = map[string]int{"a": int(b[0]), "b": int(b[1]), "c": int(b[2])}
	return nil
}

func makeState(rank int, step, n int) *state {
	s := &state{Map: &mapVar{M: map[string]int{"a": rank, "b": step, "c": n % 256}}}
	for i := 0; i < n; i++ {
		x := float64(rank*1000000 + step*1000 + i)
		s.F64 = append(s.F64, x*1.5+math.Pi)
		s.I32 = append(s.I32, int32(-i*rank+step))
		s.U8 = append(s.U8, byte(i+rank+step))
		s.C128 = append(s.C128, complex(x, -x))
		s.Part = append(s.Part, particle{X: float32(x), Y: float32(i), Z: -1, ID: int64(i) << 33, Alive: i%2 == 0, Tag: [3]uint16{uint16(i), uint16(rank), uint16(step)}})
		s.Arr = append(s.Arr, [4]int16{int16(i), int16(-i), int16(rank), int16(step)})
		s.Int = append(s.Int, i*step-rank)
	}
	return s
}

func (s *state) protect(r *Runtime) error {
	return errors.Join(
		Protect(r, 1, &s.F64, "temperature"),
		Protect(r, 2, &s.I32),
		Protect(r, 3, &s.U8, "raw"),
		Protect(r, 4, &s.C128),
		Protect(r, 5, &s.Part, "particles"),
		Protect(r, 6, &s.Arr),
		Protect(r, 7, &s.Int),
		ProtectValue(r, 8, s.Map, "table"),
	)
}

func TestRoundTrip(t *testing.T) {
	for _, n := range []int{1, 4, 8} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), min(n, 2))
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				if r.Status() != Fresh {
					return fmt.Errorf("status %v", r.Status())
				}
				for step := 1; step <= 3; step++ {
					s := makeState(r.c.Rank(), step, 50+step*10+r.c.Rank())
					if err := s.protect(r); err != nil {
						return err
					}
					if err := r.Checkpoint(int64(step), 1); err != nil {
						return err
					}
				}
				return nil // no Finalize: the job "dies"
			}))
			var mu sync.Mutex
			got := map[int]*state{}
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				if r.Status() != Restart {
					return fmt.Errorf("status %v", r.Status())
				}
				// L1 data files are verified through their FTI-FF hashes.
				if f, _ := r.recoveredManifest().DataFile(r.c.Rank()); f.Attrs[levels.AttrDigest] != levels.DigestFTIFF {
					return fmt.Errorf("data file digest kind %q", f.Attrs[levels.AttrDigest])
				}
				s := &state{Map: &mapVar{}}
				if err := s.protect(r); err != nil {
					return err
				}
				if err := r.Recover(); err != nil {
					return err
				}
				mu.Lock()
				got[r.c.Rank()] = s
				mu.Unlock()
				return r.Finalize()
			}))
			for rank := 0; rank < n; rank++ {
				assert.Equal(t, makeState(rank, 3, 80+rank), got[rank], "rank %d", rank)
			}
			// Finalize without keep_last_ckpt removed everything: fresh again.
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				if r.Status() != Fresh {
					return fmt.Errorf("status after finalize: %v", r.Status())
				}
				return r.Finalize()
			}))
		})
	}
}

func TestKeepLastCkpt(t *testing.T) {
	cfg := testConfig(t.TempDir(), 2)
	cfg.KeepLastCkpt = true
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		s := makeState(r.c.Rank(), 7, 20)
		if err := s.protect(r); err != nil {
			return err
		}
		if err := r.Checkpoint(70, 1); err != nil {
			return err
		}
		return r.Finalize()
	}))
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		if r.Status() != RestartKept {
			return fmt.Errorf("status %v, want restart-kept", r.Status())
		}
		s := &state{Map: &mapVar{}}
		if err := s.protect(r); err != nil {
			return err
		}
		if err := r.Recover(); err != nil {
			return err
		}
		if want := makeState(r.c.Rank(), 7, 20); !assert.ObjectsAreEqual(want, s) {
			return fmt.Errorf("rank %d: data differs", r.c.Rank())
		}
		return nil
	}))
}

func TestChangingSizesRecoverVarStoredSize(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		a := make([]float64, 10)
		b := []uint32{1, 2, 3}
		if err := errors.Join(Protect(r, 0, &a), Protect(r, 1, &b)); err != nil {
			return err
		}
		if err := r.Checkpoint(1, 1); err != nil {
			return err
		}
		// Grow a, shrink b, re-protect with new slices.
		a = make([]float64, 1000+r.c.Rank())
		for i := range a {
			a[i] = float64(i) / 3
		}
		b = b[:1]
		if err := errors.Join(Protect(r, 0, &a), Protect(r, 1, &b)); err != nil {
			return err
		}
		return r.Checkpoint(2, 1)
	}))
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		var a []float64
		b := make([]uint32, 50)
		if err := errors.Join(Protect(r, 0, &a), Protect(r, 1, &b)); err != nil {
			return err
		}
		n, err := r.StoredSize(0)
		if err != nil {
			return err
		}
		if n != int64(8*(1000+r.c.Rank())) {
			return fmt.Errorf("stored size %d", n)
		}
		if err := r.Realloc(0); err != nil {
			return err
		}
		if len(a) != 1000+r.c.Rank() || a[5] != 0 {
			return fmt.Errorf("realloc gave len %d", len(a))
		}
		if err := r.RecoverVar(0); err != nil {
			return err
		}
		if a[999] != 333 {
			return fmt.Errorf("a[999] = %v", a[999])
		}
		if len(b) != 50 {
			return fmt.Errorf("RecoverVar(0) touched b")
		}
		if err := r.RecoverVar(1); err != nil {
			return err
		}
		if len(b) != 1 || b[0] != 1 {
			return fmt.Errorf("b = %v", b)
		}
		if err := r.RecoverVar(9); !errors.Is(err, ErrNotProtected) {
			return fmt.Errorf("RecoverVar(9): %v", err)
		}
		var c []int8
		if err := Protect(r, 9, &c); err != nil {
			return err
		}
		if err := r.RecoverVar(9); !errors.Is(err, ErrVarMismatch) {
			return fmt.Errorf("RecoverVar of unstored var: %v", err)
		}
		r.Unprotect(9)
		return r.Recover()
	}))
}

func TestTypeMismatch(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		a := []float64{1, 2}
		if err := Protect(r, 0, &a); err != nil {
			return err
		}
		return r.Checkpoint(1, 1)
	}))
	for name, protect := range map[string]func(r *Runtime) error{
		"int64 for float64":    func(r *Runtime) error { var x []int64; return Protect(r, 0, &x) },
		"float32 for float64":  func(r *Runtime) error { var x []float32; return Protect(r, 0, &x) },
		"struct for float64":   func(r *Runtime) error { var x []struct{ A, B int32 }; return Protect(r, 0, &x) },
		"serializer for float": func(r *Runtime) error { return ProtectValue(r, 0, &mapVar{}) },
	} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var errs []error
			require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
				if err := protect(r); err != nil {
					return err
				}
				err := r.Recover()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return nil
			}))
			require.Len(t, errs, 2)
			for _, err := range errs {
				assert.ErrorIs(t, err, ErrVarMismatch)
				assert.Equal(t, errs[0].Error(), err.Error())
			}
		})
	}
}

func TestProtectRejects(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	require.NoError(t, world(t, 1, cfg, nil, func(r *Runtime) error {
		var s []string
		var p []struct{ X *int }
		var m []map[int]int
		var e []struct{}
		var ok []struct {
			A [2]float64
			B bool
		}
		for what, err := range map[string]error{
			"string":    Protect(r, 1, &s),
			"pointer":   Protect(r, 2, &p),
			"map":       Protect(r, 3, &m),
			"zero-size": Protect(r, 4, &e),
		} {
			if !errors.Is(err, ErrBadType) {
				return fmt.Errorf("%s: %v", what, err)
			}
		}
		if err := Protect(r, -1, &ok); !errors.Is(err, ErrBadID) {
			return fmt.Errorf("negative id: %v", err)
		}
		if err := Protect(r, 102401, &ok); !errors.Is(err, ErrBadID) {
			return fmt.Errorf("id above max: %v", err)
		}
		return Protect(r, 5, &ok)
	}))
}

func TestLevelUnavailable(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	var mu sync.Mutex
	var msgs []string
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		x := []int64{1}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		for _, l := range []int{0, -1, 9} {
			if err := r.Checkpoint(1, l); !errors.Is(err, ErrLevelUnavailable) {
				return fmt.Errorf("level %d: %v", l, err)
			}
		}
		// Levels 2-4 are unavailable until their packages register.
		for _, l := range []int{2, 3, 4} {
			if _, err := r.eng.Level(levels.ID(l)); err != nil {
				err := r.Checkpoint(1, l)
				if !errors.Is(err, ErrLevelUnavailable) {
					return fmt.Errorf("level %d: %v", l, err)
				}
				mu.Lock()
				msgs = append(msgs, err.Error())
				mu.Unlock()
			}
		}
		// Mismatched arguments are caught, identically everywhere.
		if err := r.Checkpoint(int64(r.c.Rank()), 1); !errors.Is(err, ErrMismatchedCall) {
			return fmt.Errorf("mismatched: %v", err)
		}
		return r.Checkpoint(2, 1)
	}))
	for _, m := range msgs {
		assert.Contains(t, m, "level not available")
	}
}

func TestUnrecoverableRestartIsAnError(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 2)
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		x := []float64{float64(r.c.Rank())}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		return r.Checkpoint(1, 1)
	}))
	// Corrupt rank 2's file (node 1).
	p := filepath.Join(cfg.NodeDir(1, runOf(t, cfg)), levels.RankFileName(levels.CheckpointDir(1), levels.RoleData, 2))
	f, err := vfd.Sec2{}.Open(p, vfd.ReadWrite)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("TextForCorruption"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	errs := initErrors(t, 4, cfg)
	for rank, err := range errs {
		require.ErrorIs(t, err, ErrUnrecoverable)
		assert.Contains(t, err.Error(), "failed on rank 2")
		assert.Equal(t, errs[0].Error(), err.Error(), "rank %d", rank)
	}
	assert.ErrorIs(t, errs[2], levels.ErrDigestMismatch)
}

// initErrors runs Init on n ranks and returns each rank's error.
func initErrors(t testing.TB, n int, cfg Config, opts ...Option) []error {
	errs := make([]error, n)
	require.NoError(t, comm.Run(n, func(c comm.Comm) error {
		var r *Runtime
		r, errs[c.Rank()] = Init(cfg, c, append([]Option{WithLogger(zaptest.NewLogger(t)), WithWarnings(tbWriter{t})}, opts...)...)
		if r != nil {
			return r.Close()
		}
		return nil
	}, comm.WithTimeout(30*time.Second)))
	return errs
}

// worldClocks is world with one fake clock per rank.
func worldClocks(t testing.TB, n int, cfg Config, clocks []*fakeClock, fn func(r *Runtime, clk *fakeClock) error, opts ...Option) error {
	return comm.Run(n, func(c comm.Comm) error {
		clk := clocks[c.Rank()]
		o := append([]Option{WithLogger(zaptest.NewLogger(t)), WithWarnings(tbWriter{t}), WithClock(clk.Now)}, opts...)
		r, err := Init(cfg, c, o...)
		if err != nil {
			return err
		}
		defer r.Close()
		return fn(r, clk)
	}, comm.WithTimeout(30*time.Second))
}
