package h5ckpt

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

const (
	benchRanks = 4
	benchBytes = 64 << 20 // per rank
)

// BenchmarkWritePaired writes a 4-rank checkpoint of one float64 global
// dataset (64 MiB per rank, 1-D and 2-D row and column decompositions) as
// the HDF5 single file on disk (vfd.Sec2), and in every iteration also
// the raw reference: every rank writing the same bytes at its offset of
// one file and fsyncing it. h5/raw is the speed ratio (raw time / HDF5
// time, summed over alternating iterations); the goal is >= 0.9.
func BenchmarkWritePaired(b *testing.B) {
	elems := int64(benchRanks * benchBytes / 8)
	for _, tc := range []struct {
		name  string
		shape []int64
		grid  []int
	}{
		{"1D", []int64{elems}, []int{benchRanks}},
		{"2D-rows", []int64{elems / 4096, 4096}, []int{benchRanks, 1}},
		{"2D-blocks", []int64{elems / 4096, 4096}, []int{2, 2}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ds := dataset.Dataset{ID: 0, Name: "field", Shape: tc.shape, Type: fileformat.Float64}
			subs := make([]dataset.Subset, benchRanks)
			data := make([][]byte, benchRanks)
			for r := range subs {
				off, cnt, err := dataset.Block(tc.shape, tc.grid, r)
				if err != nil {
					b.Fatal(err)
				}
				subs[r] = dataset.Subset{VarID: 1, Dataset: 0, Offset: off, Count: cnt}
				data[r] = make([]byte, subs[r].Elements()*8)
				for i := range data[r] {
					data[r][i] = byte(i*7 + r)
				}
			}
			dir := b.TempDir()
			raw := filepath.Join(dir, "raw.bin")
			b.SetBytes(benchRanks * benchBytes)
			var rawTotal, h5Total time.Duration
			b.ResetTimer()
			err := comm.Run(benchRanks, func(c comm.Comm) error {
				r := c.Rank()
				for i := 0; i < b.N; i++ {
					// Raw: one file, every rank writes its bytes at its offset.
					if r == 0 {
						f, err := vfd.CreateTrunc(vfd.Sec2{}, raw)
						if err != nil {
							return err
						}
						if err := f.Close(); err != nil {
							return err
						}
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					t0 := time.Now()
					f, err := vfd.Sec2{}.Open(raw, vfd.ReadWrite)
					if err != nil {
						return err
					}
					if _, err := f.WriteAt(data[r], int64(r)*benchBytes); err != nil {
						return err
					}
					if err := f.Sync(); err != nil {
						return err
					}
					if err := f.Close(); err != nil {
						return err
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					t1 := time.Now()
					if r == 0 {
						if err := (vfd.Sec2{}).Remove(raw); err != nil {
							return err
						}
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					t2 := time.Now()
					v := fileformat.Var{ID: 1, Type: fileformat.Float64, Data: data[r]}
					name := Name(dir, "VPR-h5", int64(i))
					if err := Write(c, vfd.Sec2{}, name, Meta{CkptID: int64(i)}, []fileformat.Var{v}, []dataset.Dataset{ds}, subs[r:r+1]); err != nil {
						return err
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					t3 := time.Now()
					if r == 0 {
						rawTotal += t1.Sub(t0)
						h5Total += t3.Sub(t2)
						if err := (vfd.Sec2{}).Remove(name); err != nil {
							return err
						}
					}
				}
				return nil
			})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(rawTotal)/float64(h5Total), "h5/raw")
			mib := float64(b.N) * benchRanks * benchBytes / (1 << 20)
			b.ReportMetric(mib/rawTotal.Seconds(), "raw-MiB/s")
			b.ReportMetric(mib/h5Total.Seconds(), "h5-MiB/s")
		})
	}
}
