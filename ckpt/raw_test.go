package ckpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/fileformat"
)

// rawF64 returns n float64 values for rank as little-endian bytes (the
// memory a C program would hold).
func rawF64(rank, n int, salt float64) []byte {
	b := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(rank)*1e6+float64(i)+salt))
	}
	return b
}

// TestProtectRawInPlace: raw memory is checkpointed as it is at the
// moment of the checkpoint and written back into the same memory by
// Recover; a raw float64 variable and a Go []float64 are the same record,
// so either side recovers what the other wrote.
func TestProtectRawInPlace(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	const n = 1000
	require.NoError(t, world(t, 3, cfg, nil, func(r *Runtime) error {
		mem := rawF64(r.c.Rank(), n, 0.25)
		opaque := []byte("0123456789ab") // two 6-byte opaque elements
		if err := errors.Join(
			ProtectRaw(r, 0, Raw{Type: fileformat.Float64, ElemSize: 8, Mem: mem, Name: "field"}),
			ProtectRaw(r, 1, Raw{Type: fileformat.Struct, ElemSize: 6, Mem: opaque}),
		); err != nil {
			return err
		}
		if err := r.Checkpoint(1, 1); err != nil {
			return err
		}
		copy(mem, rawF64(r.c.Rank(), n, 99)) // changed after the checkpoint: not stored
		return nil
	}))
	var mu sync.Mutex
	seen := map[int][]fileformat.VarInfo{}
	require.NoError(t, world(t, 3, cfg, nil, func(r *Runtime) error {
		vars, err := r.StoredVars()
		if err != nil {
			return err
		}
		mu.Lock()
		seen[r.c.Rank()] = vars
		mu.Unlock()
		mem := make([]byte, 8*n)
		base := unsafe.SliceData(mem)
		opaque := make([]byte, 12)
		if err := errors.Join(
			ProtectRaw(r, 0, Raw{Type: fileformat.Float64, ElemSize: 8, Mem: mem}),
			ProtectRaw(r, 1, Raw{Type: fileformat.Struct, ElemSize: 6, Mem: opaque}),
		); err != nil {
			return err
		}
		if err := r.Recover(); err != nil {
			return err
		}
		if unsafe.SliceData(mem) != base || !slices.Equal(mem, rawF64(r.c.Rank(), n, 0.25)) {
			return fmt.Errorf("rank %d: raw memory not restored in place", r.c.Rank())
		}
		if string(opaque) != "0123456789ab" {
			return fmt.Errorf("opaque = %q", opaque)
		}
		// The same record read as a Go slice.
		var f []float64
		if err := Protect(r, 0, &f); err != nil {
			return err
		}
		if err := r.RecoverVar(0); err != nil {
			return err
		}
		if len(f) != n || f[7] != float64(r.c.Rank())*1e6+7.25 {
			return fmt.Errorf("Go view of the raw record: len %d, f[7] = %v", len(f), f[7])
		}
		return nil
	}))
	for rank, vars := range seen {
		require.Len(t, vars, 2, "rank %d", rank)
		assert.Equal(t, fileformat.VarInfo{ID: 0, Name: "field", Type: fileformat.Float64, ElemSize: 8, Count: n, Size: 8 * n, Chunks: 1, Stored: 8 * n}, vars[0])
		assert.Equal(t, fileformat.Struct, vars[1].Type)
		assert.Equal(t, uint32(6), vars[1].ElemSize)
		assert.Equal(t, int64(2), vars[1].Count)
	}
}

// TestProtectRawResize: a stored size that differs from the protected
// memory goes through Resize (C's realloc behind FTI_Realloc), or is
// refused with ErrVarMismatch, leaving the memory untouched, when there
// is no Resize.
func TestProtectRawResize(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		mem := rawF64(r.c.Rank(), 10+r.c.Rank(), 0.5)
		if err := ProtectRaw(r, 4, Raw{Type: fileformat.Float64, ElemSize: 8, Mem: mem}); err != nil {
			return err
		}
		return r.Checkpoint(1, 1)
	}))
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		want := rawF64(r.c.Rank(), 10+r.c.Rank(), 0.5)
		small := []byte{1, 2, 3, 4, 5, 6, 7, 8}
		if err := ProtectRaw(r, 4, Raw{Type: fileformat.Float64, ElemSize: 8, Mem: small}); err != nil {
			return err
		}
		if err := r.RecoverVar(4); !errors.Is(err, ErrVarMismatch) {
			return fmt.Errorf("RecoverVar without Resize: %v", err)
		}
		if !slices.Equal(small, []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
			return fmt.Errorf("memory touched by a refused recovery: %v", small)
		}
		var asked []int64
		var grown []byte
		resize := func(n int64) ([]byte, error) {
			asked = append(asked, n)
			grown = make([]byte, n)
			copy(grown, small)
			return grown, nil
		}
		if err := ProtectRaw(r, 4, Raw{Type: fileformat.Float64, ElemSize: 8, Mem: small, Resize: resize}); err != nil {
			return err
		}
		if err := r.Realloc(4); err != nil {
			return err
		}
		if !slices.Equal(asked, []int64{int64(len(want))}) || !slices.Equal(grown[:8], small) {
			return fmt.Errorf("Realloc asked %v", asked)
		}
		if err := r.Recover(); err != nil {
			return err
		}
		if len(asked) != 1 || !slices.Equal(grown, want) {
			return fmt.Errorf("Recover after Realloc: asked %v, data ok %v", asked, slices.Equal(grown, want))
		}
		// A Resize that returns the wrong length is an error, not an overrun.
		bad := func(n int64) ([]byte, error) { return make([]byte, n-8), nil }
		if err := ProtectRaw(r, 4, Raw{Type: fileformat.Float64, ElemSize: 8, Mem: nil, Resize: bad}); err != nil {
			return err
		}
		if err := r.RecoverVar(4); !errors.Is(err, ErrVarMismatch) {
			return fmt.Errorf("short Resize: %v", err)
		}
		return nil
	}))
}

func TestProtectRawRejects(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	require.NoError(t, world(t, 1, cfg, nil, func(r *Runtime) error {
		for _, m := range []Raw{
			{Type: fileformat.ElemType(200), ElemSize: 1},
			{Type: fileformat.Float64, ElemSize: 4, Mem: make([]byte, 8)},
			{Type: fileformat.Struct, ElemSize: 0},
			{Type: fileformat.Struct, ElemSize: 3, Mem: make([]byte, 7)},
		} {
			if err := ProtectRaw(r, 0, m); !errors.Is(err, ErrBadType) {
				return fmt.Errorf("%+v: %v", m, err)
			}
		}
		if err := ProtectRaw(r, -1, Raw{Type: fileformat.Bytes, ElemSize: 1}); !errors.Is(err, ErrBadID) {
			return fmt.Errorf("id -1: %v", err)
		}
		if _, err := r.StoredVars(); !errors.Is(err, ErrNoCheckpoint) {
			return fmt.Errorf("StoredVars on a fresh run: %v", err)
		}
		return nil
	}))
}
