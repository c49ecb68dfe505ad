package fileformat_test

import (
	"fmt"
	"unsafe"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

func Example() {
	d := vfd.NewCore()
	temps := []float64{20.5, 21, 22.25}
	step := []int64{42}
	vars := []fileformat.Var{
		{ID: 0, Name: "temps", Type: fileformat.Float64,
			Data: unsafe.Slice((*byte)(unsafe.Pointer(&temps[0])), len(temps)*8)},
		{ID: 1, Name: "step", Type: fileformat.Int64,
			Data: unsafe.Slice((*byte)(unsafe.Pointer(&step[0])), 8)},
	}

	f, _ := vfd.Create(d, "Ckpt1-Rank0.fti")
	layout, sum, err := fileformat.Write(f, fileformat.Meta{CkptID: 1, Rank: 0, Level: 1, Timestamp: 1}, vars, nil)
	if err != nil {
		panic(err)
	}
	_ = f.Sync()
	_ = f.Close()
	fmt.Println("file size:", sum.FileSize, "blocks:", len(layout.Blocks))

	// Restart: open, check, restore one variable.
	g, _ := vfd.OpenRead(d, "Ckpt1-Rank0.fti")
	defer g.Close()
	r, err := fileformat.Open(g)
	if err != nil {
		panic(err)
	}
	for _, v := range r.Vars() {
		fmt.Printf("var %d %q: %d x %v\n", v.ID, v.Name, v.Count, v.Type)
	}
	got := make([]float64, 3)
	if err := r.ReadVar(0, unsafe.Slice((*byte)(unsafe.Pointer(&got[0])), 24)); err != nil {
		panic(err)
	}
	fmt.Println(got, r.Verify())
	// Output:
	// file size: 608 blocks: 1
	// var 0 "temps": 3 x float64
	// var 1 "step": 1 x int64
	// [20.5 21 22.25] <nil>
}
