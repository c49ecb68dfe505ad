package ckpt

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/levels"
	"github.com/ftigo/ftigo/vfd"
)

// flipData flips one byte in the middle of variable id's first chunk of
// the FTI-FF file p: data only, header and metadata stay intact.
func flipData(p string, id int32) error {
	f, err := vfd.Sec2{}.Open(p, vfd.ReadWrite)
	if err != nil {
		return err
	}
	defer f.Close()
	rd, err := fileformat.Open(f)
	if err != nil {
		return err
	}
	for _, c := range rd.Summary().Chunks {
		if c.VarID == id && c.Size > 0 {
			b := []byte{0}
			off := c.Fptr + c.Size/2
			if err := vfd.ReadFull(f, b, off); err != nil {
				return err
			}
			b[0] ^= 0x10
			_, err = f.WriteAt(b, off)
			return err
		}
	}
	return fmt.Errorf("no chunk of variable %d in %s", id, p)
}

// TestCorruptionAfterInit: Init looks at the newest L1 checkpoint without
// reading its data, so a data byte changed after Init (before Recover)
// must be caught while Recover reads it: the variable is never left
// holding wrong data, and Recover falls back to an older checkpoint
// (restoring it) or fails on every rank with ErrUnrecoverable and, on the
// damaged rank, the digest mismatch. RecoverVar, local, reports the hash
// mismatch and zeroes the variable.
func TestCorruptionAfterInit(t *testing.T) {
	const n, words, victim = 3, 3000, 1
	data := func(rank int, id int64) []float64 {
		x := make([]float64, words)
		for i := range x {
			x[i] = float64(rank*1_000_000) + float64(id)*0.5 + float64(i)
		}
		return x
	}
	tests := []struct {
		name    string
		older   int  // level of an older checkpoint (id 1), 0 for none
		flip    bool // flip a data byte of the victim after Init
		perVar  bool // RecoverVar instead of Recover
		wantID  int64
		wantErr bool
	}{
		{"intact", 0, false, false, 2, false},
		{"flipped, nothing older", 0, true, false, 2, true},
		{"flipped, older L4", 4, true, false, 1, false},
		{"flipped, older L1 superseded", 1, true, false, 2, true},
		{"flipped, RecoverVar", 4, true, true, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			cfg := testConfig(root, 1)
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				if tt.older > 0 {
					x := data(r.c.Rank(), 1)
					if err := Protect(r, 0, &x); err != nil {
						return err
					}
					if err := r.Checkpoint(1, tt.older); err != nil {
						return err
					}
				}
				x := data(r.c.Rank(), 2)
				if err := Protect(r, 0, &x); err != nil {
					return err
				}
				return r.Checkpoint(2, 1)
			}))
			errs := make([]error, n)
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				if r.Status() != Restart || r.Recovered().ID != 2 {
					return fmt.Errorf("Init chose %v %+v", r.Status(), r.Recovered())
				}
				rank := r.c.Rank()
				if tt.flip && rank == victim {
					if err := flipData(r.src.Store.Path(r.src.Name), 0); err != nil {
						return err
					}
				}
				if err := r.c.Barrier(); err != nil {
					return err
				}
				x := slices.Repeat([]float64{-7}, words)
				if err := Protect(r, 0, &x); err != nil {
					return err
				}
				var err error
				if tt.perVar {
					err = r.RecoverVar(0)
				} else {
					err = r.Recover()
				}
				errs[rank] = err
				switch {
				case err == nil:
					if got := r.Recovered().ID; got != tt.wantID {
						return fmt.Errorf("rank %d restored checkpoint %d", rank, got)
					}
					if want := data(rank, tt.wantID); !slices.Equal(x, want) {
						return fmt.Errorf("rank %d restored wrong data", rank)
					}
				case rank == victim:
					// Never the damaged values: zeroed.
					if !slices.Equal(x, make([]float64, words)) {
						return fmt.Errorf("rank %d left non-zero data after %v", rank, err)
					}
				}
				return nil
			}))
			for rank, err := range errs {
				if !tt.wantErr {
					assert.NoError(t, err, "rank %d", rank)
					continue
				}
				switch {
				case tt.perVar && rank == victim:
					assert.ErrorIs(t, err, fileformat.ErrHashMismatch)
				case tt.perVar:
					assert.NoError(t, err, "rank %d", rank)
				default:
					require.ErrorIs(t, err, ErrUnrecoverable, "rank %d", rank)
					assert.Equal(t, errs[0].Error(), err.Error(), "rank %d: same error everywhere", rank)
					if rank == victim {
						assert.ErrorIs(t, err, levels.ErrDigestMismatch)
					}
				}
			}
			if tt.wantErr && !tt.perVar {
				assert.False(t, errors.Is(errs[0], ErrNoCheckpoint))
			}
		})
	}
}
