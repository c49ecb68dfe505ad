package comm

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// scaleOp is one collective step of the scale test, run by every rank.
type scaleOp struct {
	name string
	fn   func(c Comm) error
	// rooted: rank 0's share may grow with the number of ranks (it
	// gathers or hands out every rank's part); every other rank's may not.
	rooted bool
}

var errScale = errors.New("disk full")

var scaleOps = []scaleOp{
	{"Barrier", func(c Comm) error { return c.Barrier() }, false},
	{"Bcast 64 B", func(c Comm) error { return c.Bcast(0, make([]byte, 64)) }, false},
	{"AllreduceInt64", func(c Comm) error { _, err := c.AllreduceInt64(int64(c.Rank()), Max); return err }, false},
	{"AllreduceInt64s x4", func(c Comm) error {
		return AllreduceInt64s(c, []int64{1, int64(c.Rank()), -int64(c.Rank()), 0}, Max)
	}, false},
	{"Agree, all pass", func(c Comm) error { return Agree(c, nil, "step") }, false},
	{"Agree, rank 1 fails", func(c Comm) error {
		var local error
		if c.Rank() == 1 {
			local = errScale
		}
		var ae *AgreedError
		if err := Agree(c, local, "step"); !errors.As(err, &ae) || len(ae.Ranks) != 1 || ae.Ranks[0] != 1 {
			return fmt.Errorf("Agree: got %v, want rank 1 failing", err)
		}
		return nil
	}, true},
	{"GathervBytes 100 B", func(c Comm) error {
		all, err := GathervBytes(c, 0, make([]byte, 100))
		if err == nil && c.Rank() == 0 && len(all) != c.Size() {
			err = fmt.Errorf("%d parts", len(all))
		}
		return err
	}, true},
	{"ScattervBytes 100 B", func(c Comm) error {
		var parts [][]byte
		if c.Rank() == 0 {
			parts = make([][]byte, c.Size())
			for r := range parts {
				parts[r] = make([]byte, 100)
			}
		}
		got, err := ScattervBytes(c, 0, parts)
		if err == nil && len(got) != 100 {
			err = fmt.Errorf("%d bytes", len(got))
		}
		return err
	}, true},
	{"Split 16 colors", func(c Comm) error {
		s, err := c.Split(c.Rank()%16, -c.Rank())
		if err != nil {
			return err
		}
		return s.Close()
	}, false},
	{"SplitNode nodes of 4", func(c Comm) error {
		node, _, count, err := SplitNode(c, func() string { return fmt.Sprintf("n%06d", c.Rank()/4) })
		if err != nil {
			return err
		}
		if count != (c.Size()+3)/4 || node.Size() != min(4, c.Size()) {
			return fmt.Errorf("%d nodes, node of %d", count, node.Size())
		}
		return node.Close()
	}, false},
}

// scaleRow is what one size costs per rank and operation.
type scaleRow struct {
	ranks int
	// other is the largest Counts of a rank other than 0, root the
	// Counts of rank 0 (per operation).
	other, root Counts
	scans       float64 // contributions visited per rank
	alloc       float64 // bytes allocated per rank
}

// measure runs op reps times on n in-process ranks and returns its
// cost per rank and operation.
func measure(t *testing.T, n, reps int, op scaleOp) scaleRow {
	t.Helper()
	row := scaleRow{ranks: n}
	before := make([]Counts, n)
	after := make([]Counts, n)
	var m0, m1 runtime.MemStats
	var s0, s1 int64
	err := Run(n, func(c Comm) error {
		w := c.(*proc).g.w
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			runtime.ReadMemStats(&m0)
			s0 = w.scans.Load()
		}
		before[c.Rank()] = CountsOf(c)
		if err := c.Barrier(); err != nil {
			return err
		}
		for range reps {
			if err := op.fn(c); err != nil {
				return err
			}
		}
		after[c.Rank()] = CountsOf(c)
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			s1 = w.scans.Load()
			runtime.ReadMemStats(&m1)
		}
		return nil
	}, WithTimeout(5*time.Minute))
	if err != nil {
		t.Fatalf("%s at %d ranks: %v", op.name, n, err)
	}
	per := func(c Counts) Counts {
		k := int64(reps)
		return Counts{c.Sent / k, c.Received / k, c.BytesSent / k, c.BytesReceived / k, c.Collectives / k}
	}
	row.root = per(after[0].Sub(before[0]))
	for r := 1; r < n; r++ {
		d := per(after[r].Sub(before[r]))
		row.other = Counts{max(row.other.Sent, d.Sent), max(row.other.Received, d.Received),
			max(row.other.BytesSent, d.BytesSent), max(row.other.BytesReceived, d.BytesReceived),
			max(row.other.Collectives, d.Collectives)}
	}
	ops := float64(n * reps)
	row.scans = float64(s1-s0-2*int64(n)) / ops // less the two barriers around the steps
	row.alloc = float64(m1.TotalAlloc-m0.TotalAlloc) / ops
	return row
}

// TestCollectivesScale runs every collective step on in-process worlds
// of 64 to 16,384 ranks and checks, by counted work and not by time,
// that a rank's share does not grow with the number of ranks: the
// messages, bytes and collectives of every rank but a root are the same
// at every size, a root's grow linearly, the contributions visited per
// rank and the bytes allocated per rank stay flat.
func TestCollectivesScale(t *testing.T) {
	sizes := []int{64, 256, 1024, 4096, 16384}
	switch {
	case testing.Short():
		sizes = sizes[:3]
	case raceEnabled:
		sizes = sizes[:4] // the race detector's goroutine limit
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-22s %6s | %-30s | %-30s | %7s %9s\n", "operation", "ranks",
		"rank>0: coll msgs-in bytes-in", "rank 0: coll msgs-in bytes-in", "visits", "alloc B")
	for _, op := range scaleOps {
		var base scaleRow
		for i, n := range sizes {
			row := measure(t, n, 2, op)
			fmt.Fprintf(&table, "%-22s %6d | %4d %8d %12d   | %4d %8d %12d   | %7.2f %9.0f\n", op.name, n,
				row.other.Collectives, row.other.Received, row.other.BytesReceived,
				row.root.Collectives, row.root.Received, row.root.BytesReceived, row.scans, row.alloc)
			if i == 0 {
				base = row
				continue
			}
			if row.other != base.other {
				t.Errorf("%s: a rank other than 0 costs %+v at %d ranks, %+v at %d", op.name, row.other, n, base.other, base.ranks)
			}
			if !op.rooted && row.root != base.root {
				t.Errorf("%s: rank 0 costs %+v at %d ranks, %+v at %d", op.name, row.root, n, base.root, base.ranks)
			}
			// A root receives every rank's part once: linear, with the
			// same cost per rank as at the smallest size.
			if op.rooted {
				perRank := func(r scaleRow) float64 { return float64(r.root.BytesReceived) / float64(r.ranks) }
				if perRank(row) > 1.05*perRank(base)+8 {
					t.Errorf("%s: rank 0 receives %.1f B per rank at %d ranks, %.1f at %d", op.name, perRank(row), n, perRank(base), base.ranks)
				}
				if row.root.Collectives != base.root.Collectives {
					t.Errorf("%s: rank 0 enters %d collectives at %d ranks, %d at %d", op.name, row.root.Collectives, n, base.root.Collectives, base.ranks)
				}
			}
			if row.scans > base.scans*1.05+0.01 {
				t.Errorf("%s: %.2f contributions visited per rank at %d ranks, %.2f at %d", op.name, row.scans, n, base.scans, base.ranks)
			}
			if row.alloc > 1.5*base.alloc+512 {
				t.Errorf("%s: %.0f bytes allocated per rank at %d ranks, %.0f at %d", op.name, row.alloc, n, base.alloc, base.ranks)
			}
		}
	}
	t.Logf("cost per rank and operation:\n%s", table.String())
}
