//go:build mpi

package mpi_test

import (
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
// bounded-memory route for large partner copies.
func BenchmarkSendrecvChunked(b *testing.B) {
	n, r := world.Size(), world.Rank()
	b.Run(fmt.Sprintf("np=%d/ring/size=%dMiB/block=1MiB", n, benchSize>>20), func(b *testing.B) {
		send, recv := filled(benchSize), filled(benchSize)
		if err := world.Barrier(); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(benchSize)
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			if _, err := comm.SendrecvChunked(world, send, (r+1)%n, recv, (r+n-1)%n, 0, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)*float64(benchSize)*float64(b.N)/time.Since(start).Seconds()/1e6, "agg-MB/s")
	})
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
