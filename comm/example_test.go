package comm_test

import (
	"fmt"
	"time"

	"github.com/ftigo/ftigo/comm"
)

// Four goroutine ranks pass their rank around a ring and agree on a sum.
func ExampleRun() {
	err := comm.Run(4, func(c comm.Comm) error {
		n, r := c.Size(), c.Rank()
		recv := make([]byte, 1)
		if _, err := c.Sendrecv([]byte{byte(r)}, (r+1)%n, 0, recv, (r+n-1)%n, 0); err != nil {
			return err
		}
		sum, err := c.AllreduceInt64(int64(recv[0]), comm.Sum)
		if err != nil {
			return err
		}
		if r == 0 {
			fmt.Println("rank 0 got", recv[0], "from its left neighbour; sum", sum)
		}
		return nil
	}, comm.WithTimeout(10*time.Second))
	fmt.Println("error:", err)
	// Output:
	// rank 0 got 3 from its left neighbour; sum 6
	// error: <nil>
}

// A failing rank ends the world: the others' blocked calls return
// ErrAborted, and Run returns the cause.
func ExampleRun_failure() {
	err := comm.Run(3, func(c comm.Comm) error {
		if c.Rank() == 2 {
			return fmt.Errorf("disk full")
		}
		return c.Barrier() // never completes: rank 2 is gone
	})
	fmt.Println(err)
	// Output:
	// comm: rank 2: disk full
}

// NodeMap groups ranks by node; in-process nodes are simulated.
func ExampleNodeMap() {
	_ = comm.Run(5, func(c comm.Comm) error {
		nodes, mine, err := comm.NodeMap(c, nil)
		if err == nil && c.Rank() == 4 {
			fmt.Println(nodes, "rank 4 is on node", mine)
		}
		return err
	}, comm.WithNodeSize(2))
	// Output:
	// [[0 1] [2 3] [4]] rank 4 is on node 2
}
