package levels

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// BenchmarkCommitSmall measures the fixed cost of a checkpoint — votes,
// intent marker, directory syncs, both manifest copies, the retention of
// the previous one — with a 4 KiB and a 1 MiB file per rank on 4 ranks
// (2 nodes), against the physical reference in the same loop: each rank
// committing the same bytes atomically on its own (write, fsync, rename,
// directory fsync). ckpt/raw is the ratio of the two, over-raw-µs/op the
// difference per checkpoint. The background work a checkpoint leaves
// (the superseded checkpoint's removal) runs in the next iteration's
// raw write, as it would beside the application's computation.
func BenchmarkCommitSmall(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) { benchCommitSmall(b, size) })
	}
}

func benchCommitSmall(b *testing.B, size int) {
	const ranks = 4
	data := make([]byte, size)
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
	b.ReportMetric(float64((ckpt-raw).Microseconds())/float64(b.N), "over-raw-µs/op")
}

// slowSync is a driver whose file and directory syncs each take lat (a
// modelled device flush; concurrent syncs overlap, as a journal commit
// shared by several fsyncs does), over an in-memory file system.
type slowSync struct {
	vfd.Driver
	lat time.Duration
}

func (d slowSync) Open(name string, flag vfd.Flag) (vfd.File, error) {
	f, err := d.Driver.Open(name, flag)
	if err != nil {
		return nil, err
	}
	return slowFile{File: f, lat: d.lat}, nil
}

func (d slowSync) SyncDir(name string) error {
	time.Sleep(d.lat)
	return d.Driver.SyncDir(name)
}

type slowFile struct {
	vfd.File
	lat time.Duration
}

func (f slowFile) Sync() error {
	time.Sleep(f.lat)
	return f.File.Sync()
}

// BenchmarkCommitRounds measures the critical path of a checkpoint's
// fixed cost in device flushes: 4 ranks (one per node) take L1, L2, L3
// (at L2 and L3 also with the data digest left to the level, as ckpt
// writes them) or inline L4 checkpoints of 1 MiB each in a loop (retention included) on two
// in-memory file systems, alternately: one whose every file or directory
// sync takes lat (concurrent ones overlapping, as syncs sharing a
// journal commit do) and one whose syncs take no time. ckpt-rounds/op is
// the difference of the time until Checkpoint returns, over lat: how
// many flushes the checkpoint waits for one after the other, without its
// CPU time, which cpu-µs/op gives (the time on the file system without
// latency); flush-rounds/op likewise includes the background work the
// checkpoint leaves (the superseded checkpoint's removal, the next intent
// marker).
func BenchmarkCommitRounds(b *testing.B) {
	const ranks, lat = 4, 10 * time.Millisecond
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	type benchCase struct {
		lvl ID
		// pending: the WriteFunc gives no digest, which L2's and L3's
		// Protect then computes (ckpt's case, [DataReader]).
		pending bool
	}
	for _, bc := range []benchCase{{L1, false}, {L2, false}, {L2, true}, {L3, false}, {L3, true}, {L4, false}} {
		lvl := bc.lvl
		write := writeBytes(data)
		name := lvl.String()
		if bc.pending {
			name += "/digest-pending"
			write = func(f vfd.File) (int64, Digest, bool, error) {
				_, err := f.WriteAt(data, 0)
				return int64(len(data)), Digest{}, false, err
			}
		}
		b.Run(name, func(b *testing.B) {
			var inCkpt, total [2]time.Duration // with latency, without
			for i := 0; i < b.N; i++ {
				for k, l := range []time.Duration{lat, 0} {
					cl := newCluster(b, slowSync{Driver: vfd.NewCore(), lat: l}, "/r", 1)
					err := runWorld(ranks, func(c comm.Comm) error {
						env := cl.env(c)
						env.Logger = zap.NewNop()
						env.Topo, _ = partner.NewTopology(ranks, 1, ranks, nil)
						e, err := NewEngine(env, Config{Levels: []Level{Local1{}, Partner2{}, RS3{}, Global4{Inline: true}}})
						if err != nil {
							return err
						}
						if err := e.Open(); err != nil {
							return err
						}
						defer e.Wait()
						// The measured checkpoint is the third: steady
						// state, with a checkpoint to supersede.
						for j := 0; j < 3; j++ {
							if err := c.Barrier(); err != nil {
								return err
							}
							t0 := time.Now()
							if _, _, err := e.Checkpoint(int64(j+1), lvl, write); err != nil {
								return err
							}
							t1 := time.Now()
							e.Wait() // the background work it left
							if err := c.Barrier(); err != nil {
								return err
							}
							if c.Rank() == 0 && j == 2 {
								inCkpt[k] += t1.Sub(t0)
								total[k] += time.Since(t0)
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(inCkpt[0]-inCkpt[1])/n/float64(lat), "ckpt-rounds/op")
			b.ReportMetric(float64(total[0]-total[1])/n/float64(lat), "flush-rounds/op")
			b.ReportMetric(float64(inCkpt[1].Microseconds())/n, "cpu-µs/op")
		})
	}
}
