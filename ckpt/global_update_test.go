package ckpt

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/dataset"
)

// TestUpdateAndStoredDataset: UpdateGlobalDataset changes a dataset's
// shape (checked by the next checkpoint), GlobalDataset reports this
// rank's definition and StoredDataset the recovered checkpoint's, which
// a restart on another rank count uses to size its decomposition
// (FTI_RecoverDatasetDimension).
func TestUpdateAndStoredDataset(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	value := func(i int) float64 { return float64(i)*0.5 + 7 }
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		x := make([]float64, 5)
		for i := range x {
			x[i] = value(r.c.Rank()*5 + i)
		}
		if err := errors.Join(Protect(r, 1, &x), DefineDataset[float64](r, 5, "a", []int64{10}),
			r.AddSubset(1, 5, []int64{int64(r.c.Rank()) * 5}, []int64{5})); err != nil {
			return err
		}
		d, ok := r.GlobalDataset(5)
		assert.True(t, ok)
		assert.Equal(t, []int64{10}, d.Shape)
		_, ok = r.GlobalDataset(9)
		assert.False(t, ok)
		_, err := r.StoredDataset(5)
		assert.ErrorIs(t, err, ErrNoCheckpoint)
		_, err = r.StoredIDs()
		assert.ErrorIs(t, err, ErrNoCheckpoint)
		assert.ErrorIs(t, r.UpdateGlobalDataset(9, []int64{10}), dataset.ErrUnknown)
		err = r.UpdateGlobalDataset(5, []int64{0})
		assert.ErrorIs(t, err, ErrDataset)
		assert.ErrorIs(t, err, dataset.ErrInvalid)
		d, _ = r.GlobalDataset(5)
		assert.Equal(t, []int64{10}, d.Shape, "a refused update changes nothing")
		require.NoError(t, r.UpdateGlobalDataset(5, []int64{12}))
		err = r.Checkpoint(1, 1)
		assert.ErrorIs(t, err, dataset.ErrGap, "elements 10 and 11 are in no subset")
		require.NoError(t, r.UpdateGlobalDataset(5, []int64{10}))
		require.NoError(t, r.Checkpoint(2, 1))
		d, err = r.StoredDataset(5)
		require.NoError(t, err)
		assert.Equal(t, []int64{10}, d.Shape)
		assert.Equal(t, "a", d.Name)
		_, err = r.StoredDataset(9)
		assert.ErrorIs(t, err, dataset.ErrUnknown)
		ids, err := r.StoredIDs()
		require.NoError(t, err)
		assert.Equal(t, []int{1}, ids)
		return nil
	}))
	// One rank restarts: the stored shape sizes its decomposition.
	require.NoError(t, world(t, 1, cfg, nil, func(r *Runtime) error {
		require.True(t, r.Reshaped())
		ids, err := r.StoredIDs()
		require.NoError(t, err)
		assert.Equal(t, []int{1}, ids, "the old ranks' ids")
		var x []float64
		require.NoError(t, errors.Join(Protect(r, 1, &x), DefineDataset[float64](r, 5, "a", []int64{1})))
		d, err := r.StoredDataset(5)
		require.NoError(t, err)
		require.Equal(t, []int64{10}, d.Shape)
		require.NoError(t, r.UpdateGlobalDataset(5, d.Shape))
		require.NoError(t, r.AddSubset(1, 5, []int64{0}, []int64{10}))
		require.NoError(t, r.Recover())
		for i, v := range x {
			if v != value(i) {
				return fmt.Errorf("element %d: %v, want %v", i, v, value(i))
			}
		}
		assert.Len(t, x, 10)
		return nil
	}))
}
