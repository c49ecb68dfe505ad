package comm_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/commtest"
)

func TestConformance(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 8} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			err := comm.Run(n, func(c comm.Comm) error {
				commtest.Run(t, c)
				return nil
			}, comm.WithTimeout(20*time.Second))
			require.NoError(t, err)
		})
	}
}

// TestConformanceBytesOnly runs the suite with the typed capabilities
// hidden, so the typed operations take their fallbacks on the byte
// operations.
func TestConformanceBytesOnly(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			err := comm.Run(n, func(c comm.Comm) error {
				commtest.Run(t, commtest.BytesOnly(c))
				return nil
			}, comm.WithTimeout(20*time.Second))
			require.NoError(t, err)
		})
	}
}

func TestConformanceNewWorld(t *testing.T) {
	comms := comm.NewWorld(3, comm.WithTimeout(20*time.Second))
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			commtest.Run(t, c)
		}()
	}
	wg.Wait()
}

func TestRunBadSize(t *testing.T) {
	for _, n := range []int{0, -1} {
		err := comm.Run(n, func(comm.Comm) error { return nil })
		assert.ErrorIs(t, err, comm.ErrBadArgument, "n=%d", n)
	}
}

var errBoom = errors.New("boom")

// failureCase describes where the failing rank fails and what the others do.
type failureCase struct {
	name string
	// others runs on the surviving ranks and must block until the world aborts.
	others func(c comm.Comm) error
	// sub makes the survivors block inside a sub-communicator.
	sub bool
}

var failureCases = []failureCase{
	{name: "Barrier", others: func(c comm.Comm) error { return c.Barrier() }},
	{name: "Allgather", others: func(c comm.Comm) error {
		return c.Allgather(make([]byte, 4), make([]byte, 4*c.Size()))
	}},
	{name: "Bcast", others: func(c comm.Comm) error { return c.Bcast(0, make([]byte, 8)) }},
	{name: "Allreduce", others: func(c comm.Comm) error {
		_, err := c.AllreduceInt64(1, comm.Min)
		return err
	}},
	{name: "Split", others: func(c comm.Comm) error {
		_, err := c.Split(0, 0)
		return err
	}},
	{name: "Sendrecv", others: func(c comm.Comm) error {
		// An exchange with the failing rank, which never joins.
		_, err := c.Sendrecv(make([]byte, 1<<16), 0, 0, make([]byte, 1<<16), 0, 0)
		return err
	}},
	{name: "Recv", others: func(c comm.Comm) error {
		_, err := c.Recv(0, 0, make([]byte, 8))
		return err
	}},
	{name: "Send", others: func(c comm.Comm) error { return c.Send(0, 0, make([]byte, 8)) }},
	{name: "Send to self", others: func(c comm.Comm) error { return c.Send(c.Rank(), 0, make([]byte, 8)) }},
	{name: "typed Allreduce", others: func(c comm.Comm) error {
		v := make([]float64, 100)
		return comm.Allreduce(c, v, v, comm.Sum)
	}},
	{name: "Gather", others: func(c comm.Comm) error {
		return comm.Gather(c, 1, make([]float64, 3), make([]float64, 3*c.Size()))
	}},
	{name: "Allgather typed", others: func(c comm.Comm) error {
		return comm.Allgather(c, make([]int64, 3), make([]int64, 3*c.Size()))
	}},
	{name: "Scatter", others: func(c comm.Comm) error {
		return comm.Scatter(c, 1, make([]float64, 3*c.Size()), make([]float64, 3))
	}},
	{name: "Wait on Irecv", others: func(c comm.Comm) error {
		r, err := comm.Irecv(c, 0, 0, make([]float64, 8))
		if err != nil {
			return err
		}
		_, err = r.Wait()
		return err
	}},
	{name: "WaitAll on Isend and Irecv", others: func(c comm.Comm) error {
		s, err1 := comm.Isend(c, 0, 0, make([]float64, 8))
		r, err2 := comm.Irecv(c, 0, 0, make([]float64, 8))
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		return comm.WaitAll(s, r)
	}},
	{name: "Test loop", others: func(c comm.Comm) error {
		r, err := comm.Irecv(c, 0, 0, make([]byte, 8))
		if err != nil {
			return err
		}
		for {
			if done, _, err := r.Test(); done {
				return err
			}
			time.Sleep(time.Millisecond)
		}
	}},
	{name: "typed Allreduce fallback", others: func(c comm.Comm) error {
		v := make([]float64, 100)
		return comm.Allreduce(commtest.BytesOnly(c), v, v, comm.Sum)
	}},
	{name: "Gather fallback", others: func(c comm.Comm) error {
		return comm.Gather(commtest.BytesOnly(c), 1, make([]float64, 3), make([]float64, 3*c.Size()))
	}},
	{name: "Scatter fallback", others: func(c comm.Comm) error {
		return comm.Scatter(commtest.BytesOnly(c), 1, make([]float64, 3*c.Size()), make([]float64, 3))
	}},
	{name: "WaitAll fallback", others: func(c comm.Comm) error {
		b := commtest.BytesOnly(c)
		s, err1 := comm.Isend(b, 0, 0, make([]float64, 8))
		r, err2 := comm.Irecv(b, 0, 0, make([]float64, 8))
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		return comm.WaitAll(s, r)
	}},
	{name: "Barrier in sub-communicator", sub: true, others: func(c comm.Comm) error { return c.Barrier() }},
	{name: "Sendrecv in sub-communicator", sub: true, others: func(c comm.Comm) error {
		_, err := c.Sendrecv([]byte{1}, 0, 0, make([]byte, 1), 0, 0)
		return err
	}},
}

// TestRankFailureUnblocksOthers fails rank 0 (by error, panic or Abort)
// while the other ranks are blocked in a call, and checks that every other
// rank wakes with ErrAborted within a second and Run returns the cause.
func TestRankFailureUnblocksOthers(t *testing.T) {
	failures := []struct {
		name  string
		fail  func(c comm.Comm) error
		check func(t *testing.T, err error)
	}{
		{"error", func(comm.Comm) error { return errBoom }, func(t *testing.T, err error) {
			assert.ErrorIs(t, err, errBoom)
			assert.Contains(t, err.Error(), "rank 0")
		}},
		{"panic", func(comm.Comm) error { panic("kaboom") }, func(t *testing.T, err error) {
			var pe *comm.PanicError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, 0, pe.Rank)
			assert.Equal(t, "kaboom", pe.Value)
			assert.Contains(t, string(pe.Stack), "inproc_test.go")
			assert.Contains(t, err.Error(), "rank 0 panicked: kaboom")
		}},
		{"panic with error", func(comm.Comm) error { panic(errBoom) }, func(t *testing.T, err error) {
			var pe *comm.PanicError
			require.ErrorAs(t, err, &pe)
			assert.ErrorIs(t, err, errBoom)
		}},
		{"Abort", func(c comm.Comm) error {
			return c.(comm.Aborter).Abort(3)
		}, func(t *testing.T, err error) {
			assert.ErrorIs(t, err, comm.ErrAborted)
			assert.Contains(t, err.Error(), "rank 0 called Abort(3)")
		}},
	}
	for _, f := range failures {
		for _, fc := range failureCases {
			t.Run(f.name+"/"+fc.name, func(t *testing.T) {
				const n = 4
				var mu sync.Mutex
				woke := map[int]time.Duration{}
				errs := map[int]error{}
				var failedAt time.Time
				err := comm.Run(n, func(c comm.Comm) error {
					failing := c.Rank() == 0
					if fc.sub {
						// Everyone moves to a sub-communicator (same order)
						// and, for depth, a sub-communicator of that.
						sub, err := c.Split(0, 0)
						if err != nil {
							return err
						}
						if c, err = sub.Split(1, 0); err != nil {
							return err
						}
					}
					if failing {
						time.Sleep(50 * time.Millisecond) // let the others block
						mu.Lock()
						failedAt = time.Now()
						mu.Unlock()
						return f.fail(c)
					}
					err := fc.others(c)
					mu.Lock()
					woke[len(woke)] = time.Since(failedAt)
					errs[len(errs)] = err
					mu.Unlock()
					return err
				}, comm.WithTimeout(10*time.Second))
				require.Error(t, err)
				f.check(t, err)
				require.Len(t, errs, n-1)
				for i, e := range errs {
					assert.ErrorIs(t, e, comm.ErrAborted, "survivor %d", i)
					assert.NotErrorIs(t, e, comm.ErrTimeout, "survivor %d", i)
					assert.Less(t, woke[i], time.Second, "survivor %d woke late", i)
				}
			})
		}
	}
}

// TestFailureMidCollective fails a rank between two collectives while the
// others are already inside the second one.
func TestFailureMidCollective(t *testing.T) {
	start := time.Now()
	err := comm.Run(8, func(c comm.Comm) error {
		for i := range 5 {
			if c.Rank() == 5 && i == 3 {
				return fmt.Errorf("step %d: %w", i, errBoom)
			}
			if _, err := c.AllreduceInt64(int64(i), comm.Sum); err != nil {
				if !errors.Is(err, comm.ErrAborted) {
					return fmt.Errorf("want ErrAborted, got %w", err)
				}
				return err
			}
		}
		return nil
	}, comm.WithTimeout(10*time.Second))
	assert.ErrorIs(t, err, errBoom)
	assert.Contains(t, err.Error(), "rank 5: step 3: boom")
	assert.Less(t, time.Since(start), time.Second)
}

func TestCallsAfterAbortFail(t *testing.T) {
	comms := comm.NewWorld(2)
	require.NoError(t, comms[1].(comm.Aborter).Abort(7))
	for _, c := range comms {
		assert.ErrorIs(t, c.Barrier(), comm.ErrAborted)
		assert.ErrorIs(t, c.Send(0, 0, nil), comm.ErrAborted)
		_, err := c.Recv(0, 0, nil)
		assert.ErrorIs(t, err, comm.ErrAborted)
		_, err = c.Split(0, 0)
		assert.ErrorIs(t, err, comm.ErrAborted)
	}
}

func TestWatchdog(t *testing.T) {
	tests := []struct {
		name string
		fn   func(c comm.Comm) error
	}{
		{"both Send first", func(c comm.Comm) error {
			// Synchronous sends: this deadlocks like MPI_Ssend would.
			if err := c.Send(1-c.Rank(), 0, []byte{1}); err != nil {
				return err
			}
			_, err := c.Recv(1-c.Rank(), 0, make([]byte, 1))
			return err
		}},
		{"missing Barrier", func(c comm.Comm) error {
			if c.Rank() == 0 {
				return c.Barrier()
			}
			time.Sleep(300 * time.Millisecond)
			return nil
		}},
		{"wrong tag", func(c comm.Comm) error {
			_, err := c.Sendrecv([]byte{1}, 1-c.Rank(), c.Rank(), make([]byte, 1), 1-c.Rank(), c.Rank())
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := comm.Run(2, tc.fn, comm.WithTimeout(100*time.Millisecond))
			assert.ErrorIs(t, err, comm.ErrTimeout)
			assert.Less(t, time.Since(start), 3*time.Second)
		})
	}
}

func TestCollectiveMismatch(t *testing.T) {
	var errs [2]error
	err := comm.Run(2, func(c comm.Comm) error {
		if c.Rank() == 0 {
			errs[0] = c.Barrier()
		} else {
			_, errs[1] = c.AllreduceInt64(1, comm.Sum)
		}
		return nil
	}, comm.WithTimeout(5*time.Second))
	require.NoError(t, err)
	for i, e := range errs {
		assert.ErrorIs(t, e, comm.ErrBadArgument, "rank %d", i)
		assert.Contains(t, e.Error(), "collective mismatch", "rank %d", i)
	}
}

func TestMismatchedLengths(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	err := comm.Run(3, func(c comm.Comm) error {
		n := 4
		if c.Rank() == 2 {
			n = 5
		}
		e1 := c.Bcast(0, make([]byte, n))
		e2 := c.Allgather(make([]byte, n), make([]byte, 3*n))
		mu.Lock()
		errs = append(errs, e1, e2)
		mu.Unlock()
		return c.Barrier()
	}, comm.WithTimeout(5*time.Second))
	require.NoError(t, err)
	require.Len(t, errs, 6)
	for _, e := range errs {
		assert.ErrorIs(t, e, comm.ErrBadArgument)
		assert.Contains(t, e.Error(), "rank 2")
	}
}

func TestTruncatedKeepsPrefix(t *testing.T) {
	err := comm.Run(2, func(c comm.Comm) error {
		if c.Rank() == 0 {
			return c.Send(1, 0, []byte("hello world"))
		}
		buf := make([]byte, 5)
		n, err := c.Recv(0, 0, buf)
		assert.ErrorIs(t, err, comm.ErrTruncated)
		assert.Contains(t, err.Error(), "11-byte message from rank 0 tag 0 into a 5-byte buffer")
		assert.Equal(t, 5, n)
		assert.Equal(t, "hello", string(buf))
		return nil
	}, comm.WithTimeout(5*time.Second))
	require.NoError(t, err)
}

func TestNodeID(t *testing.T) {
	tests := []struct {
		opts []comm.Option
		want [][]int
	}{
		{nil, [][]int{{0}, {1}, {2}, {3}, {4}}},
		{[]comm.Option{comm.WithNodeSize(2)}, [][]int{{0, 1}, {2, 3}, {4}}},
		{[]comm.Option{comm.WithNodeSize(5)}, [][]int{{0, 1, 2, 3, 4}}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.want), func(t *testing.T) {
			err := comm.Run(5, func(c comm.Comm) error {
				nodes, mine, err := comm.NodeMap(c, nil)
				if err != nil {
					return err
				}
				if fmt.Sprint(nodes) != fmt.Sprint(tc.want) {
					return fmt.Errorf("nodes %v, want %v", nodes, tc.want)
				}
				if !containsInt(nodes[mine], c.Rank()) {
					return fmt.Errorf("rank %d not on node %d", c.Rank(), mine)
				}
				// A sub-communicator keeps the world's node names.
				sub, err := c.Split(c.Rank()%2, 0)
				if err != nil {
					return err
				}
				defer sub.Close()
				want := c.(comm.NodeIDer).NodeID()
				if got := sub.(comm.NodeIDer).NodeID(); got != want {
					return fmt.Errorf("sub NodeID %q, want %q", got, want)
				}
				return nil
			}, append(tc.opts, comm.WithTimeout(5*time.Second))...)
			require.NoError(t, err)
		})
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestChunkedTruncated(t *testing.T) {
	err := comm.Run(2, func(c comm.Comm) error {
		send := make([]byte, 100)
		recv := make([]byte, 10)
		if c.Rank() == 1 {
			recv = make([]byte, 200)
		}
		_, err := comm.SendrecvChunked(c, send, 1-c.Rank(), recv, 1-c.Rank(), 0, 16)
		if c.Rank() == 0 {
			assert.ErrorIs(t, err, comm.ErrTruncated)
			assert.Contains(t, err.Error(), "100-byte chunked transfer from rank 1 into a 10-byte buffer")
			return err // rank 1 is left waiting: the failure must abort it
		}
		assert.ErrorIs(t, err, comm.ErrAborted)
		return nil
	}, comm.WithTimeout(5*time.Second))
	assert.ErrorIs(t, err, comm.ErrTruncated)
}

func TestOpString(t *testing.T) {
	assert.Equal(t, "min", comm.Min.String())
	assert.Equal(t, "max", comm.Max.String())
	assert.Equal(t, "sum", comm.Sum.String())
	assert.Equal(t, "op(9)", comm.Op(9).String())
}

func TestLoggerRecordsAbort(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	err := comm.Run(2, func(c comm.Comm) error {
		if c.Rank() == 1 {
			return errBoom
		}
		return c.Barrier()
	}, comm.WithLogger(zap.New(core)), comm.WithTimeout(5*time.Second))
	require.ErrorIs(t, err, errBoom)
	entries := logs.All()
	require.Len(t, entries, 1)
	assert.Equal(t, "in-process world aborted", entries[0].Message)
	assert.Contains(t, entries[0].ContextMap()["error"], "rank 1: boom")
}

func TestGoexitRankAborts(t *testing.T) {
	start := time.Now()
	var survivor error
	err := comm.Run(2, func(c comm.Comm) error {
		if c.Rank() == 0 {
			runtime.Goexit() // what t.FailNow does on a rank goroutine
		}
		survivor = c.Barrier()
		return nil
	})
	assert.ErrorIs(t, err, comm.ErrAborted)
	assert.ErrorContains(t, err, "rank 0 exited through runtime.Goexit")
	assert.ErrorIs(t, survivor, comm.ErrAborted)
	assert.Less(t, time.Since(start), time.Second)
	assert.Nil(t, comm.NewWorld(0))
}
