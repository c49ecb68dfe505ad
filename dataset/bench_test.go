package dataset

import (
	"flag"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

var benchBig = flag.Bool("big", false, "restart benchmarks with 256 MiB per rank (default 64 MiB)")

// BenchmarkRestartPaired writes a 4-rank checkpoint (one float64 global
// dataset, 1-D blocks, FTI-FF files on disk) and restores it, in each
// iteration, on 4 ranks the usual way (every rank reads its own file,
// verified: the same-count restart) and on M ranks through a plan from
// the files (every byte verified). restart/same is the time ratio, summed
// over alternating iterations; the goal is <= 1.5 for M = 3 and 8.
func BenchmarkRestartPaired(b *testing.B) {
	const n = 4
	per := int64(64 << 20)
	if *benchBig {
		per = 256 << 20
	}
	for _, m := range []int{3, 8} {
		for _, layout := range []string{"1D", "2D-blocks"} {
			b.Run(fmt.Sprintf("4to%d/%s", m, layout), func(b *testing.B) {
				shape, oldGrid, newGrid := []int64{n * per / 8}, []int{n}, []int{m}
				if layout == "2D-blocks" {
					shape = []int64{n * per / 8 / 4096, 4096}
					oldGrid = []int{2, 2}
					newGrid, _ = Dims(m, 2)
				}
				ds := Dataset{ID: 0, Name: "field", Shape: shape, Type: fileformat.Float64}
				dir := b.TempDir()
				views := func(k int, grid []int) []View {
					vs := make([]View, k)
					for r := range vs {
						off, cnt, err := Block(shape, grid, r)
						if err != nil {
							b.Fatal(err)
						}
						vs[r] = View{Datasets: []Dataset{ds}, Subsets: []Subset{{VarID: 1, Dataset: 0, Offset: off, Count: cnt}}}
					}
					return vs
				}
				oldV := views(n, oldGrid)
				paths := make([]string, n)
				for r := 0; r < n; r++ {
					s := oldV[r].Subsets[0]
					data := make([]byte, s.Elements()*8)
					for i := range data {
						data[i] = byte(i*13 + r)
					}
					paths[r] = filepath.Join(dir, fmt.Sprintf("Ckpt1-Rank%d.fti", r))
					f, err := vfd.CreateTrunc(vfd.Sec2{}, paths[r])
					if err != nil {
						b.Fatal(err)
					}
					if _, _, err := fileformat.Write(f, fileformat.Meta{CkptID: 1, Rank: int32(r)}, []fileformat.Var{{ID: 1, Type: fileformat.Float64, Data: data}}, nil,
						fileformat.WithDatasets(oldV[r].Datasets, oldV[r].Subsets), fileformat.WithSync()); err != nil {
						b.Fatal(err)
					}
					if err := f.Close(); err != nil {
						b.Fatal(err)
					}
				}
				newV := views(m, newGrid)
				nw, err := NewDecomposition(newV)
				if err != nil {
					b.Fatal(err)
				}
				bufs := make([][]byte, m)
				for q := range bufs {
					bufs[q] = make([]byte, nw.VarSize(newV[q].Subsets[0]))
				}
				same := make([][]byte, n)
				for r := range same {
					same[r] = make([]byte, oldV[r].Subsets[0].Elements()*8)
				}
				open := func() (Files, []vfd.File) {
					rs := make(Files, n)
					fs := make([]vfd.File, n)
					for r := range rs {
						f, err := vfd.OpenRead(vfd.Sec2{}, paths[r])
						if err != nil {
							b.Fatal(err)
						}
						rd, err := fileformat.Open(f)
						if err != nil {
							b.Fatal(err)
						}
						rs[r], fs[r] = rd, f
					}
					return rs, fs
				}
				b.SetBytes(n * per)
				var sameTotal, redisTotal time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					// Same count: rank r opens and reads its own file.
					t0 := time.Now()
					var wg sync.WaitGroup
					errs := make([]error, n)
					for r := 0; r < n; r++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							f, err := vfd.OpenRead(vfd.Sec2{}, paths[r])
							if err != nil {
								errs[r] = err
								return
							}
							defer f.Close()
							rd, err := fileformat.Open(f)
							if err == nil {
								err = rd.ReadVar(1, same[r])
							}
							errs[r] = err
						}()
					}
					wg.Wait()
					sameTotal += time.Since(t0)
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
					// M ranks: each opens the old files' metadata, plans
					// and reads the runs it needs.
					t1 := time.Now()
					errs = make([]error, m)
					for q := 0; q < m; q++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							rs, fs := open()
							defer func() {
								for _, f := range fs {
									f.Close()
								}
							}()
							old, err := FromFiles(rs)
							if err != nil {
								errs[q] = err
								return
							}
							p, err := NewPlan(old, nw)
							if err == nil {
								err = p.Execute(q, rs, map[int32][]byte{1: bufs[q]})
							}
							errs[q] = err
						}()
					}
					wg.Wait()
					redisTotal += time.Since(t1)
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(redisTotal)/float64(sameTotal), "restart/same")
				b.ReportMetric(sameTotal.Seconds()/float64(b.N), "same-s")
				b.ReportMetric(redisTotal.Seconds()/float64(b.N), "restart-s")
			})
		}
	}
}
