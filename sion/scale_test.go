package sion

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// scaleCost is what one rank received while writing a container.
type scaleCost struct {
	msgs, bytes, colls int64
}

func costOf(c comm.Counts) scaleCost { return scaleCost{c.Received, c.BytesReceived, c.Collectives} }

func maxCost(a, b scaleCost) scaleCost {
	return scaleCost{max(a.msgs, b.msgs), max(a.bytes, b.bytes), max(a.colls, b.colls)}
}

// TestParallelScale writes a set of 32 tasks per file collectively on 64
// to 2,048 in-process ranks (ParCreate, then CreateMapped with two tasks
// per rank) and checks by counted traffic that a rank's share does not
// grow with the number of ranks: a rank that leads nothing receives the
// same messages and bytes at every size, a file's leader its own file's
// table and block sizes, and rank 0 every rank's layout once.
func TestParallelScale(t *testing.T) {
	sizes := []int{64, 512, 2048}
	if testing.Short() {
		sizes = sizes[:2]
	}
	for _, mapped := range []bool{false, true} {
		var base [3]scaleCost // plain rank, leader, rank 0 per rank
		for i, n := range sizes {
			const perFile = 32
			nfiles := n / perFile
			d := vfd.NewCore()
			if err := d.MkdirAll("scale", 0o755); err != nil {
				t.Fatal(err)
			}
			counts := make([]comm.Counts, n)
			err := comm.Run(n, func(c comm.Comm) error {
				var pw *ParWriter
				var err error
				r := c.Rank()
				if mapped {
					// Two tasks per rank: global ranks r and n+r, in file
					// r/perFile at local ranks 2(r%perFile) and 2(r%perFile)+1.
					f, l := r/perFile, 2*(r%perFile)
					pw, err = CreateMapped(c, d, "scale/m.sion", []MappedTask{
						{GlobalRank: int64(r), ChunkSize: 100, File: f, LocalRank: l},
						{GlobalRank: int64(n + r), ChunkSize: 200, File: f, LocalRank: l + 1},
					}, nfiles, &Options{FSBlkSize: 512})
				} else {
					pw, err = ParCreate(c, d, "scale/p.sion", int64(100+r%7), nfiles, &Options{FSBlkSize: 512})
				}
				if err != nil {
					return err
				}
				for k := range pw.NTasks() {
					if _, err := pw.Task(k).Write(bytes.Repeat([]byte{byte(r + k)}, 50)); err != nil {
						return err
					}
				}
				err = pw.Close()
				counts[r] = comm.CountsOf(c)
				return err
			})
			if err != nil {
				t.Fatalf("mapped %v, %d ranks: %v", mapped, n, err)
			}
			var got [3]scaleCost
			for r := 1; r < n; r++ {
				kind := 0
				if r%perFile == 0 {
					kind = 1
				}
				got[kind] = maxCost(got[kind], costOf(counts[r]))
			}
			got[2] = costOf(counts[0])
			perRank := float64(got[2].bytes) / float64(n)
			t.Logf("mapped %-5v %5d ranks: plain rank %+v, leader %+v, rank 0 %+v (%.1f B per rank)", mapped, n, got[0], got[1], got[2], perRank)
			checkScaleRead(t, d, mapped, n)
			if i == 0 {
				base = got
				continue
			}
			// A leader's table holds its tasks' global ranks as varints:
			// a byte more per task once they pass 127.
			lead := got[1].msgs == base[1].msgs && got[1].colls == base[1].colls && got[1].bytes <= base[1].bytes+2*perFile
			if got[0] != base[0] || !lead {
				t.Errorf("mapped %v: at %d ranks a plain rank costs %+v and a leader %+v; at %d, %+v and %+v", mapped, n, got[0], got[1], sizes[0], base[0], base[1])
			}
			if basePer := float64(base[2].bytes) / float64(sizes[0]); perRank > 1.1*basePer+8 || got[2].colls != base[2].colls {
				t.Errorf("mapped %v: rank 0 receives %.1f B per rank in %d collectives at %d ranks, %.1f in %d at %d",
					mapped, perRank, got[2].colls, n, basePer, base[2].colls, sizes[0])
			}
		}
	}
}

// checkScaleRead reads two tasks of the container back.
func checkScaleRead(t *testing.T, d vfd.Driver, mapped bool, n int) {
	t.Helper()
	name, tasks := "scale/p.sion", []int{0, n - 1}
	if mapped {
		name, tasks = "scale/m.sion", []int{n - 1, 2*n - 1}
	}
	rd, err := Open(d, name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer rd.Close()
	for _, g := range tasks {
		b, err := rd.ReadTask(g)
		want := bytes.Repeat([]byte{byte(g % n)}, 50)
		if mapped && g >= n {
			want = bytes.Repeat([]byte{byte(g%n + 1)}, 50)
		}
		if err != nil || !bytes.Equal(b, want) {
			t.Errorf("%s task %d: %v, %d bytes %s", name, g, err, len(b), fmt.Sprintf("% x", b[:min(4, len(b))]))
		}
	}
}
