package dataset_test

import (
	"fmt"

	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
)

// mem serves old ranks' variables from memory (a checkpoint's files in
// real use: dataset.Files).
type mem map[int][]byte

func (m mem) ReadVarAt(rank int, _ int32, dst []byte, off int64) error {
	copy(dst, m[rank][off:])
	return nil
}

// A 1-D array of 10 bytes written by 2 ranks is restored on 3.
func ExamplePlan() {
	ds := dataset.Dataset{ID: 0, Name: "x", Shape: []int64{10}, Type: fileformat.Uint8}
	decompose := func(n int) *dataset.Decomposition {
		views := make([]dataset.View, n)
		for r := range views {
			off, cnt, _ := dataset.Block(ds.Shape, []int{n}, r)
			views[r] = dataset.View{Datasets: []dataset.Dataset{ds}, Subsets: []dataset.Subset{{VarID: 1, Dataset: 0, Offset: off, Count: cnt}}}
		}
		d, err := dataset.NewDecomposition(views)
		if err != nil {
			panic(err)
		}
		return d
	}
	old := mem{0: {0, 1, 2, 3, 4}, 1: {5, 6, 7, 8, 9}}
	p, err := dataset.NewPlan(decompose(2), decompose(3))
	if err != nil {
		panic(err)
	}
	for q := 0; q < 3; q++ {
		s := p.New().Subsets(q)[0]
		buf := make([]byte, s.Count[0])
		if err := p.Execute(q, old, map[int32][]byte{1: buf}); err != nil {
			panic(err)
		}
		fmt.Println(q, s.Offset, buf, len(p.Copies(q)), "copies")
	}
	// Output:
	// 0 [0] [0 1 2 3] 1 copies
	// 1 [4] [4 5 6] 2 copies
	// 2 [7] [7 8 9] 1 copies
}
