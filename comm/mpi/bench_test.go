//go:build mpi

package mpi_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
)

// The MPI benchmarks run on every rank in lock step: use a fixed iteration
// count (-benchtime=5x), or the ranks pick different b.N and deadlock.
//
//	go test -tags mpi -run '^$' -bench . -benchtime 5x \
//	  -exec "mpirun.openmpi -np 4 -x GOMAXPROCS=1" ./comm/mpi/

const benchSize = 64 << 20

// BenchmarkSendrecv moves 64 MiB per rank per iteration, in a ring (r to
// r+1, the partner-copy pattern) and in pairs (r with r^1). MB/s is per rank
// per direction; agg-MB/s is the sum over all ranks. BenchmarkMemcpy in the
// same run is the physical reference.
func BenchmarkSendrecv(b *testing.B) {
	n, r := world.Size(), world.Rank()
	patterns := []struct {
		name     string
		dst, src int
	}{
		{"ring", (r + 1) % n, (r + n - 1) % n},
		{"pair", r ^ 1, r ^ 1},
	}
	for _, p := range patterns {
		if p.dst >= n { // odd size: the last rank exchanges with itself
			p.dst, p.src = r, r
		}
		b.Run(fmt.Sprintf("np=%d/%s/size=%dMiB", n, p.name, benchSize>>20), func(b *testing.B) {
			send, recv := filled(benchSize), filled(benchSize)
			if err := world.Barrier(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchSize)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if _, err := world.Sendrecv(send, p.dst, 0, recv, p.src, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(benchSize)*float64(b.N)/time.Since(start).Seconds()/1e6, "agg-MB/s")
		})
	}
}

// BenchmarkSendrecvChunked is the ring of BenchmarkSendrecv through
// comm.SendrecvChunked with 1 MiB blocks (FTI's default block size), the
// bounded-memory route for large partner copies, and with 64 KiB blocks
// (the capi benchmarks' block_size): one MPI call per block, so the cost
// of each call shows, through the funnel (FTIGO_MPI_THREAD=single) or not.
func BenchmarkSendrecvChunked(b *testing.B) {
	n, r := world.Size(), world.Rank()
	for _, block := range []int{1 << 20, 64 << 10} {
		b.Run(fmt.Sprintf("np=%d/ring/size=%dMiB/block=%dKiB", n, benchSize>>20, block>>10), func(b *testing.B) {
			send, recv := filled(benchSize), filled(benchSize)
			if err := world.Barrier(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchSize)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if _, err := comm.SendrecvChunked(world, send, (r+1)%n, recv, (r+n-1)%n, 0, block); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(benchSize)*float64(b.N)/time.Since(start).Seconds()/1e6, "agg-MB/s")
		})
	}
}

// BenchmarkMemcpy is the reference: one copy() of the same size.
func BenchmarkMemcpy(b *testing.B) {
	src, dst := filled(benchSize), filled(benchSize)
	b.SetBytes(benchSize)
	b.ResetTimer()
	for range b.N {
		copy(dst, src)
	}
}

// BenchmarkLatency measures small collectives. Every iteration is 1000
// calls so that a fixed -benchtime of a few iterations still averages well;
// ns/call is the figure to read.
func BenchmarkLatency(b *testing.B) {
	const calls = 1000
	ops := []struct {
		name string
		fn   func() error
	}{
		{"Barrier", world.Barrier},
		{"AllreduceInt64", func() error { _, err := world.AllreduceInt64(1, comm.Sum); return err }},
	}
	for _, op := range ops {
		b.Run(fmt.Sprintf("np=%d/%s", world.Size(), op.name), func(b *testing.B) {
			if err := world.Barrier(); err != nil { // line the ranks up
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N * calls {
				if err := op.fn(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*calls), "ns/call")
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

// paired runs contender and reference alternately, reps calls each per
// iteration, timed from barrier to barrier, and reports both throughputs
// (bytes per call per rank), the time per call of each and the ratio of
// the times. Run with a fixed -benchtime (e.g. 5x): every rank must make
// the same calls.
func paired(b *testing.B, reps, bytes int, contender, reference string, fa, fr func() error) {
	b.Helper()
	var spent [2]time.Duration
	b.SetBytes(int64(bytes * reps))
	b.ResetTimer()
	for range b.N {
		for i, fn := range []func() error{fa, fr} {
			if err := world.Barrier(); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			for range reps {
				if err := fn(); err != nil {
					b.Fatal(err)
				}
			}
			if err := world.Barrier(); err != nil {
				b.Fatal(err)
			}
			spent[i] += time.Since(start)
		}
	}
	calls := float64(b.N * reps)
	b.ReportMetric(float64(bytes)*calls/spent[0].Seconds()/1e6, contender+"-MB/s")
	b.ReportMetric(float64(bytes)*calls/spent[1].Seconds()/1e6, reference+"-MB/s")
	b.ReportMetric(float64(spent[0].Nanoseconds())/calls, contender+"-ns/call")
	b.ReportMetric(float64(spent[1].Nanoseconds())/calls, reference+"-ns/call")
	b.ReportMetric(spent[0].Seconds()/spent[1].Seconds(), contender+"/"+reference)
}

// BenchmarkAllreduceVsSendrecv compares the typed Allreduce(Sum) of a
// float64 vector (MPI_Allreduce on MPI_DOUBLE, with its length check) with
// a ring Sendrecv of the same bytes, the reference; for one element the
// reference is AllreduceInt64, the byte-level collective a convergence
// check used before.
func BenchmarkAllreduceVsSendrecv(b *testing.B) {
	n, r := world.Size(), world.Rank()
	for _, elems := range []int{1, 1 << 10, 1 << 17} {
		b.Run(fmt.Sprintf("np=%d/elems=%d", n, elems), func(b *testing.B) {
			send, recv := make([]float64, elems), make([]float64, elems)
			sb, rb := filled(8*elems), filled(8*elems)
			typed := func() error { return comm.Allreduce(world, send, recv, comm.Sum) }
			if elems == 1 {
				paired(b, 1000, 8, "allreduce", "allreduceint64", typed, func() error {
					_, err := world.AllreduceInt64(int64(r), comm.Max)
					return err
				})
				return
			}
			paired(b, max(1, 4096/elems), 8*elems, "allreduce", "sendrecv", typed, func() error {
				_, err := world.Sendrecv(sb, (r+1)%n, 0, rb, (r+n-1)%n, 0)
				return err
			})
		})
	}
}

// BenchmarkHaloVsSendrecv compares a halo exchange with both ring
// neighbours through Isend/Irecv/WaitAll of float64 rows with the same
// exchange as two byte Sendrecv calls, the reference. SetBytes counts the
// two rows a rank sends.
func BenchmarkHaloVsSendrecv(b *testing.B) {
	n, r := world.Size(), world.Rank()
	up, down := (r+n-1)%n, (r+1)%n
	for _, row := range []int{128, 8 << 10, 128 << 10} {
		b.Run(fmt.Sprintf("np=%d/row=%dKiB", n, row*8>>10), func(b *testing.B) {
			first, last, top, bottom := make([]float64, row), make([]float64, row), make([]float64, row), make([]float64, row)
			bfirst, blast, btop, bbottom := filled(8*row), filled(8*row), filled(8*row), filled(8*row)
			halo := func() error {
				r0, e0 := comm.Irecv(world, up, 1, top)
				r1, e1 := comm.Irecv(world, down, 2, bottom)
				r2, e2 := comm.Isend(world, up, 2, first)
				r3, e3 := comm.Isend(world, down, 1, last)
				if err := errors.Join(e0, e1, e2, e3); err != nil {
					return err
				}
				return comm.WaitAll(r0, r1, r2, r3)
			}
			sendrecv := func() error {
				if _, err := world.Sendrecv(bfirst, up, 2, bbottom, down, 2); err != nil {
					return err
				}
				_, err := world.Sendrecv(blast, down, 1, btop, up, 1)
				return err
			}
			paired(b, max(1, 8192/row), 2*8*row, "halo", "sendrecv", halo, sendrecv)
		})
	}
}
