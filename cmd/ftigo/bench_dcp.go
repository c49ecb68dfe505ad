package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// dcpBenchRow is one level's differential checkpoint measurement: a full
// checkpoint, then, after a share of the dCP blocks changed, a
// differential one, beside the two references of the goals: the full
// checkpoint of the same level, and the time to hash the data on the
// ranks' cores plus the fixed cost of an empty checkpoint.
type dcpBenchRow struct {
	Case      string  `json:"case"`
	Level     int     `json:"level"`
	Ranks     int     `json:"ranks"`
	BytesRank int64   `json:"bytes_per_rank"`
	Dirty     float64 `json:"dirty"`
	BlockSize int     `json:"dcp_block_size"`
	// Full and DCP time the full and the differential checkpoint.
	Full stats `json:"full"`
	DCP  stats `json:"dcp"`
	// Ratio is DCP/Full (medians): goal ≤ 0.2 at 10% changed.
	Ratio float64 `json:"ratio_median"`
	// DCPShare is what the differential checkpoint's manifest says it
	// wrote of the data (FTI's dCP share); BytesWritten is every byte of
	// every file it wrote (deltas, partner copies, parity, containers),
	// FullBytesWritten the same for the full checkpoint.
	DCPShare         float64 `json:"dcp_share"`
	BytesWritten     int64   `json:"bytes_written"`
	FullBytesWritten int64   `json:"full_bytes_written"`
	// Empty times a checkpoint of 8 bytes per rank at this level (its
	// fixed cost); Hash the BLAKE3 of every rank's data, each rank on its
	// own goroutine at one core's speed; Bound is Hash + Empty (medians),
	// the goal for a differential checkpoint when nothing changed.
	Empty      stats   `json:"empty"`
	Hash       stats   `json:"hash"`
	Bound      float64 `json:"hash_plus_empty_s"`
	BoundRatio float64 `json:"ratio_to_hash_plus_empty"`
	// CPU seconds the whole process used (every rank, every goroutine)
	// during the full checkpoint, the differential one, the empty one and
	// the hashing, medians: on a shared machine the wall times swing with
	// the load, the CPU a step needs much less.
	FullCPU  float64 `json:"full_cpu_s"`
	DCPCPU   float64 `json:"dcp_cpu_s"`
	EmptyCPU float64 `json:"empty_cpu_s"`
	HashCPU  float64 `json:"hash_cpu_s"`
}

type dcpBenchResult struct {
	Rows        []dcpBenchRow `json:"rows"`
	Blake3MBps  float64       `json:"blake3_mb_per_s_per_core"`
	Load        [2]float64    `json:"load_average_before_after"`
	Description string        `json:"description"`
}

// loadAverage reads the 1-minute load average (0 where unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(string(b), &l)
	return l
}

// benchDCP measures differential checkpoints at every level of bc with a
// share dirty of the dCP blocks changed between the full checkpoint and
// the differential one.
func benchDCP(bc benchConfig, dirty float64, blockSize int, tick func()) (*dcpBenchResult, error) {
	if tick == nil {
		tick = func() {}
	}
	res := &dcpBenchResult{Rows: []dcpBenchRow{}, Description: fmt.Sprintf("%d ranks on %d simulated nodes, %s per rank, %.0f%% of the %d-byte dCP blocks changed, %d repeats, scratch %s",
		bc.ranks, bc.ranks, humanBytes(bc.size), 100*dirty, blockSize, bc.repeats, bc.dir)}
	res.Load[0] = loadAverage()
	data := make([][]float64, bc.ranks)
	for r := range data {
		data[r] = make([]float64, bc.size/8)
		for i := range data[r] {
			data[r][i] = float64(r) + float64(i)*1e-3
		}
	}
	for _, level := range bc.levels {
		row := dcpBenchRow{Case: fmt.Sprintf("L%d", level), Level: level, Ranks: bc.ranks, BytesRank: bc.size, Dirty: dirty, BlockSize: blockSize}
		var full, dcp, empty, hash []time.Duration
		var fullCPU, dcpCPU, emptyCPU, hashCPU []time.Duration
		for rep := 0; rep < bc.repeats; rep++ {
			run := filepath.Join(bc.dir, fmt.Sprintf("dcp-L%d-%d", level, rep))
			m, err := benchDCPLevel(bc, data, level, dirty, blockSize, uint64(rep), run)
			if err != nil {
				return nil, fmt.Errorf("level %d: %w", level, err)
			}
			full, dcp, empty = append(full, m.full), append(dcp, m.dcp), append(empty, m.empty)
			fullCPU, dcpCPU, emptyCPU = append(fullCPU, m.fullCPU), append(dcpCPU, m.dcpCPU), append(emptyCPU, m.emptyCPU)
			row.DCPShare, row.BytesWritten, row.FullBytesWritten = m.share, m.written, m.fullWritten
			os.RemoveAll(run)
			c0 := processCPU()
			hash = append(hash, hashRanks(data))
			hashCPU = append(hashCPU, processCPU().sub(c0).total())
			tick()
		}
		row.Full, row.DCP, row.Empty, row.Hash = summarize(full), summarize(dcp), summarize(empty), summarize(hash)
		row.FullCPU, row.DCPCPU = summarize(fullCPU).Median, summarize(dcpCPU).Median
		row.EmptyCPU, row.HashCPU = summarize(emptyCPU).Median, summarize(hashCPU).Median
		row.Ratio = row.DCP.Median / row.Full.Median
		row.Bound = row.Hash.Median + row.Empty.Median
		row.BoundRatio = row.DCP.Median / row.Bound
		res.Rows = append(res.Rows, row)
	}
	res.Blake3MBps, _, _, _ = kernels()
	res.Load[1] = loadAverage()
	tick()
	return res, nil
}

// hashRanks hashes every rank's data with BLAKE3, one goroutine per rank
// (each at one core's speed), and returns the wall time.
func hashRanks(data [][]float64) time.Duration {
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, d := range data {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := b3.New()
			_, _ = h.Write(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), len(d)*8))
			_ = h.Sum(nil)
		}()
	}
	wg.Wait()
	return time.Since(t0)
}

type dcpMeasure struct {
	full, dcp, empty     time.Duration
	fullCPU, dcpCPU      time.Duration
	emptyCPU             time.Duration
	share                float64
	written, fullWritten int64
}

// manifestBytes sums the sizes of every file a manifest lists (an L4
// rank's data that lives only in the container counts once, as part of it).
func manifestBytes(m *levels.Manifest) int64 {
	var n int64
	for _, fs := range m.Files {
		for _, f := range fs {
			if f.Attrs[levels.AttrInContainer] == "" {
				n += f.Size
			}
		}
	}
	return n
}

// benchDCPLevel runs one repeat at one level in a fresh run directory: a
// full checkpoint, the blocks changed (untimed), a differential one, and
// an empty checkpoint.
func benchDCPLevel(bc benchConfig, data [][]float64, level int, dirty float64, blockSize int, seed uint64, dir string) (dcpMeasure, error) {
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, bc.ranks, true
	cfg.EnableDCP, cfg.DCPBlockSize = true, blockSize
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")
	var m dcpMeasure
	var mu sync.Mutex
	err := comm.Run(bc.ranks, func(c comm.Comm) error {
		rt, err := ckpt.Init(cfg, c, ckpt.WithLogger(zap.NewNop()), ckpt.WithWarnings(io.Discard))
		if err != nil {
			return err
		}
		defer rt.Close()
		v := data[c.Rank()]
		if err := ckpt.Protect(rt, 1, &v); err != nil {
			return err
		}
		var cpu time.Duration // of the last timed step, measured by rank 0
		timed := func(id int64, lvl int) (time.Duration, *levels.Manifest, error) {
			if err := c.Barrier(); err != nil {
				return 0, nil, err
			}
			t0, c0 := time.Now(), processCPU()
			if err := rt.Checkpoint(id, lvl); err != nil {
				return 0, nil, err
			}
			if err := c.Barrier(); err != nil {
				return 0, nil, err
			}
			d := time.Since(t0)
			cpu = processCPU().sub(c0).total()
			ms, err := levels.ScanManifests(levels.Store{Driver: vfd.Sec2{}, Dir: cfg.MetaDir})
			if err != nil || len(ms) == 0 || ms[len(ms)-1].M == nil {
				return 0, nil, fmt.Errorf("read the manifest of checkpoint %d: %v", id, err)
			}
			return d, ms[len(ms)-1].M, nil
		}
		tf, mf, err := timed(1, level)
		if err != nil {
			return err
		}
		tfc := cpu
		// Change the share of blocks (one byte in each), untimed.
		buf := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*8)
		nb := (len(buf) + blockSize - 1) / blockSize
		rnd := rand.New(rand.NewPCG(seed, uint64(c.Rank())))
		for _, b := range rnd.Perm(nb)[:int(dirty*float64(nb)+0.5)] {
			buf[b*blockSize+rnd.IntN(min(blockSize, len(buf)-b*blockSize))]++
		}
		td, md, err := timed(2, level+4)
		if err != nil {
			return err
		}
		tdc := cpu
		if md.DCP == nil {
			return fmt.Errorf("the checkpoint at level %d is not differential", level+4)
		}
		small := []float64{1}
		rt.Unprotect(1)
		if err := ckpt.Protect(rt, 2, &small); err != nil {
			return err
		}
		te, _, err := timed(3, level)
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			mu.Lock()
			m = dcpMeasure{full: tf, dcp: td, empty: te, fullCPU: tfc, dcpCPU: tdc, emptyCPU: cpu,
				share: md.DCP.Share(), written: manifestBytes(md), fullWritten: manifestBytes(mf)}
			mu.Unlock()
		}
		return nil
	})
	return m, err
}

func printDCPBench(w io.Writer, r *dcpBenchResult) {
	fmt.Fprintln(w, r.Description)
	fmt.Fprintf(w, "load average %.1f before, %.1f after\n", r.Load[0], r.Load[1])
	fmt.Fprintf(w, "%-6s %26s %26s %7s %9s %12s %12s %26s %26s %7s\n", "level", "full min/median/max s", "dCP min/median/max s", "ratio",
		"dCP share", "written", "full written", "hash min/median/max s", "empty min/median/max s", "dCP/(hash+empty)")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%-6s %8.3f/%8.3f/%8.3f %8.3f/%8.3f/%8.3f %6.3fx %8.2f%% %9.1f MiB %9.1f MiB %8.3f/%8.3f/%8.3f %8.3f/%8.3f/%8.3f %6.2fx\n",
			row.Case, row.Full.Min, row.Full.Median, row.Full.Max, row.DCP.Min, row.DCP.Median, row.DCP.Max, row.Ratio,
			100*row.DCPShare, float64(row.BytesWritten)/(1<<20), float64(row.FullBytesWritten)/(1<<20),
			row.Hash.Min, row.Hash.Median, row.Hash.Max, row.Empty.Min, row.Empty.Median, row.Empty.Max, row.BoundRatio)
	}
	fmt.Fprintf(w, "CPU seconds (medians): %-6s %8s %8s %8s %8s\n", "level", "full", "dCP", "empty", "hash")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "                       %-6s %8.3f %8.3f %8.3f %8.3f\n", row.Case, row.FullCPU, row.DCPCPU, row.EmptyCPU, row.HashCPU)
	}
	fmt.Fprintf(w, "BLAKE3 %.0f MB/s per core\n", r.Blake3MBps)
}
