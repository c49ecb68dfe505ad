package ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/ftigo/ftigo/comm"
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

// notInProcess hides the in-process world's [comm.InProcess] capability,
// as a communicator over MPI processes has none.
type notInProcess struct{ comm.Comm }

// TestPageHandoverOnlyInProcess: the image's pages are handed over only
// where no MPI library can have registered the variables with a network
// device: by default in the in-process world, never on a communicator
// without the capability (MPI) unless asked for, and never when turned
// off. Where they are not, the variable gets a copy and the image keeps
// the checkpointed bytes.
func TestPageHandoverOnlyInProcess(t *testing.T) {
	const n, words = 2, 400_000
	for _, tc := range []struct {
		name   string
		wrap   bool
		opts   []Option
		handed bool
	}{
		{"in-process default", false, nil, true},
		{"in-process turned off", false, []Option{WithPageHandover(false)}, false},
		{"mpi-like default", true, nil, false},
		{"mpi-like turned on", true, []Option{WithPageHandover(true)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 1)
			run := func(fn func(r *Runtime) error) error {
				return comm.Run(n, func(c comm.Comm) error {
					if tc.wrap {
						c = notInProcess{c}
					}
					o := append([]Option{WithLogger(zaptest.NewLogger(t)), WithWarnings(tbWriter{t})}, tc.opts...)
					r, err := Init(cfg, c, o...)
					if err != nil {
						return err
					}
					defer r.Close()
					return fn(r)
				}, comm.WithTimeout(30*time.Second))
			}
			want := func(rank int) []float64 {
				x := make([]float64, words)
				for i := range x {
					x[i] = float64(rank)*1e7 + float64(i)
				}
				return x
			}
			require.NoError(t, run(func(r *Runtime) error {
				x := want(r.c.Rank())
				return errors.Join(Protect(r, 0, &x), r.Checkpoint(1, 1))
			}))
			require.NoError(t, run(func(r *Runtime) error {
				rank := r.c.Rank()
				img := r.src.Image
				if img == nil {
					return fmt.Errorf("rank %d: no restart image", rank)
				}
				f, err := fileformat.Open(vfd.BytesFile("img", slices.Clone(img)))
				if err != nil {
					return err
				}
				c := f.Summary().Chunks[0]
				before := slices.Clone(img[c.Fptr+4096 : c.Fptr+c.Size-4096])
				x := make([]float64, words)
				if err := errors.Join(Protect(r, 0, &x), r.RecoverVar(0)); err != nil {
					return err
				}
				if !slices.Equal(x, want(rank)) {
					return fmt.Errorf("rank %d: wrong values", rank)
				}
				zeroed := bytes.Equal(img[c.Fptr+4096:c.Fptr+c.Size-4096], make([]byte, len(before)))
				kept := bytes.Equal(img[c.Fptr+4096:c.Fptr+c.Size-4096], before)
				switch {
				case tc.handed && !zeroed:
					return fmt.Errorf("rank %d: the image's pages were copied, want them handed over", rank)
				case !tc.handed && !kept:
					return fmt.Errorf("rank %d: the image's pages were handed over, want a copy", rank)
				}
				return nil
			}))
		})
	}
}
