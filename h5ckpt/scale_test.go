package h5ckpt

import (
	"math"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// scaleJob writes one checkpoint of a float64 field of 16x16 elements
// per rank on n in-process ranks (2-D blocks, or 1-D bands of whole
// rows), plus one variable of 8 bytes per rank outside it, and returns
// every rank's counted traffic.
func scaleJob(t *testing.T, n int, blocks bool) []comm.Counts {
	t.Helper()
	grid := []int{n, 1}
	if blocks {
		grid, _ = dataset.Dims(n, 2)
	}
	ds := dataset.Dataset{ID: 1, Name: "field", Shape: []int64{16 * int64(grid[0]), 16 * int64(grid[1])}, Type: fileformat.Float64}
	if !blocks {
		ds.Shape[1] = 16 * 16
		ds.Shape[0] = int64(n)
	}
	g := global(ds, 7)
	d := vfd.NewCore()
	counts := make([]comm.Counts, n)
	err := comm.Run(n, func(c comm.Comm) error {
		r := c.Rank()
		off, cnt, err := dataset.Block(ds.Shape, grid, r)
		if err != nil {
			return err
		}
		vars := []fileformat.Var{
			{ID: 10, Name: "field@r", Type: fileformat.Float64, Data: slabOf(ds, g, off, cnt)},
			{ID: 1, Name: "step", Type: fileformat.Int64, Data: make([]byte, 8)},
		}
		subs := []dataset.Subset{{VarID: 10, Dataset: 1, Offset: off, Count: cnt}}
		err = Write(c, d, "/ckpt/s.h5", Meta{CkptID: 1, Level: 4, Timestamp: 1}, vars, []dataset.Dataset{ds}, subs, WithHashWorkers(1))
		counts[r] = comm.CountsOf(c)
		return err
	}, comm.WithTimeout(5*time.Minute))
	if err != nil {
		t.Fatalf("%d ranks: %v", n, err)
	}
	f, err := Open(d, "/ckpt/s.h5")
	if err != nil {
		t.Fatalf("%d ranks: open: %v", n, err)
	}
	defer f.Close()
	if err := f.Verify(); err != nil {
		t.Fatalf("%d ranks: verify: %v", n, err)
	}
	return counts
}

// TestWriteScale writes a checkpoint on 64 to 2,048 in-process ranks and
// checks by counted traffic that a rank's share does not grow with the
// number of ranks: rank 0 alone receives every declaration and every
// block hash (linear), and every other rank receives its own part of the
// layout and, with collective buffering (2-D blocks), the bytes of its
// file domain. The messages an aggregator receives in a 2-D block
// decomposition come from the ranks whose blocks cross its domain: about
// √N of them, the nature of the layout, so they are bounded by √N.
func TestWriteScale(t *testing.T) {
	sizes := []int{64, 256, 1024, 2048}
	if testing.Short() {
		sizes = sizes[:2]
	}
	for _, blocks := range []bool{false, true} {
		var base, baseRoot comm.Counts
		for i, n := range sizes {
			counts := scaleJob(t, n, blocks)
			var other comm.Counts
			for _, c := range counts[1:] {
				other = comm.Counts{Sent: max(other.Sent, c.Sent), Received: max(other.Received, c.Received),
					BytesSent: max(other.BytesSent, c.BytesSent), BytesReceived: max(other.BytesReceived, c.BytesReceived),
					Collectives: max(other.Collectives, c.Collectives)}
			}
			root := counts[0]
			t.Logf("blocks %-5v %5d ranks: rank>0 at most %+v; rank 0 %+v (%.0f B received per rank)", blocks, n, other, root,
				float64(root.BytesReceived)/float64(n))
			if i == 0 {
				base, baseRoot = other, root
				continue
			}
			if other.Collectives != base.Collectives || root.Collectives != baseRoot.Collectives {
				t.Errorf("blocks %v: %d and %d collectives at %d ranks, %d and %d at %d", blocks,
					other.Collectives, root.Collectives, n, base.Collectives, baseRoot.Collectives, sizes[0])
			}
			if float64(other.BytesReceived) > 1.5*float64(base.BytesReceived) {
				t.Errorf("blocks %v: a rank other than 0 receives %d B at %d ranks, %d at %d", blocks, other.BytesReceived, n, base.BytesReceived, sizes[0])
			}
			msgs := float64(base.Received)
			if blocks {
				msgs *= 1.5 * math.Sqrt(float64(n)/float64(sizes[0]))
			}
			if float64(other.Received) > msgs {
				t.Errorf("blocks %v: a rank other than 0 receives %d messages at %d ranks, %d at %d", blocks, other.Received, n, base.Received, sizes[0])
			}
			perRank := func(c comm.Counts, n int) float64 { return float64(c.BytesReceived) / float64(n) }
			if perRank(root, n) > 1.2*perRank(baseRoot, sizes[0]) {
				t.Errorf("blocks %v: rank 0 receives %.0f B per rank at %d ranks, %.0f at %d", blocks, perRank(root, n), n, perRank(baseRoot, sizes[0]), sizes[0])
			}
		}
	}
}
