package sion_test

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/sion"
	"github.com/ftigo/ftigo/vfd"
)

// Write two tasks from one process, then read them back.
func ExampleCreate() {
	dir, _ := os.MkdirTemp("", "sion-example")
	defer os.RemoveAll(dir)
	name := filepath.Join(dir, "two.sion")

	w, err := sion.Create(vfd.Sec2{}, name, []int64{1000, 3000}, []int64{10, 11}, &sion.Options{FSBlkSize: 1024})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprint(w.Task(0), "hello from task 0")
	fmt.Fprint(w.Task(1), "and from task 1")
	if err := w.Close(); err != nil { // META2, sync, rename: the file appears now
		log.Fatal(err)
	}

	r, err := sion.Open(vfd.Sec2{}, name)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < r.NTasks(); i++ {
		t, _ := r.Task(i)
		sr, _ := r.TaskReader(i)
		b, _ := io.ReadAll(sr)
		fmt.Printf("task %d (global rank %d, chunk %d): %s\n", i, t.GlobalRank, t.ChunkSize, b)
	}
	// Output:
	// task 0 (global rank 10, chunk 1024): hello from task 0
	// task 1 (global rank 11, chunk 3072): and from task 1
}

// Every rank of a world writes its own task into a 2-file set; only open
// and close are collective.
func ExampleParCreate() {
	dir, _ := os.MkdirTemp("", "sion-example")
	defer os.RemoveAll(dir)
	name := filepath.Join(dir, "set.sion")

	err := comm.Run(4, func(c comm.Comm) error {
		pw, err := sion.ParCreate(c, vfd.Sec2{}, name, 4096, 2, nil)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(pw, "rank %d", c.Rank()); err != nil {
			return err
		}
		return pw.Close()
	})
	if err != nil {
		log.Fatal(err)
	}
	r, err := sion.Open(vfd.Sec2{}, name) // opens set.sion and set.sion.000001
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < r.NTasks(); i++ {
		t, _ := r.Task(i)
		b, _ := r.ReadTask(i)
		fmt.Printf("task %d in file %d: %s\n", i, t.File, b)
	}
	// Output:
	// task 0 in file 0: rank 0
	// task 1 in file 0: rank 1
	// task 2 in file 1: rank 2
	// task 3 in file 1: rank 3
}
