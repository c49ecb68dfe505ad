package ckpt

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// TestSnapshotCopyOverlapsVote: in snapshot mode a rank copies its data
// into staging while the call's reduction waits for the other ranks.
// Rank 1 enters Checkpoint only once rank 0's copy is done, which can
// happen only if rank 0 copies before the reduction completes (rank 1
// gives up after 10 s, so a copy that waited for the vote fails the
// test instead of hanging it). The checkpoint then restores the values
// at the call on both ranks.
func TestSnapshotCopyOverlapsVote(t *testing.T) {
	for _, dcp := range []bool{false, true} {
		t.Run(fmt.Sprintf("dcp=%v", dcp), func(t *testing.T) {
			cfg := snapConfig(dcp)
			level := 2
			if dcp {
				level += dcpLevelOffset
			}
			core := vfd.NewCore()
			done := make(chan struct{})
			var once sync.Once
			waited := make([]bool, 2)
			times := make([]CheckpointTimes, 2)
			require.NoError(t, comm.Run(2, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
				if err != nil {
					return err
				}
				x := make([]uint64, 1<<14)
				for i := range x {
					x[i] = uint64(c.Rank())<<32 | uint64(i)
				}
				if err := Protect(r, 0, &x); err != nil {
					return err
				}
				if c.Rank() == 0 {
					r.scopy.copied = func() { once.Do(func() { close(done) }) }
				} else {
					select {
					case <-done:
						waited[1] = true
					case <-time.After(10 * time.Second):
					}
				}
				if err := r.Checkpoint(1, level); err != nil {
					return err
				}
				for i := range x {
					x[i] = 0xdead // after the call: never in the checkpoint
				}
				if err := r.CheckpointWait(); err != nil {
					return err
				}
				times[c.Rank()] = r.CheckpointTimes()
				return r.Close() // killed: the checkpoint stays
			}))
			assert.True(t, waited[1], "rank 0 copied before the vote completed")
			for rank, tm := range times {
				assert.Equal(t, int64(1), tm.ID, "rank %d", rank)
				assert.LessOrEqual(t, tm.Copy, tm.Blocked, "rank %d: the copy is part of the blocked time", rank)
			}
			require.NoError(t, comm.Run(2, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithDriver(core), WithLogger(zap.NewNop()))
				if err != nil {
					return err
				}
				defer r.Close()
				if r.Status() != Restart {
					return fmt.Errorf("rank %d: status %v, want a restart", c.Rank(), r.Status())
				}
				x := make([]uint64, 1<<14)
				if err := Protect(r, 0, &x); err != nil {
					return err
				}
				if err := r.Recover(); err != nil {
					return err
				}
				for i, v := range x {
					if want := uint64(c.Rank())<<32 | uint64(i); v != want {
						return fmt.Errorf("rank %d: x[%d] = %#x, want %#x", c.Rank(), i, v, want)
					}
				}
				return nil
			}))
		})
	}
}
