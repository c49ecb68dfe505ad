package ckpt

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/partner"
)

// FuzzBinRecords: whatever a join or check message holds, decoding it
// yields subsets of the datasets it names, or an error; never a panic.
func FuzzBinRecords(f *testing.F) {
	defs := []Dataset{{ID: 3, Name: "a", Shape: []int64{10, 4}, Type: fileformat.Float64}}
	good := appendBinPiece(nil, 0, 2, dataset.Piece{Rank: 5, Subset: fileformat.Subset{VarID: 1, Dataset: 3, Offset: []int64{2, 0}, Count: []int64{3, 4}}})
	f.Add(good)
	f.Add(appendRecord(nil, recOld, good))
	f.Add([]byte{})
	f.Add(good[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = readBinPieces(b, defs, func(ds int, _ int64, p dataset.Piece) {
			assert.Less(t, ds, len(defs))
			assert.Len(t, p.Subset.Offset, len(defs[ds].Shape))
			assert.Len(t, p.Subset.Count, len(defs[ds].Shape))
		})
		_ = eachRecord(b, func(kind byte, p []byte) error {
			assert.LessOrEqual(t, len(p), len(b))
			return nil
		})
	})
}

// FuzzTopologyVerdict: rank 0's verdict on the node table, damaged any
// way, gives a topology of the run's shape or an error.
func FuzzTopologyVerdict(f *testing.F) {
	topo, err := partner.NewBlockTopology(8, 2, 2, nil, simulatedHost, nil)
	if err != nil {
		f.Fatal(err)
	}
	r := &Runtime{log: zap.NewNop()}
	f.Add(r.remapVerdict(topo, []string{"a", "b", "c", "d"}, nil))
	f.Add(r.remapVerdict(topo, nil, []byte("[topology]\n0 = node0001\n1 = node0000\n2 = node0002\n3 = node0003\n")))
	f.Add([]byte{topoAsIs})
	f.Add(errVerdict(assert.AnError))
	f.Fuzz(func(t *testing.T, v []byte) {
		got, err := applyVerdict(topo, v)
		if err != nil {
			return
		}
		assert.Equal(t, 8, got.NumRanks())
		assert.Equal(t, 4, got.NumNodes())
		for q := range 8 {
			assert.Less(t, got.NodeOf(q), 4)
		}
	})
}
