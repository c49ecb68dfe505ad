package comm_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/commtest"
)

// TestAllreduceRankOrder checks the documented order of the in-process
// float sum, ((v0 + v1) + v2) + v3, with values whose sum depends on the
// order: 1e16 + 1 rounds back to 1e16 (its spacing is 2), so rank order
// gives 1 where, e.g., (v0 + v2) + (v1 + v3) would give 2. The native
// reduction and the fallback agree, on every rank, every time.
func TestAllreduceRankOrder(t *testing.T) {
	vals := []float64{1e16, 1, -1e16, 1}
	want := ((vals[0] + vals[1]) + vals[2]) + vals[3]
	require.Equal(t, 1.0, want)
	for _, wrap := range []struct {
		name string
		fn   func(comm.Comm) comm.Comm
	}{{"native", func(c comm.Comm) comm.Comm { return c }}, {"fallback", commtest.BytesOnly}} {
		t.Run(wrap.name, func(t *testing.T) {
			for range 20 {
				err := comm.Run(4, func(c comm.Comm) error {
					got, err := comm.AllreduceValue(wrap.fn(c), vals[c.Rank()], comm.Sum)
					if err == nil && got != want {
						return fmt.Errorf("rank %d: sum %v, want %v", c.Rank(), got, want)
					}
					return err
				}, comm.WithTimeout(10*time.Second))
				require.NoError(t, err)
			}
		})
	}
}

// TestAllreduceMinMaxEdges pins the in-process treatment of NaN and signed
// zeros: Go's min and max.
func TestAllreduceMinMaxEdges(t *testing.T) {
	negZero := math.Copysign(0, -1)
	err := comm.Run(2, func(c comm.Comm) error {
		v := []float64{0, math.NaN(), 3}
		if c.Rank() == 1 {
			v = []float64{negZero, 1, 2}
		}
		lo, hi := make([]float64, 3), make([]float64, 3)
		if err := comm.Allreduce(c, v, lo, comm.Min); err != nil {
			return err
		}
		if err := comm.Allreduce(c, v, hi, comm.Max); err != nil {
			return err
		}
		assert.True(t, math.Signbit(lo[0]), "min(+0, -0) is -0")
		assert.False(t, math.Signbit(hi[0]), "max(+0, -0) is +0")
		assert.True(t, math.IsNaN(lo[1]) && math.IsNaN(hi[1]), "NaN wins")
		assert.Equal(t, []float64{2, 3}, []float64{lo[2], hi[2]})
		return nil
	}, comm.WithTimeout(10*time.Second))
	require.NoError(t, err)
}

// TestTypedOnAbortedWorld: every typed call on an aborted world returns
// ErrAborted at once, natively and through the fallbacks.
func TestTypedOnAbortedWorld(t *testing.T) {
	comms := comm.NewWorld(2)
	require.NoError(t, comms[1].(comm.Aborter).Abort(7))
	for _, c := range []comm.Comm{comms[0], commtest.BytesOnly(comms[0])} {
		v := []float64{1}
		assert.ErrorIs(t, comm.Allreduce(c, v, v, comm.Max), comm.ErrAborted)
		assert.ErrorIs(t, comm.Gather(c, 0, v, make([]float64, 2)), comm.ErrAborted)
		assert.ErrorIs(t, comm.Allgather(c, v, make([]float64, 2)), comm.ErrAborted)
		assert.ErrorIs(t, comm.Scatter(c, 0, make([]float64, 2), v), comm.ErrAborted)
		s, err := comm.Isend(c, 1, 0, v)
		if err == nil { // the fallback records the send and fails at Wait
			_, err = s.Wait()
		}
		assert.ErrorIs(t, err, comm.ErrAborted)
		r, err := comm.Irecv(c, 1, 0, v)
		if err == nil {
			err = comm.WaitAll(r)
		}
		assert.ErrorIs(t, err, comm.ErrAborted)
		assert.Contains(t, err.Error(), "rank 1 called Abort(7)")
	}
}

// TestRequestAbortedWhilePosted: a request posted before the abort
// completes with ErrAborted through Test, and its message is withdrawn.
func TestRequestAbortedWhilePosted(t *testing.T) {
	comms := comm.NewWorld(2)
	r, err := comm.Irecv(comms[0], 1, 0, make([]byte, 4))
	require.NoError(t, err)
	done, _, err := r.Test()
	require.False(t, done)
	require.NoError(t, err)
	require.NoError(t, comms[1].(comm.Aborter).Abort(1))
	done, _, err = r.Test()
	assert.True(t, done)
	assert.ErrorIs(t, err, comm.ErrAborted)
	_, err2 := r.Wait()
	assert.Equal(t, err, err2, "Wait after completion returns the same")
}

// TestRequestWatchdog: a receive that nobody sends trips the watchdog
// instead of hanging.
func TestRequestWatchdog(t *testing.T) {
	start := time.Now()
	err := comm.Run(2, func(c comm.Comm) error {
		if c.Rank() == 1 {
			return c.Barrier() // woken by the abort the watchdog causes
		}
		r, err := comm.Irecv(c, 1, 0, make([]float64, 1))
		if err != nil {
			return err
		}
		_, err = r.Wait()
		assert.ErrorIs(t, err, comm.ErrTimeout)
		return err
	}, comm.WithTimeout(200*time.Millisecond))
	assert.ErrorIs(t, err, comm.ErrTimeout)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestTypedOnClosedSubCommunicator(t *testing.T) {
	err := comm.Run(2, func(c comm.Comm) error {
		sub, err := c.Split(0, 0)
		if err != nil {
			return err
		}
		require.NoError(t, sub.Close())
		v := []int64{1}
		assert.ErrorIs(t, comm.Allreduce(sub, v, v, comm.Sum), comm.ErrClosed)
		assert.ErrorIs(t, comm.Gather(sub, 0, v, make([]int64, 2)), comm.ErrClosed)
		_, err = comm.Isend(sub, 0, 0, v)
		assert.ErrorIs(t, err, comm.ErrClosed)
		_, err = comm.Irecv(sub, 0, 0, v)
		assert.ErrorIs(t, err, comm.ErrClosed)
		return nil
	}, comm.WithTimeout(10*time.Second))
	require.NoError(t, err)
}

// TestWaitAllPartialMessage: a typed receive of a message that is not whole
// elements is refused with ErrBadArgument.
func TestWaitAllPartialMessage(t *testing.T) {
	err := comm.Run(2, func(c comm.Comm) error {
		if c.Rank() == 0 {
			return c.Send(1, 0, make([]byte, 12))
		}
		r, err := comm.Irecv(c, 0, 0, make([]float64, 4))
		if err != nil {
			return err
		}
		err = comm.WaitAll(r)
		assert.ErrorIs(t, err, comm.ErrBadArgument)
		assert.ErrorContains(t, err, "request 0: comm: bad argument: a 12-byte message is not whole 8-byte elements")
		return nil
	}, comm.WithTimeout(10*time.Second))
	require.NoError(t, err)
}
