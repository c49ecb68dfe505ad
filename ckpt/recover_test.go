package ckpt

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/fileformat"
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

// TestCorruptionAfterInit: Init verifies every file of the checkpoint it
// restarts from. Without the in-memory image (WithRestartImage(0)) a data
// byte changed after Init (before Recover) can only be caught while
// Recover reads it, and Recover is local: the damaged rank gets an error
// wrapping the hash mismatch with the variable zeroed (never the changed
// values), the other ranks recover; nothing falls back behind their
// backs. RecoverVar behaves the same. With the image (the default),
// Recover copies the bytes Init verified and never reads the file again:
// a change on storage after Init cannot reach the variables, and every
// rank restores the checkpointed values.
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
		name   string
		older  int  // level of an older checkpoint (id 1), 0 for none
		flip   bool // flip a data byte of the victim after Init
		perVar bool // RecoverVar instead of Recover
		image  bool // Init keeps the verified data in memory
	}{
		{"intact", 0, false, false, false},
		{"flipped, nothing older", 0, true, false, false},
		{"flipped, older L4", 4, true, false, false},
		{"flipped, RecoverVar", 4, true, true, false},
		{"image, intact", 0, false, false, true},
		{"image, flipped", 0, true, false, true},
		{"image, flipped, RecoverVar", 4, true, true, true},
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
			opts := []Option{WithRestartImage(0)}
			if tt.image {
				opts = nil // the default
			}
			require.NoError(t, world(t, n, cfg, opts, func(r *Runtime) error {
				if r.Status() != Restart || r.Recovered().ID != 2 {
					return fmt.Errorf("Init chose %v %+v", r.Status(), r.Recovered())
				}
				if (r.src.Image != nil) != tt.image {
					return fmt.Errorf("rank %d: image kept %v, want %v", r.c.Rank(), r.src.Image != nil, tt.image)
				}
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
					if want := data(rank, 2); !slices.Equal(x, want) {
						return fmt.Errorf("rank %d restored wrong data", rank)
					}
					if r.src.Image != nil {
						return fmt.Errorf("rank %d: the image is still held after every variable was restored", rank)
					}
				case !slices.Equal(x, make([]float64, words)):
					return fmt.Errorf("rank %d left non-zero data after %v", rank, err)
				}
				if r.Recovered().ID != 2 {
					return fmt.Errorf("rank %d: Recover moved to checkpoint %d", rank, r.Recovered().ID)
				}
				return nil
			}))
			for rank, err := range errs {
				if !tt.flip || rank != victim || tt.image {
					assert.NoError(t, err, "rank %d", rank)
					continue
				}
				require.ErrorIs(t, err, fileformat.ErrHashMismatch, "rank %d", rank)
				assert.NotErrorIs(t, err, ErrUnrecoverable)
			}
		})
	}
}

// TestRecoverIsLocal: as in FTI (its diffSizes test), any subset of ranks
// may call Recover while the others call RecoverVar or nothing at all,
// without a collective call that would hang; after a successful Recover
// Status is Fresh (FTI_Status returns 0), Recovered still names the
// checkpoint; and Recover right after a Checkpoint in the same run
// recovers that checkpoint (FTI), also at L4 where the data is only a task
// of the global container.
func TestRecoverIsLocal(t *testing.T) {
	const n = 4
	for _, lvl := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			cfg := testConfig(t.TempDir(), 1)
			cfg.GroupSize = 2
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				x := []int64{int64(r.c.Rank()), 1}
				if err := Protect(r, 0, &x); err != nil {
					return err
				}
				if err := r.Recover(); !errors.Is(err, ErrNoCheckpoint) {
					return fmt.Errorf("Recover on a fresh run before any checkpoint: %v", err)
				}
				if err := r.Checkpoint(1, lvl); err != nil {
					return err
				}
				// Recover right after a Checkpoint restores that checkpoint.
				x[0], x[1] = -1, -1
				if err := r.Recover(); err != nil {
					return err
				}
				if x[0] != int64(r.c.Rank()) || x[1] != 1 {
					return fmt.Errorf("rank %d: Recover after Checkpoint gave %v", r.c.Rank(), x)
				}
				x[1] = 2
				return r.Checkpoint(2, lvl)
			}))
			var mu sync.Mutex
			statuses := map[int][2]Status{}
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				before := r.Status()
				x := []int64{-1, -1}
				if err := Protect(r, 0, &x); err != nil {
					return err
				}
				switch r.c.Rank() % 3 {
				case 0: // Recover, alone among ranks that do other things
					if err := r.Recover(); err != nil {
						return err
					}
				case 1:
					if err := r.RecoverVar(0); err != nil {
						return err
					}
				case 2: // nothing: this rank does not need its data
					mu.Lock()
					statuses[r.c.Rank()] = [2]Status{before, r.Status()}
					mu.Unlock()
					return nil
				}
				if x[0] != int64(r.c.Rank()) || x[1] != 2 {
					return fmt.Errorf("rank %d recovered %v", r.c.Rank(), x)
				}
				if r.Recovered() == nil || r.Recovered().ID != 2 {
					return fmt.Errorf("rank %d: Recovered %+v", r.c.Rank(), r.Recovered())
				}
				mu.Lock()
				statuses[r.c.Rank()] = [2]Status{before, r.Status()}
				mu.Unlock()
				return nil
			}))
			assert.Equal(t, map[int][2]Status{
				0: {Restart, Fresh},   // Recover succeeded: 0, as FTI_Status
				1: {Restart, Restart}, // RecoverVar alone does not end the restart
				2: {Restart, Restart},
				3: {Restart, Fresh},
			}, statuses)
		})
	}
}

// TestRestartImageDefault: by default the image may take up to 1 GiB per
// rank and no more than a quarter of the node's memory for all its ranks.
func TestRestartImageDefault(t *testing.T) {
	mem := vfd.PhysicalMemory()
	for _, nodeSize := range []int{1, 4, 64, 1 << 20} {
		got := restartImageDefault(nodeSize)
		assert.LessOrEqual(t, got, int64(DefaultRestartImage), "node size %d", nodeSize)
		if mem > 0 {
			assert.LessOrEqual(t, got*int64(nodeSize), mem/4, "node size %d", nodeSize)
			assert.Equal(t, min(int64(DefaultRestartImage), mem/int64(4*nodeSize)), got, "node size %d", nodeSize)
		}
	}
}

// TestRestartReadsOnce: a restart (Init, then Recover) reads every byte of
// each rank's data file from storage once at L1 and L2, and each rank's
// task of the L4 container once (nothing staged locally); without the
// image (WithRestartImage(0)) the L1 data is read twice.
func TestRestartReadsOnce(t *testing.T) {
	const n, words = 3, 200_000
	for _, tc := range []struct {
		level int
		image bool
		times int64
	}{{1, true, 1}, {2, true, 1}, {4, true, 1}, {1, false, 2}} {
		t.Run(fmt.Sprintf("L%d/image=%v", tc.level, tc.image), func(t *testing.T) {
			var mu sync.Mutex
			on := false
			read := map[string]int64{}
			d := vfd.NewFault(vfd.Sec2{}, vfd.InjectorFunc(func(op vfd.Op) error {
				mu.Lock()
				defer mu.Unlock()
				if on && op.Kind == vfd.OpRead {
					read[op.Path] += int64(op.Len)
				}
				return nil
			}))
			cfg := testConfig(t.TempDir(), 1)
			cfg.GroupSize = n
			opts := []Option{WithDriver(d)}
			data := func(rank int) []float64 {
				x := make([]float64, words)
				for i := range x {
					x[i] = float64(rank)*1e7 + float64(i)
				}
				return x
			}
			require.NoError(t, world(t, n, cfg, opts, func(r *Runtime) error {
				x := data(r.c.Rank())
				return errors.Join(Protect(r, 0, &x), r.Checkpoint(1, tc.level))
			}))
			mu.Lock()
			on = true
			mu.Unlock()
			if !tc.image {
				opts = append(opts, WithRestartImage(0))
			}
			var task [n]int64
			require.NoError(t, world(t, n, cfg, opts, func(r *Runtime) error {
				if f, ok := r.recoveredManifest().DataFile(r.c.Rank()); ok {
					task[r.c.Rank()] = f.Size
				}
				x := make([]float64, words)
				if err := errors.Join(Protect(r, 0, &x), r.Recover()); err != nil {
					return err
				}
				if !slices.Equal(x, data(r.c.Rank())) {
					return fmt.Errorf("rank %d: wrong data", r.c.Rank())
				}
				return nil
			}))
			mu.Lock()
			on = false
			mu.Unlock()
			var dataRead, container int64
			for p, b := range read {
				switch {
				case strings.Contains(p, "/data0"):
					dataRead += b
				case strings.Contains(p, ".sion"):
					container += b
				}
			}
			var want int64
			for _, s := range task {
				want += s
			}
			if tc.level == 4 {
				// The tasks once, plus the container's metadata.
				assert.Zero(t, dataRead, "nothing read from local copies")
				assert.GreaterOrEqual(t, container, want)
				assert.Less(t, container, want+want/10, "tasks read once (%d bytes of container for %d of tasks)", container, want)
				return
			}
			if tc.times == 1 {
				assert.Equal(t, want, dataRead, "bytes read from the data files (%d of data)", want)
				return
			}
			// Verified, then read again (plus the metadata a second time).
			assert.GreaterOrEqual(t, dataRead, tc.times*want)
			assert.Less(t, dataRead, tc.times*want+want/10)
		})
	}
}
