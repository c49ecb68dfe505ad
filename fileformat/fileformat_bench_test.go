package fileformat

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/zeebo/blake3"
	"golang.org/x/sys/unix"

	"github.com/ftigo/ftigo/vfd"
)

var benchSizes = []int{1 << 20, 16 << 20, 256 << 20}

func benchName(n int) string { return fmt.Sprintf("%dMiB", n>>20) }

// BenchmarkWrite compares writing one variable as an FTI-FF file (with and
// without hashing) against the physical reference: a raw vfd.Sec2 write of
// the same bytes to a truncated file. Run the 256 MiB case with -benchtime=2x.
func BenchmarkWrite(b *testing.B) {
	for _, n := range benchSizes {
		data := pattern(n, 1)
		for _, sync := range []bool{false, true} {
			suffix := ""
			if sync {
				suffix = "+sync"
			}
			b.Run(benchName(n)+"/raw"+suffix, func(b *testing.B) {
				f := benchFile(b)
				b.SetBytes(int64(n))
				b.ResetTimer()
				defer reportCPU(b, cpuNow())
				for i := 0; i < b.N; i++ {
					if err := f.Truncate(0); err != nil {
						b.Fatal(err)
					}
					if _, err := vfd.WriteAtType(f, vfd.MemDraw, data, HeaderSize); err != nil {
						b.Fatal(err)
					}
					if sync {
						if err := f.Sync(); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
			modes := []struct {
				name string
				opts []Option
			}{{"hash", nil}, {"nohash", []Option{WithoutHash()}}}
			if sync {
				// WithSync overlaps the device flush with the hashing.
				modes = append(modes, struct {
					name string
					opts []Option
				}{"hash-withsync", []Option{WithSync()}})
			}
			for _, mode := range modes {
				b.Run(benchName(n)+"/"+mode.name+suffix, func(b *testing.B) {
					f := benchFile(b)
					vars := []Var{{ID: 1, Type: Bytes, Data: data}}
					b.SetBytes(int64(n))
					b.ResetTimer()
					defer reportCPU(b, cpuNow())
					for i := 0; i < b.N; i++ {
						if _, _, err := Write(f, Meta{CkptID: int64(i)}, vars, nil, mode.opts...); err != nil {
							b.Fatal(err)
						}
						if sync {
							if err := f.Sync(); err != nil {
								b.Fatal(err)
							}
						}
					}
				})
			}
		}
	}
}

// BenchmarkRead compares a verified ReadVar (after Open) against a raw
// vfd.Sec2 read of the same bytes into the same buffer.
func BenchmarkRead(b *testing.B) {
	for _, n := range benchSizes {
		data := pattern(n, 2)
		for _, cold := range []bool{false, true} {
			suffix := ""
			if cold {
				suffix = "+cold"
			}
			b.Run(benchName(n)+"/raw"+suffix, func(b *testing.B) {
				f := benchFile(b)
				if _, err := f.WriteAt(data, HeaderSize); err != nil {
					b.Fatal(err)
				}
				dst := make([]byte, n)
				b.SetBytes(int64(n))
				b.ResetTimer()
				defer reportCPU(b, cpuNow())
				for i := 0; i < b.N; i++ {
					if cold {
						b.StopTimer()
						dropCache(b, f)
						b.StartTimer()
					}
					if err := vfd.ReadFull(f, dst, HeaderSize); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(benchName(n)+"/verify"+suffix, func(b *testing.B) {
				f := benchFile(b)
				if _, _, err := Write(f, Meta{}, []Var{{ID: 1, Data: data}}, nil); err != nil {
					b.Fatal(err)
				}
				r, err := Open(f)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(n))
				b.ResetTimer()
				defer reportCPU(b, cpuNow())
				for i := 0; i < b.N; i++ {
					if cold {
						b.StopTimer()
						dropCache(b, f)
						b.StartTimer()
					}
					if err := r.Verify(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(benchName(n)+"/verified"+suffix, func(b *testing.B) {
				f := benchFile(b)
				if _, _, err := Write(f, Meta{}, []Var{{ID: 1, Data: data}}, nil); err != nil {
					b.Fatal(err)
				}
				dst := make([]byte, n)
				b.SetBytes(int64(n))
				b.ResetTimer()
				defer reportCPU(b, cpuNow())
				for i := 0; i < b.N; i++ {
					if cold {
						b.StopTimer()
						dropCache(b, f)
						b.StartTimer()
					}
					r, err := Open(f)
					if err != nil {
						b.Fatal(err)
					}
					if err := r.ReadVar(1, dst); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkBLAKE3 measures BLAKE3 on one core (block hashes of the
// default dCP block size) against memcpy of the same bytes;
// blocks-avx2-1core hashes the same blocks with the 8-way implementation
// the format's other hashes use (what block hashing cost before
// BlockHash's 16-way path).
func BenchmarkBLAKE3(b *testing.B) {
	data := pattern(16<<20, 3)
	out := make([][HashSize]byte, numBlocks(int64(len(data)), DefaultBlockSize))
	b.Run("blocks-1core", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		defer reportCPU(b, cpuNow())
		for i := 0; i < b.N; i++ {
			hashBlocks(data, DefaultBlockSize, out, 1)
		}
	})
	b.Run("blocks-avx2-1core", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		defer reportCPU(b, cpuNow())
		h := blake3.New()
		for i := 0; i < b.N; i++ {
			for k := range out {
				h.Reset()
				_, _ = h.Write(blockOf(data, k, DefaultBlockSize))
				h.Sum(out[k][:0])
			}
		}
	})
	b.Run("blocks-parallel", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		defer reportCPU(b, cpuNow())
		for i := 0; i < b.N; i++ {
			hashBlocks(data, DefaultBlockSize, out, runtime.GOMAXPROCS(0))
		}
	})
	b.Run("whole-1core", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		defer reportCPU(b, cpuNow())
		for i := 0; i < b.N; i++ {
			_ = blake3.Sum256(data)
		}
	})
	b.Run("memcpy", func(b *testing.B) {
		dst := make([]byte, len(data))
		b.SetBytes(int64(len(data)))
		defer reportCPU(b, cpuNow())
		for i := 0; i < b.N; i++ {
			copy(dst, data)
		}
	})
}

// dropCache syncs f and asks the kernel to drop its cached pages, so the
// next read comes from the device (only this file's pages are dropped).
func dropCache(b *testing.B, f vfd.File) {
	b.Helper()
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	fd, ok := f.(vfd.Fder)
	if !ok {
		b.Skip("file has no descriptor")
	}
	if err := unix.Fadvise(int(fd.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}

// cpuNow returns the process's user+system CPU time. Under a shared,
// loaded machine wall time is noisy; CPU time per op says what the work
// itself costs.
func cpuNow() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per op since start as "cpu-ms/op".
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuNow()-start)/float64(b.N)/1e6, "cpu-ms/op")
}

func benchFile(b *testing.B) vfd.File {
	b.Helper()
	f, err := vfd.CreateTrunc(vfd.Sec2{}, filepath.Join(b.TempDir(), "bench.fti"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	return f
}
