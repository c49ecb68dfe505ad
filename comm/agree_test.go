package comm_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
)

var errLocal = errors.New("local trouble")

// TestAgree runs Agree on four in-process ranks with different sets of
// failing ranks. Every rank must return the same message. A failing
// rank's error must wrap its own; the others' must not. Success must
// cost one reduction and nothing else; a failure only a few fixed-size
// collectives and, on ranks but 0, a fixed number of bytes.
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
			counts := make([]comm.Counts, n)
			require.NoError(t, comm.Run(n, func(c comm.Comm) error {
				errs[c.Rank()] = comm.Agree(c, tc.fail[c.Rank()], "save")
				counts[c.Rank()] = comm.CountsOf(c)
				return nil
			}, comm.WithTimeout(10*time.Second)))
			if !tc.gathers {
				for r, err := range errs {
					assert.NoError(t, err, "rank %d", r)
					assert.Equal(t, comm.Counts{Sent: 1, Received: 1, BytesSent: 8, BytesReceived: 8, Collectives: 1}, counts[r],
						"rank %d: one reduction", r)
				}
				return
			}
			for r, err := range errs {
				// The vote, the gather of lengths and messages to rank 0,
				// the broadcast of the summary's length and bytes.
				assert.EqualValues(t, 5, counts[r].Collectives, "rank %d", r)
				if r != 0 {
					assert.LessOrEqual(t, counts[r].BytesReceived, int64(8+8+len(tc.msg)), "rank %d", r)
				}
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

// TestAgreeManyFailures: when every one of 100 ranks fails, the list of
// failing ranks travels as one run, so a rank other than 0 receives a
// few dozen bytes; the message abbreviates the list, Ranks holds it all.
func TestAgreeManyFailures(t *testing.T) {
	const n = 100
	errs := make([]error, n)
	counts := make([]comm.Counts, n)
	require.NoError(t, comm.Run(n, func(c comm.Comm) error {
		errs[c.Rank()] = comm.Agree(c, fmt.Errorf("rank %d: %w", c.Rank(), errLocal), "save")
		counts[c.Rank()] = comm.CountsOf(c)
		return nil
	}, comm.WithTimeout(20*time.Second)))
	want := "save failed on 100 ranks (0, 1, 2, 3, 4, 5, 6, 7 and 92 more); rank 0: rank 0: local trouble"
	for r, err := range errs {
		var ae *comm.AgreedError
		require.ErrorAs(t, err, &ae, "rank %d", r)
		assert.Equal(t, want, ae.Msg, "rank %d", r)
		assert.Len(t, ae.Ranks, n, "rank %d", r)
		assert.Equal(t, n-1, ae.Ranks[n-1], "rank %d", r)
		assert.ErrorIs(t, err, errLocal, "rank %d", r)
		if r != 0 {
			assert.LessOrEqual(t, counts[r].BytesReceived, int64(64), "rank %d", r)
		}
	}
	assert.GreaterOrEqual(t, counts[0].BytesReceived, int64((n-1)*len("rank 99: local trouble")-n*2), "rank 0 gathers the messages")
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
