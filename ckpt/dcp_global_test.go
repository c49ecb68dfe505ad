package ckpt

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/dataset"
)

// TestDCPDatasets: differential checkpoints of variables in global
// datasets. A restart on the ranks that wrote the chain recovers the
// newest (differential) checkpoint, datasets included; a restart on
// another rank count does not redistribute a chain and falls back to
// the newest full checkpoint, every element of it bit for bit.
func TestDCPDatasets(t *testing.T) {
	for _, lvl := range []int{1, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			root := t.TempDir()
			cfg := testConfig(root, 1)
			cfg.EnableDCP, cfg.DCPBlockSize = true, 512
			require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
				field, _, _, err := reshapeWriter(r, 2)
				if err != nil {
					return err
				}
				if err := r.Checkpoint(1, lvl); err != nil {
					return err
				}
				field[0] += 1 // one block of every rank changes
				if err := r.Checkpoint(2, lvl+dcpLevelOffset); err != nil {
					return err
				}
				if m := r.last; m.DCP == nil || m.ID != 2 {
					return fmt.Errorf("checkpoint 2 is not differential: %+v", m.DCP)
				}
				return nil
			}))
			// Same shape: checkpoint 2, through its chain.
			require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
				q := r.c.Rank()
				shape := reshapeShapes[2]
				grid, _ := dataset.Dims(4, 2)
				off, cnt := unevenBlock(shape, grid, q)
				io, ic := idsSlab(q, 4)
				var field []float64
				var ids []int32
				var owner []int64
				if err := errors.Join(Protect(r, 1, &field, "field"), Protect(r, 2, &ids, "ids"), Protect(r, 3, &owner, "owner"),
					DefineDataset[float64](r, 10, "fields/temperature", shape), DefineDataset[int32](r, 11, "ids", []int64{idsLen}),
					r.AddSubset(1, 10, off, cnt), r.AddSubset(2, 11, []int64{io}, []int64{ic})); err != nil {
					return err
				}
				if r.Recovered() == nil || r.Recovered().ID != 2 {
					return fmt.Errorf("rank %d restarted from %v, want checkpoint 2", q, r.Recovered())
				}
				if err := r.Recover(); err != nil {
					return err
				}
				want := slabValues(shape, off, cnt)
				want[0] += 1
				for i := range want {
					if math.Float64bits(field[i]) != math.Float64bits(want[i]) {
						return fmt.Errorf("rank %d: field[%d] = %v, want %v", q, i, field[i], want[i])
					}
				}
				if !slices.Equal(owner, []int64{int64(q), 4242}) {
					return fmt.Errorf("rank %d: owner %v", q, owner)
				}
				return nil
			}))
			// Another shape: the full checkpoint 1, redistributed.
			require.NoError(t, world(t, 3, cfg, nil, func(r *Runtime) error {
				if m := r.Recovered(); m == nil || m.ID != 1 {
					return fmt.Errorf("rank %d restarted from %v, want the full checkpoint 1", r.c.Rank(), m)
				}
				return reshapeReader(r, 2, 4, false)
			}))
		})
	}
}

// TestDCPWithHDF5L4: with ckpt_io = 5 an L4 checkpoint is one HDF5 file,
// so a differential L4 request (level 8) is taken whole, with a warning,
// and restores like any.
func TestDCPWithHDF5L4(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	cfg.CkptIO, cfg.EnableDCP, cfg.DCPBlockSize = 5, true, 512
	core, logs := observer.New(zapcore.WarnLevel)
	require.NoError(t, world(t, 4, cfg, []Option{WithLogger(zap.New(core))}, func(r *Runtime) error {
		field, _, _, err := reshapeWriter(r, 2)
		if err != nil {
			return err
		}
		if err := r.Checkpoint(1, 4); err != nil {
			return err
		}
		field[0] += 1
		if err := r.Checkpoint(2, 8); err != nil {
			return err
		}
		if m := r.last; m.DCP != nil || m.ID != 2 {
			return fmt.Errorf("checkpoint 2 is differential: %+v", m.DCP)
		}
		return nil
	}))
	require.Equal(t, 1, logs.FilterMessageSnippet("ckpt_io = 5 writes L4 as one HDF5 file: checkpoint 2 is taken whole").Len())
	require.NoError(t, world(t, 4, cfg, nil, func(r *Runtime) error {
		field, _, _, err := reshapeWriter(r, 2)
		if err != nil {
			return err
		}
		want := slices.Clone(field)
		want[0] += 1
		clear(field)
		if err := r.Recover(); err != nil {
			return err
		}
		if !slices.Equal(field, want) {
			return fmt.Errorf("rank %d: field differs", r.c.Rank())
		}
		return nil
	}))
}
