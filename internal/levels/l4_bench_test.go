package levels

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// BenchmarkL4Checkpoint times a 4-rank checkpoint at L1, at L4 with the
// data file written locally and copied into the container ("L4"), and at
// the inline L4 writing straight into the container ("L4inline"), against
// the physical reference in the same run: 4 goroutines writing and syncing
// the same bytes to 4 plain files through vfd.Sec2. Compare MB/s as a
// ratio. The writer returns a digest computed before the timer starts, so
// the figures are the levels' I/O cost alone (hashing is the file
// format's, measured in fileformat's benchmarks).
func BenchmarkL4Checkpoint(b *testing.B) {
	const ranks = 4
	for _, per := range []int{64 << 20, 256 << 20} {
		data := make([]byte, per)
		for i := range data {
			data[i] = byte(i*7 + i>>13)
		}
		var d Digest
		copy(d[:], blake3Sum(data))
		write := func(f vfd.File) (int64, Digest, bool, error) {
			_, err := f.WriteAt(data, 0)
			return int64(len(data)), d, true, err
		}
		b.Run(fmt.Sprintf("%dMiB/raw", per>>20), func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(int64(ranks * per))
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for r := 0; r < ranks; r++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						name := filepath.Join(dir, fmt.Sprintf("raw%d", r))
						f, err := vfd.CreateTrunc(vfd.Sec2{}, name)
						if err != nil {
							b.Error(err)
							return
						}
						if _, err := f.WriteAt(data, 0); err != nil {
							b.Error(err)
						}
						if err := f.Sync(); err != nil {
							b.Error(err)
						}
						_ = f.Close()
					}()
				}
				wg.Wait()
			}
		})
		for _, mode := range []struct {
			name   string
			lvl    ID
			inline bool
		}{{"L1", L1, false}, {"L4", L4, false}, {"L4inline", L4, true}} {
			lvl := mode.lvl
			b.Run(fmt.Sprintf("%dMiB/%s", per>>20, mode.name), func(b *testing.B) {
				cl := newCluster(b, vfd.Sec2{}, b.TempDir(), 2)
				b.SetBytes(int64(ranks * per))
				err := comm.Run(ranks, func(c comm.Comm) error {
					env := cl.env(c)
					env.Logger = nil
					e, err := NewEngine(env, Config{Levels: []Level{Local1{}, Global4{Inline: mode.inline}}})
					if err != nil {
						return err
					}
					if err := e.Open(); err != nil {
						return err
					}
					if c.Rank() == 0 {
						b.ResetTimer()
					}
					var sum Stats
					for i := 0; i < b.N; i++ {
						_, st, err := e.Checkpoint(int64(i+1), lvl, write)
						if err != nil {
							return err
						}
						sum.Write += st.Write
						sum.Protect += st.Protect
						sum.Commit += st.Commit
						sum.Clean += st.Clean
					}
					e.Wait()
					if c.Rank() == 0 {
						// Where the time goes, per checkpoint on rank 0.
						n := float64(b.N) * 1e6
						b.ReportMetric(float64(sum.Write)/n, "write-ms")
						b.ReportMetric(float64(sum.Protect)/n, "protect-ms")
						b.ReportMetric(float64(sum.Commit+sum.Clean)/n, "commit-ms")
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

func blake3Sum(b []byte) []byte {
	s := blake3.Sum256(b)
	return s[:]
}
