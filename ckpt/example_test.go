package ckpt_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
)

// step is one iteration of a toy solver on one rank's part of the field.
func step(field []float64, rank int, iter int64) {
	for i := range field {
		field[i] = 0.5*field[i] + math.Sin(float64(iter)+float64(rank*len(field)+i))
	}
}

// The lifecycle: the first launch runs fresh, checkpoints and is "killed"
// after iteration 12; the second learns from Status that it is a restart,
// recovers the newest checkpoint (iteration 10) and finishes. Its final
// field is bit-identical to an uninterrupted run's.
func Example() {
	root, err := os.MkdirTemp("", "ftigo-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, 4, true // 4 simulated nodes, one group
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(root, "local"), filepath.Join(root, "global"), filepath.Join(root, "meta")
	// At verbosity 2 the runtime prints FTI's information lines on
	// stdout (one per checkpoint, with timings); 3 keeps to warnings.
	cfg.Verbosity = 3

	const ranks, size, iters = 4, 8, 20
	// launch runs the solver on 4 goroutine ranks up to iteration stop and
	// returns every rank's final field.
	launch := func(stop int64) [][]float64 {
		final := make([][]float64, ranks)
		err := comm.Run(ranks, func(c comm.Comm) error {
			rt, err := ckpt.Init(cfg, c)
			if err != nil {
				return err
			}
			iter := []int64{0}
			field := make([]float64, size)
			if err := errors.Join(ckpt.Protect(rt, 0, &iter, "iteration"), ckpt.Protect(rt, 1, &field, "field")); err != nil {
				return err
			}
			status := rt.Status()
			if status != ckpt.Fresh {
				if err := rt.Recover(); err != nil { // every block hash checked; Status is Fresh afterwards
					return err
				}
			}
			start := iter[0]
			if c.Rank() == 0 {
				fmt.Printf("%s launch starts at iteration %d\n", status, start)
			}
			for ; iter[0] < stop; iter[0]++ {
				if iter[0] > start && iter[0]%5 == 0 {
					// Checkpoint n holds the state before iteration 5n,
					// at L1, L2, L3 in turn; a restart resumes there.
					n := iter[0] / 5
					if err := rt.Checkpoint(n, int(n-1)%3+1); err != nil {
						return err
					}
					if c.Rank() == 0 {
						fmt.Printf("checkpoint %d at L%d, iteration %d\n", n, (n-1)%3+1, iter[0])
					}
				}
				step(field, c.Rank(), iter[0])
			}
			final[c.Rank()] = field
			if stop < iters {
				// "Killed": no Finalize, every checkpoint stays for the
				// next launch. Close releases meta_dir's lock, as the
				// death of a process does.
				return rt.Close()
			}
			return rt.Finalize() // deletes the checkpoints (keep_last_ckpt would keep the last one)
		})
		if err != nil {
			panic(err)
		}
		return final
	}
	launch(12)
	got := launch(iters)

	// The same solver, uninterrupted and without checkpoints.
	same := true
	for r := range ranks {
		want := make([]float64, size)
		for i := int64(0); i < iters; i++ {
			step(want, r, i)
		}
		for i := range want {
			same = same && math.Float64bits(got[r][i]) == math.Float64bits(want[i])
		}
	}
	fmt.Println("final field bit-identical to an uninterrupted run:", same)
	// Output:
	// fresh launch starts at iteration 0
	// checkpoint 1 at L1, iteration 5
	// checkpoint 2 at L2, iteration 10
	// restart launch starts at iteration 10
	// checkpoint 3 at L3, iteration 15
	// final field bit-identical to an uninterrupted run: true
}
