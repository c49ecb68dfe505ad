package ckpt

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

const (
	benchRanks = 4
	benchBytes = 64 << 20 // per rank
)

func benchData(rank int) []float64 {
	x := make([]float64, benchBytes/8)
	for i := range x {
		x[i] = float64(i*benchRanks + rank)
	}
	return x
}

// BenchmarkCheckpointPaired takes checkpoints at L1, L2 and L3 (4
// in-process ranks on 4 simulated nodes in one group, 64 MiB each, the
// default block size) in a running job, and in every iteration also
// writes and fsyncs the bytes the level must persist raw (vfd.Sec2): L1
// the data, L2 the data and a copy, L3 the data and a parity file as large
// (m = k), one file after the other per rank. ckpt/raw is the ratio of the
// summed times, measured alternately so that the machine's drift hits
// both alike. The goals: L1 <= 1.15, L2 <= 1.2, L3 <= 1.3.
func BenchmarkCheckpointPaired(b *testing.B) {
	data := make([][]float64, benchRanks)
	for r := range data {
		data[r] = benchData(r)
	}
	for _, level := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("L%d", level), func(b *testing.B) {
			rawDir := b.TempDir()
			cfg := testConfig(b.TempDir(), 1)
			cfg.GroupSize = benchRanks
			cfg.BlockSize = DefaultConfig().BlockSize
			files := min(level, 2) // raw files per rank
			b.SetBytes(int64(files) * benchRanks * benchBytes)
			var rawTotal, ckptTotal time.Duration
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
				for i := 0; i < b.N; i++ {
					if err := c.Barrier(); err != nil {
						return err
					}
					t0 := time.Now()
					for f := range files {
						if err := rawWrite(filepath.Join(rawDir, fmt.Sprintf("raw%d-%d", c.Rank(), f)), x); err != nil {
							return err
						}
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					t1 := time.Now()
					for f := range files {
						if err := (vfd.Sec2{}).Remove(filepath.Join(rawDir, fmt.Sprintf("raw%d-%d", c.Rank(), f))); err != nil {
							return err
						}
					}
					r.eng.Wait()
					if err := c.Barrier(); err != nil {
						return err
					}
					t2 := time.Now()
					if err := r.Checkpoint(int64(i+1), level); err != nil {
						return err
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					if c.Rank() == 0 {
						rawTotal += t1.Sub(t0)
						ckptTotal += time.Since(t2)
					}
				}
				return r.Finalize()
			})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(ckptTotal)/float64(rawTotal), "ckpt/raw")
			b.ReportMetric(float64(b.N)*float64(files)*benchRanks*benchBytes/(1<<20)/rawTotal.Seconds(), "raw-MiB/s")
			b.ReportMetric(float64(b.N)*float64(files)*benchRanks*benchBytes/(1<<20)/ckptTotal.Seconds(), "ckpt-MiB/s")
		})
	}
}

func rawWrite(name string, x []float64) error {
	f, err := vfd.CreateTrunc(vfd.Sec2{}, name)
	if err != nil {
		return err
	}
	b := unsafeBytes(x)
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

func benchLogger() *zap.Logger {
	if testing.Verbose() {
		l, _ := zap.NewDevelopment()
		return l
	}
	return zap.NewNop()
}

// BenchmarkRestartL1Paired restarts 4 ranks (Init, Protect, Recover) from
// one L1 checkpoint of 64 MiB per rank, and in every iteration also reads
// the same data files raw (vfd.Sec2, into the same arrays) as the
// physical reference, so both see the same load and the same page cache;
// it reports the ratio of their total times as "restart/raw".
func BenchmarkRestartL1Paired(b *testing.B) {
	cfg := testConfig(b.TempDir(), 2)
	err := comm.Run(benchRanks, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithLogger(benchLogger()))
		if err != nil {
			return err
		}
		defer r.Close()
		x := benchData(c.Rank())
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		return r.Checkpoint(1, 1) // no Finalize: the checkpoint stays
	})
	if err != nil {
		b.Fatal(err)
	}
	dst := make([][]float64, benchRanks)
	for r := range dst {
		dst[r] = make([]float64, benchBytes/8)
		for i := range dst[r] {
			dst[r][i] = -1
		}
	}
	b.SetBytes(benchRanks * benchBytes)
	var rawTotal, restartTotal time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		err := comm.Run(benchRanks, func(c comm.Comm) error {
			x := dst[c.Rank()]
			if err := c.Barrier(); err != nil {
				return err
			}
			t0 := time.Now()
			r, err := Init(cfg, c, WithLogger(benchLogger()))
			if err != nil {
				return err
			}
			defer r.Close()
			if err := Protect(r, 0, &x); err != nil {
				return err
			}
			if err := r.Recover(); err != nil {
				return err
			}
			if err := c.Barrier(); err != nil {
				return err
			}
			t1 := time.Now()
			if x[len(x)-1] != float64((len(x)-1)*benchRanks+c.Rank()) {
				return fmt.Errorf("rank %d restored wrong data", c.Rank())
			}
			// Raw: the same file's bytes into the same array.
			if err := c.Barrier(); err != nil {
				return err
			}
			t2 := time.Now()
			f, err := vfd.OpenRead(vfd.Sec2{}, r.src.Store.Path(r.src.Name))
			if err != nil {
				return err
			}
			if err := vfd.ReadFull(f, unsafeBytes(x), 0); err != nil {
				return errors.Join(err, f.Close())
			}
			if err := f.Close(); err != nil {
				return err
			}
			if err := c.Barrier(); err != nil {
				return err
			}
			if c.Rank() == 0 {
				restartTotal += t1.Sub(t0)
				rawTotal += time.Since(t2)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(restartTotal)/float64(rawTotal), "restart/raw")
	b.ReportMetric(float64(b.N)*benchRanks*benchBytes/(1<<20)/rawTotal.Seconds(), "raw-MiB/s")
	b.ReportMetric(float64(b.N)*benchRanks*benchBytes/(1<<20)/restartTotal.Seconds(), "restart-MiB/s")
}
