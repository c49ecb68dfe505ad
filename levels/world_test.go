package levels

import (
	"fmt"
	"sync"

	"github.com/ftigo/ftigo/comm"
)

// testWorld is a minimal in-process world for the collectives the engine
// uses (Barrier, Bcast, Allgather, AllreduceInt64). Point-to-point calls
// are not supported.
type testWorld struct {
	n     int
	mu    sync.Mutex
	cond  *sync.Cond
	gen   int
	count int
	slots [][]byte
	vals  []int64
	out   []byte
	res   int64
}

type testComm struct {
	w    *testWorld
	rank int
}

func runWorld(n int, fn func(c comm.Comm) error) error {
	w := &testWorld{n: n, slots: make([][]byte, n), vals: make([]int64, n)}
	w.cond = sync.NewCond(&w.mu)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = fn(&testComm{w: w, rank: r})
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return nil
}

// step deposits this rank's contribution; the last rank to arrive runs
// finish; everyone returns after it.
func (c *testComm) step(put func(w *testWorld), finish func(w *testWorld), get func(w *testWorld)) {
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	gen := w.gen
	put(w)
	w.count++
	if w.count == w.n {
		finish(w)
		w.count = 0
		w.gen++
		w.cond.Broadcast()
	} else {
		for w.gen == gen {
			w.cond.Wait()
		}
	}
	get(w)
}

func (c *testComm) Rank() int { return c.rank }
func (c *testComm) Size() int { return c.w.n }
func (c *testComm) Barrier() error {
	c.step(func(*testWorld) {}, func(*testWorld) {}, func(*testWorld) {})
	return nil
}
func (c *testComm) Bcast(root int, buf []byte) error {
	c.step(func(w *testWorld) { w.slots[c.rank] = buf },
		func(w *testWorld) { w.out = append([]byte(nil), w.slots[root]...) },
		func(w *testWorld) { copy(buf, w.out) })
	c.Barrier()
	return nil
}
func (c *testComm) Allgather(send, recv []byte) error {
	c.step(func(w *testWorld) { w.slots[c.rank] = append([]byte(nil), send...) },
		func(w *testWorld) {
			w.out = nil
			for _, s := range w.slots {
				w.out = append(w.out, s...)
			}
		},
		func(w *testWorld) { copy(recv, w.out) })
	c.Barrier()
	return nil
}
func (c *testComm) AllreduceInt64(v int64, op comm.Op) (int64, error) {
	var res int64
	c.step(func(w *testWorld) { w.vals[c.rank] = v },
		func(w *testWorld) {
			r := w.vals[0]
			for _, x := range w.vals[1:] {
				switch op {
				case comm.Min:
					r = min(r, x)
				case comm.Max:
					r = max(r, x)
				default:
					r += x
				}
			}
			w.res = r
		},
		func(w *testWorld) { res = w.res })
	c.Barrier()
	return res, nil
}
func (c *testComm) Send(int, int, []byte) error        { return comm.ErrBadArgument }
func (c *testComm) Recv(int, int, []byte) (int, error) { return 0, comm.ErrBadArgument }
func (c *testComm) Sendrecv([]byte, int, int, []byte, int, int) (int, error) {
	return 0, comm.ErrBadArgument
}
func (c *testComm) Split(int, int) (comm.Comm, error) { return nil, comm.ErrBadArgument }
func (c *testComm) Close() error                      { return nil }
