package ckpt

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// compBenchBytes is each rank's variable in BenchmarkCompressionPaired.
const compBenchBytes = 16 << 20

// compBenchData returns rank's variable of kind "smooth" (a smooth field
// sampled at 1/64 resolution: its values' low mantissa bits are zero, as
// in a field of few distinct levels, and zstd compresses it) or "random"
// (uniform bits: nothing to compress).
func compBenchData(kind string, rank int) []float64 {
	x := make([]float64, compBenchBytes/8)
	switch kind {
	case "smooth":
		for i := range x {
			x[i] = math.Round(64*100*math.Sin(float64(i+rank)/20000)) / 64
		}
	default:
		rnd := rand.New(rand.NewPCG(uint64(rank), 7))
		for i := range x {
			x[i] = math.Float64frombits(rnd.Uint64())
		}
	}
	return x
}

// BenchmarkCompressionPaired takes L1 checkpoints of 4 in-process ranks
// (16 MiB each, one float64 variable) stored as they are ("none") and
// with zstd, and in every iteration writes the same bytes raw (one
// write and one fsync per rank through vfd.Sec2) as the physical
// reference. The three run in rotating order, one runtime switching the
// variable's compression with SetCompression. It reports zstd/raw,
// none/raw and zstd/none (summed wall times) and stored/logical, the
// compressed checkpoint's stored bytes over the variable's (from its
// manifest). The goals: random data within 3% of the
// uncompressed checkpoint; data compressing 2x or more faster.
func BenchmarkCompressionPaired(b *testing.B) {
	for _, kind := range []string{"smooth", "random"} {
		b.Run(kind, func(b *testing.B) {
			data := make([][]float64, benchRanks)
			for r := range data {
				data[r] = compBenchData(kind, r)
			}
			rawDir := b.TempDir()
			cfg := testConfig(b.TempDir(), 1)
			cfg.GroupSize = benchRanks
			cfg.BlockSize = DefaultConfig().BlockSize
			b.SetBytes(benchRanks * compBenchBytes)
			const nPhase = 3 // raw, none, zstd
			var wall [nPhase]time.Duration
			var ratio float64
			b.ResetTimer()
			err := comm.Run(benchRanks, func(c comm.Comm) error {
				r, err := Init(cfg, c, WithLogger(benchLogger()))
				if err != nil {
					return err
				}
				x := data[c.Rank()]
				if err := Protect(r, 0, &x); err != nil {
					return err
				}
				name := filepath.Join(rawDir, fmt.Sprintf("raw%d", c.Rank()))
				id := int64(0)
				phase := func(p int) error {
					if p == 0 {
						return rawWrite(name, x)
					}
					codec := map[int]fileformat.Codec{1: fileformat.CodecNone, 2: fileformat.CodecZstd}[p]
					if err := r.SetCompression(0, Compression{Codec: codec}); err != nil {
						return err
					}
					id++
					if err := r.Checkpoint(id, 1); err != nil {
						return err
					}
					if p == 2 && c.Rank() == 0 {
						if cm := r.last.Compressed; cm != nil {
							ratio = float64(cm.Stored) / float64(cm.Logical)
						}
					}
					return nil
				}
				for i := 0; i < b.N; i++ {
					for j := range nPhase {
						p := (i + j) % nPhase
						if err := c.Barrier(); err != nil {
							return err
						}
						t0 := time.Now()
						if err := phase(p); err != nil {
							return err
						}
						if err := c.Barrier(); err != nil {
							return err
						}
						if c.Rank() == 0 {
							wall[p] += time.Since(t0)
						}
						_ = (vfd.Sec2{}).Remove(name)
						r.eng.Wait()
					}
				}
				return r.Finalize()
			})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if ratio == 0 {
				b.Fatal("the zstd checkpoint's manifest records no compressed bytes")
			}
			b.ReportMetric(float64(wall[2])/float64(wall[0]), "zstd/raw")
			b.ReportMetric(float64(wall[1])/float64(wall[0]), "none/raw")
			b.ReportMetric(float64(wall[2])/float64(wall[1]), "zstd/none")
			b.ReportMetric(ratio, "stored/logical")
		})
	}
}
