package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/spf13/cobra"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

// benchConfig are the settings of one bench run.
type benchConfig struct {
	ranks   int
	size    int64
	levels  []int
	repeats int
	dir     string
	// cold drops the page cache (drop) before every restart and raw read.
	cold bool
	drop func() error
	// async post-processes levels 2-4 in the background (inline_lL = 0)
	// while the ranks run a solver-like CPU load.
	async bool
}

// persistFactor is how many times a level stores each byte of data: L2
// keeps a partner copy, L3 a parity file as large as the data (m = k);
// L4 writes each rank's file once, straight into the global container.
var persistFactor = map[int]int64{1: 1, 2: 2, 3: 2, 4: 1}

// lostNodes are the nodes whose local storage a level's restart loses
// (ranks run one per node); L4 loses every node's local storage.
var lostNodes = map[int][]int{2: {1}, 3: {1, 2}}

// lost returns the nodes level's restart loses among ranks nodes.
func lost(level, ranks int) []int {
	var out []int
	for _, n := range lostNodes[level] {
		if n < ranks {
			out = append(out, n)
		}
	}
	return out
}

// rebuiltBytes is what a level's restart writes again per the raw
// restart reference: every lost node of L2 gets its data file and the
// partner copy it held back, every lost node of L3 its data and parity
// file (as large as the data, m = k).
func rebuiltBytes(level, ranks int, size int64) int64 {
	return int64(len(lost(level, ranks))) * 2 * size
}

// stats are min, median and max of repeated timings, in seconds.
type stats struct {
	Min    float64 `json:"min_s"`
	Median float64 `json:"median_s"`
	Max    float64 `json:"max_s"`
}

func summarize(ds []time.Duration) stats {
	s := make([]float64, len(ds))
	for i, d := range ds {
		s[i] = d.Seconds()
	}
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{Min: s[0], Median: med, Max: s[len(s)-1]}
}

// cpuTimes are the user and system CPU time of the whole process.
type cpuTimes struct{ user, sys time.Duration }

func processCPU() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}
	}
	return cpuTimes{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

func (c cpuTimes) sub(d cpuTimes) cpuTimes { return cpuTimes{c.user - d.user, c.sys - d.sys} }

// total is the user and system time together.
func (c cpuTimes) total() time.Duration { return c.user + c.sys }

// cpuStats are the medians of the process CPU time of repeated
// measurements, in seconds.
type cpuStats struct {
	User float64 `json:"user_s"`
	Sys  float64 `json:"sys_s"`
}

func summarizeCPU(cs []cpuTimes) cpuStats {
	u, s := make([]time.Duration, len(cs)), make([]time.Duration, len(cs))
	for i, c := range cs {
		u[i], s[i] = c.user, c.sys
	}
	return cpuStats{User: summarize(u).Median, Sys: summarize(s).Median}
}

// benchRow is one line of the result; the JSON names are stable (see
// docs/performance.md, "ftigo bench --json").
type benchRow struct {
	Case  string `json:"case"`
	Kind  string `json:"kind"` // "checkpoint" or "restart"
	Level int    `json:"level"`
	Ranks int    `json:"ranks"`
	// BytesRank is the protected data per rank.
	BytesRank int64 `json:"bytes_per_rank"`
	// Persisted is, for a checkpoint, the bytes the level persists; for
	// a restart, the data recovered.
	Persisted int64 `json:"bytes_persisted"`
	// Rebuilt is the bytes a restart writes again (lost files); 0 for
	// checkpoints.
	Rebuilt int64 `json:"bytes_rebuilt"`
	Time    stats `json:"time"`
	// Raw is, for a checkpoint, the plain raw write+fsync of the
	// persisted bytes (one file per rank); for a restart, the raw read of
	// the data by as many readers.
	Raw   stats   `json:"raw"`
	Ratio float64 `json:"ratio_median"`
	// Strong is, for a checkpoint, the strongest raw writer (16 MiB
	// writes with early writeback, one file per persisted copy, the
	// fsyncs overlapped); for a restart, the raw read plus the raw
	// write+fsync of the rebuilt bytes by the ranks that lost them.
	Strong      stats   `json:"strong_raw"`
	RatioStrong float64 `json:"ratio_strong_median"`
	// CacheDropped says whether the page cache was dropped before the
	// measurement and its raw reference (restarts with --cold).
	CacheDropped bool `json:"cache_dropped"`
	// Async says the level was post-processed in the background
	// (--async); BlockedS is then the median time the ranks were blocked
	// in Checkpoint (the same as Time) and TotalS the median time until
	// the checkpoint was committed at its level, while the ranks ran a
	// solver-like CPU load. Without --async both equal Time's median.
	// Zero for restarts.
	Async     bool     `json:"async"`
	BlockedS  float64  `json:"blocked_s"`
	TotalS    float64  `json:"total_s"`
	CPU       cpuStats `json:"cpu"`
	RawCPU    cpuStats `json:"raw_cpu"`
	StrongCPU cpuStats `json:"strong_raw_cpu"`
	// StrongShared is, for the L4 checkpoint only (nil otherwise), the
	// strong writer into one shared file, as the L4 container is
	// written: every rank writes its data at its task's offset (after a
	// 4 KiB head, tasks rounded up to 4 KiB), 16 MiB writes each followed
	// by a writeback hint, and fsyncs the file. Information beside
	// Strong, which stays the L4 goal's reference: it shows what writing
	// one file from every rank costs by itself (the kernel serializes
	// buffered writes into one file).
	StrongShared      *stats    `json:"strong_shared_raw,omitempty"`
	RatioStrongShared float64   `json:"ratio_strong_shared_median,omitempty"`
	StrongSharedCPU   *cpuStats `json:"strong_shared_raw_cpu,omitempty"`
}

type benchResult struct {
	Rows        []benchRow `json:"rows"`
	Blake3MBps  float64    `json:"blake3_mb_per_s_per_core"`
	RSEncMBps   float64    `json:"rs_encode_mb_per_s_per_core"`
	RSDecMBps   float64    `json:"rs_decode_mb_per_s_per_core"`
	MemcpyMBps  float64    `json:"memcpy_mb_per_s"`
	Description string     `json:"description"`
	// LoadStart and LoadEnd are the 1, 5 and 15 minute load averages
	// when the run started and ended (zeros where unknown).
	LoadStart [3]float64 `json:"load_start"`
	LoadEnd   [3]float64 `json:"load_end"`
	// Skipped lists the sweep points left out, with the reason.
	Skipped []string `json:"skipped"`
}

// sizeFlag is a byte count flag accepting the suffixes of vfd.ParseSize.
type sizeFlag int64

func (s *sizeFlag) String() string { return strings.ReplaceAll(humanBytes(int64(*s)), " ", "") }
func (s *sizeFlag) Type() string   { return "size" }
func (s *sizeFlag) Set(v string) error {
	n, err := vfd.ParseSize(v)
	if err != nil {
		return err
	}
	*s = sizeFlag(n)
	return nil
}

// sizesFlag is a comma-separated list of byte counts.
type sizesFlag []int64

func (s *sizesFlag) String() string {
	parts := make([]string, len(*s))
	for i, v := range *s {
		parts[i] = strings.ReplaceAll(humanBytes(v), " ", "")
	}
	return strings.Join(parts, ",")
}
func (s *sizesFlag) Type() string { return "sizes" }
func (s *sizesFlag) Set(v string) error {
	var out []int64
	for _, f := range strings.Split(v, ",") {
		n, err := vfd.ParseSize(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		if n < 8 {
			return fmt.Errorf("size %q: at least 8 bytes", f)
		}
		out = append(out, n)
	}
	*s = out
	return nil
}

// intsFlag is a comma-separated list of positive integers.
type intsFlag []int

func (l *intsFlag) String() string {
	parts := make([]string, len(*l))
	for i, v := range *l {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}
func (l *intsFlag) Type() string { return "ints" }
func (l *intsFlag) Set(v string) error {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("bad count %q: a positive integer", f)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// levelsFlag is a comma-separated list of checkpoint levels 1-4.
type levelsFlag []int

func (l *levelsFlag) String() string { return (*intsFlag)(l).String() }
func (l *levelsFlag) Type() string   { return "levels" }
func (l *levelsFlag) Set(v string) error {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 4 {
			return fmt.Errorf("bad level %q: levels are 1, 2, 3 and 4", f)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// benchFlags are the command line of ftigo bench.
type benchFlags struct {
	size         sizeFlag
	levels       levelsFlag
	ranks        int
	repeats      int
	dir          string
	jsonOut      bool
	cold         bool
	plot         string
	sweep        bool
	sweepSizes   sizesFlag
	sweepRanks   intsFlag
	from         []string
	cpuProfile   string
	maxMemFactor float64
	dcpDirty     float64 // with --dcp-dirty (>= 0): the differential checkpoint bench
	dcpBlock     int
	async        bool
}

func (a *app) benchCmd() *cobra.Command {
	bf := &benchFlags{size: sizeFlag(256 << 20), levels: levelsFlag{1, 2, 3, 4}, dcpDirty: -1,
		sweepSizes: sizesFlag{1 << 20, 16 << 20, 64 << 20, 256 << 20}, sweepRanks: intsFlag{4, 8, 16}}
	c := &cobra.Command{
		Use:   "bench",
		Short: "time checkpoints and restarts per level against raw I/O of the same bytes",
		Long: `For each level: the checkpoint time and the restart time of N in-process
ranks (one per simulated node, all in one group), each beside physical
references measured in the same run, on the same file system, by as many
writers or readers, from and into the same memory:

  checkpoint  raw     plain write+fsync of the bytes the level persists
                      (L1, L4 the data; L2 data and partner copy; L3 data
                      and parity, m = k), one file per rank
              strong  the strongest raw writer: 16 MiB writes each
                      followed by a writeback hint (as ftigo's FTI-FF
                      writer does), one file per persisted copy, the
                      first file's fsync overlapped with the second's
                      writes
              shared  L4 only, information beside strong (the goal's
                      reference): the same writer into one file, every
                      rank at its task's offset as in the L4 container,
                      each rank fsyncing it
  restart     raw     raw read of the data
              strong  raw read plus the raw write+fsync of what the
                      restart rebuilds (L2: node 1 lost, its data file
                      and the copy it held; L3: nodes 1 and 2 lost, their
                      data and parity files)

Times are min, median and max over the repeats, ratios are of medians;
the process CPU time (user, system) of each is kept too. The measurements
of a repeat run in rotating order. Every recovered element is compared
with what was checkpointed; a mismatch fails the run. The page cache is
dropped before restarts and raw reads only with --cold (root only; it
drops the cache of the whole machine).

Which restart ratio means what: a restart verifies every byte it
restores (BLAKE3, about 2-3 GB/s per core) before the run goes on, and
keeps doing so. With the page cache kept, the raw read is a copy from
memory (several GB/s per core), so the restart ratio measures the cost
of that hashing on the cores at hand (several times the raw read on 2
cores shared by 4 ranks), not storage. With --cold both read from the
device and the hashing overlaps with the reading: that ratio is the one
to hold against the goals (restart at most 1.2x a raw read for L1, 1.5x
the raw read plus the rebuild write for L2 and L3).

--async post-processes L2-L4 in the background (inline_lL = 0): the
checkpoint time is then the time the ranks were blocked in Checkpoint,
and the JSON rows also carry total_s, until the checkpoint was committed
at its level while the ranks ran a solver-like CPU load.

--sweep measures every combination of --sweep-sizes and --sweep-ranks
(points needing more than half of the available memory are skipped and
listed); --plot draws the result: a bar chart per level for one point, the
scaling curves for a sweep (.png or .svg by the file's extension). --from
reads results saved with --json (several files are merged) instead of
measuring, to print or draw them again.

Exit codes: 0 the measurements completed, 1 one failed, 2 usage error.`,
		Example: `  ftigo bench                                # 4 ranks x 256 MiB, levels 1-4
  ftigo bench --size 64MiB --repeats 5 --json
  ftigo bench --levels 1,4 --dir /scratch/me --plot levels.svg
  ftigo bench --sweep --levels 1 --repeats 1 --json > l1.json
  ftigo bench --from l1.json,l2.json --plot scaling.png`,
		Args: argNames(false),
		RunE: func(cmd *cobra.Command, args []string) error { return a.runBench(cmd, bf) },
	}
	f := c.Flags()
	f.IntVar(&bf.ranks, "ranks", 4, "in-process ranks (one per simulated node, all in one group)")
	f.Var(&bf.size, "size", "protected bytes per rank (suffixes KiB, MiB, GiB)")
	f.Var(&bf.levels, "levels", "comma-separated levels to measure")
	f.IntVar(&bf.repeats, "repeats", 3, "repetitions of each measurement")
	f.StringVar(&bf.dir, "dir", "", "scratch directory on the file system to measure (default: a temporary directory)")
	f.BoolVar(&bf.jsonOut, "json", false, "print the result as JSON")
	f.BoolVar(&bf.cold, "cold", false, "drop the machine's page cache before each restart and raw read (needs root)")
	f.StringVar(&bf.plot, "plot", "", "draw the result into this .png or .svg file")
	f.BoolVar(&bf.sweep, "sweep", false, "measure every combination of --sweep-sizes and --sweep-ranks")
	f.Var(&bf.sweepSizes, "sweep-sizes", "bytes per rank of a sweep")
	f.Var(&bf.sweepRanks, "sweep-ranks", "rank counts of a sweep")
	f.StringSliceVar(&bf.from, "from", nil, "read results saved with --json instead of measuring (comma-separated files are merged)")
	f.StringVar(&bf.cpuProfile, "cpuprofile", "", "write a CPU profile of the measurements to this file (samples labelled phase=checkpoint or restart and level=N: go tool pprof -tagfocus phase=restart)")
	f.Float64Var(&bf.maxMemFactor, "max-mem", 0.5, "fraction of the available memory a sweep point may need")
	_ = f.MarkHidden("max-mem")
	f.Float64Var(&bf.dcpDirty, "dcp-dirty", -1, "measure differential checkpoints instead: per level a full checkpoint, then this fraction (0..1) of the dCP blocks changed and a differential one, beside the time to hash the data and an empty checkpoint")
	f.IntVar(&bf.dcpBlock, "dcp-block-size", 16384, "dCP block size in bytes with --dcp-dirty (FTI's dcp_block_size)")
	f.BoolVar(&bf.async, "async", false, "post-process L2-L4 in the background (inline_lL = 0) while the ranks run a solver-like CPU load: time is the time blocked in Checkpoint, total_s until the level is durable")
	return c
}

// runBench checks the flags, measures (or reads saved results) and
// prints and draws the result.
func (a *app) runBench(cmd *cobra.Command, bf *benchFlags) error {
	if bf.size < 8 {
		return usagef("--size %d: at least 8 bytes", int64(bf.size))
	}
	if bf.ranks < 1 || bf.repeats < 1 {
		return usagef("--ranks and --repeats must be at least 1")
	}
	if cmd.Flags().Changed("dcp-dirty") && (bf.dcpDirty < 0 || bf.dcpDirty > 1) {
		return usagef("--dcp-dirty %g: a fraction of the dCP blocks, 0..1", bf.dcpDirty)
	}
	if bf.dcpBlock < 512 || bf.dcpBlock > 65535 {
		return usagef("--dcp-block-size %d: use 512..65535 (FTI's dcp_block_size)", bf.dcpBlock)
	}
	if bf.async && (bf.dcpDirty >= 0 || len(bf.from) > 0) {
		return usagef("--async measures checkpoints: it takes no --dcp-dirty or --from")
	}
	if bf.dcpDirty >= 0 && (bf.sweep || len(bf.from) > 0 || bf.plot != "") {
		return usagef("--dcp-dirty measures one point: it takes no --sweep, --from or --plot")
	}
	if bf.sweep && (cmd.Flags().Changed("size") || cmd.Flags().Changed("ranks")) {
		return usagef("--sweep measures --sweep-sizes and --sweep-ranks: drop --size and --ranks")
	}
	if len(bf.from) > 0 && (bf.sweep || cmd.Flags().Changed("dir") || bf.cold || bf.cpuProfile != "") {
		return usagef("--from reads saved results: it takes no measurement flags (--sweep, --dir, --cold, --cpuprofile)")
	}
	if bf.plot != "" {
		if _, err := plotFormat(bf.plot); err != nil {
			return usagef("--plot %s: %v", bf.plot, err)
		}
	}
	rankCounts := []int{bf.ranks}
	sizes := []int64{int64(bf.size)}
	if bf.sweep {
		rankCounts, sizes = bf.sweepRanks, bf.sweepSizes
	}
	if len(bf.from) == 0 && slices.ContainsFunc(bf.levels, func(l int) bool { return l == 2 || l == 3 }) && slices.Min(rankCounts) < 2 {
		return usagef("L2 and L3 need at least 2 ranks (nodes): raise --ranks or drop them from --levels")
	}
	var res *benchResult
	if len(bf.from) > 0 {
		var err error
		if res, err = readResults(bf.from); err != nil {
			return err
		}
	} else {
		if bf.cold {
			if err := a.dropCaches(); err != nil {
				return usagef("--cold: cannot drop the page cache: %v", err)
			}
		}
		dir := bf.dir
		if dir == "" {
			d, err := os.MkdirTemp("", "ftigo-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			dir = d
		} else if err := outputDir(vfd.Sec2{}, "--dir", dir); err != nil {
			return err
		}
		if bf.dcpDirty >= 0 {
			bc := benchConfig{ranks: bf.ranks, size: int64(bf.size), levels: bf.levels, repeats: bf.repeats, dir: dir, cold: bf.cold, drop: a.dropCaches}
			p := a.newProgress(bf.jsonOut, "bench", int64(len(bf.levels)*bc.repeats+1), false)
			res, err := benchDCP(bc, bf.dcpDirty, bf.dcpBlock, func() { p.Add(1) })
			p.Done()
			if err != nil {
				return err
			}
			if bf.jsonOut {
				return writeJSON(a.stdout, res)
			}
			printDCPBench(a.stdout, res)
			return nil
		}
		if bf.cpuProfile != "" {
			pf, err := os.Create(bf.cpuProfile)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(pf); err != nil {
				pf.Close()
				return err
			}
			defer func() { pprof.StopCPUProfile(); pf.Close() }()
		}
		steps := int64(len(rankCounts)*len(sizes)*len(bf.levels)*bf.repeats*3 + 1)
		p := a.newProgress(bf.jsonOut, "bench", steps, false)
		var err error
		res, err = measure(rankCounts, sizes, bf, dir, a.dropCaches, func() { p.Add(1) })
		p.Done()
		if err != nil {
			return err
		}
	}
	if bf.plot != "" {
		if err := writePlot(bf.plot, res); err != nil {
			return err
		}
	}
	if bf.jsonOut {
		return writeJSON(a.stdout, res)
	}
	printBench(a.stdout, res)
	if bf.plot != "" {
		fmt.Fprintf(a.stdout, "plot: %s\n", bf.plot)
	}
	return nil
}

// measure runs bench for every point of the grid, skipping the points
// that need more memory than the machine has to spare.
func measure(rankCounts []int, sizes []int64, bf *benchFlags, dir string, drop func() error, tick func()) (*benchResult, error) {
	all := &benchResult{Rows: []benchRow{}, Skipped: []string{}, LoadStart: loadAvg()}
	avail := memAvailable()
	var descs []string
	for _, ranks := range rankCounts {
		for _, size := range sizes {
			// the application's arrays and the arrays recovered into
			need := 2 * int64(ranks) * size
			if avail > 0 && float64(need) > bf.maxMemFactor*float64(avail) {
				all.Skipped = append(all.Skipped, fmt.Sprintf("%d ranks x %s: needs %s of memory, %s available",
					ranks, humanBytes(size), humanBytes(need), humanBytes(avail)))
				for range len(bf.levels) * bf.repeats * 3 {
					tick()
				}
				continue
			}
			bc := benchConfig{ranks: ranks, size: size, levels: bf.levels, repeats: bf.repeats, dir: dir, cold: bf.cold, drop: drop, async: bf.async}
			res, err := bench(bc, tick)
			if err != nil {
				return nil, fmt.Errorf("%d ranks x %s: %w", ranks, humanBytes(size), err)
			}
			all.Rows = append(all.Rows, res.Rows...)
			descs = append(descs, res.Description)
			runtime.GC()
		}
	}
	all.Blake3MBps, all.RSEncMBps, all.RSDecMBps, all.MemcpyMBps = kernels()
	tick()
	all.LoadEnd = loadAvg()
	if len(descs) == 1 {
		all.Description = descs[0]
	} else {
		all.Description = fmt.Sprintf("sweep of %d points (ranks %v, bytes per rank %v), %d repeats, scratch %s",
			len(descs), rankCounts, (*sizesFlag)(&sizes).String(), bf.repeats, dir)
	}
	return all, nil
}

// readResults merges results saved with --json.
func readResults(files []string) (*benchResult, error) {
	out := &benchResult{Rows: []benchRow{}, Skipped: []string{}}
	var descs []string
	for _, name := range files {
		b, err := vfd.ReadFileLimit(vfd.Sec2{}, name, 64<<20)
		if err != nil {
			return nil, fmt.Errorf("--from %s: %w", name, err)
		}
		var r benchResult
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("--from %s: not a result of ftigo bench --json: %w", name, err)
		}
		if len(r.Rows) == 0 {
			return nil, fmt.Errorf("--from %s: no rows", name)
		}
		for i, row := range r.Rows {
			if row.Kind != "checkpoint" && row.Kind != "restart" || row.Level < 1 || row.Level > 4 || row.Ranks < 1 || row.BytesRank < 1 {
				return nil, fmt.Errorf("--from %s: row %d (%q) is not a bench row", name, i, row.Case)
			}
		}
		out.Rows = append(out.Rows, r.Rows...)
		out.Skipped = append(out.Skipped, r.Skipped...)
		descs = append(descs, r.Description)
		if out.Blake3MBps == 0 {
			out.Blake3MBps, out.RSEncMBps, out.RSDecMBps, out.MemcpyMBps = r.Blake3MBps, r.RSEncMBps, r.RSDecMBps, r.MemcpyMBps
			out.LoadStart = r.LoadStart
		}
		out.LoadEnd = r.LoadEnd
	}
	out.Description = descs[0]
	if len(descs) > 1 {
		out.Description = fmt.Sprintf("%d results merged: %s", len(descs), strings.Join(descs, "; "))
	}
	return out, nil
}

func printBench(w io.Writer, r *benchResult) {
	fmt.Fprintln(w, r.Description)
	fmt.Fprintf(w, "load average %.1f %.1f %.1f at the start, %.1f %.1f %.1f at the end\n",
		r.LoadStart[0], r.LoadStart[1], r.LoadStart[2], r.LoadEnd[0], r.LoadEnd[1], r.LoadEnd[2])
	fmt.Fprint(w, benchTable(r.Rows))
	fmt.Fprintln(w, "raw: checkpoint, plain write+fsync; restart, raw read of the data.")
	fmt.Fprintln(w, "strong: checkpoint, 16 MiB writes with writeback hints and overlapped fsyncs; restart, raw read plus raw write of the rebuilt files.")
	fmt.Fprintln(w, "cpu: the process's user+system CPU seconds (medians): ftigo / raw / strong.")
	for _, row := range r.Rows {
		if row.StrongShared != nil {
			fmt.Fprintf(w, "strong shared (information): the strong writer into one file, every rank at its task's offset as in the L4 container: %s %.3f s (%.3f-%.3f), ftigo %.2fx, cpu %.2f s.\n",
				row.Case, row.StrongShared.Median, row.StrongShared.Min, row.StrongShared.Max, row.RatioStrongShared, row.StrongSharedCPU.User+row.StrongSharedCPU.Sys)
		}
	}
	if warm := slices.ContainsFunc(r.Rows, func(row benchRow) bool { return row.Kind == "restart" && !row.CacheDropped }); warm {
		fmt.Fprintln(w, "restarts with the page cache kept: the raw read copies from memory while a restart hashes every byte it restores, so these ratios are the hashing's CPU cost; --cold (root) reads both from the device, the comparison the restart goals mean.")
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
	fmt.Fprintf(w, "BLAKE3 %.0f MB/s per core; Reed-Solomon (k=m=4) encode %.0f MB/s, decode %.0f MB/s per core; memcpy %.0f MB/s\n",
		r.Blake3MBps, r.RSEncMBps, r.RSDecMBps, r.MemcpyMBps)
}

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
		var ck, total, rs, plain, strong, read, restartRef, shared []time.Duration
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
}

// benchLevel takes one checkpoint at level in a fresh run directory,
// then (after deleting the nodes a level is meant to survive) restarts
// and recovers into dst, and checks every recovered element.
func benchLevel(bc benchConfig, data, dst [][]float64, level int, dir string) (levelTimes, error) {
	var m levelTimes
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, bc.ranks, true
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")
	if bc.async && level > 1 {
		cfg.Async[level] = true
	}
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
			rt, err := ckpt.Init(cfg, c)
			if err != nil {
				return err
			}
			defer rt.Close() // releases meta_dir when the job ends without Finalize
			v := data[c.Rank()]
			if err := ckpt.Protect(rt, 1, &v); err != nil {
				return err
			}
			if err := start(c); err != nil {
				return err
			}
			if err := rt.Checkpoint(1, level); err != nil {
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
			rt, err := ckpt.Init(cfg, c)
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

// rawWrite is the plain raw reference of a checkpoint: every rank writes
// its data copies times into one file from the application's memory, in
// 4 MiB writes, and fsyncs it; then the directory is synced.
func rawWrite(bc benchConfig, data [][]float64, dir string, copies int64) (time.Duration, cpuTimes, error) {
	d := vfd.Sec2{}
	if err := d.MkdirAll(dir, 0o755); err != nil {
		return 0, cpuTimes{}, err
	}
	defer d.RemoveAll(dir)
	t0, c0 := time.Now(), processCPU()
	err := parallel(bc.ranks, func(r int) error {
		f, err := vfd.CreateTrunc(d, filepath.Join(dir, fmt.Sprintf("raw%04d", r)))
		if err != nil {
			return err
		}
		src := bytesOf(data[r])
		const piece = 4 << 20
		for c := range copies {
			base := c * int64(len(src))
			for off := 0; off < len(src); off += piece {
				if _, err := f.WriteAt(src[off:min(off+piece, len(src))], base+int64(off)); err != nil {
					return errors.Join(err, f.Close())
				}
			}
		}
		return errors.Join(f.Sync(), f.Close())
	})
	if err == nil {
		err = d.SyncDir(dir)
	}
	return time.Since(t0), processCPU().sub(c0), err
}

// strongTimes are the strongest raw references of one repeat.
type strongTimes struct {
	write, read, rebuild          time.Duration
	writeCPU, readCPU, rebuildCPU cpuTimes
}

// strongPiece is the write size of the strongest raw writer, after which
// it starts the writeback (fileformat's writebackPiece).
const strongPiece = 16 << 20

// writeStrong writes src to a new file name in strongPiece writes, each
// followed by a writeback hint, and returns the function that syncs and
// closes it.
func writeStrong(name string, src []byte) (func() error, error) {
	f, err := vfd.CreateTrunc(vfd.Sec2{}, name)
	if err != nil {
		return nil, err
	}
	if err := writePieces(f, src, 0); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() error { return errors.Join(f.Sync(), f.Close()) }, nil
}

// writePieces writes src into f at base in strongPiece writes, each
// followed by a writeback hint: the strong writer's pattern.
func writePieces(f vfd.File, src []byte, base int64) error {
	for off := 0; off < len(src); off += strongPiece {
		end := min(off+strongPiece, len(src))
		if _, err := f.WriteAt(src[off:end], base+int64(off)); err != nil {
			return err
		}
		if err := vfd.StartWriteback(f, base+int64(off), int64(end-off)); err != nil {
			return err
		}
	}
	return nil
}

// writeFilesStrong writes src to every file of names, each file's fsync
// running while the next is written.
func writeFilesStrong(names []string, src []byte) error {
	var syncs []chan error
	var errs []error
	for _, name := range names {
		sync, err := writeStrong(name, src)
		if err != nil {
			errs = append(errs, err)
			break
		}
		done := make(chan error, 1)
		go func() { done <- sync() }()
		syncs = append(syncs, done)
	}
	for _, d := range syncs {
		errs = append(errs, <-d)
	}
	return errors.Join(errs...)
}

// strongShared measures the strong writer into one shared file, as the
// L4 container is written: the file is created with a 4 KiB head (the
// container's META1 block), every rank then opens it, writes its data at
// its task's offset (tasks rounded up to 4 KiB) in strongPiece writes,
// each followed by a writeback hint, and fsyncs it; then the directory
// is synced. No metadata is written: only the data's placement differs
// from [strongRaw]'s checkpoint writer.
func strongShared(bc benchConfig, data [][]float64, dir string) (time.Duration, cpuTimes, error) {
	d := vfd.Sec2{}
	if err := d.MkdirAll(dir, 0o755); err != nil {
		return 0, cpuTimes{}, err
	}
	defer d.RemoveAll(dir)
	const blk = 4096
	name := filepath.Join(dir, "shared")
	t0, c0 := time.Now(), processCPU()
	f, err := vfd.CreateTrunc(d, name)
	if err == nil {
		_, err = f.WriteAt(make([]byte, blk), 0)
		err = errors.Join(err, f.Close())
	}
	if err == nil {
		err = parallel(bc.ranks, func(r int) error {
			src := bytesOf(data[r])
			task := (int64(len(src)) + blk - 1) / blk * blk
			return writeStrongAt(d, name, src, blk+int64(r)*task)
		})
	}
	if err == nil {
		err = d.SyncDir(dir)
	}
	return time.Since(t0), processCPU().sub(c0), err
}

// writeStrongAt writes src into the existing file name at base as
// [writeStrong] does (strongPiece writes, each followed by a writeback
// hint), then syncs and closes it.
func writeStrongAt(d vfd.Driver, name string, src []byte, base int64) error {
	f, err := d.Open(name, vfd.ReadWrite)
	if err != nil {
		return err
	}
	if err := writePieces(f, src, base); err != nil {
		return errors.Join(err, f.Close())
	}
	return errors.Join(f.Sync(), f.Close())
}

// strongRaw measures the strongest raw references of level: the
// strongest raw writer of the checkpoint's bytes (every rank writes its
// data once per persisted copy, one file each), the raw read of the
// data back into dst by every rank, and the raw write of what the
// level's restart rebuilds by the ranks that lost it.
func strongRaw(bc benchConfig, data, dst [][]float64, level int, dir string) (strongTimes, error) {
	var m strongTimes
	d := vfd.Sec2{}
	if err := d.MkdirAll(dir, 0o755); err != nil {
		return m, err
	}
	defer d.RemoveAll(dir)
	name := func(r int, copy int64) string { return filepath.Join(dir, fmt.Sprintf("raw%04d-%d", r, copy)) }
	names := func(r int, n int64, tag string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = name(r, int64(i)) + tag
		}
		return out
	}
	t0, c0 := time.Now(), processCPU()
	err := parallel(bc.ranks, func(r int) error {
		return writeFilesStrong(names(r, persistFactor[level], ""), bytesOf(data[r]))
	})
	if err == nil {
		err = d.SyncDir(dir)
	}
	m.write, m.writeCPU = time.Since(t0), processCPU().sub(c0)
	if err != nil {
		return m, err
	}
	if bc.cold {
		if err := bc.drop(); err != nil {
			return m, fmt.Errorf("drop the page cache: %w", err)
		}
	}
	t0, c0 = time.Now(), processCPU()
	err = parallel(bc.ranks, func(r int) error {
		f, err := vfd.OpenRead(d, name(r, 0))
		if err != nil {
			return err
		}
		return errors.Join(vfd.ReadFull(f, bytesOf(dst[r]), 0), f.Close())
	})
	m.read, m.readCPU = time.Since(t0), processCPU().sub(c0)
	if err != nil {
		return m, err
	}
	lostRanks := lost(level, bc.ranks)
	if len(lostRanks) == 0 {
		return m, nil
	}
	t0, c0 = time.Now(), processCPU()
	err = parallel(len(lostRanks), func(i int) error {
		r := lostRanks[i]
		return writeFilesStrong(names(r, 2, ".rebuilt"), bytesOf(data[r]))
	})
	if err == nil {
		err = d.SyncDir(dir)
	}
	m.rebuild, m.rebuildCPU = time.Since(t0), processCPU().sub(c0)
	return m, err
}

// dropPageCache asks the kernel to drop clean page-cache pages of the
// whole machine (root only), so that reads come from the device.
func dropPageCache() error {
	syscall.Sync()
	f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("1\n")
	return errors.Join(err, f.Close())
}

// loadAvg returns the 1, 5 and 15 minute load averages, or zeros.
func loadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg") // procfs reports size 0: read to EOF
	if err != nil {
		return out
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}

// memAvailable returns the kernel's estimate of the memory available to
// new work (MemAvailable), or 0 when unknown.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kib, _ := strconv.ParseInt(f[1], 10, 64)
			return kib << 10
		}
	}
	return 0
}

// kernels measures single-core BLAKE3 and Reed-Solomon throughput and a
// memcpy for scale, in MB/s. The buffers are touched before they are
// timed, so no first-touch page faults are counted.
func kernels() (hash, rsEnc, rsDec, memcpy float64) {
	const n = 64 << 20
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	mbps := func(bytes int, d time.Duration) float64 { return float64(bytes) / 1e6 / d.Seconds() }
	t0 := time.Now()
	h := b3.New()
	h.Write(buf)
	_ = h.Sum(nil)
	hash = mbps(n, time.Since(t0))

	dst := make([]byte, n)
	copy(dst, buf)
	t0 = time.Now()
	copy(dst, buf)
	memcpy = mbps(n, time.Since(t0))

	code, err := encode.New(4, 4)
	if err != nil {
		return hash, 0, 0, memcpy
	}
	shard := n / 4
	data := [][]byte{buf[:shard], buf[shard : 2*shard], buf[2*shard : 3*shard], buf[3*shard:]}
	parity := make([][]byte, 4)
	for i := range parity {
		parity[i] = make([]byte, shard)
		clear(parity[i])
	}
	t0 = time.Now()
	if err := code.EncodeBlock(data, parity); err != nil {
		return hash, 0, 0, memcpy
	}
	rsEnc = mbps(n, time.Since(t0))
	shards := append(append([][]byte{}, data...), parity...)
	lost := []bool{true, true, false, false, false, false, true, true}
	for i, l := range lost {
		if l {
			shards[i] = make([]byte, shard)
			clear(shards[i])
		}
	}
	t0 = time.Now()
	if err := code.Reconstruct(shards, lost); err == nil {
		rsDec = mbps(n, time.Since(t0))
	}
	return hash, rsEnc, rsDec, memcpy
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
