package ckpt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// TestMetaDirLock: while one runtime uses a meta_dir, a second Init on it
// fails on every rank with ErrLocked naming meta_dir and its holder, and so does the
// offline rebuild; once the first ends (Close keeps the checkpoints,
// Finalize too), the next Init succeeds.
func TestMetaDirLock(t *testing.T) {
	const n = 2
	for _, end := range []string{"close", "finalize"} {
		t.Run(end, func(t *testing.T) {
			root := t.TempDir()
			cfg := testConfig(root, 1)
			cfg.KeepLastCkpt = true
			held, release := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			var first error
			go func() {
				defer wg.Done()
				first = comm.Run(n, func(c comm.Comm) error {
					r, err := Init(cfg, c, WithWarnings(tbWriter{t}))
					if err != nil {
						return err
					}
					x := []int64{int64(c.Rank())}
					if err := errors.Join(Protect(r, 0, &x), r.Checkpoint(1, 1), c.Barrier()); err != nil {
						return err
					}
					if c.Rank() == 0 {
						close(held)
						<-release
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					if end == "close" {
						return errors.Join(r.Close(), r.Close())
					}
					return r.Finalize()
				}, comm.WithTimeout(30*time.Second))
			}()
			<-held
			errs := initErrors(t, n, cfg)
			for rank, err := range errs {
				require.ErrorIs(t, err, ErrLocked, "rank %d", rank)
				assert.Equal(t, errs[0].Error(), err.Error())
				// The holder is named: this process.
				assert.Contains(t, err.Error(), fmt.Sprintf("meta_dir %s is in use by %s (pid %d on host ", cfg.MetaDir, filepath.Base(os.Args[0]), os.Getpid()))
			}
			off := cfg
			off.NodeSize, off.GroupSize, off.LocalTest = 0, 0, false
			_, err := RebuildOffline(off)
			require.ErrorIs(t, err, ErrLocked)
			close(release)
			wg.Wait()
			require.NoError(t, first)
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				want := map[string]Status{"close": Restart, "finalize": RestartKept}[end]
				if r.Status() != want || r.Recovered().ID != 1 {
					return fmt.Errorf("after %s: status %v from %+v", end, r.Status(), r.Recovered())
				}
				return nil
			}))
		})
	}
}

// noLocks is a driver without the Locker capability.
type noLocks struct{ vfd.Driver }

// TestMetaDirLockUnsupported: with a driver that cannot lock, rank 0
// warns once and the run goes on.
func TestMetaDirLockUnsupported(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	core, logs := observer.New(zapcore.WarnLevel)
	require.NoError(t, world(t, 4, cfg, []Option{WithDriver(noLocks{vfd.Sec2{}}), WithLogger(zap.New(core))}, func(r *Runtime) error {
		x := []int64{1}
		return errors.Join(Protect(r, 0, &x), r.Checkpoint(1, 1))
	}))
	w := logs.FilterMessageSnippet("meta_dir cannot be locked").All()
	require.Len(t, w, 1)
	assert.Equal(t, int64(0), w[0].ContextMap()["rank"])
	assert.Equal(t, cfg.MetaDir, w[0].ContextMap()["meta_dir"])
	_, err := (vfd.Sec2{}).Stat(filepath.Join(cfg.MetaDir, levels.LockName))
	assert.Error(t, err, "no lock file through a driver without locks")
}

// TestNilArguments: Init with a nil communicator, every method of a nil
// *Runtime (what a failed Init returns), and Protect/ProtectValue with a
// nil runtime return errors wrapping ErrNilArgument, never panic; the
// methods without an error result return zero values. After Close every
// call returns ErrClosed, and Close again does nothing.
func TestNilArguments(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	r, err := Init(cfg, nil)
	require.ErrorIs(t, err, ErrNilArgument)
	assert.Contains(t, err.Error(), "nil comm.Comm")
	require.Nil(t, r)

	var x []float64
	calls := map[string]error{
		"Protect":      Protect(r, 0, &x),
		"ProtectValue": ProtectValue(r, 1, &mapVar{}),
		"Checkpoint":   r.Checkpoint(1, 1),
		"Recover":      r.Recover(),
		"RecoverVar":   r.RecoverVar(0),
		"Realloc":      r.Realloc(0),
		"Finalize":     r.Finalize(),
		"Close":        r.Close(),
	}
	_, calls["Snapshot"] = r.Snapshot()
	_, calls["StoredSize"] = r.StoredSize(0)
	for call, err := range calls {
		require.ErrorIs(t, err, ErrNilArgument, call)
		assert.Contains(t, err.Error(), call+" on a nil *ckpt.Runtime")
	}
	assert.Equal(t, Fresh, r.Status())
	assert.Nil(t, r.Topology())
	assert.Nil(t, r.Recovered())
	r.Wait()
	r.Unprotect(0)

	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		if err := r.Close(); err != nil {
			return err
		}
		if err := r.Close(); err != nil {
			return fmt.Errorf("second Close: %w", err)
		}
		_, serr := r.Snapshot()
		for _, err := range []error{Protect(r, 0, &x), r.Checkpoint(1, 1), r.Recover(), r.Finalize(), serr} {
			if !errors.Is(err, ErrClosed) {
				return fmt.Errorf("after Close: %v", err)
			}
		}
		return nil
	}))
}
