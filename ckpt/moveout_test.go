package ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// TestRecoverTakesTheImagePages: with the restart image (the default),
// RecoverVar hands the verified image's pages over to the variable's
// memory instead of copying them (the pages are swapped: the image holds
// the variable's former zeros there
// afterwards) and restores the checkpointed values; a second RecoverVar
// of the same variable reads it from storage, checked as it is read: the
// checkpointed values again, or, when a byte on storage changed after
// Init, the hash mismatch with the variable zeroed (never the image's
// zeros, never the changed bytes).
func TestRecoverTakesTheImagePages(t *testing.T) {
	const n, words = 2, 400_000 // 3.2 MiB per rank: whole pages to move
	data := func(rank, id int) []float64 {
		x := make([]float64, words/(1+id*100))
		for i := range x {
			x[i] = float64(rank)*1e7 + float64(id)*0.25 + float64(i)
		}
		return x
	}
	for _, flip := range []bool{false, true} {
		t.Run(fmt.Sprintf("flipped=%v", flip), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 1)
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				x, y := data(r.c.Rank(), 0), data(r.c.Rank(), 1)
				return errors.Join(Protect(r, 0, &x), Protect(r, 1, &y), r.Checkpoint(1, 1))
			}))
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				rank := r.c.Rank()
				if r.src.Image == nil {
					return fmt.Errorf("rank %d: no restart image", rank)
				}
				img := r.src.Image
				f, err := fileformat.Open(vfd.BytesFile("img", slices.Clone(img)))
				if err != nil {
					return err
				}
				c := f.Summary().Chunks[0]
				if c.VarID != 0 {
					return fmt.Errorf("first chunk is variable %d", c.VarID)
				}
				x, y := make([]float64, words), make([]float64, 1)
				if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &y)); err != nil {
					return err
				}
				if err := r.RecoverVar(0); err != nil {
					return err
				}
				if !slices.Equal(x, data(rank, 0)) {
					return fmt.Errorf("rank %d: wrong values from the image", rank)
				}
				if !bytes.Equal(img[c.Fptr+4096:c.Fptr+c.Size-4096], make([]byte, c.Size-8192)) {
					return fmt.Errorf("rank %d: the image's pages were copied, not handed over", rank)
				}
				if r.src.Image == nil {
					return fmt.Errorf("rank %d: the image was dropped before variable 1 was restored", rank)
				}
				if flip {
					if err := flipData(r.src.Store.Path(r.src.Name), 0); err != nil {
						return err
					}
				}
				clear(x)
				err = r.RecoverVar(0)
				switch {
				case flip && !errors.Is(err, fileformat.ErrHashMismatch):
					return fmt.Errorf("rank %d: second RecoverVar of a changed file: %v, want the hash mismatch", rank, err)
				case flip && !slices.Equal(x, make([]float64, words)):
					return fmt.Errorf("rank %d: variable not zeroed after the mismatch", rank)
				case !flip && err != nil:
					return err
				case !flip && !slices.Equal(x, data(rank, 0)):
					return fmt.Errorf("rank %d: wrong values read again from storage", rank)
				}
				if err := r.RecoverVar(1); err != nil || !slices.Equal(y, data(rank, 1)) {
					return fmt.Errorf("rank %d: variable 1: %v", rank, err)
				}
				return nil
			}))
		})
	}
}
