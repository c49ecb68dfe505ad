package levels

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// BenchmarkL4Checkpoint times a 4-rank L4 checkpoint (data file written
// locally, flushed into the container, committed) against the physical
// reference in the same run: 4 goroutines writing and syncing the same
// bytes to 4 plain files through vfd.Sec2. Compare MB/s as a ratio.
func BenchmarkL4Checkpoint(b *testing.B) {
	const ranks = 4
	for _, per := range []int{16 << 20, 64 << 20} {
		data := make([]byte, per)
		for i := range data {
			data[i] = byte(i*7 + i>>13)
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
		for _, lvl := range []ID{L1, L4} {
			b.Run(fmt.Sprintf("%dMiB/%v", per>>20, lvl), func(b *testing.B) {
				cl := newCluster(b, vfd.Sec2{}, b.TempDir(), 2)
				b.SetBytes(int64(ranks * per))
				err := comm.Run(ranks, func(c comm.Comm) error {
					env := cl.env(c)
					env.Logger = nil
					e, err := NewEngine(env, Config{Levels: []Level{Local1{}, Global4{}}})
					if err != nil {
						return err
					}
					if err := e.Open(); err != nil {
						return err
					}
					if c.Rank() == 0 {
						b.ResetTimer()
					}
					for i := 0; i < b.N; i++ {
						if _, _, err := e.Checkpoint(int64(i+1), lvl, writeBytes(data)); err != nil {
							return err
						}
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
