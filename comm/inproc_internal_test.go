package comm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCancelledRound checks the rule that keeps collective buffers safe on
// an aborted world: a rank that gives up waiting cancels the round, and a
// rank arriving after that (it passed its entry check just before the
// abort) gets ErrAborted instead of a result that would read the first
// rank's buffer.
func TestCancelledRound(t *testing.T) {
	comms := NewWorld(2)
	p0, p1 := comms[0].(*proc), comms[1].(*proc)
	done := make(chan error, 1)
	go func() { done <- p0.Allgather([]byte{1}, make([]byte, 2)) }()
	// Wait until rank 0 has arrived.
	require.Eventually(t, func() bool {
		p0.g.mu.Lock()
		defer p0.g.mu.Unlock()
		return p0.g.cur.Load().count() == 1
	}, 5*time.Second, time.Millisecond)
	r := p0.g.cur.Load()
	require.NoError(t, p1.Abort(1))
	err := <-done
	assert.ErrorIs(t, err, ErrAborted)
	p0.g.mu.Lock()
	assert.True(t, r.cancelled)
	assert.False(t, r.computed)
	p0.g.mu.Unlock()

	// Rank 1 arrives late, as if it had passed its entry check just before
	// the abort.
	r1, last := p1.g.arrive(1, contrib{op: "Allgather", v: gatherArg{[]byte{2}, 2}}, func([]contrib) any {
		t.Error("a cancelled round was computed")
		return nil
	})
	require.True(t, last)
	require.Same(t, r, r1)
	outErr, ok := r1.out.(error)
	require.True(t, ok, "result %v", r1.out)
	assert.ErrorIs(t, outErr, ErrAborted)
	assert.Contains(t, outErr.Error(), "rank 1 called Abort(1)")
}
