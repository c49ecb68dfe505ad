package dhdf

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/vfd"
)

const benchRanks, benchN = 4, 4096

// benchBuffers returns each rank's 1024x4096 float64 block.
func benchBuffers() [][]byte {
	rows := benchN / benchRanks
	bufs := make([][]byte, benchRanks)
	for r := range bufs {
		bufs[r] = make([]byte, rows*benchN*8)
		for i := range bufs[r] {
			bufs[r][i] = byte(i*7 + r)
		}
	}
	return bufs
}

// writeRaw is the physical reference: each rank's bytes written to its own
// file through vfd.Sec2 and synced.
func writeRaw(dir string, bufs [][]byte) error {
	var wg sync.WaitGroup
	errs := make([]error, len(bufs))
	for r := range bufs {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			f, err := vfd.CreateTrunc(vfd.Sec2{}, filepath.Join(dir, fmt.Sprintf("raw.%d", r)))
			if err != nil {
				errs[r] = err
				return
			}
			_, err = f.WriteAt(bufs[r], 0)
			if err == nil {
				err = f.Sync()
			}
			errs[r] = errors.Join(err, f.Close())
		}(r)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writeSet writes the same bytes as one distributed SDS from 4 ranks.
func writeSet(dir string, bufs [][]byte) error { return writeSetOpts(dir, bufs, Options{}) }

func writeSetOpts(dir string, bufs [][]byte, opts Options) error {
	rows := benchN / benchRanks
	return comm.Run(benchRanks, func(c comm.Comm) error {
		w, err := CreateParallel(c, filepath.Join(dir, "set"), opts)
		if err != nil {
			return err
		}
		if err := w.DefineSDS(SDS{Name: "field", Type: h5.Float64, Dims: []uint64{benchN, benchN}}); err != nil {
			return err
		}
		r := c.Rank()
		if err := w.WriteChunk("field", 0, "", []uint64{uint64(r * rows), 0}, []uint64{uint64(rows), benchN}, bufs[r]); err != nil {
			return err
		}
		return w.Close()
	})
}

// BenchmarkDistributedWrite writes a 4096x4096 float64 array (128 MiB)
// from 4 ranks, 1024 rows each, as a set (each rank its AHF, rank 0 the
// MHF, everything synced) and, as the physical reference in the same run,
// the same bytes as 4 raw files written and synced through vfd.Sec2. Read
// the two MB/s figures as a ratio; absolute numbers depend on the disk and
// on the load. Run with -benchtime=3x.
func BenchmarkDistributedWrite(b *testing.B) {
	bufs := benchBuffers()
	total := int64(benchN * benchN * 8)
	b.Run("raw-sec2", func(b *testing.B) {
		root := b.TempDir()
		b.SetBytes(total)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			dir := filepath.Join(root, fmt.Sprint(i))
			if err := (vfd.Sec2{}).MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := writeRaw(dir, bufs); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := (vfd.Sec2{}).RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	for _, one := range []bool{false, true} {
		name := "dhdf-set"
		if one {
			name = "dhdf-set-onesync"
		}
		b.Run(name, func(b *testing.B) {
			root := b.TempDir()
			b.SetBytes(total)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(root, fmt.Sprint(i))
				if err := (vfd.Sec2{}).MkdirAll(dir, 0o755); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := writeSetOpts(dir, bufs, Options{OneSyncAHF: one}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := (vfd.Sec2{}).RemoveAll(dir); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// writeRawTwoSyncs is raw plus what costs a set most on storage with
// expensive barriers: after the data sync, a 48-byte rewrite at offset 0
// and a second sync per file (the superblock-last commit).
func writeRawTwoSyncs(dir string, bufs [][]byte) error {
	if err := writeRaw(dir, bufs); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(bufs))
	for r := range bufs {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			f, err := vfd.Sec2{}.Open(filepath.Join(dir, fmt.Sprintf("raw.%d", r)), vfd.ReadWrite)
			if err != nil {
				errs[r] = err
				return
			}
			_, err = f.WriteAt(bufs[r][:48], 0)
			if err == nil {
				err = f.Sync()
			}
			errs[r] = errors.Join(err, f.Close())
		}(r)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// BenchmarkDistributedWriteInterleaved runs, in every iteration and in
// rotating order so that load drift on a shared machine hits all alike:
// the raw reference, raw with a second sync per file, the set, and the
// set with Options.OneSyncAHF; each in a fresh directory. It reports each
// throughput and each ratio to raw (goal for the set: >= 0.9).
func BenchmarkDistributedWriteInterleaved(b *testing.B) {
	bufs := benchBuffers()
	total := float64(benchN * benchN * 8)
	root := b.TempDir()
	variants := []struct {
		name string
		fn   func(dir string, bufs [][]byte) error
	}{
		{"raw", writeRaw},
		{"raw2sync", writeRawTwoSyncs},
		{"set", writeSet},
		{"set1sync", func(dir string, bufs [][]byte) error { return writeSetOpts(dir, bufs, Options{OneSyncAHF: true}) }},
	}
	times := make([]time.Duration, len(variants))
	b.SetBytes(int64(float64(len(variants)) * total))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range variants {
			v := (k + i) % len(variants)
			// A fresh directory each time, so no variant pays for
			// truncating the previous iteration's files.
			dir := filepath.Join(root, fmt.Sprintf("%d-%d", i, k))
			if err := (vfd.Sec2{}).MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			st := time.Now()
			if err := variants[v].fn(dir, bufs); err != nil {
				b.Fatal(err)
			}
			times[v] += time.Since(st)
			if err := (vfd.Sec2{}).RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
		}
	}
	n := float64(b.N)
	for k, v := range variants {
		b.ReportMetric(total*n/times[k].Seconds()/1e6, v.name+"-MB/s")
		if k > 0 {
			b.ReportMetric(times[0].Seconds()/times[k].Seconds(), v.name+"/raw")
		}
	}
}
