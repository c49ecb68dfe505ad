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

// A solver's convergence check and a global norm: every rank contributes
// its own largest change and its partial sums, and every rank gets the
// same answer, so all of them stop at the same iteration.
func ExampleAllreduce() {
	err := comm.Run(4, func(c comm.Comm) error {
		r := float64(c.Rank())
		change, err := comm.AllreduceValue(c, 0.001*(r+1), comm.Max)
		if err != nil {
			return err
		}
		// Element-wise: the sum of squares and the cell count, in place.
		sums := []float64{r * r, 10}
		if err := comm.Allreduce(c, sums, sums, comm.Sum); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println("largest change", change, "converged:", change < 0.01)
			fmt.Println("sum of squares", sums[0], "over", sums[1], "cells")
		}
		return nil
	}, comm.WithTimeout(10*time.Second))
	fmt.Println("error:", err)
	// Output:
	// largest change 0.004 converged: true
	// sum of squares 14 over 40 cells
	// error: <nil>
}

// A halo exchange on a chain of ranks: each rank posts the receives of
// its two halo values and the sends of its two edge values, in any order,
// and waits for all four; then rank 0 gathers the bands, of different
// lengths, in rank order.
func ExampleIsend() {
	err := comm.Run(3, func(c comm.Comm) error {
		r, n := c.Rank(), c.Size()
		// Rank r owns r+2 cells; u[0] and u[len-1] are the halo.
		u := make([]float64, r+4)
		for i := 1; i < len(u)-1; i++ {
			u[i] = float64(10*r + i)
		}
		var reqs []comm.Request
		post := func(req comm.Request, err error) error {
			reqs = append(reqs, req)
			return err
		}
		if r > 0 {
			if err := post(comm.Irecv(c, r-1, 0, u[:1])); err != nil {
				return err
			}
			if err := post(comm.Isend(c, r-1, 1, u[1:2])); err != nil {
				return err
			}
		}
		if r < n-1 {
			if err := post(comm.Isend(c, r+1, 0, u[len(u)-2:len(u)-1])); err != nil {
				return err
			}
			if err := post(comm.Irecv(c, r+1, 1, u[len(u)-1:])); err != nil {
				return err
			}
		}
		// u belongs to the communicator until WaitAll returns.
		if err := comm.WaitAll(reqs...); err != nil {
			return err
		}
		fmt.Printf("rank %d halo: %v %v\n", r, u[0], u[len(u)-1])
		var field []float64
		if r == 0 {
			field = make([]float64, 2+3+4)
		}
		if err := comm.Gather(c, 0, u[1:len(u)-1], field); err != nil {
			return err
		}
		if r == 0 {
			fmt.Println("field:", field)
		}
		return nil
	}, comm.WithTimeout(10*time.Second))
	fmt.Println("error:", err)
	// Unordered output:
	// rank 0 halo: 0 11
	// rank 1 halo: 2 21
	// rank 2 halo: 13 0
	// field: [1 2 11 12 13 21 22 23 24]
	// error: <nil>
}
