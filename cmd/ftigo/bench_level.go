package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
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
	"github.com/ftigo/ftigo/fileformat"
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
	if bc.codec != fileformat.CodecNone {
		cache += fmt.Sprintf(", checkpoints compressed with %v (the raw references write the data as it is)", bc.codec)
	}
	if bc.data == "" {
		bc.data = "ramp"
	}
	res := &benchResult{Rows: []benchRow{}, Skipped: []string{}, Description: fmt.Sprintf("%d ranks on %d simulated nodes, %s per rank (%s data), %d repeats, %s, scratch %s",
		bc.ranks, bc.ranks, humanBytes(bc.size), bc.data, bc.repeats, cache, bc.dir)}
	data := make([][]float64, bc.ranks)
	dst := make([][]float64, bc.ranks) // recovered into and read into, touched
	for r := range data {
		data[r] = benchData(bc.data, r, bc.ranks, bc.size/8)
		dst[r] = make([]float64, bc.size/8)
	}
	plainBC := bc
	plainBC.codec = fileformat.CodecNone
	for _, level := range bc.levels {
		var ck, total, rs, plain, strong, read, restartRef, shared, ckNone, rsNone, firstCk, firstTot []time.Duration
		var ckNoneC, rsNoneC []cpuTimes
		var logical, stored int64
		var ckC, rsC, plainC, strongC, readC, refC, sharedC []cpuTimes
		steps := []int{0, 1, 2}
		if level == 4 {
			steps = append(steps, 3) // and the shared-file strong writer
		}
		if bc.codec != fileformat.CodecNone {
			steps = append(steps, 4) // and the uncompressed checkpoint
		}
		for rep := 0; rep < bc.repeats; rep++ {
			for step := range steps {
				switch steps[(rep+step)%len(steps)] {
				case 0:
					run := filepath.Join(bc.dir, fmt.Sprintf("L%d-%d", level, rep))
					m, err := benchLevel(bc, data, dst, level, run)
					os.RemoveAll(run)
					if err != nil {
						return nil, fmt.Errorf("level %d: %w", level, err)
					}
					ck, rs, total = append(ck, m.ckpt), append(rs, m.restart), append(total, m.total)
					firstCk, firstTot = append(firstCk, m.firstCkpt), append(firstTot, m.firstTotal)
					logical, stored = m.logical, m.stored
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
				case 4:
					run := filepath.Join(bc.dir, fmt.Sprintf("L%d-none-%d", level, rep))
					m, err := benchLevel(plainBC, data, dst, level, run)
					os.RemoveAll(run)
					if err != nil {
						return nil, fmt.Errorf("level %d uncompressed: %w", level, err)
					}
					ckNone, rsNone = append(ckNone, m.ckpt), append(rsNone, m.restart)
					ckNoneC, rsNoneC = append(ckNoneC, m.ckptCPU), append(rsNoneC, m.restartCPU)
				}
				tick()
			}
		}
		row := benchRow{Case: fmt.Sprintf("L%d checkpoint", level), Kind: "checkpoint", Level: level, Ranks: bc.ranks, BytesRank: bc.size,
			Persisted: bc.size * persistFactor[level] * int64(bc.ranks), Time: summarize(ck), Raw: summarize(plain), Strong: summarize(strong),
			CPU: summarizeCPU(ckC), RawCPU: summarizeCPU(plainC), StrongCPU: summarizeCPU(strongC)}
		row.Ratio, row.RatioStrong = row.Time.Median/row.Raw.Median, row.Time.Median/row.Strong.Median
		row.Async, row.BlockedS, row.TotalS = bc.async && level > 1, row.Time.Median, summarize(total).Median
		if bc.codec != fileformat.CodecNone {
			row.Compression, row.LogicalBytes, row.StoredBytes = bc.codec.String(), logical, stored
			row.CompressionRatio = float64(logical) / float64(max(stored, 1))
			row.setUncompressed(ckNone, ckNoneC)
		}
		row.Data = bc.data
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
		row.Data = bc.data
		row.setUncompressed(rsNone, rsNoneC)
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// setUncompressed records the uncompressed times and process CPU of the
// row's case and the ratios of the row's medians to theirs.
func (row *benchRow) setUncompressed(ds []time.Duration, cs []cpuTimes) {
	if len(ds) == 0 {
		return
	}
	s, c := summarize(ds), summarizeCPU(cs)
	row.Uncompressed, row.RatioUncompressed = &s, row.Time.Median/s.Median
	row.UncompressedCPU = &c
	if t := c.User + c.Sys; t > 0 {
		row.CPURatioUncompressed = (row.CPU.User + row.CPU.Sys) / t
	}
}

// benchDataKinds are the kinds of data --data accepts.
var benchDataKinds = []string{"ramp", "heat", "random", "sparse"}

// heatSteps and heatColumns shape the heat data: a field of heatColumns
// columns whose rows are stacked over the ranks, heatSteps iterations
// after its top edge was heated.
const (
	heatSteps   = 4000
	heatColumns = 1024
)

// benchData returns rank's n values of kind (of ranks ranks):
//   - ramp: rank + i/1000, a linear ramp;
//   - heat: heat2d's field after heatSteps Jacobi iterations, from the
//     diffusion solution instead of the iterations (cheap). The middle
//     half of the top edge is held at 100; the rest starts at 0. The
//     solution is the product of an erfc profile down the rows and an
//     erf window across the columns, with diffusivity 1/4 per
//     iteration. Values below the smallest double are 0, as heat2d's
//     rows beyond the heat's reach are.
//   - random: uniform bits;
//   - sparse: 90% zeros, the rest uniform bits.
func benchData(kind string, rank, ranks int, n int64) []float64 {
	x := make([]float64, n)
	switch kind {
	case "heat":
		w := 2 * math.Sqrt(heatSteps/4.0)
		cols := make([]float64, heatColumns)
		for j := range cols {
			lo, hi := float64(heatColumns)/4, 3*float64(heatColumns)/4
			cols[j] = 0.5 * (math.Erf((float64(j)-lo)/w) - math.Erf((float64(j)-hi)/w))
		}
		row0 := int64(rank) * n / heatColumns
		for i := int64(0); i < n; i += heatColumns {
			r := 100 * math.Erfc(float64(row0+i/heatColumns+1)/w)
			for j := int64(0); j < heatColumns && i+j < n; j++ {
				x[i+j] = r * cols[j]
			}
		}
	case "random", "sparse":
		rnd := rand.New(rand.NewPCG(uint64(rank), uint64(ranks)))
		for i := range x {
			if kind == "sparse" && rnd.IntN(10) != 0 {
				continue
			}
			x[i] = math.Float64frombits(rnd.Uint64())
		}
	default:
		for i := range x {
			x[i] = float64(rank) + float64(i)*1e-3
		}
	}
	return x
}

// codecKernel measures codec's rates on one core into res, on the data
// of kind of the first ranks whose data fit in limit bytes (one at least).
func codecKernel(res *benchResult, codec fileformat.Codec, kind string, ranks int, size, limit int64) error {
	var x []float64
	for r := 0; r < ranks && (r == 0 || int64(r+1)*size <= limit); r++ {
		x = append(x, benchData(kind, r, ranks, size/8)...)
	}
	r, err := fileformat.MeasureCodec(codec, bytesOf(x), ckpt.DefaultConfig().DCPBlockSize)
	if err != nil {
		return err
	}
	mbps := func(d time.Duration) float64 { return float64(r.Logical) / 1e6 / max(d.Seconds(), 1e-9) }
	res.ZstdCompMBps, res.ZstdDecMBps = mbps(r.Compress), mbps(r.Decode)
	res.ZstdRatio = float64(r.Logical) / float64(max(r.Stored, 1))
	return nil
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
	// logical and stored sum the variable's bytes and the bytes its
	// files hold (with compression only).
	logical, stored int64
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
	cfg.Compression = bc.codec
	var mu sync.Mutex
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
				if bc.codec != fileformat.CodecNone && id == 1 { // once durable: in snapshot mode the background commits it
					info, err := rt.StoredInfo(1)
					if err != nil {
						return err
					}
					mu.Lock()
					m.logical, m.stored = m.logical+info.Size, m.stored+info.Stored
					mu.Unlock()
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
