package partner

import (
	"errors"
	"path"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

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

// writebackPiece is the piece after which a strong writer starts the
// writeback of what it wrote, as the FTI-FF writer does
// (fileformat.writebackPiece).
const writebackPiece = 16 << 20

// writeStarting writes data to a new file name in writebackPiece pieces,
// starting the writeback of each, and returns the function that syncs
// and closes it: the data-file write of a checkpoint, and the strongest
// raw writer.
func writeStarting(name string, data []byte) (func() error, error) {
	_ = (vfd.Sec2{}).Remove(name)
	f, err := vfd.CreateTrunc(vfd.Sec2{}, name)
	if err != nil {
		return nil, err
	}
	for off := 0; off < len(data); off += writebackPiece {
		end := min(off+writebackPiece, len(data))
		if _, err := f.WriteAt(data[off:end], int64(off)); err != nil {
			return nil, errors.Join(err, f.Close())
		}
		if err := vfd.StartWriteback(f, int64(off), int64(end-off)); err != nil {
			return nil, errors.Join(err, f.Close())
		}
	}
	return func() error { return errors.Join(f.Sync(), f.Close()) }, nil
}

// strongRaw is the strongest raw reference of L2 and L3 for one rank:
// two files written with early writeback, the first one's fsync running
// while the second is written.
func strongRaw(a, b string, data []byte) error {
	syncA, err := writeStarting(a, data)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- syncA() }()
	syncB, err := writeStarting(b, data)
	if err == nil {
		err = syncB()
	}
	return errors.Join(err, <-done)
}

// BenchmarkPartnerPaired measures, in every iteration and in rotating
// order, four ways of persisting the bytes of an L2 or L3 checkpoint of 4
// ranks (one per simulated node, one group), each rank holding size
// bytes:
//   - "raw": every rank writes and fsyncs two files of its size, one
//     after the other (8 MiB writes);
//   - "strong": the strongest raw writer: 16 MiB writes each followed by
//     vfd.StartWriteback, the first file's fsync overlapped with the
//     second file's writes;
//   - the level ("l2" or "l3") as the engine runs it: the data file
//     written as the FTI-FF writer writes it (16 MiB writes with early
//     writeback), its fsync beside the transfer, which reads it back,
//     hashes it and writes the partner copy or the parity file, dropping
//     it from the page cache behind the write, with the default 1 MiB
//     block size;
//   - the level with Options.KeepCache ("l2-keep", "l3-keep"): the same
//     without dropping behind, as before issue 19.
//
// It reports the ratios of the summed wall times of the level against
// both raw writers, and the process CPU time of each way, user and
// system, per GiB persisted: on a loaded machine the CPU time is the
// steadier measure of the kernel cost of the writes.
func BenchmarkPartnerPaired(b *testing.B) {
	for _, level := range []string{"l2", "l3"} {
		for _, size := range benchSizes(b) {
			b.Run(level+"/"+strconv.Itoa(size>>20)+"MiB", func(b *testing.B) {
				benchPartnerPaired(b, level, size)
			})
		}
	}
}

func benchPartnerPaired(b *testing.B, level string, size int) {
	w := newBenchWorld(b, size)
	o := Options{Buffers: w.pool, BlockSize: DefaultBlockSize}
	persisted := float64(2*benchRanks*size) / (1 << 30)
	b.SetBytes(int64(2 * benchRanks * size))
	runLevel := func(o Options) error {
		return comm.Run(benchRanks, func(c comm.Comm) error {
			r := c.Rank()
			own := path.Join(w.node(r), "data")
			out := Ref{vfd.Sec2{}, path.Join(w.node(r), "out")}
			_ = (vfd.Sec2{}).Remove(out.Path)
			syncData, err := writeStarting(own, w.data)
			if err != nil {
				return err
			}
			done := make(chan error, 1)
			go func() { done <- syncData() }()
			fi := FileInfo{Ref: Ref{vfd.Sec2{}, own}, Size: int64(size), HashUnknown: true}
			if level == "l2" {
				_, err = CopyToPartner(c, w.topo, o, fi, out)
			} else {
				_, err = EncodeGroup(c, w.topo, o, 0, fi, out)
			}
			return errors.Join(err, <-done)
		})
	}
	keep := o
	keep.KeepCache = true
	steps := []struct {
		name string
		run  func() error
	}{
		{"raw", func() error {
			return parallel(benchRanks, func(r int) error {
				return errors.Join(writeSync(path.Join(w.node(r), "raw-a"), w.data), writeSync(path.Join(w.node(r), "raw-b"), w.data))
			})
		}},
		{"strong", func() error {
			return parallel(benchRanks, func(r int) error {
				return strongRaw(path.Join(w.node(r), "raw-a"), path.Join(w.node(r), "raw-b"), w.data)
			})
		}},
		{level, func() error { return runLevel(o) }},
		{level + "-keep", func() error { return runLevel(keep) }},
	}
	clean := func() {
		for r := range benchRanks {
			for _, f := range []string{"raw-a", "raw-b", "data", "out"} {
				_ = (vfd.Sec2{}).Remove(path.Join(w.node(r), f))
			}
		}
	}
	wall := make([]time.Duration, len(steps))
	cpu := make([]cpuTimes, len(steps))
	i := 0
	for b.Loop() {
		for j := range steps {
			s := (i + j) % len(steps)
			c0, t0 := processCPU(), time.Now()
			if err := steps[s].run(); err != nil {
				b.Fatal(err)
			}
			wall[s] += time.Since(t0)
			cpu[s] = cpu[s].add(processCPU().sub(c0))
			clean()
		}
		i++
	}
	for _, lv := range []int{2, 3} {
		b.ReportMetric(float64(wall[lv])/float64(wall[0]), steps[lv].name+"/raw")
		b.ReportMetric(float64(wall[lv])/float64(wall[1]), steps[lv].name+"/strong")
	}
	n := float64(i) * persisted
	for s, st := range steps {
		b.ReportMetric(cpu[s].sys.Seconds()/n, st.name+"-sys-s/GiB")
		b.ReportMetric(cpu[s].user.Seconds()/n, st.name+"-user-s/GiB")
	}
}

// BenchmarkTransferCache runs L2 and L3 checkpoints of 4 ranks as the
// engine takes them (see BenchmarkPartnerPaired), with the partner copy or
// parity file dropped from the page cache behind the write ("drop", the
// default) or kept there ("keep", Options.KeepCache), one way per
// sub-benchmark, so that a CPU profile of one shows where its kernel time
// goes:
//
//	go test -run '^$' -bench 'TransferCache/l2/keep' -benchtime 2x -big -cpuprofile keep.prof ./partner
//	go tool pprof -top -focus 'sink\).run' partner.test keep.prof
//
// It reports the process CPU time per GiB persisted.
func BenchmarkTransferCache(b *testing.B) {
	for _, level := range []string{"l2", "l3"} {
		for _, size := range benchSizes(b) {
			for _, keep := range []bool{false, true} {
				name := level + "/drop/"
				if keep {
					name = level + "/keep/"
				}
				b.Run(name+strconv.Itoa(size>>20)+"MiB", func(b *testing.B) {
					w := newBenchWorld(b, size)
					o := Options{Buffers: w.pool, BlockSize: DefaultBlockSize, KeepCache: keep}
					b.SetBytes(int64(2 * benchRanks * size))
					var cpu cpuTimes
					for b.Loop() {
						c0 := processCPU()
						err := comm.Run(benchRanks, func(c comm.Comm) error {
							r := c.Rank()
							own := path.Join(w.node(r), "data")
							out := Ref{vfd.Sec2{}, path.Join(w.node(r), "out")}
							syncData, err := writeStarting(own, w.data)
							if err != nil {
								return err
							}
							done := make(chan error, 1)
							go func() { done <- syncData() }()
							fi := FileInfo{Ref: Ref{vfd.Sec2{}, own}, Size: int64(size), HashUnknown: true}
							if level == "l2" {
								_, err = CopyToPartner(c, w.topo, o, fi, out)
							} else {
								_, err = EncodeGroup(c, w.topo, o, 0, fi, out)
							}
							return errors.Join(err, <-done)
						})
						cpu = cpu.add(processCPU().sub(c0))
						if err != nil {
							b.Fatal(err)
						}
						for r := range benchRanks {
							for _, f := range []string{"data", "out"} {
								_ = (vfd.Sec2{}).Remove(path.Join(w.node(r), f))
							}
						}
					}
					gib := float64(b.N) * float64(2*benchRanks*size) / (1 << 30)
					b.ReportMetric(cpu.sys.Seconds()/gib, "sys-s/GiB")
					b.ReportMetric(cpu.user.Seconds()/gib, "user-s/GiB")
				})
			}
		}
	}
}
