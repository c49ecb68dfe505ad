package ckpt

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecoverVarByName checkpoints named variables, restarts with other
// ids for the same names, and recovers by name (FTI's recoverName test):
// the data comes back, unknown names and mismatched types are refused.
func TestRecoverVarByName(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	temp := func(rank int) []float64 {
		x := make([]float64, 100+rank)
		for i := range x {
			x[i] = float64(rank)*1000 + float64(i)/4
		}
		return x
	}
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		x := temp(r.c.Rank())
		step := []int64{int64(7 + r.c.Rank())}
		if err := Protect(r, 1, &x, "temperature"); err != nil {
			return err
		}
		if err := Protect(r, 2, &step, "step"); err != nil {
			return err
		}
		return r.Checkpoint(1, 1)
	}))
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		if r.Status() != Restart {
			return fmt.Errorf("status %v", r.Status())
		}
		var x []float64
		var step []int64
		var wrong []float32
		if err := Protect(r, 10, &x, "temperature"); err != nil {
			return err
		}
		if err := Protect(r, 20, &step, "step"); err != nil {
			return err
		}
		if err := Protect(r, 30, &wrong, "pressure"); err != nil {
			return err
		}
		id, err := r.IDByName("temperature")
		if err != nil || id != 1 {
			return fmt.Errorf("IDByName: %d, %v", id, err)
		}
		if err := r.RecoverVarByName("temperature"); err != nil {
			return err
		}
		if err := r.RecoverVarByName("step"); err != nil {
			return err
		}
		if !assert.Equal(t, temp(r.c.Rank()), x) || !assert.Equal(t, []int64{int64(7 + r.c.Rank())}, step) {
			return fmt.Errorf("rank %d: wrong data", r.c.Rank())
		}
		assert.ErrorIs(t, r.RecoverVarByName("nothing"), ErrNotProtected)
		err = r.RecoverVarByName("pressure")
		assert.ErrorIs(t, err, ErrVarMismatch, "not in the checkpoint")
		assert.Contains(t, fmt.Sprint(err), `no variable named "pressure"`)
		_, err = r.IDByName("pressure")
		assert.Error(t, err)
		// "step" protected as float32 now: a type mismatch.
		r.Unprotect(20)
		var f32 []float32
		if err := Protect(r, 21, &f32, "step"); err != nil {
			return err
		}
		assert.ErrorIs(t, r.RecoverVarByName("step"), ErrVarMismatch)
		return nil
	}))
}

func TestProtectNameTaken(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	require.NoError(t, world(t, 1, cfg, nil, func(r *Runtime) error {
		var a, b []int32
		require.NoError(t, Protect(r, 1, &a, "a"))
		require.NoError(t, Protect(r, 1, &b, "a"), "re-protecting an id under its name")
		err := Protect(r, 2, &b, "a")
		require.ErrorIs(t, err, ErrNameTaken)
		assert.Contains(t, err.Error(), `"a" is variable 1`)
		require.ErrorIs(t, ProtectValue(r, 3, &testValue{}, "a"), ErrNameTaken)
		r.Unprotect(1)
		require.NoError(t, Protect(r, 2, &b, "a"), "the name is free after Unprotect")
		require.NoError(t, Protect(r, 4, &a), "unnamed variables never clash")
		require.NoError(t, Protect(r, 5, &a))
		return nil
	}))
}

type testValue struct{ b []byte }

func (v *testValue) MarshalBinary() ([]byte, error) { return v.b, nil }
func (v *testValue) UnmarshalBinary(b []byte) error { v.b = append(v.b[:0], b...); return nil }
