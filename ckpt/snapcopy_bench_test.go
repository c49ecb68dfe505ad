package ckpt

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
)

// BenchmarkCheckpointSnapshot measures snapshot mode in steady state: 2
// in-process ranks on 2 simulated nodes, 16 MiB each, take checkpoints
// at L1..L4 in one running job, each iteration taking one snapshot-mode
// checkpoint (blocked until Checkpoint returns, then durable once
// CheckpointWait returns), one inline checkpoint of the same level in
// another runtime, and one plain copy of the same bytes into a reused
// buffer, in rotating order. The first iteration (first touch of the
// staging buffer, the directories' creation) is left out. It reports
// blocked/memcpy (the goal: at most 1.2) and durable/inline (at
// most 1.05), each the median of the per-iteration ratios.
func BenchmarkCheckpointSnapshot(b *testing.B) {
	const ranks, size = 2, 16 << 20
	data := make([][]float64, ranks)
	for r := range data {
		data[r] = make([]float64, size/8)
		for i := range data[r] {
			data[r][i] = float64(i*ranks + r)
		}
	}
	for level := 1; level <= 4; level++ {
		b.Run(fmt.Sprintf("L%d", level), func(b *testing.B) {
			cfgSnap := testConfig(b.TempDir(), 1)
			cfgSnap.GroupSize, cfgSnap.BlockSize, cfgSnap.Snapshot = ranks, DefaultConfig().BlockSize, true
			cfgInl := testConfig(b.TempDir(), 1)
			cfgInl.GroupSize, cfgInl.BlockSize = ranks, DefaultConfig().BlockSize
			b.SetBytes(ranks * size)
			var blocked, durable, inline, memcpy, cps, inner []time.Duration
			b.ResetTimer()
			err := comm.Run(ranks, func(c comm.Comm) error {
				rs, err := Init(cfgSnap, c, WithLogger(benchLogger()))
				if err != nil {
					return err
				}
				ri, err := Init(cfgInl, c, WithLogger(benchLogger()))
				if err != nil {
					return err
				}
				x := data[c.Rank()]
				if err := errors.Join(Protect(rs, 0, &x), Protect(ri, 0, &x)); err != nil {
					return err
				}
				buf := make([]float64, len(x))
				copy(buf, x)
				timed := func(fn func() error) (time.Duration, error) {
					if err := c.Barrier(); err != nil {
						return 0, err
					}
					t0 := time.Now()
					if err := fn(); err != nil {
						return 0, err
					}
					return time.Since(t0), c.Barrier()
				}
				for i := 0; i <= b.N; i++ {
					var bl, du, in, mc time.Duration
					for j := range 3 {
						switch (i + j) % 3 {
						case 0:
							if err := c.Barrier(); err != nil {
								return err
							}
							t0 := time.Now()
							if err := rs.Checkpoint(int64(i+1), level); err != nil {
								return err
							}
							if err := c.Barrier(); err != nil {
								return err
							}
							bl = time.Since(t0)
							if err := rs.CheckpointWait(); err != nil {
								return err
							}
							if err := c.Barrier(); err != nil {
								return err
							}
							du = time.Since(t0)
							if c.Rank() == 0 && i > 0 {
								ct := rs.CheckpointTimes()
								cps, inner = append(cps, ct.Copy), append(inner, ct.Blocked)
							}
						case 1:
							if in, err = timed(func() error { return ri.Checkpoint(int64(i+1), level) }); err != nil {
								return err
							}
						case 2:
							if mc, err = timed(func() error { copy(buf, x); return nil }); err != nil {
								return err
							}
						}
						rs.Wait()
						ri.Wait()
					}
					if i > 0 && c.Rank() == 0 {
						blocked, durable, inline, memcpy = append(blocked, bl), append(durable, du), append(inline, in), append(memcpy, mc)
					}
				}
				return errors.Join(rs.Finalize(), ri.Finalize())
			})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(medianRatio(blocked, memcpy), "blocked/memcpy")
			b.ReportMetric(medianRatio(durable, inline), "durable/inline")
			b.ReportMetric(median(blocked).Seconds()*1e3, "blocked-ms")
			b.ReportMetric(median(memcpy).Seconds()*1e3, "memcpy-ms")
			b.ReportMetric(median(cps).Seconds()*1e3, "copy-ms")
			b.ReportMetric(median(inner).Seconds()*1e3, "inner-ms")
			b.ReportMetric(median(durable).Seconds()*1e3, "durable-ms")
			b.ReportMetric(median(inline).Seconds()*1e3, "inline-ms")
		})
	}
}

// median returns the median of ds (0 when empty).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
