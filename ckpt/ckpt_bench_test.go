package ckpt

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
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

// BenchmarkCheckpointPaired takes checkpoints at L1 to L4 (4
// in-process ranks on 4 simulated nodes in one group, 64 MiB each, the
// default block size; L4 written inline into its container) in a running
// job, and in every iteration also
// persists the bytes the level must persist (L1 and L4 the data, L2 the data
// and a copy, L3 the data and a parity file as large, m = k) raw through
// vfd.Sec2 in two ways: "raw", one write and one fsync per file, the
// files of a rank one after the other; "strong", the strongest raw
// writer, 16 MiB writes each followed by vfd.StartWriteback as the
// FTI-FF writer does, and for two files the first one's fsync running
// while the second is written. The three run in rotating order, so that
// the machine's drift and the page cache's state hit all alike. It
// reports ckpt/raw and ckpt/strong, the ratios of the summed wall times,
// and the process CPU time (user and system) of each per GiB persisted.
// The goals: L1 and L4 <= 1.1, L2 <= 1.2, L3 <= 1.3 the
// strongest raw reference.
func BenchmarkCheckpointPaired(b *testing.B) {
	data := make([][]float64, benchRanks)
	for r := range data {
		data[r] = benchData(r)
	}
	for _, level := range []int{1, 2, 3, 4} {
		b.Run(fmt.Sprintf("L%d", level), func(b *testing.B) {
			rawDir := b.TempDir()
			cfg := testConfig(b.TempDir(), 1)
			cfg.GroupSize = benchRanks
			cfg.BlockSize = DefaultConfig().BlockSize
			files := map[int]int{1: 1, 2: 2, 3: 2, 4: 1}[level] // raw files per rank
			persisted := float64(files) * benchRanks * benchBytes
			b.SetBytes(int64(persisted))
			const nPhase = 3 // raw, strong, checkpoint
			var wall [nPhase]time.Duration
			var cpu [nPhase]cpuTimes
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
				names := make([]string, files)
				for f := range names {
					names[f] = filepath.Join(rawDir, fmt.Sprintf("raw%d-%d", c.Rank(), f))
				}
				phase := func(p int, i int) error {
					switch p {
					case 0:
						for _, n := range names {
							if err := rawWrite(n, x); err != nil {
								return err
							}
						}
						return nil
					case 1:
						return rawWriteStrong(names, unsafeBytes(x))
					}
					return r.Checkpoint(int64(i+1), level)
				}
				for i := 0; i < b.N; i++ {
					for j := range nPhase {
						p := (i + j) % nPhase
						if err := c.Barrier(); err != nil {
							return err
						}
						t0, c0 := time.Now(), processCPU()
						if err := phase(p, i); err != nil {
							return err
						}
						if err := c.Barrier(); err != nil {
							return err
						}
						if c.Rank() == 0 {
							wall[p] += time.Since(t0)
							cpu[p] = cpu[p].add(processCPU().sub(c0))
						}
						for _, n := range names {
							_ = (vfd.Sec2{}).Remove(n)
						}
						r.eng.Wait()
					}
				}
				return r.Finalize()
			})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(wall[2])/float64(wall[0]), "ckpt/raw")
			b.ReportMetric(float64(wall[2])/float64(wall[1]), "ckpt/strong")
			gib := float64(b.N) * persisted / (1 << 30)
			for p, name := range []string{"raw", "strong", "ckpt"} {
				b.ReportMetric(cpu[p].sys.Seconds()/gib, name+"-sys-s/GiB")
				b.ReportMetric(cpu[p].user.Seconds()/gib, name+"-user-s/GiB")
			}
		})
	}
}

// cpuTimes are the user and system CPU time of the whole process.
type cpuTimes struct{ user, sys time.Duration }

func processCPU() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}
	}
	return cpuTimes{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

func (c cpuTimes) sub(d cpuTimes) cpuTimes { return cpuTimes{c.user - d.user, c.sys - d.sys} }
func (c cpuTimes) add(d cpuTimes) cpuTimes { return cpuTimes{c.user + d.user, c.sys + d.sys} }

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

// rawWriteStrong is the strongest raw writer: it writes b to every file
// of names in 16 MiB pieces, starting the writeback of each piece (as the
// FTI-FF writer does), and syncs each file while the next is written.
func rawWriteStrong(names []string, b []byte) error {
	const piece = 16 << 20
	var syncs []chan error
	var errs []error
	for _, name := range names {
		f, err := vfd.CreateTrunc(vfd.Sec2{}, name)
		if err != nil {
			errs = append(errs, err)
			break
		}
		for off := 0; off < len(b) && err == nil; off += piece {
			end := min(off+piece, len(b))
			if _, err = f.WriteAt(b[off:end], int64(off)); err == nil {
				err = vfd.StartWriteback(f, int64(off), int64(end-off))
			}
		}
		if err != nil {
			errs = append(errs, err, f.Close())
			break
		}
		done := make(chan error, 1)
		go func() { done <- errors.Join(f.Sync(), f.Close()) }()
		syncs = append(syncs, done)
	}
	for _, d := range syncs {
		errs = append(errs, <-d)
	}
	return errors.Join(errs...)
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
