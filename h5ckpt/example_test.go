package h5ckpt_test

import (
	"fmt"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/h5ckpt"
	"github.com/ftigo/ftigo/vfd"
)

// Two ranks write their halves of a 2 x 4 int32 array into one HDF5
// checkpoint; the whole array is then read back from the file.
func Example() {
	d := vfd.NewCore() // in memory; vfd.Sec2{} on disk
	ds := dataset.Dataset{ID: 1, Name: "grid", Shape: []int64{2, 4}, Type: fileformat.Int32}
	name := h5ckpt.Name("/glbl", "VPR-h5", 7)
	err := comm.Run(2, func(c comm.Comm) error {
		r := int64(c.Rank())
		row := []byte{byte(4 * r), 0, 0, 0, byte(4*r + 1), 0, 0, 0, byte(4*r + 2), 0, 0, 0, byte(4*r + 3), 0, 0, 0}
		v := fileformat.Var{ID: 0, Name: "row", Type: fileformat.Int32, Data: row}
		s := dataset.Subset{VarID: 0, Dataset: 1, Offset: []int64{r, 0}, Count: []int64{1, 4}}
		return h5ckpt.Write(c, d, name, h5ckpt.Meta{CkptID: 7, Level: 9}, []fileformat.Var{v}, []dataset.Dataset{ds}, []dataset.Subset{s})
	})
	if err != nil {
		panic(err)
	}
	f, err := h5ckpt.Open(d, name)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	col := make([]byte, 2*4)
	if err := f.ReadSlab(1, []int64{0, 2}, []int64{2, 1}, col); err != nil {
		panic(err)
	}
	fmt.Println(name, f.Ranks(), "ranks; column 2:", col[0], col[4])
	// Output: /glbl/VPR-h5-ID00000007.h5 2 ranks; column 2: 2 6
}
