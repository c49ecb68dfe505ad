package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/ftigo/ftigo/comm"
)

// snapRow adds to row, a checkpoint row of --async --snapshot, the two
// references of the same run: inline_s, the median synchronous
// checkpoint of the level (inline_lL = 1, no snapshot), and memcpy_s,
// the median time for every rank to copy its bytes into a buffer, timed
// between barriers as the checkpoint is.
func snapRow(bc benchConfig, data, dst [][]float64, level int, row *benchRow) error {
	inl := bc
	inl.async, inl.snapshot = false, false
	var inline, cp []time.Duration
	for rep := 0; rep < bc.repeats; rep++ {
		m, err := benchLevel(inl, data, dst, level, filepath.Join(bc.dir, fmt.Sprintf("L%d-inline-%d", level, rep)))
		if err != nil {
			return fmt.Errorf("level %d inline: %w", level, err)
		}
		inline = append(inline, m.ckpt)
		d, err := memcpyTime(bc.ranks, data)
		if err != nil {
			return err
		}
		cp = append(cp, d)
	}
	row.Async, row.Snapshot = true, true
	row.InlineS, row.MemcpyS = summarize(inline).Median, summarize(cp).Median
	return nil
}

// memcpyTime is the time for ranks ranks to copy data[rank] each into a
// buffer already touched (as the staging memory is from the second
// checkpoint on), between two barriers.
func memcpyTime(ranks int, data [][]float64) (time.Duration, error) {
	var d time.Duration
	err := comm.Run(ranks, func(c comm.Comm) error {
		buf := make([]float64, len(data[c.Rank()]))
		copy(buf, data[c.Rank()]) // the first touch, not timed
		if err := c.Barrier(); err != nil {
			return err
		}
		t := time.Now()
		copy(buf, data[c.Rank()])
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			d = time.Since(t)
		}
		return nil
	})
	return d, err
}
