package vfd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ftigo/ftigo/vfd"
)

// The benchmarks write and read one file of benchFile bytes in benchChunk
// pieces through each driver, with two physical references in the same
// set: a plain *os.File (the goal is sec2 within 5% of it) and memcpy
// (the reference for core). Run them a few times, e.g.
//
//	go test -run=^$ -bench=Seq -benchtime=5x -count=3 ./vfd
//
// and read the results as ratios: timings are noisy on a shared machine.
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
				of = os.O_RDWR | os.O_CREATE | os.O_TRUNC
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

// BenchmarkSeqWrite writes the file anew (truncating it) in every
// iteration, after one untimed warm-up iteration so that every target
// starts with warm page cache and warm Go heap: on a virtual machine the
// first touch of fresh memory costs more than the copy being measured.
func BenchmarkSeqWrite(b *testing.B) {
	buf := vfd.AlignedBuffer(benchChunk, 4096)
	copy(buf, pattern(benchChunk))
	const trunc = vfd.ReadWrite | vfd.OCreate | vfd.OTrunc
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
			f, err := vfd.CreateTrunc(c, "core.bin")
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
