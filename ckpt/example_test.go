package ckpt_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
)

// A solver protects its state, checkpoints, "dies", and restarts with its
// data back.
func Example() {
	root, _ := os.MkdirTemp("", "ftigo-example")
	defer os.RemoveAll(root)
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.LocalTest = 2, true
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(root, "local"), filepath.Join(root, "global"), filepath.Join(root, "meta")

	run := func(iters int) {
		_ = comm.Run(4, func(c comm.Comm) error {
			rt, err := ckpt.Init(cfg, c)
			if err != nil {
				return err
			}
			// The job is "killed" at the end of this function: it never
			// calls Finalize, so its checkpoints stay for the next launch.
			// Close releases meta_dir for that launch (a real kill does too).
			defer rt.Close()
			iter := []int64{0}
			field := make([]float64, 8)
			_ = ckpt.Protect(rt, 0, &iter, "iteration")
			_ = ckpt.Protect(rt, 1, &field, "temperature")
			status := rt.Status()
			if status != ckpt.Fresh {
				if err := rt.Recover(); err != nil { // afterwards Status is Fresh, as in FTI
					return err
				}
			}
			if c.Rank() == 0 {
				fmt.Printf("%v run starts at iteration %d\n", status, iter[0])
			}
			for ; iter[0] < int64(iters); iter[0]++ {
				field[iter[0]%8] += float64(c.Rank())
				if iter[0]%5 == 4 {
					if err := rt.Checkpoint(iter[0], 1); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	run(12)
	run(20)
	// Output:
	// fresh run starts at iteration 0
	// restart run starts at iteration 9
}
