package comm_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
)

var benchSizes = []int{1 << 20, 64 << 20}

// BenchmarkSendrecvRing moves size bytes from every rank r to r+1 of a
// 4-rank in-process world per iteration. MB/s is aggregate (4 messages per
// iteration) and reads against BenchmarkMemcpy of the same size, which is
// the physical reference: one copy() in one goroutine.
func BenchmarkSendrecvRing(b *testing.B) {
	const n = 4
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("ranks=%d/size=%dMiB", n, size>>20), func(b *testing.B) {
			send := make([][]byte, n)
			recv := make([][]byte, n)
			for i := range send {
				send[i], recv[i] = filled(size), filled(size)
			}
			b.SetBytes(int64(n * size))
			b.ResetTimer()
			err := comm.Run(n, func(c comm.Comm) error {
				r := c.Rank()
				for range b.N {
					if _, err := c.Sendrecv(send[r], (r+1)%n, 0, recv[r], (r+n-1)%n, 0); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkMemcpy is the reference for BenchmarkSendrecvRing.
func BenchmarkMemcpy(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("size=%dMiB", size>>20), func(b *testing.B) {
			src, dst := filled(size), filled(size)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				copy(dst, src)
			}
		})
	}
}

// BenchmarkLatency measures small collectives of a 4-rank world; ns/op is
// per call per rank.
func BenchmarkLatency(b *testing.B) {
	const n = 4
	calls := []struct {
		name string
		fn   func(c comm.Comm) error
	}{
		{"Barrier", func(c comm.Comm) error { return c.Barrier() }},
		{"AllreduceInt64", func(c comm.Comm) error { _, err := c.AllreduceInt64(1, comm.Sum); return err }},
		{"Sendrecv8B", func(c comm.Comm) error {
			var s, r [8]byte
			_, err := c.Sendrecv(s[:], (c.Rank()+1)%n, 0, r[:], (c.Rank()+n-1)%n, 0)
			return err
		}},
	}
	for _, call := range calls {
		b.Run(fmt.Sprintf("ranks=%d/%s", n, call.name), func(b *testing.B) {
			err := comm.Run(n, func(c comm.Comm) error {
				for range b.N {
					if err := call.fn(c); err != nil {
						return err
					}
				}
				return nil
			}, comm.WithTimeout(time.Minute))
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

func filled(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// BenchmarkRingVsMemcpy interleaves the two measurements of
// BenchmarkSendrecvRing and BenchmarkMemcpy at 64 MiB, iteration by
// iteration, so that the load of a shared machine hits both alike, and
// reports their ratio: ring-MB/s is the aggregate of the 4-rank ring,
// memcpy-MB/s one copy() in one goroutine, ring/memcpy the ratio of the
// two (the goal is at least 0.6).
func BenchmarkRingVsMemcpy(b *testing.B) {
	const n, size = 4, 64 << 20
	send := make([][]byte, n)
	recv := make([][]byte, n)
	for i := range send {
		send[i], recv[i] = filled(size), filled(size)
	}
	comms := comm.NewWorld(n)
	var ringTime, copyTime time.Duration
	b.SetBytes(n * size)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		copy(recv[0], send[0])
		copyTime += time.Since(start)

		start = time.Now()
		errs := make(chan error, n)
		for r, c := range comms {
			go func() {
				_, err := c.Sendrecv(send[r], (r+1)%n, 0, recv[r], (r+n-1)%n, 0)
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		ringTime += time.Since(start)
	}
	ring := float64(n*size*b.N) / ringTime.Seconds() / 1e6
	mem := float64(size*b.N) / copyTime.Seconds() / 1e6
	b.ReportMetric(ring, "ring-MB/s")
	b.ReportMetric(mem, "memcpy-MB/s")
	b.ReportMetric(ring/mem, "ring/memcpy")
}
