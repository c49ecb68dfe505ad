package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
)

// bench measures every level in bc at one point (ranks, size).
func bench(bc benchConfig, tick func()) (*benchResult, error) {
	if tick == nil {
		tick = func() {}
	}
	cache := "page cache kept"
	if bc.cold {
		cache = "page cache dropped before restarts and reads"
	}
	if bc.async {
		cache += ", L2-L4 post-processed in the background (inline_lL = 0) under a solver-like CPU load"
	}
	res := &benchResult{Rows: []benchRow{}, Skipped: []string{}, Description: fmt.Sprintf("%d ranks on %d simulated nodes, %s per rank, %d repeats, %s, scratch %s",
		bc.ranks, bc.ranks, humanBytes(bc.size), bc.repeats, cache, bc.dir)}
	data := make([][]float64, bc.ranks)
	dst := make([][]float64, bc.ranks) // recovered into and read into, touched
	for r := range data {
		data[r] = make([]float64, bc.size/8)
		for i := range data[r] {
			data[r][i] = float64(r) + float64(i)*1e-3
		}
		dst[r] = make([]float64, bc.size/8)
	}
	for _, level := range bc.levels {
		var ck, total, rs, plain, strong, read, restartRef, shared, firstCk, firstTot []time.Duration
		var ckC, rsC, plainC, strongC, readC, refC, sharedC []cpuTimes
		steps := 3
		if level == 4 {
			steps = 4 // and the shared-file strong writer
		}
		for rep := 0; rep < bc.repeats; rep++ {
			for step := range steps {
				switch (rep + step) % steps {
				case 0:
					run := filepath.Join(bc.dir, fmt.Sprintf("L%d-%d", level, rep))
					m, err := benchLevel(bc, data, dst, level, run)
					os.RemoveAll(run)
					if err != nil {
						return nil, fmt.Errorf("level %d: %w", level, err)
					}
					ck, rs, total = append(ck, m.ckpt), append(rs, m.restart), append(total, m.total)
					firstCk, firstTot = append(firstCk, m.firstCkpt), append(firstTot, m.firstTotal)
					ckC, rsC = append(ckC, m.ckptCPU), append(rsC, m.restartCPU)
				case 1:
					w, c, err := rawWrite(bc, data, filepath.Join(bc.dir, fmt.Sprintf("raw-%d", rep)), persistFactor[level])
					if err != nil {
						return nil, err
					}
					plain, plainC = append(plain, w), append(plainC, c)
				case 2:
					m, err := strongRaw(bc, data, dst, level, filepath.Join(bc.dir, fmt.Sprintf("strong-%d", rep)))
					if err != nil {
						return nil, err
					}
					strong, strongC = append(strong, m.write), append(strongC, m.writeCPU)
					read, readC = append(read, m.read), append(readC, m.readCPU)
					restartRef = append(restartRef, m.read+m.rebuild)
					refC = append(refC, cpuTimes{m.readCPU.user + m.rebuildCPU.user, m.readCPU.sys + m.rebuildCPU.sys})
				case 3:
					w, c, err := strongShared(bc, data, filepath.Join(bc.dir, fmt.Sprintf("shared-%d", rep)))
					if err != nil {
						return nil, err
					}
					shared, sharedC = append(shared, w), append(sharedC, c)
				}
				tick()
			}
		}
		row := benchRow{Case: fmt.Sprintf("L%d checkpoint", level), Kind: "checkpoint", Level: level, Ranks: bc.ranks, BytesRank: bc.size,
			Persisted: bc.size * persistFactor[level] * int64(bc.ranks), Time: summarize(ck), Raw: summarize(plain), Strong: summarize(strong),
			CPU: summarizeCPU(ckC), RawCPU: summarizeCPU(plainC), StrongCPU: summarizeCPU(strongC)}
		row.Ratio, row.RatioStrong = row.Time.Median/row.Raw.Median, row.Time.Median/row.Strong.Median
		row.Async, row.BlockedS, row.TotalS = bc.async && level > 1, row.Time.Median, summarize(total).Median
		if bc.snapshot {
			if err := snapRow(bc, data, dst, level, &row); err != nil {
				return nil, err
			}
			row.FirstBlockedS, row.FirstTotalS = summarize(firstCk).Median, summarize(firstTot).Median
		}
		if len(shared) > 0 {
			s, c := summarize(shared), summarizeCPU(sharedC)
			row.StrongShared, row.StrongSharedCPU, row.RatioStrongShared = &s, &c, row.Time.Median/s.Median
		}
		res.Rows = append(res.Rows, row)
		row = benchRow{Case: restartCase(level, bc.ranks), Kind: "restart", Level: level, Ranks: bc.ranks, BytesRank: bc.size, Persisted: bc.size * int64(bc.ranks),
			Rebuilt: rebuiltBytes(level, bc.ranks, bc.size), Time: summarize(rs), Raw: summarize(read), Strong: summarize(restartRef),
			CacheDropped: bc.cold, CPU: summarizeCPU(rsC), RawCPU: summarizeCPU(readC), StrongCPU: summarizeCPU(refC)}
		row.Ratio, row.RatioStrong = row.Time.Median/row.Raw.Median, row.Time.Median/row.Strong.Median
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// restartCase names a restart row: the level and the nodes it lost (L4
// loses all local storage, which the name does not repeat).
func restartCase(level, ranks int) string {
	l := lost(level, ranks)
	switch len(l) {
	case 0:
		return fmt.Sprintf("L%d restart", level)
	case 1:
		return fmt.Sprintf("L%d restart, node %d lost", level, l[0])
	}
	nodes := make([]string, len(l))
	for i, n := range l {
		nodes[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("L%d restart, nodes %s lost", level, strings.Join(nodes, ","))
}

// levelTimes are one checkpoint and restart of a level.
type levelTimes struct {
	ckpt, restart       time.Duration
	ckptCPU, restartCPU cpuTimes
	// total is the time until the checkpoint is durable at its level
	// (ckpt unless it is post-processed in the background).
	total time.Duration
	// firstCkpt and firstTotal are the first checkpoint's of a run of
	// several (--snapshot: steady, the first touch of the staging memory
	// and of the directories apart); ckpt and total are then the medians
	// of the others.
	firstCkpt, firstTotal time.Duration
}

// snapSteady is the number of checkpoints a --snapshot run takes per
// job, the first one reported apart.
const snapSteady = 4

// benchLevel takes one checkpoint at level in a fresh run directory,
// then (after deleting the nodes a level is meant to survive) restarts
// and recovers into dst, and checks every recovered element.
func benchLevel(bc benchConfig, data, dst [][]float64, level int, dir string) (levelTimes, error) {
	var m levelTimes
	n := 1
	if bc.steady {
		n = snapSteady
	}
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, bc.ranks, true
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")
	if bc.localDir != "" {
		cfg.CkptDir = filepath.Join(bc.localDir, filepath.Base(dir), "local")
		defer os.RemoveAll(filepath.Join(bc.localDir, filepath.Base(dir)))
	}
	if bc.async && level > 1 {
		cfg.Async[level] = true
	}
	cfg.Snapshot = bc.snapshot
	var t0 time.Time
	var c0 cpuTimes
	start := func(c comm.Comm) error {
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			t0, c0 = time.Now(), processCPU()
		}
		return nil
	}
	stop := func(c comm.Comm, d *time.Duration, cpu *cpuTimes) error {
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			*d, *cpu = time.Since(t0), processCPU().sub(c0)
		}
		return nil
	}
	err := runLabeled("checkpoint", level, func() error {
		return comm.Run(bc.ranks, func(c comm.Comm) error {
			rt, err := ckpt.Init(cfg, c, ckpt.WithLogger(zap.NewNop())) // a benchmark prints its own figures
			if err != nil {
				return err
			}
			defer rt.Close() // releases meta_dir when the job ends without Finalize
			v := data[c.Rank()]
			if err := ckpt.Protect(rt, 1, &v); err != nil {
				return err
			}
			var cks, tots []time.Duration
			for id := int64(1); id <= int64(n); id++ {
				if err := start(c); err != nil {
					return err
				}
				if err := rt.Checkpoint(id, level); err != nil {
					return err
				}
				if err := stop(c, &m.ckpt, &m.ckptCPU); err != nil {
					return err
				}
				if err := solveUntilDone(rt); err != nil {
					return err
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				if c.Rank() == 0 {
					m.total = time.Since(t0)
					cks, tots = append(cks, m.ckpt), append(tots, m.total)
				}
				rt.Wait() // the deletion of the checkpoint superseded, between measurements
			}
			if c.Rank() == 0 && n > 1 {
				m.firstCkpt, m.firstTotal = cks[0], tots[0]
				m.ckpt = time.Duration(summarize(cks[1:]).Median * float64(time.Second))
				m.total = time.Duration(summarize(tots[1:]).Median * float64(time.Second))
			}
			return nil // no Finalize: the job "dies" with its checkpoint committed
		})
	})
	if err != nil {
		return m, err
	}
	for _, n := range lost(level, bc.ranks) {
		if err := os.RemoveAll(filepath.Join(cfg.CkptDir, fmt.Sprintf("node%04d", n))); err != nil {
			return m, err
		}
	}
	if level == 4 {
		if err := os.RemoveAll(cfg.CkptDir); err != nil {
			return m, err
		}
	}
	if bc.cold {
		if err := bc.drop(); err != nil {
			return m, fmt.Errorf("drop the page cache: %w", err)
		}
	}
	err = runLabeled("restart", level, func() error {
		return comm.Run(bc.ranks, func(c comm.Comm) error {
			// The application's arrays exist before it recovers into them (as
			// heat2d's do): dst is allocated and touched outside the timed
			// region, and marked so that a restart that leaves it alone fails.
			v := dst[c.Rank()]
			for i := range v {
				v[i] = math.NaN()
			}
			if err := start(c); err != nil {
				return err
			}
			rt, err := ckpt.Init(cfg, c, ckpt.WithLogger(zap.NewNop())) // a benchmark prints its own figures
			if err != nil {
				return err
			}
			defer rt.Close() // releases meta_dir when the job ends without Finalize
			if err := ckpt.Protect(rt, 1, &v); err != nil {
				return err
			}
			if err := rt.Recover(); err != nil {
				return err
			}
			if err := stop(c, &m.restart, &m.restartCPU); err != nil {
				return err
			}
			return errors.Join(checkRecovered(c.Rank(), v, data[c.Rank()]), rt.Finalize())
		})
	})
	return m, err
}

// runLabeled runs fn with the CPU profile labels phase and level, which
// every goroutine it starts inherits, so that a profile of the bench
// (--cpuprofile) can be split: go tool pprof -tagfocus phase=restart.
func runLabeled(phase string, level int, fn func() error) error {
	var err error
	pprof.Do(context.Background(), pprof.Labels("phase", phase, "level", strconv.Itoa(level)), func(context.Context) { err = fn() })
	return err
}

// solveUntilDone runs a solver-like CPU load (a relaxation sweep over a
// 1 MiB array, about a millisecond at a time) until the checkpoint's
// background post-processing, if any, has finished on this rank, and
// returns its failure.
func solveUntilDone(rt *ckpt.Runtime) error {
	x := make([]float64, 1<<17)
	for {
		done, err := rt.CheckpointDone()
		if err != nil || done {
			return err
		}
		for t := time.Now(); time.Since(t) < time.Millisecond; {
			for i := 1; i < len(x)-1; i++ {
				x[i] = 0.25*(x[i-1]+x[i+1]) + 0.5*x[i] + 1e-9
			}
		}
	}
}

// checkRecovered compares every recovered element with the checkpointed
// one, bit for bit, and names the first mismatches.
func checkRecovered(rank int, got, want []float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("rank %d recovered %d elements, checkpointed %d", rank, len(got), len(want))
	}
	bad, first := 0, -1
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	if bad == 0 {
		return nil
	}
	return fmt.Errorf("rank %d recovered wrong data: %d of %d elements differ, the first at index %d (got %v, want %v)",
		rank, bad, len(want), first, got[first], want[first])
}

// bytesOf is the memory of x as bytes.
func bytesOf(x []float64) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*8)
}

// parallel runs fn for every rank at once and joins the errors.
func parallel(ranks int, fn func(r int) error) error {
	errs := make([]error, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = fn(r) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}
