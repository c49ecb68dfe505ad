package comm_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
)

// The typed operations against the plain byte Sendrecv moving the same
// bytes, as sibling sub-benchmarks of one run: read the ratio of a
// contender's ns/op to its "sendrecv" sibling's.
//
//	go test -run '^$' -bench 'AllreduceVsSendrecv|HaloVsSendrecv' -count 3 ./comm/

// runRanks runs fn b.N times on every rank of an in-process world of n
// ranks; ns/op is the time of one call on every rank.
func runRanks(b *testing.B, n int, fn func(c comm.Comm) error) {
	b.Helper()
	b.ResetTimer()
	err := comm.Run(n, func(c comm.Comm) error {
		for range b.N {
			if err := fn(c); err != nil {
				return err
			}
		}
		return nil
	}, comm.WithTimeout(5*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAllreduceVsSendrecv: the typed Allreduce(Sum) of a float64
// vector on 4 in-process ranks ("allreduce"); for one element also
// AllreduceInt64, the byte-level collective a solver's convergence check
// used before ("allreduceint64"); and the reference, a ring Sendrecv of
// the same bytes ("sendrecv": one message per rank, no arithmetic).
// SetBytes is the vector's size.
func BenchmarkAllreduceVsSendrecv(b *testing.B) {
	const n = 4
	for _, elems := range []int{1, 1 << 10, 1 << 17} {
		send := make([][]float64, n)
		recv := make([][]float64, n)
		sb := make([][]byte, n)
		rb := make([][]byte, n)
		for r := range send {
			send[r], recv[r] = make([]float64, elems), make([]float64, elems)
			sb[r], rb[r] = make([]byte, 8*elems), make([]byte, 8*elems)
			for i := range send[r] {
				send[r][i] = float64(r*i) * 0.5
			}
		}
		name := fmt.Sprintf("ranks=%d/elems=%d", n, elems)
		b.Run(name+"/allreduce", func(b *testing.B) {
			b.SetBytes(int64(8 * elems))
			runRanks(b, n, func(c comm.Comm) error {
				return comm.Allreduce(c, send[c.Rank()], recv[c.Rank()], comm.Sum)
			})
		})
		if elems == 1 {
			b.Run(name+"/allreduceint64", func(b *testing.B) {
				b.SetBytes(8)
				runRanks(b, n, func(c comm.Comm) error {
					_, err := c.AllreduceInt64(int64(c.Rank()), comm.Max)
					return err
				})
			})
		}
		b.Run(name+"/sendrecv", func(b *testing.B) {
			b.SetBytes(int64(8 * elems))
			runRanks(b, n, func(c comm.Comm) error {
				r := c.Rank()
				_, err := c.Sendrecv(sb[r], (r+1)%n, 0, rb[r], (r+n-1)%n, 0)
				return err
			})
		})
	}
}

// haloBufs are one rank's rows for the halo benchmarks.
type haloBufs struct {
	first, last, top, bottom     []float64
	bfirst, blast, btop, bbottom []byte
}

func newHaloBufs(n, row int) []haloBufs {
	out := make([]haloBufs, n)
	for r := range out {
		out[r] = haloBufs{make([]float64, row), make([]float64, row), make([]float64, row), make([]float64, row),
			make([]byte, 8*row), make([]byte, 8*row), make([]byte, 8*row), make([]byte, 8*row)}
	}
	return out
}

// haloExchange exchanges rows with both ring neighbours through
// Isend/Irecv/WaitAll.
func haloExchange(c comm.Comm, x *haloBufs) error {
	r, n := c.Rank(), c.Size()
	up, down := (r+n-1)%n, (r+1)%n
	r0, e0 := comm.Irecv(c, up, 1, x.top)
	r1, e1 := comm.Irecv(c, down, 2, x.bottom)
	r2, e2 := comm.Isend(c, up, 2, x.first)
	r3, e3 := comm.Isend(c, down, 1, x.last)
	for _, err := range []error{e0, e1, e2, e3} {
		if err != nil {
			return err
		}
	}
	return comm.WaitAll(r0, r1, r2, r3)
}

// sendrecvExchange is the same exchange as two byte Sendrecv calls.
func sendrecvExchange(c comm.Comm, x *haloBufs) error {
	r, n := c.Rank(), c.Size()
	up, down := (r+n-1)%n, (r+1)%n
	if _, err := c.Sendrecv(x.bfirst, up, 2, x.bbottom, down, 2); err != nil {
		return err
	}
	_, err := c.Sendrecv(x.blast, down, 1, x.btop, up, 1)
	return err
}

// BenchmarkHaloVsSendrecv: a halo exchange with both neighbours of a ring
// of 4 in-process ranks through Isend/Irecv/WaitAll of float64 rows
// ("halo") against the same exchange as two byte Sendrecv calls
// ("sendrecv", the reference). SetBytes is what a rank sends per exchange
// (two rows).
func BenchmarkHaloVsSendrecv(b *testing.B) {
	const n = 4
	for _, row := range []int{128, 8 << 10, 128 << 10} { // float64s: 1 KiB, 64 KiB, 1 MiB rows
		bufs := newHaloBufs(n, row)
		name := fmt.Sprintf("ranks=%d/row=%dKiB", n, row*8>>10)
		b.Run(name+"/halo", func(b *testing.B) {
			b.SetBytes(int64(2 * 8 * row))
			runRanks(b, n, func(c comm.Comm) error { return haloExchange(c, &bufs[c.Rank()]) })
		})
		b.Run(name+"/sendrecv", func(b *testing.B) {
			b.SetBytes(int64(2 * 8 * row))
			runRanks(b, n, func(c comm.Comm) error { return sendrecvExchange(c, &bufs[c.Rank()]) })
		})
	}
}

// pairRatio runs contender and reference alternately, in blocks of up to
// 64 calls on every rank of an in-process world of n ranks, timed on rank 0
// from barrier to barrier, so that the load of a shared machine hits both
// alike. It reports both throughputs (bytes per call per rank) and the
// ratio of their times; b.N counts calls of each.
func pairRatio(b *testing.B, n, bytes int, contender, reference string, fa, fr func(c comm.Comm) error) {
	b.Helper()
	var spent [2]time.Duration
	b.ResetTimer()
	err := comm.Run(n, func(c comm.Comm) error {
		for done := 0; done < b.N; done += 64 {
			k := min(64, b.N-done)
			for i, fn := range []func(comm.Comm) error{fa, fr} {
				if err := c.Barrier(); err != nil {
					return err
				}
				start := time.Now()
				for range k {
					if err := fn(c); err != nil {
						return err
					}
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				if c.Rank() == 0 {
					spent[i] += time.Since(start)
				}
			}
		}
		return nil
	}, comm.WithTimeout(5*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(bytes)*float64(b.N)/spent[0].Seconds()/1e6, contender+"-MB/s")
	b.ReportMetric(float64(bytes)*float64(b.N)/spent[1].Seconds()/1e6, reference+"-MB/s")
	b.ReportMetric(spent[0].Seconds()/spent[1].Seconds(), contender+"/"+reference)
}

// BenchmarkPairedAllreduce interleaves the "allreduce" and "sendrecv"
// contenders of BenchmarkAllreduceVsSendrecv and reports the ratio of their
// times (allreduce/sendrecv; lower is better, 1 is parity with moving the
// bytes once).
func BenchmarkPairedAllreduce(b *testing.B) {
	const n = 4
	for _, elems := range []int{1, 1 << 10, 1 << 17} {
		b.Run(fmt.Sprintf("ranks=%d/elems=%d", n, elems), func(b *testing.B) {
			send, recv := make([][]float64, n), make([][]float64, n)
			sb, rb := make([][]byte, n), make([][]byte, n)
			for r := range send {
				send[r], recv[r] = make([]float64, elems), make([]float64, elems)
				sb[r], rb[r] = make([]byte, 8*elems), make([]byte, 8*elems)
			}
			b.SetBytes(int64(8 * elems))
			pairRatio(b, n, 8*elems, "allreduce", "sendrecv", func(c comm.Comm) error {
				return comm.Allreduce(c, send[c.Rank()], recv[c.Rank()], comm.Sum)
			}, func(c comm.Comm) error {
				r := c.Rank()
				_, err := c.Sendrecv(sb[r], (r+1)%n, 0, rb[r], (r+n-1)%n, 0)
				return err
			})
		})
	}
}

// BenchmarkPairedHalo interleaves the "halo" and "sendrecv" contenders of
// BenchmarkHaloVsSendrecv and reports the ratio of their times
// (halo/sendrecv).
func BenchmarkPairedHalo(b *testing.B) {
	const n = 4
	for _, row := range []int{128, 8 << 10, 128 << 10} {
		b.Run(fmt.Sprintf("ranks=%d/row=%dKiB", n, row*8>>10), func(b *testing.B) {
			bufs := newHaloBufs(n, row)
			b.SetBytes(int64(2 * 8 * row))
			pairRatio(b, n, 2*8*row, "halo", "sendrecv",
				func(c comm.Comm) error { return haloExchange(c, &bufs[c.Rank()]) },
				func(c comm.Comm) error { return sendrecvExchange(c, &bufs[c.Rank()]) })
		})
	}
}
