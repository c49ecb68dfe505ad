package levels

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// BenchmarkCommitSmall measures the fixed cost of a checkpoint — votes,
// intent marker, renames, directory syncs, both manifest copies, the
// retention of the previous one — with a 4 KiB file per rank on 4 ranks
// (2 nodes), against the physical reference in the same loop: each rank
// committing the same bytes atomically on its own (write, fsync, rename,
// directory fsync). ckpt/raw is the ratio of the two.
func BenchmarkCommitSmall(b *testing.B) {
	const ranks = 4
	data := make([]byte, 4<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	cl := newCluster(b, vfd.Sec2{}, b.TempDir(), 2)
	rawDir := b.TempDir()
	var raw, ckpt time.Duration
	b.ResetTimer()
	err := runWorld(ranks, func(c comm.Comm) error {
		env := cl.env(c)
		env.Logger = zap.NewNop()
		e, err := NewEngine(env, Config{Levels: []Level{Local1{}}})
		if err != nil {
			return err
		}
		if err := e.Open(); err != nil {
			return err
		}
		defer e.Wait()
		for i := 0; i < b.N; i++ {
			if err := c.Barrier(); err != nil {
				return err
			}
			t0 := time.Now()
			if err := vfd.WriteFileAtomic(vfd.Sec2{}, filepath.Join(rawDir, fmt.Sprintf("raw%d", c.Rank())), data); err != nil {
				return err
			}
			if err := c.Barrier(); err != nil {
				return err
			}
			t1 := time.Now()
			if _, _, err := e.Checkpoint(int64(i+1), L1, writeBytes(data)); err != nil {
				return err
			}
			if err := c.Barrier(); err != nil {
				return err
			}
			if c.Rank() == 0 {
				raw += t1.Sub(t0)
				ckpt += time.Since(t1)
			}
		}
		return nil
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(ckpt)/float64(raw), "ckpt/raw")
	b.ReportMetric(float64(ckpt.Microseconds())/float64(b.N), "ckpt-µs/op")
	b.ReportMetric(float64(raw.Microseconds())/float64(b.N), "raw-µs/op")
}
