package ckpt

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/vfd"
)

// reshapeBenchBytes is each old rank's share of the benchmark's dataset.
const reshapeBenchBytes = 256 << 20

// BenchmarkRestartReshapePaired: a checkpoint of 4 ranks × 256 MiB (one
// 1-D global dataset of float64, in blocks) is restarted through ckpt on
// 3 and on 8 ranks (Init verifies every file, Recover redistributes, every
// block hash checked), and in every iteration also on the 4 ranks that
// wrote it (Init, local Recover): "reshape/same" is the ratio of the
// summed wall times, measured alternately at the same level so the page
// cache and the machine's load hit both alike. The goal: <= 1.5.
func BenchmarkRestartReshapePaired(b *testing.B) {
	const oldRanks = 4
	total := int64(oldRanks * reshapeBenchBytes / 8) // elements
	shape := []int64{total}
	value := func(i int64) float64 { return float64(i)*0.5 + 1 }
	for _, level := range []int{1, 4} {
		root := b.TempDir()
		cfg := testConfig(root, 1)
		cfg.BlockSize = DefaultConfig().BlockSize
		err := comm.Run(oldRanks, func(c comm.Comm) error {
			r, err := Init(cfg, c, WithLogger(benchLogger()))
			if err != nil {
				return err
			}
			defer r.Close()
			off, cnt, _ := dataset.Block(shape, []int{oldRanks}, c.Rank())
			x := make([]float64, cnt[0])
			for i := range x {
				x[i] = value(off[0] + int64(i))
			}
			if err := errors.Join(Protect(r, 0, &x), DefineDataset[float64](r, 0, "x", shape), r.AddSubset(0, 0, off, cnt)); err != nil {
				return err
			}
			return r.Checkpoint(1, level) // no Finalize: the checkpoint stays
		})
		if err != nil {
			b.Fatal(err)
		}
		// Destinations, reused by every restart of a shape.
		dst := map[int][][]float64{}
		for _, m := range []int{oldRanks, 3, 8} {
			dst[m] = make([][]float64, m)
		}
		restart := func(m int) (time.Duration, error) {
			var took time.Duration
			err := comm.Run(m, func(c comm.Comm) error {
				if err := c.Barrier(); err != nil {
					return err
				}
				t0 := time.Now()
				r, err := Init(cfg, c, WithLogger(benchLogger()))
				if err != nil {
					return err
				}
				defer r.Close()
				off, cnt, _ := dataset.Block(shape, []int{m}, c.Rank())
				x := dst[m][c.Rank()]
				if err := errors.Join(Protect(r, 0, &x), DefineDataset[float64](r, 0, "x", shape), r.AddSubset(0, 0, off, cnt)); err != nil {
					return err
				}
				if err := r.Recover(); err != nil {
					return err
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				if c.Rank() == 0 {
					took = time.Since(t0)
				}
				dst[m][c.Rank()] = x
				if int64(len(x)) != cnt[0] || x[0] != value(off[0]) || x[len(x)-1] != value(off[0]+cnt[0]-1) {
					return fmt.Errorf("rank %d of %d restored wrong data", c.Rank(), m)
				}
				return nil
			}, comm.WithTimeout(10*time.Minute))
			return took, err
		}
		for _, m := range []int{3, 8} {
			b.Run(fmt.Sprintf("L%d/4-to-%d", level, m), func(b *testing.B) {
				b.SetBytes(oldRanks * reshapeBenchBytes)
				load0 := loadAvg()
				var same, other time.Duration
				for i := 0; i < b.N; i++ {
					t, err := restart(oldRanks)
					if err != nil {
						b.Fatal(err)
					}
					same += t
					if t, err = restart(m); err != nil {
						b.Fatal(err)
					}
					other += t
				}
				b.ReportMetric(float64(other)/float64(same), "reshape/same")
				b.ReportMetric(float64(b.N)*oldRanks*reshapeBenchBytes/(1<<20)/same.Seconds(), "same-MiB/s")
				b.ReportMetric(float64(b.N)*oldRanks*reshapeBenchBytes/(1<<20)/other.Seconds(), "reshape-MiB/s")
				b.ReportMetric((load0+loadAvg())/2, "loadavg")
			})
		}
	}
}

// loadAvg returns the 1-minute load average of the machine (0 when it
// cannot be read): benchmark ratios are reported with it.
func loadAvg() float64 {
	f, err := vfd.OpenRead(vfd.Sec2{}, "/proc/loadavg")
	if err != nil {
		return 0
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := f.ReadAt(b, 0) // a /proc file has no size: read what there is
	var l float64
	if _, err := fmt.Sscan(string(b[:n]), &l); err != nil {
		return 0
	}
	return l
}
