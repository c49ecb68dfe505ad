package comm_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/commtest"
)

// runMux starts an in-process world of len(counts) processes, process p
// hosting counts[p] virtual ranks, and runs fn on every virtual rank.
func runMux(t *testing.T, counts []int, fn func(v comm.Comm) error, opts ...comm.Option) error {
	t.Helper()
	return comm.Run(len(counts), func(c comm.Comm) error {
		m, err := comm.NewMux(c, counts[c.Rank()])
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		errs := make([]error, len(m.Comms()))
		for i, v := range m.Comms() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = fn(v)
			}()
		}
		wg.Wait()
		return errors.Join(errors.Join(errs...), m.Close())
	}, append([]comm.Option{comm.WithTimeout(2 * time.Minute)}, opts...)...)
}

func TestMuxConformance(t *testing.T) {
	for _, counts := range [][]int{{1}, {3}, {1, 1}, {2, 2}, {3, 1, 2}, {0, 2, 1}} {
		t.Run(fmt.Sprint(counts), func(t *testing.T) {
			require.NoError(t, runMux(t, counts, func(v comm.Comm) error {
				commtest.Run(t, v)
				commtest.Run(t, commtest.BytesOnly(v))
				return nil
			}))
		})
	}
}

func TestMuxLayout(t *testing.T) {
	err := comm.Run(3, func(c comm.Comm) error {
		m, err := comm.NewMux(c, c.Rank()+1) // 1, 2, 3 virtual ranks
		if err != nil {
			return err
		}
		defer m.Close()
		if m.Size() != 6 {
			return fmt.Errorf("size %d", m.Size())
		}
		base := map[int]int{0: 0, 1: 1, 2: 3}[c.Rank()]
		for i, v := range m.Comms() {
			if v.Rank() != base+i || v.Size() != 6 || m.Host(v.Rank()) != c.Rank() {
				return fmt.Errorf("process %d: virtual %d of %d hosted by %d", c.Rank(), v.Rank(), v.Size(), m.Host(v.Rank()))
			}
		}
		return nil
	})
	require.NoError(t, err)
}

func TestMuxNodeID(t *testing.T) {
	require.NoError(t, runMux(t, []int{2, 2, 1, 1}, func(v comm.Comm) error {
		nodes, me, err := comm.NodeMap(v, nil)
		if err != nil {
			return err
		}
		// Processes 0,1 on node 0 and 2,3 on node 1 (node size 2).
		want := [][]int{{0, 1, 2, 3}, {4, 5}}
		if fmt.Sprint(nodes) != fmt.Sprint(want) || me != v.Rank()/4 {
			return fmt.Errorf("virtual %d: nodes %v, mine %d", v.Rank(), nodes, me)
		}
		return nil
	}, comm.WithNodeSize(2)))
}

func TestMuxErrors(t *testing.T) {
	err := comm.Run(2, func(c comm.Comm) error {
		_, err := comm.NewMux(c, 0)
		return err
	})
	assert.ErrorIs(t, err, comm.ErrBadArgument)
	_, err = comm.NewMux(nil, 1)
	assert.ErrorIs(t, err, comm.ErrBadArgument)

	// After Close every virtual call fails; a closed sub-communicator too.
	err = comm.Run(2, func(c comm.Comm) error {
		m, err := comm.NewMux(c, 1)
		if err != nil {
			return err
		}
		v := m.Comms()[0]
		sub, err := v.Split(0, 0)
		if err != nil {
			return err
		}
		if err := sub.Close(); err != nil {
			return err
		}
		if err := sub.Barrier(); !errors.Is(err, comm.ErrClosed) {
			return fmt.Errorf("barrier on closed sub: %v", err)
		}
		if err := m.Close(); err != nil {
			return err
		}
		if _, err := v.Recv(0, 0, nil); !errors.Is(err, comm.ErrClosed) {
			return fmt.Errorf("recv after close: %v", err)
		}
		return nil
	})
	require.NoError(t, err)
}

// A failed real world wakes a virtual rank blocked in Recv.
func TestMuxAbort(t *testing.T) {
	cause := errors.New("process 1 fails")
	err := comm.Run(2, func(c comm.Comm) error {
		m, err := comm.NewMux(c, 1)
		if err != nil {
			return err
		}
		if c.Rank() == 1 {
			// Its goroutines end when the world aborts.
			return cause
		}
		defer m.Close()
		_, err = m.Comms()[0].Recv(1, 0, make([]byte, 1))
		if !errors.Is(err, comm.ErrAborted) {
			return fmt.Errorf("recv: %v", err)
		}
		return nil
	})
	assert.ErrorIs(t, err, cause)
}
