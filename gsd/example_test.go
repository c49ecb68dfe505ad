package gsd_test

import (
	"fmt"

	"github.com/ftigo/ftigo/gsd"
	"github.com/ftigo/ftigo/vfd"
)

// A 2-D temperature field written frame by frame, then read back.
func Example() {
	d := vfd.NewCore() // in memory; vfd.Sec2{} for OS files
	w, err := gsd.Create(d, "heat.gsd", "heat2d", "heat2d", gsd.MakeVersion(1, 0))
	if err != nil {
		panic(err)
	}
	for step := 0; step < 3; step++ {
		field := []float64{float64(step), 1, 2, 3, 4, 5} // ny=2 rows × nx=3 columns
		if err := gsd.WriteChunk(w, "temperature", field, 2, 3); err != nil {
			panic(err)
		}
		if err := gsd.WriteChunk(w, "step", []uint64{uint64(step)}, 1, 1); err != nil {
			panic(err)
		}
		if err := w.EndFrame(); err != nil { // commits the frame
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}

	r, err := gsd.Open(d, "heat.gsd")
	if err != nil {
		panic(err)
	}
	defer r.Close()
	last := r.NFrames() - 1
	t, e, err := gsd.ReadChunk[float64](r, last, "temperature")
	if err != nil {
		panic(err)
	}
	row, _ := gsd.ReadRows[float64](r, last, "temperature", 1, 1)
	fmt.Println(r.NFrames(), "frames;", e.Type, e.N, "x", e.M, t, "row 1:", row)
	fmt.Println(r.ChunkNames(""), gsd.Verify(d, "heat.gsd"))
	// Output:
	// 3 frames; float64 2 x 3 [2 1 2 3 4 5] row 1: [3 4 5]
	// [temperature step] <nil>
}

// Overwriting an existing file must be asked for.
func ExampleWithOverwrite() {
	d := vfd.NewCore()
	w, _ := gsd.Create(d, "t.gsd", "app", "none", 0)
	_ = w.Close()
	_, err := gsd.Create(d, "t.gsd", "app", "none", 0)
	fmt.Println(err != nil)
	w, err = gsd.Create(d, "t.gsd", "app", "none", 0, gsd.WithOverwrite())
	fmt.Println(err, w.Close())
	// Output:
	// true
	// <nil> <nil>
}
