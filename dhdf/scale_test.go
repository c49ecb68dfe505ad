package dhdf

import (
	"fmt"
	"testing"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/vfd"
)

// TestParallelScale writes a set of one row per rank on 64 to 2,048
// in-process ranks and checks, by counted traffic, that a rank other
// than 0 receives the same bytes and messages at every size (the set id
// and two votes), while rank 0 receives every rank's chunk list once
// (the same bytes per rank at every size, but for the digits of the
// chunk names).
func TestParallelScale(t *testing.T) {
	sizes := []int{64, 512, 2048}
	if testing.Short() {
		sizes = sizes[:2]
	}
	type cost struct{ other, root comm.Counts }
	var base cost
	for i, n := range sizes {
		counts := make([]comm.Counts, n)
		d := vfd.NewCore()
		err := comm.Run(n, func(c comm.Comm) error {
			w, err := CreateParallel(c, "scale/set", Options{Driver: d, Now: fixedClock, HostName: fmt.Sprintf("node%05d", c.Rank()/4)})
			if err != nil {
				return err
			}
			if err := w.DefineSDS(SDS{Name: "field", Type: h5.Uint64, Dims: []uint64{uint64(n), 4}}); err != nil {
				return err
			}
			if err := w.WriteChunk("field", 0, "", []uint64{uint64(c.Rank()), 0}, []uint64{1, 4}, blockRows(c.Rank(), 1, 4)); err != nil {
				return err
			}
			err = w.Close()
			counts[c.Rank()] = comm.CountsOf(c)
			return err
		})
		if err != nil {
			t.Fatalf("%d ranks: %v", n, err)
		}
		got := cost{root: counts[0]}
		for r := 1; r < n; r++ {
			o, c := &got.other, counts[r]
			o.Sent, o.Received, o.Collectives = max(o.Sent, c.Sent), max(o.Received, c.Received), max(o.Collectives, c.Collectives)
			o.BytesReceived = max(o.BytesReceived, c.BytesReceived)
			// What a rank sends is its own chunk list, whose names grow
			// with the digits of its rank: not compared.
		}
		t.Logf("%5d ranks: rank>0 %+v; rank 0 %+v (%.1f B received per rank)", n, got.other, got.root,
			float64(got.root.BytesReceived)/float64(n))
		if i == 0 {
			base = got
			s, err := Open("scale/set.h5", Options{Driver: d})
			if err != nil {
				t.Fatal(err)
			}
			v, err := s.ReadSDS("field")
			s.Close()
			if err != nil || string(v) != string(blockRows(0, n, 4)) {
				t.Fatalf("read back: %v", err)
			}
			continue
		}
		if got.other != base.other {
			t.Errorf("a rank other than 0 costs %+v at %d ranks, %+v at %d", got.other, n, base.other, sizes[0])
		}
		perRank := func(c cost, n int) float64 { return float64(c.root.BytesReceived) / float64(n) }
		if perRank(got, n) > 1.1*perRank(base, sizes[0])+8 {
			t.Errorf("rank 0 receives %.1f B per rank at %d ranks, %.1f at %d", perRank(got, n), n, perRank(base, sizes[0]), sizes[0])
		}
	}
}
