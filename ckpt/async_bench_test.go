package ckpt

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// BenchmarkCheckpointAsync measures what asynchronous post-processing
// buys: 4 in-process ranks on 4 simulated nodes (groups of 2), 64 MiB
// each, take checkpoints at L2, L3 and L4 with the post-processing
// inline (inline_lL = 1) and in the background (inline_lL = 0), and in
// every iteration also write the same bytes raw (one write and one fsync
// per rank: what an L1 checkpoint must at least cost). The phases run in
// rotating order. It reports, against the raw write: sync/raw, the
// blocked time of the inline checkpoint; async/raw, the time Checkpoint
// blocks the solver with the background post-processing; durable/raw,
// the time until the asynchronous checkpoint is committed at its level
// (Checkpoint and CheckpointWait); async/sync; and async/L1, against an
// L1 checkpoint of the same data taken in the same rotation (the issue's
// goal: at most 1.1). Those are ratios of the times summed over the
// iterations; durable/sync-med and async/L1-med are the medians of the
// ratios within each iteration (the time until durable against the
// inline checkpoint's, the goal: at most 1; the blocked time
// against the L1 checkpoint's), which a burst of load on a shared
// machine moves less.
func BenchmarkCheckpointAsync(b *testing.B) {
	data := make([][]float64, benchRanks)
	for r := range data {
		data[r] = benchData(r)
	}
	for _, level := range []int{2, 3, 4} {
		b.Run(fmt.Sprintf("L%d", level), func(b *testing.B) {
			rawDir := b.TempDir()
			cfgSync := testConfig(b.TempDir(), 1)
			cfgSync.GroupSize = 2
			cfgSync.BlockSize = DefaultConfig().BlockSize
			cfgAsync := testConfig(b.TempDir(), 1)
			cfgAsync.GroupSize = 2
			cfgAsync.BlockSize = DefaultConfig().BlockSize
			cfgAsync.Async[level] = true
			b.SetBytes(benchRanks * benchBytes)
			cfgL1 := testConfig(b.TempDir(), 1)
			cfgL1.GroupSize = 2
			const nPhase = 4 // raw, sync, async, L1
			var wall [nPhase]time.Duration
			var durable time.Duration
			// Each iteration's times (rank 0), for the medians of the
			// per-iteration ratios: on a shared machine one slow phase
			// moves the ratio of the sums, hardly the median.
			var iter [nPhase][]time.Duration
			var iterDurable []time.Duration
			b.ResetTimer()
			err := comm.Run(benchRanks, func(c comm.Comm) error {
				rs, err := Init(cfgSync, c, WithLogger(benchLogger()))
				if err != nil {
					return err
				}
				ra, err := Init(cfgAsync, c, WithLogger(benchLogger()))
				if err != nil {
					return err
				}
				rl, err := Init(cfgL1, c, WithLogger(benchLogger()))
				if err != nil {
					return err
				}
				x := data[c.Rank()]
				if err := Protect(rs, 0, &x); err != nil {
					return err
				}
				if err := errors.Join(Protect(ra, 0, &x), Protect(rl, 0, &x)); err != nil {
					return err
				}
				name := filepath.Join(rawDir, fmt.Sprintf("raw%d", c.Rank()))
				for i := 0; i < b.N; i++ {
					for j := range nPhase {
						p := (i + j) % nPhase
						if err := c.Barrier(); err != nil {
							return err
						}
						t0 := time.Now()
						switch p {
						case 0:
							err = rawWrite(name, x)
						case 1:
							err = rs.Checkpoint(int64(i+1), level)
						case 2:
							err = ra.Checkpoint(int64(i+1), level)
						case 3:
							err = rl.Checkpoint(int64(i+1), 1)
						}
						if err != nil {
							return err
						}
						if err := c.Barrier(); err != nil {
							return err
						}
						if c.Rank() == 0 {
							wall[p] += time.Since(t0)
							iter[p] = append(iter[p], time.Since(t0))
						}
						if p == 2 {
							if err := ra.CheckpointWait(); err != nil {
								return err
							}
							if err := c.Barrier(); err != nil {
								return err
							}
							if c.Rank() == 0 {
								durable += time.Since(t0)
								iterDurable = append(iterDurable, time.Since(t0))
							}
						}
						_ = (vfd.Sec2{}).Remove(name)
						rs.Wait()
						ra.Wait()
						rl.Wait()
					}
				}
				return errors.Join(rs.Finalize(), ra.Finalize(), rl.Finalize())
			})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(wall[1])/float64(wall[0]), "sync/raw")
			b.ReportMetric(float64(wall[2])/float64(wall[0]), "async/raw")
			b.ReportMetric(float64(durable)/float64(wall[0]), "durable/raw")
			b.ReportMetric(float64(wall[2])/float64(wall[1]), "async/sync")
			b.ReportMetric(float64(wall[2])/float64(wall[3]), "async/L1")
			b.ReportMetric(float64(wall[3])/float64(wall[0]), "L1/raw")
			b.ReportMetric(medianRatio(iterDurable, iter[1]), "durable/sync-med")
			b.ReportMetric(medianRatio(iter[2], iter[3]), "async/L1-med")
		})
	}
}

// medianRatio returns the median over iterations of a[i]/b[i].
func medianRatio(a, b []time.Duration) float64 {
	n := min(len(a), len(b))
	if n == 0 {
		return 0
	}
	r := make([]float64, n)
	for i := range n {
		r[i] = float64(a[i]) / float64(b[i])
	}
	slices.Sort(r)
	if n%2 == 1 {
		return r[n/2]
	}
	return (r[n/2-1] + r[n/2]) / 2
}
