package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ftigo/ftigo/fileformat"
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
	// codec compresses the checkpoints ([basic] compression); the same
	// run then also measures each level's uncompressed checkpoint.
	codec fileformat.Codec
	// data is the kind of data the ranks protect (benchDataKinds).
	data string
	// snapshot (with async) takes every level in ckpt_snapshot mode and
	// also measures the inline checkpoint and a plain memcpy (bench_snap.go).
	snapshot bool
	// steady (with snapshot, for the rows and their inline reference)
	// takes several checkpoints per job, the first reported apart.
	steady bool
	// localDir, when set, holds the checkpoints' node-local area
	// (ckpt_dir) in place of dir (--ckpt-dir, with --snapshot).
	localDir string
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
	Async    bool    `json:"async"`
	BlockedS float64 `json:"blocked_s"`
	TotalS   float64 `json:"total_s"`
	// Snapshot (--async --snapshot): the level was taken in ckpt_snapshot
	// mode; InlineS is the median synchronous checkpoint of the level and
	// MemcpyS the median plain copy of the same bytes by the same ranks,
	// both in the same run.
	Snapshot bool    `json:"snapshot,omitempty"`
	InlineS  float64 `json:"inline_s,omitempty"`
	MemcpyS  float64 `json:"memcpy_s,omitempty"`
	// FirstBlockedS and FirstTotalS (--snapshot) are the medians of each
	// job's first checkpoint, which touches its staging memory and makes
	// its directories. BlockedS, TotalS and InlineS are the medians of
	// the later ones (steady state), MemcpyS of a copy into a buffer
	// already touched.
	FirstBlockedS float64  `json:"first_blocked_s,omitempty"`
	FirstTotalS   float64  `json:"first_total_s,omitempty"`
	CPU           cpuStats `json:"cpu"`
	RawCPU        cpuStats `json:"raw_cpu"`
	StrongCPU     cpuStats `json:"strong_raw_cpu"`
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
	// Compression is the codec checkpoints were written with (--compression;
	// empty for none); LogicalBytes and StoredBytes sum the variable's
	// bytes and the bytes they took in the ranks' files (the last
	// repeat's), CompressionRatio is their ratio. Checkpoints only.
	Compression      string  `json:"compression,omitempty"`
	LogicalBytes     int64   `json:"logical_bytes,omitempty"`
	StoredBytes      int64   `json:"stored_bytes,omitempty"`
	CompressionRatio float64 `json:"compression_ratio,omitempty"`
	// Data is the kind of data protected (--data). Uncompressed is the
	// same level's checkpoint or restart without compression, measured
	// in the same run (with --compression only), and RatioUncompressed
	// the compressed median over its median.
	Data              string  `json:"data,omitempty"`
	Uncompressed      *stats  `json:"uncompressed,omitempty"`
	RatioUncompressed float64 `json:"ratio_uncompressed,omitempty"`
	// UncompressedCPU is that case's process CPU (medians), and
	// CPURatioUncompressed the row's CPU (user+system) over it: the
	// counted measure, steadier than times on a loaded machine.
	UncompressedCPU      *cpuStats `json:"uncompressed_cpu,omitempty"`
	CPURatioUncompressed float64   `json:"cpu_ratio_uncompressed,omitempty"`
}

type benchResult struct {
	Rows       []benchRow `json:"rows"`
	Blake3MBps float64    `json:"blake3_mb_per_s_per_core"`
	RSEncMBps  float64    `json:"rs_encode_mb_per_s_per_core"`
	RSDecMBps  float64    `json:"rs_decode_mb_per_s_per_core"`
	MemcpyMBps float64    `json:"memcpy_mb_per_s"`
	// ZstdCompMBps and ZstdDecMBps are zstd's rates on one core on the
	// data of the first ranks of the first point, up to 64 MiB
	// (--compression zstd), block by block as the files store it, and
	// ZstdRatio that data's logical over stored bytes.
	ZstdCompMBps float64 `json:"zstd_compress_mb_per_s_per_core,omitempty"`
	ZstdDecMBps  float64 `json:"zstd_decompress_mb_per_s_per_core,omitempty"`
	ZstdRatio    float64 `json:"zstd_ratio,omitempty"`
	Description  string  `json:"description"`
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
	compression  string
	codec        fileformat.Codec
	data         string
	size         sizeFlag
	levels       levelsFlag
	ranks        int
	repeats      int
	dir          string
	ckptDir      string
	jsonOut      bool
	cold         bool
	plot         string
	sweep        bool
	sweepSizes   sizesFlag
	sweepRanks   intsFlag
	from         []string
	cpuProfile   string
	memProfile   string
	maxMemFactor float64
	dcpDirty     float64 // with --dcp-dirty (>= 0): the differential checkpoint bench
	dcpBlock     int
	async        bool
	snapshot     bool
	// the scale sweep (--sweep-ranks without --sweep, or --mpi)
	scale     bool
	mpi       bool
	groupSize int
	timeLimit time.Duration
	storage   string
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

--compression zstd writes the checkpoints with [basic] compression =
zstd; each checkpoint row then carries the variable's bytes, the bytes
its files took and their ratio (a "compressed" column), while the raw
references still write the data as it is. The same run also takes each
level's checkpoint and restart uncompressed: rows carry that time and
ratio_uncompressed (a "vs none" column), and its
process CPU with cpu_ratio_uncompressed ("cpu vs none"). The result adds zstd's
compression and decompression rates on one core beside BLAKE3's.
--data picks what the ranks protect: ramp, heat, random or sparse.

--sweep-ranks without --sweep is the scale sweep: what one rank pays
for Init, a checkpoint and a restart (Init and Recover) as the ranks
grow, in groups of --group-size, with 4 KiB and 64 KiB per rank unless
--size or --sweep-sizes say otherwise. Each row has rank 0's wall time,
the process CPU per rank, the messages and bytes a rank received and
sent (mean and most over the ranks, from comm's counters), the metadata
a rank decoded where the engine counts it, and the memory allocated and
at its peak. A goal table follows: each per-rank figure at the largest
count over the one at the smallest (PASS: CPU and bytes received per
rank at most 1.5x for checkpoints and restarts, 2x for Init). Use tmpfs
(--dir /dev/shm/...) so that storage costs next to nothing. --mpi
measures the same figures over the processes of an MPI job instead,
one rank each (ftigo built with -tags mpi, under mpirun); rank 0 prints.

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
  ftigo bench --from l1.json,l2.json --plot scaling.png
  ftigo bench --sweep-ranks 64,256,1024 --dir /dev/shm/scale --repeats 1 --plot scale.svg
  mpirun -np 16 ftigo bench --mpi --dir /dev/shm/scale --json   # ftigo built with -tags mpi`,
		Args: argNames(false),
		RunE: func(cmd *cobra.Command, args []string) error { return a.runBench(cmd, bf) },
	}
	f := c.Flags()
	f.IntVar(&bf.ranks, "ranks", 4, "in-process ranks (one per simulated node, all in one group)")
	f.Var(&bf.size, "size", "protected bytes per rank (suffixes KiB, MiB, GiB)")
	f.Var(&bf.levels, "levels", "comma-separated levels to measure")
	f.IntVar(&bf.repeats, "repeats", 3, "repetitions of each measurement")
	f.StringVar(&bf.dir, "dir", "", "scratch directory on the file system to measure (default: a temporary directory)")
	f.StringVar(&bf.ckptDir, "ckpt-dir", "", "with --snapshot: the checkpoints' node-local area (ckpt_dir) under this directory, for example on tmpfs, while glbl_dir and meta_dir stay in --dir (as on clusters with node-local memory)")
	f.BoolVar(&bf.jsonOut, "json", false, "print the result as JSON")
	f.BoolVar(&bf.cold, "cold", false, "drop the machine's page cache before each restart and raw read (needs root)")
	f.StringVar(&bf.plot, "plot", "", "draw the result into this .png or .svg file")
	f.BoolVar(&bf.sweep, "sweep", false, "measure every combination of --sweep-sizes and --sweep-ranks")
	f.Var(&bf.sweepSizes, "sweep-sizes", "bytes per rank of a sweep")
	f.Var(&bf.sweepRanks, "sweep-ranks", "rank counts of a sweep")
	f.StringSliceVar(&bf.from, "from", nil, "read results saved with --json instead of measuring (comma-separated files are merged)")
	f.StringVar(&bf.cpuProfile, "cpuprofile", "", "write a CPU profile of the measurements to this file (samples labelled phase=checkpoint or restart, or init in the scale sweep, and level=N: go tool pprof -tagfocus phase=restart)")
	f.StringVar(&bf.memProfile, "memprofile", "", "scale sweep: write a profile of the memory allocated, by call site, to this file at the end (go tool pprof -sample_index=alloc_space)")
	f.Float64Var(&bf.maxMemFactor, "max-mem", 0.5, "fraction of the available memory a sweep point may need")
	_ = f.MarkHidden("max-mem")
	f.Float64Var(&bf.dcpDirty, "dcp-dirty", -1, "measure differential checkpoints instead: per level a full checkpoint, then this fraction (0..1) of the dCP blocks changed and a differential one, beside the time to hash the data and an empty checkpoint")
	f.IntVar(&bf.dcpBlock, "dcp-block-size", 16384, "dCP block size in bytes with --dcp-dirty (FTI's dcp_block_size)")
	f.BoolVar(&bf.snapshot, "snapshot", false, "with --async: take every level in ckpt_snapshot mode (Checkpoint blocks for a copy into memory); rows add inline_s, memcpy_s and the first checkpoint of each job apart (first_blocked_s, first_total_s; the others are steady state)")
	f.BoolVar(&bf.mpi, "mpi", false, "scale figures of the processes of an MPI job, one rank each (an ftigo built with -tags mpi, started by mpirun; needs --dir)")
	f.IntVar(&bf.groupSize, "group-size", 4, "ranks per group (L2 partners, L3 encoding) in the scale sweep")
	f.StringVar(&bf.storage, "storage", storageFiles, "scale sweep: where the ranks' files are, files (in --dir) or memory (vfd's in-memory driver: no file descriptors, no system calls)")
	f.DurationVar(&bf.timeLimit, "time-limit", 0, "scale sweep: skip the rank counts predicted to take longer than this per point (0: no limit)")
	f.StringVar(&bf.data, "data", "ramp", "the data the ranks protect: ramp (a linear ramp), heat (heat2d's field after 4,000 iterations, from the diffusion solution), random (uniform bits) or sparse (90% zeros)")
	f.StringVar(&bf.compression, "compression", "none", "compress the checkpoints: none or zstd ([basic] compression); checkpoint rows then carry the stored bytes and the compression ratio")
	f.BoolVar(&bf.async, "async", false, "post-process L2-L4 in the background (inline_lL = 0) while the ranks run a solver-like CPU load: time is the time blocked in Checkpoint, total_s until the level is durable")
	return c
}

// runBench checks the flags, measures (or reads saved results) and
// prints and draws the result.
func (a *app) runBench(cmd *cobra.Command, bf *benchFlags) error {
	rankCounts, sizes, err := bf.check(cmd)
	if err != nil {
		return err
	}
	if len(bf.from) > 0 && isScaleResult(bf.from[0]) {
		res, err := readScaleResults(bf.from)
		if err != nil {
			return err
		}
		return a.reportScale(bf, res)
	}
	if bf.scale {
		return a.runScaleBench(bf, rankCounts, sizes)
	}
	if len(bf.from) > 0 {
		res, err := readResults(bf.from)
		if err != nil {
			return err
		}
		return a.reportBench(bf, res)
	}
	if bf.cold {
		if err := a.dropCaches(); err != nil {
			return usagef("--cold: cannot drop the page cache: %v", err)
		}
	}
	dir, cleanup, err := benchDir(bf.dir)
	if err != nil {
		return err
	}
	defer cleanup()
	if bf.dcpDirty >= 0 {
		return a.runDCPBench(bf, dir)
	}
	stop, err := startCPUProfile(bf.cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	steps := int64(len(rankCounts)*len(sizes)*len(bf.levels)*bf.repeats*3 + 1)
	p := a.newProgress(bf.jsonOut, "bench", steps, false)
	res, err := measure(rankCounts, sizes, bf, dir, a.dropCaches, func() { p.Add(1) })
	p.Done()
	if err != nil {
		return err
	}
	return a.reportBench(bf, res)
}

// check checks the flags and returns the grid to measure.
func (bf *benchFlags) check(cmd *cobra.Command) (rankCounts []int, sizes []int64, err error) {
	if bf.codec, err = fileformat.ParseCodec(bf.compression); err != nil {
		return nil, nil, usagef("--compression %q: use none or zstd", bf.compression)
	}
	if !slices.Contains(benchDataKinds, bf.data) {
		return nil, nil, usagef("--data %q: use %s", bf.data, strings.Join(benchDataKinds, ", "))
	}
	if bf.size < 8 {
		return nil, nil, usagef("--size %d: at least 8 bytes", int64(bf.size))
	}
	if bf.ranks < 1 || bf.repeats < 1 {
		return nil, nil, usagef("--ranks and --repeats must be at least 1")
	}
	if cmd.Flags().Changed("dcp-dirty") && (bf.dcpDirty < 0 || bf.dcpDirty > 1) {
		return nil, nil, usagef("--dcp-dirty %g: a fraction of the dCP blocks, 0..1", bf.dcpDirty)
	}
	if bf.dcpBlock < 512 || bf.dcpBlock > 65535 {
		return nil, nil, usagef("--dcp-block-size %d: use 512..65535 (FTI's dcp_block_size)", bf.dcpBlock)
	}
	if bf.snapshot && !bf.async {
		return nil, nil, usagef("--snapshot goes with --async")
	}
	if bf.ckptDir != "" && !bf.snapshot {
		return nil, nil, usagef("--ckpt-dir goes with --snapshot")
	}
	if bf.async && (bf.dcpDirty >= 0 || len(bf.from) > 0) {
		return nil, nil, usagef("--async measures checkpoints: it takes no --dcp-dirty or --from")
	}
	if bf.dcpDirty >= 0 && (bf.sweep || len(bf.from) > 0 || bf.plot != "") {
		return nil, nil, usagef("--dcp-dirty measures one point: it takes no --sweep, --from or --plot")
	}
	if bf.sweep && (cmd.Flags().Changed("size") || cmd.Flags().Changed("ranks")) {
		return nil, nil, usagef("--sweep measures --sweep-sizes and --sweep-ranks: drop --size and --ranks")
	}
	if len(bf.from) > 0 && (bf.sweep || cmd.Flags().Changed("dir") || bf.cold || bf.cpuProfile != "" || bf.memProfile != "" || bf.mpi) {
		return nil, nil, usagef("--from reads saved results: it takes no measurement flags (--sweep, --dir, --cold, --cpuprofile, --memprofile, --mpi)")
	}
	if bf.plot != "" {
		if _, err := plotFormat(bf.plot); err != nil {
			return nil, nil, usagef("--plot %s: %v", bf.plot, err)
		}
	}
	bf.scale = len(bf.from) == 0 && !bf.sweep && (cmd.Flags().Changed("sweep-ranks") || bf.mpi)
	if bf.codec != fileformat.CodecNone && (bf.scale || bf.dcpDirty >= 0 || len(bf.from) > 0) {
		return nil, nil, usagef("--compression measures the levels' checkpoints and restarts: it takes no --dcp-dirty, --from or scale sweep")
	}
	if bf.scale {
		return bf.checkScale(cmd)
	}
	if len(bf.from) == 0 {
		for _, f := range []string{"group-size", "time-limit", "memprofile", "storage"} {
			if cmd.Flags().Changed(f) {
				return nil, nil, usagef("--%s belongs to the scale sweep (--sweep-ranks without --sweep, or --mpi)", f)
			}
		}
	}
	rankCounts = []int{bf.ranks}
	sizes = []int64{int64(bf.size)}
	if bf.sweep {
		rankCounts, sizes = bf.sweepRanks, bf.sweepSizes
	}
	if len(bf.from) == 0 && slices.ContainsFunc(bf.levels, func(l int) bool { return l == 2 || l == 3 }) && slices.Min(rankCounts) < 2 {
		return nil, nil, usagef("L2 and L3 need at least 2 ranks (nodes): raise --ranks or drop them from --levels")
	}
	return rankCounts, sizes, nil
}

// benchDir returns the scratch directory: dir, checked, or a temporary
// one that cleanup removes.
func benchDir(dir string) (_ string, cleanup func(), err error) {
	if dir != "" {
		return dir, func() {}, outputDir(vfd.Sec2{}, "--dir", dir)
	}
	d, err := os.MkdirTemp("", "ftigo-bench-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// runDCPBench measures and prints the differential checkpoint bench.
func (a *app) runDCPBench(bf *benchFlags, dir string) error {
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

// startCPUProfile starts a CPU profile into file (none when file is "").
// stop ends it.
func startCPUProfile(file string) (stop func(), err error) {
	if file == "" {
		return func() {}, nil
	}
	pf, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); pf.Close() }, nil
}

// reportBench draws, prints or writes res as the flags ask.
func (a *app) reportBench(bf *benchFlags, res *benchResult) error {
	return a.report(bf, res, func(name string) error { return writePlot(name, res) }, func(w io.Writer) { printBench(w, res) })
}

// report draws res (plot) into --plot, then writes it as JSON with
// --json, else prints it as text (print).
func (a *app) report(bf *benchFlags, res any, plot func(name string) error, print func(w io.Writer)) error {
	if bf.plot != "" {
		if err := plot(bf.plot); err != nil {
			return err
		}
	}
	if bf.jsonOut {
		return writeJSON(a.stdout, res)
	}
	print(a.stdout)
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
			bc := benchConfig{ranks: ranks, size: size, levels: bf.levels, repeats: bf.repeats, dir: dir, cold: bf.cold, drop: drop, async: bf.async,
				snapshot: bf.snapshot, steady: bf.snapshot, localDir: bf.ckptDir, codec: bf.codec, data: bf.data}
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
	if bf.codec != fileformat.CodecNone {
		if err := codecKernel(all, bf.codec, bf.data, rankCounts[0], sizes[0], 64<<20); err != nil {
			return nil, err
		}
	}
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
	if r.ZstdCompMBps > 0 {
		fmt.Fprintf(w, "zstd on this data, one core: compress %.2f GB/s, decompress %.2f GB/s, ratio %.2fx; BLAKE3 %.2f GB/s\n",
			r.ZstdCompMBps/1e3, r.ZstdDecMBps/1e3, r.ZstdRatio, r.Blake3MBps/1e3)
	}
}
