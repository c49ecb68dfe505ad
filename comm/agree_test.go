package comm_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
)

// counting counts the collectives a rank makes.
type counting struct {
	comm.Comm
	reduces, gathers *atomic.Int64
}

func (c counting) AllreduceInt64(v int64, op comm.Op) (int64, error) {
	c.reduces.Add(1)
	return c.Comm.AllreduceInt64(v, op)
}

func (c counting) Allgather(send, recv []byte) error {
	c.gathers.Add(1)
	return c.Comm.Allgather(send, recv)
}

var errLocal = errors.New("local trouble")

// TestAgree runs Agree on four in-process ranks with different sets of
// failing ranks. Every rank must return the same message. A failing
// rank's error must wrap its own; the others' must not. Success must
// cost one reduction and no gather.
func TestAgree(t *testing.T) {
	tests := []struct {
		name    string
		fail    map[int]error
		msg     string
		ranks   []int
		gathers bool
	}{
		{"all succeed", nil, "", nil, false},
		{"one fails", map[int]error{2: fmt.Errorf("disk full: %w", errLocal)}, "save failed on rank 2: disk full: local trouble", []int{2}, true},
		{"several fail", map[int]error{3: errors.New("late"), 1: fmt.Errorf("first: %w", errLocal)},
			"save failed on 2 ranks (1, 3); rank 1: first: local trouble", []int{1, 3}, true},
		{"empty message", map[int]error{0: errors.New("")}, "save failed on rank 0: ", []int{0}, true},
		{"every rank, one line", map[int]error{0: errors.Join(errors.New("a"), errors.New("b")), 1: errLocal, 2: errLocal, 3: errLocal},
			"save failed on 4 ranks (0, 1, 2, 3); rank 0: a; b", []int{0, 1, 2, 3}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const n = 4
			errs := make([]error, n)
			var reduces, gathers atomic.Int64
			require.NoError(t, comm.Run(n, func(c comm.Comm) error {
				errs[c.Rank()] = comm.Agree(counting{c, &reduces, &gathers}, tc.fail[c.Rank()], "save")
				return nil
			}, comm.WithTimeout(10*time.Second)))
			assert.EqualValues(t, n, reduces.Load(), "one reduction per rank")
			if !tc.gathers {
				assert.Zero(t, gathers.Load(), "no gather on success")
				for r, err := range errs {
					assert.NoError(t, err, "rank %d", r)
				}
				return
			}
			assert.Positive(t, gathers.Load())
			for r, err := range errs {
				require.Error(t, err, "rank %d", r)
				assert.Equal(t, tc.msg, err.Error(), "rank %d", r)
				var ae *comm.AgreedError
				require.ErrorAs(t, err, &ae, "rank %d", r)
				assert.Equal(t, tc.ranks, ae.Ranks, "rank %d", r)
				local := tc.fail[r]
				assert.Equal(t, local, ae.Local, "rank %d", r)
				assert.Equal(t, local, errors.Unwrap(err), "rank %d", r)
				wrapsSentinel := local != nil && errors.Is(local, errLocal)
				assert.Equal(t, wrapsSentinel, errors.Is(err, errLocal), "rank %d: errors.Is through the agreed error", r)
			}
		})
	}
}

// TestAgreeBrokenWorld makes rank 0 fail before the vote: the world
// aborts, and the others' Agree returns the abort joined to their own
// error.
func TestAgreeBrokenWorld(t *testing.T) {
	errs := make([]error, 3)
	cause := errors.New("rank 0 gives up")
	err := comm.Run(3, func(c comm.Comm) error {
		if c.Rank() == 0 {
			return cause
		}
		var local error
		if c.Rank() == 2 {
			local = errLocal
		}
		errs[c.Rank()] = comm.Agree(c, local, "save")
		return nil
	}, comm.WithTimeout(10*time.Second))
	require.ErrorIs(t, err, cause)
	for r := 1; r < 3; r++ {
		assert.ErrorIs(t, errs[r], comm.ErrAborted, "rank %d", r)
		assert.ErrorContains(t, errs[r], "vote after save", "rank %d", r)
		var ae *comm.AgreedError
		assert.False(t, errors.As(errs[r], &ae), "rank %d: no agreement was reached", r)
	}
	assert.ErrorIs(t, errs[2], errLocal, "the local error survives a broken vote")
	assert.NotErrorIs(t, errs[1], errLocal)
}

// TestAgreeManyRanks: a failure on every rank of a large world stays one
// short line: the first ranks are listed, the others counted.
func TestAgreeManyRanks(t *testing.T) {
	const n = 64
	errs := make([]error, n)
	require.NoError(t, comm.Run(n, func(c comm.Comm) error {
		errs[c.Rank()] = comm.Agree(c, fmt.Errorf("disk full on rank %d", c.Rank()), "write")
		return nil
	}, comm.WithTimeout(10*time.Second)))
	for r, err := range errs {
		assert.Equal(t, "write failed on 64 ranks (0, 1, 2, 3, 4, 5, 6, 7 and 56 more); rank 0: disk full on rank 0", err.Error(), "rank %d", r)
	}
}

// TestAbortedOneLine: a rank that panicked aborts the world; the other
// ranks' error says which rank and why in one line, with one "comm:",
// and still matches ErrAborted and the cause.
func TestAbortedOneLine(t *testing.T) {
	errs := make([]error, 3)
	err := comm.Run(3, func(c comm.Comm) error {
		if c.Rank() == 2 {
			panic("boom")
		}
		errs[c.Rank()] = c.Barrier()
		return nil
	}, comm.WithTimeout(10*time.Second))
	require.Error(t, err)
	for r := range 2 {
		require.ErrorIs(t, errs[r], comm.ErrAborted, "rank %d", r)
		var pe *comm.PanicError
		require.ErrorAs(t, errs[r], &pe, "rank %d", r)
		assert.Equal(t, "comm: world aborted: rank 2 panicked: boom", errs[r].Error(), "rank %d", r)
	}
}
