package vfd_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/vfd"
)

// The benchmarks write and read one file of benchFile bytes in benchChunk
// pieces through each driver, with two physical references in the same
// set: a plain *os.File (the goal is sec2 within 5% of it) and memcpy
// (the reference for core). Run them a few times, e.g.
//
//	go test -run=^$ -bench=Seq -benchtime=5x -count=3 ./vfd
//
// and read the results as ratios (best of the runs, which is the least
// disturbed one): timings are noisy on a shared machine.
const (
	benchFile  = 64 << 20
	benchChunk = 1 << 20
)

type benchTarget struct {
	name string
	// open returns a file (created or opened as flag says) and a cleanup.
	open func(b *testing.B, dir string, flag vfd.Flag) vfd.File
}

// osFile adapts *os.File to vfd.File for the baseline.
type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func benchTargets() []benchTarget {
	viaDriver := func(d func(b *testing.B) vfd.Driver, name string) func(b *testing.B, dir string, flag vfd.Flag) vfd.File {
		return func(b *testing.B, dir string, flag vfd.Flag) vfd.File {
			f, err := d(b).Open(filepath.Join(dir, name), flag)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
	}
	return []benchTarget{
		{"os", func(b *testing.B, dir string, flag vfd.Flag) vfd.File {
			of := os.O_RDONLY
			if flag.Writable() {
				of = os.O_RDWR | os.O_CREATE
			}
			f, err := os.OpenFile(filepath.Join(dir, "os.bin"), of, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			return osFile{f}
		}},
		{"sec2", viaDriver(func(*testing.B) vfd.Driver { return vfd.Sec2{} }, "sec2.bin")},
		{"stdio", viaDriver(func(*testing.B) vfd.Driver { return vfd.NewStdio(vfd.Sec2{}, 0) }, "stdio.bin")},
		{"family", viaDriver(func(*testing.B) vfd.Driver { return vfd.NewFamily(vfd.Sec2{}, 16<<20) }, "fam-%03d.bin")},
		{"log", viaDriver(func(*testing.B) vfd.Driver { return vfd.NewLog(vfd.Sec2{}, nil) }, "log.bin")},
		{"direct", viaDriver(func(b *testing.B) vfd.Driver {
			d, err := vfd.NewDirect(0, 0)
			if err != nil {
				b.Fatal(err)
			}
			return d
		}, "direct.bin")},
	}
}

// writeAll writes the benchmark file through f in benchChunk pieces and closes it.
func writeAll(b *testing.B, f vfd.File, buf []byte) {
	for off := int64(0); off < benchFile; off += benchChunk {
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSeqWrite overwrites the file in every iteration, after one
// untimed iteration that creates it, so every target writes into warm
// page cache (or warm Go heap for core) and the driver's own cost shows:
// on a virtual machine the first touch of fresh memory, and ext4's
// flush-on-close after a truncate to zero, cost far more than the copy
// being measured and would drown it.
func BenchmarkSeqWrite(b *testing.B) {
	buf := vfd.AlignedBuffer(benchChunk, 4096)
	copy(buf, pattern(benchChunk))
	const trunc = vfd.ReadWrite | vfd.OCreate
	for _, tg := range benchTargets() {
		b.Run(tg.name, func(b *testing.B) {
			dir := b.TempDir()
			writeAll(b, tg.open(b, dir, trunc), buf)
			b.SetBytes(benchFile)
			b.ResetTimer()
			for b.Loop() {
				writeAll(b, tg.open(b, dir, trunc), buf)
			}
		})
	}
	b.Run("core", func(b *testing.B) {
		c := vfd.NewCore()
		open := func() vfd.File {
			f, err := c.Open("core.bin", vfd.ReadWrite|vfd.OCreate)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
		writeAll(b, open(), buf)
		b.SetBytes(benchFile)
		b.ResetTimer()
		for b.Loop() {
			writeAll(b, open(), buf)
		}
	})
	b.Run("memcpy", func(b *testing.B) {
		dst := make([]byte, benchFile)
		b.SetBytes(benchFile)
		b.ResetTimer()
		for b.Loop() {
			for off := 0; off < benchFile; off += benchChunk {
				copy(dst[off:], buf)
			}
		}
	})
}

func BenchmarkSeqRead(b *testing.B) {
	buf := vfd.AlignedBuffer(benchChunk, 4096)
	data := pattern(benchChunk)
	fill := func(b *testing.B, f vfd.File) {
		for off := int64(0); off < benchFile; off += benchChunk {
			if _, err := f.WriteAt(data, off); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, tg := range benchTargets() {
		b.Run(tg.name, func(b *testing.B) {
			dir := b.TempDir()
			w := tg.open(b, dir, vfd.ReadWrite|vfd.OCreate|vfd.OTrunc)
			fill(b, w)
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			f := tg.open(b, dir, vfd.ReadOnly)
			defer f.Close()
			b.SetBytes(benchFile)
			b.ResetTimer()
			for b.Loop() {
				for off := int64(0); off < benchFile; off += benchChunk {
					if err := vfd.ReadFull(f, buf, off); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
	b.Run("core", func(b *testing.B) {
		c := vfd.NewCore()
		f, err := vfd.Create(c, "core.bin")
		if err != nil {
			b.Fatal(err)
		}
		fill(b, f)
		b.SetBytes(benchFile)
		b.ResetTimer()
		for b.Loop() {
			for off := int64(0); off < benchFile; off += benchChunk {
				if err := vfd.ReadFull(f, buf, off); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("memcpy", func(b *testing.B) {
		src := make([]byte, benchFile)
		for off := 0; off < benchFile; off += benchChunk {
			copy(src[off:], data)
		}
		b.SetBytes(benchFile)
		b.ResetTimer()
		for b.Loop() {
			for off := 0; off < benchFile; off += benchChunk {
				copy(buf, src[off:off+benchChunk])
			}
		}
	})
}

// pairedTargets are the drivers compared chunk by chunk with a reference.
func pairedTargets() []benchTarget {
	tgs := benchTargets()[1:] // all but os, which is the reference
	return append(tgs, benchTarget{"core", func(b *testing.B, dir string, flag vfd.Flag) vfd.File {
		f, err := vfd.NewCore().Open("core.bin", vfd.ReadWrite|vfd.OCreate)
		if err != nil {
			b.Fatal(err)
		}
		return f
	}})
}

// benchPaired moves the benchmark file through ref and through the
// target one chunk at a time, alternating which goes first, and reports
// the ratio of the median chunk times ("x-ref": target over reference)
// and both throughputs from them. Interleaving at chunk granularity and
// taking medians cancel the swings of load and the preemptions on a
// shared machine that make separate benchmarks incomparable.
func benchPaired(b *testing.B, ref, tgt func(off int64) error) {
	var dRef, dTgt []time.Duration
	run := func(fn func(int64) error, off int64, acc *[]time.Duration) {
		start := time.Now()
		if err := fn(off); err != nil {
			b.Fatal(err)
		}
		*acc = append(*acc, time.Since(start))
	}
	b.SetBytes(benchFile)
	b.ResetTimer()
	iters := 0
	for b.Loop() {
		iters++
		for i, off := 0, int64(0); off < benchFile; i, off = i+1, off+benchChunk {
			if (i+iters)%2 == 0 {
				run(ref, off, &dRef)
				run(tgt, off, &dTgt)
			} else {
				run(tgt, off, &dTgt)
				run(ref, off, &dRef)
			}
		}
	}
	mRef, mTgt := median(dRef), median(dTgt)
	b.ReportMetric(float64(mTgt)/float64(mRef), "x-ref")
	b.ReportMetric(benchChunk/1e6/mTgt.Seconds(), "MB/s")
	b.ReportMetric(benchChunk/1e6/mRef.Seconds(), "MB/s-ref")
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkPairedWrite overwrites the file through each driver and,
// interleaved, through a plain *os.File (for core: into a byte slice,
// memcpy) and reports the ratio.
func BenchmarkPairedWrite(b *testing.B) {
	buf := vfd.AlignedBuffer(benchChunk, 4096)
	copy(buf, pattern(benchChunk))
	for _, tg := range pairedTargets() {
		b.Run(tg.name, func(b *testing.B) {
			dir := b.TempDir()
			f := tg.open(b, dir, vfd.ReadWrite|vfd.OCreate)
			defer f.Close()
			var ref func(int64) error
			if tg.name == "core" {
				mem := make([]byte, benchFile)
				ref = func(off int64) error { copy(mem[off:], buf); return nil }
			} else {
				o, err := os.OpenFile(filepath.Join(dir, "ref.bin"), os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				defer o.Close()
				ref = func(off int64) error { _, err := o.WriteAt(buf, off); return err }
			}
			tgt := func(off int64) error { _, err := f.WriteAt(buf, off); return err }
			for off := int64(0); off < benchFile; off += benchChunk { // warm-up: create both
				if err := errors.Join(ref(off), tgt(off)); err != nil {
					b.Fatal(err)
				}
			}
			benchPaired(b, ref, tgt)
		})
	}
}

// BenchmarkPairedRead reads the file through each driver and, interleaved,
// through a plain *os.File (for core: memcpy from a byte slice).
func BenchmarkPairedRead(b *testing.B) {
	data := pattern(benchChunk)
	buf := vfd.AlignedBuffer(benchChunk, 4096)
	for _, tg := range pairedTargets() {
		b.Run(tg.name, func(b *testing.B) {
			dir := b.TempDir()
			f := tg.open(b, dir, vfd.ReadWrite|vfd.OCreate)
			defer f.Close()
			var ref func(int64) error
			var fill func(int64) error
			if tg.name == "core" {
				mem := make([]byte, benchFile)
				fill = func(off int64) error { copy(mem[off:], data); return nil }
				ref = func(off int64) error { copy(buf, mem[off:off+benchChunk]); return nil }
			} else {
				o, err := os.OpenFile(filepath.Join(dir, "ref.bin"), os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				defer o.Close()
				fill = func(off int64) error { _, err := o.WriteAt(data, off); return err }
				ref = func(off int64) error { _, err := o.ReadAt(buf, off); return err }
			}
			for off := int64(0); off < benchFile; off += benchChunk {
				_, err := f.WriteAt(data, off)
				if err := errors.Join(err, fill(off)); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil { // stdio: flush its buffer
				b.Fatal(err)
			}
			tgt := func(off int64) error { return vfd.ReadFull(f, buf, off) }
			benchPaired(b, ref, tgt)
		})
	}
}

// BenchmarkCoreSync measures Sync and CrashClone of a 64 MiB core file
// after 1 MiB of it was rewritten: with copy-on-write pages both cost a
// page table (and the rewritten pages), not the 64 MiB. The bytes set are
// the rewritten megabyte; the reference is copying the whole file, which
// a naive snapshot would do.
func BenchmarkCoreSync(b *testing.B) {
	buf := pattern(benchChunk)
	c := vfd.NewCore()
	f, err := vfd.Create(c, "big")
	if err != nil {
		b.Fatal(err)
	}
	if err := c.SyncDir("/"); err != nil {
		b.Fatal(err)
	}
	for off := int64(0); off < benchFile; off += benchChunk {
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("write+sync", func(b *testing.B) {
		b.SetBytes(benchChunk)
		for i := 0; b.Loop(); i++ {
			if _, err := f.WriteAt(buf, int64(i%64)*benchChunk); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("crashclone", func(b *testing.B) {
		b.SetBytes(benchChunk)
		for b.Loop() {
			_ = c.CrashClone()
		}
	})
	b.Run("copy-whole-file", func(b *testing.B) {
		src, dst := make([]byte, benchFile), make([]byte, benchFile)
		b.SetBytes(benchChunk)
		for b.Loop() {
			copy(dst, src)
		}
	})
}

// BenchmarkWriteback is the checkpoint writer's pattern: wbWriters
// goroutines each write a wbFile-byte file in wbBlock pieces, with CPU
// work between the pieces (two BLAKE3 hashes of the piece, as a writer
// that hashes and encodes), then fsync it. Variants, in one set:
//
//   - raw: *os.File writes and fsync without the CPU work, the physical
//     reference (what the device costs);
//   - cpu-only: the CPU work without any I/O (what the CPU costs);
//   - cpu+fsync: the writer as it is, sec2, fdatasync at the end;
//   - cpu+writeback+fsync: the same with vfd.StartWriteback after each
//     piece, so the device writes while the CPU hashes.
//
// At best cpu+writeback+fsync approaches the larger of raw and cpu-only;
// cpu+fsync costs about their sum. The hint can only take away the data
// transfer, not the device cache flush each final sync still issues: on
// a fast virtual disk, where the flush is a large share of raw, the gain
// is small. The files are overwritten in place
// (created once, untimed), so every iteration writes the same bytes to
// the same blocks and freeing or discarding blocks plays no part. Each
// iteration moves wbWriters*wbFile bytes to the device: run with
// -benchtime=1x or 2x, e.g.
//
//	go test -run=^$ -bench=Writeback -benchtime=2x -count=3 ./vfd
//
// and compare the variants as ratios of ns/op (or MB/s) within one run;
// the interleaved sub-benchmark computes the ratios itself.
func BenchmarkWriteback(b *testing.B) {
	const (
		wbWriters = 4
		wbFile    = 128 << 20
		wbBlock   = 8 << 20
	)
	blk := pattern(wbBlock)
	work := func() byte {
		h1 := blake3.Sum256(blk)
		h2 := blake3.Sum256(blk)
		return h1[0] ^ h2[0]
	}
	// write writes one file through f (nil: no I/O) and syncs it.
	// Time spent by all writers in WriteAt, StartWriteback and Sync, for
	// the breakdown the interleaved sub-benchmark reports.
	var inWrite, inHint, inSync atomic.Int64
	since := func(acc *atomic.Int64, start time.Time) { acc.Add(int64(time.Since(start))) }
	write := func(f vfd.File, withCPU, hint bool) (byte, error) {
		var sink byte
		for off := int64(0); off < wbFile; off += wbBlock {
			if f != nil {
				start := time.Now()
				if _, err := f.WriteAt(blk, off); err != nil {
					return 0, err
				}
				since(&inWrite, start)
				if hint {
					start := time.Now()
					if err := vfd.StartWriteback(f, off, wbBlock); err != nil {
						return 0, err
					}
					since(&inHint, start)
				}
			}
			if withCPU {
				sink ^= work()
			}
		}
		if f == nil {
			return sink, nil
		}
		defer since(&inSync, time.Now())
		return sink, f.Sync()
	}
	openOS := func(name string) (vfd.File, error) {
		o, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		return osFile{o}, err
	}
	openSec2 := func(name string) (vfd.File, error) { return vfd.Sec2{}.Open(name, vfd.ReadWrite|vfd.OCreate) }
	variants := []struct {
		name    string
		open    func(name string) (vfd.File, error) // nil: no I/O
		withCPU bool
		hint    bool
	}{
		{"raw", openOS, false, false},
		{"cpu-only", nil, true, false},
		{"cpu+fsync", openSec2, true, false},
		{"cpu+writeback+fsync", openSec2, true, true},
	}
	dir := b.TempDir()
	for w := range wbWriters { // create the files once, untimed
		f, err := openOS(filepath.Join(dir, fmt.Sprintf("w%d", w)))
		if err == nil {
			_, err = write(f, false, false)
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	// run runs one variant: every writer's file written, synced, closed.
	run := func(open func(string) (vfd.File, error), withCPU, hint bool) error {
		var wg sync.WaitGroup
		errs := make([]error, wbWriters)
		for w := range wbWriters {
			wg.Go(func() {
				var f vfd.File
				if open != nil {
					var err error
					if f, err = open(filepath.Join(dir, fmt.Sprintf("w%d", w))); err != nil {
						errs[w] = err
						return
					}
				}
				_, err := write(f, withCPU, hint)
				if f != nil {
					err = errors.Join(err, f.Close())
				}
				errs[w] = err
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(wbWriters * wbFile)
			for range b.N {
				if err := run(v.open, v.withCPU, v.hint); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// interleaved runs every variant once per iteration, in a rotating
	// order, and reports the median time of each (ms-<variant>) and the
	// ratios that matter, which drifting load on a shared machine
	// disturbs less than separate sub-benchmarks: x-raw (the writer
	// over the raw reference, without and with the hint) and wb/fsync.
	// For the two writer variants it also reports the median time one
	// writer spent in WriteAt, StartWriteback and the final Sync
	// (ms-write-*, ms-hint-wb, ms-sync-*).
	b.Run("interleaved", func(b *testing.B) {
		times := make([][]time.Duration, len(variants))
		type split struct{ write, hint, sync []time.Duration }
		parts := make([]split, len(variants))
		for i := range b.N {
			for j := range variants {
				k := (i + j) % len(variants)
				v := variants[k]
				inWrite.Store(0)
				inHint.Store(0)
				inSync.Store(0)
				start := time.Now()
				if err := run(v.open, v.withCPU, v.hint); err != nil {
					b.Fatal(err)
				}
				times[k] = append(times[k], time.Since(start))
				p := &parts[k]
				p.write = append(p.write, time.Duration(inWrite.Load()/wbWriters))
				p.hint = append(p.hint, time.Duration(inHint.Load()/wbWriters))
				p.sync = append(p.sync, time.Duration(inSync.Load()/wbWriters))
			}
		}
		med := make([]float64, len(variants))
		for k, v := range variants {
			med[k] = float64(median(times[k]))
			b.ReportMetric(med[k]/1e6, "ms-"+v.name)
		}
		ms := func(d []time.Duration) float64 { return float64(median(d)) / 1e6 }
		b.ReportMetric(ms(parts[2].write), "ms-write-fsync")
		b.ReportMetric(ms(parts[2].sync), "ms-sync-fsync")
		b.ReportMetric(ms(parts[3].write), "ms-write-wb")
		b.ReportMetric(ms(parts[3].hint), "ms-hint-wb")
		b.ReportMetric(ms(parts[3].sync), "ms-sync-wb")
		b.ReportMetric(med[2]/med[0], "fsync-x-raw")
		b.ReportMetric(med[3]/med[0], "wb-x-raw")
		b.ReportMetric(med[3]/med[2], "wb/fsync")
	})
}

// BenchmarkDirectUnalignedRead reads pieces of a 16 MiB file through
// the direct driver (4 MiB bounce buffer): aligned (the fast path, the
// reference for each size), unaligned with a buffer whose address lines
// up with the file's blocks, unaligned with one that does not, and
// 100-byte reads (one block each, where a per-read allocation shows).
// ReportAllocs shows the pooled bounce buffers.
func BenchmarkDirectUnalignedRead(b *testing.B) {
	const file = 16 << 20
	dir := b.TempDir()
	name := filepath.Join(dir, "r")
	if err := vfd.WriteFileAtomic(vfd.Sec2{}, name, pattern(file)); err != nil {
		b.Fatal(err)
	}
	d, err := vfd.NewDirect(0, 0)
	if err != nil {
		b.Fatal(err)
	}
	f, err := vfd.OpenRead(d, name)
	if errors.Is(err, vfd.ErrUnsupported) {
		b.Skipf("skipping: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	cases := []struct {
		name  string
		n     int
		off   int64 // offset within each piece
		shift int   // buffer address modulo 4096
	}{
		{"aligned-1MiB", 1 << 20, 0, 0},
		{"lined-up-1MiB", 1 << 20, 100, 100},
		{"misaligned-1MiB", 1 << 20, 100, 0},
		{"aligned-8MiB", 8 << 20, 0, 0},
		{"lined-up-8MiB", 8 << 20, 100, 100},
		{"misaligned-8MiB", 8 << 20, 100, 0},
		{"100B", 100, 1000, 0},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			piece := max(c.n, 1<<20)
			buf := vfd.AlignedBuffer(c.n+4096, 4096)[c.shift : c.shift+c.n]
			b.SetBytes(int64(c.n))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				off := int64(i%(file/piece-1))*int64(piece) + c.off
				if err := vfd.ReadFull(f, buf, off); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDropBehind measures the kernel CPU time of writing new files
// through the page cache, three ways alternated in every iteration: a
// writer that keeps what it wrote cached ("keep", as a plain write
// does), one that drops each 16 MiB piece two pieces behind the write
// with vfd.DropCache ("drop", as the partner copies and parity files
// are written), and, for scale, the same bytes written over a file whose
// pages are cached already ("overwrite", no new page-cache memory). Each
// writes dbFiles files of dbFile bytes in 1 MiB writes and syncs them; it
// reports the process's system CPU seconds per GiB of each. On a virtual
// machine that hands free memory back to its host (virtio-balloon free
// page reporting) "keep" pays a host fault for every new page once the
// recently freed memory is used up, "drop" reuses its own pages.
func BenchmarkDropBehind(b *testing.B) {
	const (
		dbFiles = 8
		dbFile  = 256 << 20
		piece   = 16 << 20
		block   = 1 << 20
	)
	blk := pattern(block)
	dir := b.TempDir()
	sysTime := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Stime.Nano())
	}
	write := func(name string, drop, fresh bool) error {
		flag := vfd.ReadWrite | vfd.OCreate
		if fresh {
			flag |= vfd.OTrunc
		}
		f, err := vfd.Sec2{}.Open(name, flag)
		if err != nil {
			return err
		}
		for off := int64(0); off < dbFile; off += block {
			if _, err := f.WriteAt(blk, off); err != nil {
				return errors.Join(err, f.Close())
			}
			if end := off + block; drop && end%piece == 0 {
				_ = vfd.StartWriteback(f, end-piece, piece)
				if end >= 3*piece {
					_ = vfd.DropCache(f, end-3*piece, piece)
				}
			}
		}
		err = f.Sync()
		if drop {
			_ = vfd.DropCache(f, 0, 0)
		}
		return errors.Join(err, f.Close())
	}
	over := filepath.Join(dir, "over")
	if err := write(over, false, true); err != nil {
		b.Fatal(err)
	}
	variants := []struct {
		name        string
		drop, fresh bool
	}{{"keep", false, true}, {"drop", true, true}, {"overwrite", false, false}}
	sys := make([]time.Duration, len(variants))
	b.SetBytes(int64(len(variants)) * dbFiles * dbFile)
	i := 0
	for b.Loop() {
		for j := range variants {
			v := variants[(i+j)%len(variants)]
			s0 := sysTime()
			for n := range dbFiles {
				name := filepath.Join(dir, fmt.Sprintf("%s%d", v.name, n))
				if !v.fresh {
					name = over
				}
				if err := write(name, v.drop, v.fresh); err != nil {
					b.Fatal(err)
				}
			}
			sys[(i+j)%len(variants)] += sysTime() - s0
		}
		for _, v := range variants[:2] {
			for n := range dbFiles {
				_ = os.Remove(filepath.Join(dir, fmt.Sprintf("%s%d", v.name, n)))
			}
		}
		i++
	}
	gib := float64(i) * dbFiles * dbFile / (1 << 30)
	for k, v := range variants {
		b.ReportMetric(sys[k].Seconds()/gib, v.name+"-sys-s/GiB")
	}
}

// BenchmarkSharedFileWriters measures what writing one file from several
// writers costs against one file per writer, as the L4 container (one
// file, every rank at its task's offset) against the strong reference of
// ftigo bench (one file per rank): sfWriters goroutines each write
// sfBytes in sfPiece buffered writes through sec2 into a fresh file of
// their own, or all into one fresh file at offsets sfBytes apart. No
// sync: the files are removed after each round, so the device plays
// little part and what is measured is the copy into the page cache. The
// two variants alternate; the metric shared/own is the ratio of their
// median times. On Linux, buffered writes into one file take its inode's
// lock, so the writers of a shared file copy one at a time (ext4 and
// xfs alike), where writers of their own files copy in parallel:
//
//	go test -run=^$ -bench=SharedFileWriters -benchtime=20x ./vfd
func BenchmarkSharedFileWriters(b *testing.B) {
	const (
		sfWriters = 4
		sfBytes   = 64 << 20
		sfPiece   = 16 << 20
	)
	src := pattern(sfPiece)
	dir := b.TempDir()
	round := func(shared bool) (time.Duration, error) {
		name := func(w int) string {
			if shared {
				return filepath.Join(dir, "shared")
			}
			return filepath.Join(dir, fmt.Sprintf("own%d", w))
		}
		if shared {
			f, err := vfd.CreateTrunc(vfd.Sec2{}, name(0))
			if err != nil {
				return 0, err
			}
			if err := f.Close(); err != nil {
				return 0, err
			}
		}
		start := time.Now()
		errs := make([]error, sfWriters)
		var wg sync.WaitGroup
		for w := range sfWriters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				flag := vfd.ReadWrite | vfd.OCreate
				base := int64(0)
				if shared {
					flag, base = vfd.ReadWrite, int64(w)*sfBytes
				}
				f, err := vfd.Sec2{}.Open(name(w), flag)
				if err != nil {
					errs[w] = err
					return
				}
				for off := int64(0); off < sfBytes && err == nil; off += sfPiece {
					_, err = f.WriteAt(src, base+off)
				}
				errs[w] = errors.Join(err, f.Close())
			}()
		}
		wg.Wait()
		d := time.Since(start)
		for w := range sfWriters {
			if shared && w > 0 {
				break
			}
			errs = append(errs, os.Remove(name(w)))
		}
		return d, errors.Join(errs...)
	}
	var own, shared []time.Duration
	b.SetBytes(sfWriters * sfBytes)
	for i := range b.N {
		for k := range 2 {
			isShared := (i+k)%2 == 1
			d, err := round(isShared)
			if err != nil {
				b.Fatal(err)
			}
			if isShared {
				shared = append(shared, d)
			} else {
				own = append(own, d)
			}
		}
	}
	b.ReportMetric(float64(median(shared))/float64(median(own)), "shared/own")
	b.ReportMetric(median(own).Seconds()*1e3, "own-ms")
	b.ReportMetric(median(shared).Seconds()*1e3, "shared-ms")
}
