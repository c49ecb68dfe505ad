package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/encode"
	"github.com/ftigo/ftigo/vfd"
)

// benchConfig are the settings of one bench run.
type benchConfig struct {
	ranks   int
	size    int64
	levels  []int
	repeats int
	dir     string
	cold    bool
}

// persistFactor is how many times a level stores each byte of data: L2
// keeps a partner copy, L3 a parity file as large as the data (m = k);
// L4 writes each rank's file once, straight into the global container.
var persistFactor = map[int]int64{1: 1, 2: 2, 3: 2, 4: 1}

// stats are min, median and max of repeated timings.
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
	return stats{Min: s[0], Median: s[len(s)/2], Max: s[len(s)-1]}
}

type benchRow struct {
	Case      string  `json:"case"`
	Level     int     `json:"level"`
	Ranks     int     `json:"ranks"`
	BytesRank int64   `json:"bytes_per_rank"`
	Persisted int64   `json:"bytes_persisted"`
	Time      stats   `json:"time"`
	Raw       stats   `json:"raw"`
	Ratio     float64 `json:"ratio_median"`
}

type benchResult struct {
	Rows        []benchRow `json:"rows"`
	Blake3MBps  float64    `json:"blake3_mb_per_s_per_core"`
	RSEncMBps   float64    `json:"rs_encode_mb_per_s_per_core"`
	RSDecMBps   float64    `json:"rs_decode_mb_per_s_per_core"`
	MemcpyMBps  float64    `json:"memcpy_mb_per_s"`
	Description string     `json:"description"`
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

// levelsFlag is a comma-separated list of checkpoint levels 1-4.
type levelsFlag []int

func (l *levelsFlag) String() string {
	parts := make([]string, len(*l))
	for i, v := range *l {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}
func (l *levelsFlag) Type() string { return "levels" }
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

func (a *app) benchCmd() *cobra.Command {
	size := sizeFlag(256 << 20)
	lv := levelsFlag{1, 2, 3, 4}
	var ranks, repeats int
	var dir string
	var jsonOut, cold bool
	c := &cobra.Command{
		Use:   "bench",
		Short: "time checkpoints and restarts per level against raw I/O of the same bytes",
		Long: `For each level: the checkpoint time and the restart time of N in-process
ranks, each beside the physical reference measured in the same run on the
same file system (raw write+fsync, and raw read, of the bytes the level
must persist, by the same number of writers), as a ratio; min, median and
max over the repeats. Restarts of L2 and L3 are measured after losing
node 1 (L3: nodes 1 and 2), so they include the rebuild. Also BLAKE3 and
Reed-Solomon throughput per core. On a terminal, a progress bar counts the
measurements on standard error.

Exit codes: 0 the measurements completed, 1 one failed, 2 usage error.`,
		Example: `  ftigo bench                                # 4 ranks x 256 MiB, levels 1-4
  ftigo bench --size 64MiB --repeats 5 --json
  ftigo bench --levels 1,4 --dir /scratch/me`,
		Args: argNames(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			if size < 8 {
				return usagef("--size %d: at least 8 bytes", int64(size))
			}
			if ranks < 1 || repeats < 1 {
				return usagef("--ranks and --repeats must be at least 1")
			}
			if slices.ContainsFunc(lv, func(l int) bool { return l == 2 || l == 3 }) && ranks < 2 {
				return usagef("L2 and L3 need at least 2 ranks (nodes): raise --ranks or drop them from --levels")
			}
			bc := benchConfig{ranks: ranks, size: int64(size), levels: lv, repeats: repeats, dir: dir, cold: cold}
			if bc.dir == "" {
				d, err := os.MkdirTemp("", "ftigo-bench-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(d)
				bc.dir = d
			} else if err := outputDir(vfd.Sec2{}, "--dir", bc.dir); err != nil {
				return err
			}
			p := a.newProgress(jsonOut, "bench", int64(len(lv)*bc.repeats*2+1), false)
			res, err := bench(bc, func() { p.Add(1) })
			p.Done()
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(a.stdout, res)
			}
			printBench(a.stdout, res)
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&ranks, "ranks", 4, "in-process ranks (one per simulated node, all in one group)")
	f.Var(&size, "size", "protected bytes per rank (suffixes KiB, MiB, GiB)")
	f.Var(&lv, "levels", "comma-separated levels to measure")
	f.IntVar(&repeats, "repeats", 3, "repetitions of each measurement")
	f.StringVar(&dir, "dir", "", "scratch directory on the file system to measure (default: a temporary directory)")
	f.BoolVar(&jsonOut, "json", false, "print the result as JSON")
	f.BoolVar(&cold, "cold", true, "drop the page cache before each read measurement (needs root; otherwise reads may come from memory on both sides)")
	return c
}

func printBench(w io.Writer, r *benchResult) {
	fmt.Fprintln(w, r.Description)
	fmt.Fprintf(w, "%-24s %10s %26s %26s %7s\n", "case", "persisted", "ftigo min/median/max s", "raw min/median/max s", "ratio")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%-24s %7.0f MiB %8.3f/%8.3f/%8.3f %8.3f/%8.3f/%8.3f %6.2fx\n", row.Case, float64(row.Persisted)/(1<<20),
			row.Time.Min, row.Time.Median, row.Time.Max, row.Raw.Min, row.Raw.Median, row.Raw.Max, row.Ratio)
	}
	fmt.Fprintf(w, "BLAKE3 %.0f MB/s per core; Reed-Solomon (k=m=4) encode %.0f MB/s, decode %.0f MB/s per core; memcpy %.0f MB/s\n",
		r.Blake3MBps, r.RSEncMBps, r.RSDecMBps, r.MemcpyMBps)
}

// bench measures every level in bc.
func bench(bc benchConfig, tick func()) (*benchResult, error) {
	if tick == nil {
		tick = func() {}
	}
	res := &benchResult{Rows: []benchRow{}, Description: fmt.Sprintf("%d ranks on %d simulated nodes, %s per rank, %d repeats, scratch %s",
		bc.ranks, bc.ranks, humanBytes(bc.size), bc.repeats, bc.dir)}
	data := make([][]float64, bc.ranks)
	for r := range data {
		data[r] = make([]float64, bc.size/8)
		for i := range data[r] {
			data[r][i] = float64(r) + float64(i)*1e-3
		}
	}
	for _, level := range bc.levels {
		var ck, rs, rawW, rawR []time.Duration
		for rep := 0; rep < bc.repeats; rep++ {
			run := filepath.Join(bc.dir, fmt.Sprintf("L%d-%d", level, rep))
			c, r, err := benchLevel(bc, data, level, run)
			if err != nil {
				return nil, fmt.Errorf("level %d: %w", level, err)
			}
			ck, rs = append(ck, c), append(rs, r)
			tick()
			w, rd, err := rawIO(bc, filepath.Join(bc.dir, fmt.Sprintf("raw-%d", rep)), bc.size*persistFactor[level], bc.size)
			if err != nil {
				return nil, err
			}
			rawW, rawR = append(rawW, w), append(rawR, rd)
			tick()
			os.RemoveAll(run)
		}
		row := benchRow{Case: fmt.Sprintf("L%d checkpoint", level), Level: level, Ranks: bc.ranks, BytesRank: bc.size,
			Persisted: bc.size * persistFactor[level] * int64(bc.ranks), Time: summarize(ck), Raw: summarize(rawW)}
		row.Ratio = row.Time.Median / row.Raw.Median
		res.Rows = append(res.Rows, row)
		restart := fmt.Sprintf("L%d restart", level)
		switch level {
		case 2:
			restart += ", node 1 lost"
		case 3:
			restart += ", nodes 1,2 lost"
		}
		row = benchRow{Case: restart, Level: level, Ranks: bc.ranks, BytesRank: bc.size, Persisted: bc.size * int64(bc.ranks),
			Time: summarize(rs), Raw: summarize(rawR)}
		row.Ratio = row.Time.Median / row.Raw.Median
		res.Rows = append(res.Rows, row)
	}
	res.Blake3MBps, res.RSEncMBps, res.RSDecMBps, res.MemcpyMBps = kernels()
	tick()
	return res, nil
}

// benchLevel takes one checkpoint at level in a fresh run directory,
// then (after deleting the nodes a level is meant to survive) restarts
// and recovers, returning both times.
func benchLevel(bc benchConfig, data [][]float64, level int, dir string) (ckptTime, restartTime time.Duration, err error) {
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, bc.ranks, true
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")
	var mu sync.Mutex
	err = comm.Run(bc.ranks, func(c comm.Comm) error {
		rt, err := ckpt.Init(cfg, c)
		if err != nil {
			return err
		}
		defer rt.Close() // releases meta_dir when the job ends without Finalize
		v := data[c.Rank()]
		if err := ckpt.Protect(rt, 1, &v); err != nil {
			return err
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		t0 := time.Now()
		if err := rt.Checkpoint(1, level); err != nil {
			return err
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			mu.Lock()
			ckptTime = time.Since(t0)
			mu.Unlock()
		}
		return nil // no Finalize: the job "dies" with its checkpoint committed
	})
	if err != nil {
		return 0, 0, err
	}
	lost := map[int][]int{2: {1}, 3: {1, 2}}[level]
	for _, n := range lost {
		if n < bc.ranks {
			if err := os.RemoveAll(filepath.Join(cfg.CkptDir, fmt.Sprintf("node%04d", n))); err != nil {
				return 0, 0, err
			}
		}
	}
	if bc.cold {
		dropCaches()
	}
	err = comm.Run(bc.ranks, func(c comm.Comm) error {
		// The application's arrays exist before it recovers into them (as
		// heat2d's do); allocate and touch them outside the timed region so
		// both sides read into memory that is already mapped.
		v := make([]float64, len(data[c.Rank()]))
		for i := range v {
			v[i] = -1
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		t0 := time.Now()
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
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			mu.Lock()
			restartTime = time.Since(t0)
			mu.Unlock()
		}
		if len(v) != len(data[c.Rank()]) || v[len(v)-1] != data[c.Rank()][len(v)-1] {
			return fmt.Errorf("rank %d recovered wrong data", c.Rank())
		}
		return rt.Finalize()
	})
	return ckptTime, restartTime, err
}

// rawIO is the physical reference: n writers each write and fsync
// writeBytes to their own file, then n readers read readBytes back.
func rawIO(bc benchConfig, dir string, writeBytes, readBytes int64) (w, r time.Duration, err error) {
	d := vfd.Sec2{}
	if err := d.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	defer d.RemoveAll(dir)
	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	parallel := func(fn func(i int) error) error {
		errs := make([]error, bc.ranks)
		var wg sync.WaitGroup
		for i := 0; i < bc.ranks; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = fn(i) }()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("raw%04d", i)) }
	t0 := time.Now()
	err = parallel(func(i int) error {
		f, err := vfd.CreateTrunc(d, name(i))
		if err != nil {
			return err
		}
		for off := int64(0); off < writeBytes; off += int64(len(buf)) {
			n := min(int64(len(buf)), writeBytes-off)
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return errors.Join(err, f.Close())
			}
		}
		return errors.Join(f.Sync(), f.Close())
	})
	if err != nil {
		return 0, 0, err
	}
	if err := d.SyncDir(dir); err != nil {
		return 0, 0, err
	}
	w = time.Since(t0)
	if bc.cold {
		dropCaches()
	}
	// Each reader reads into a touched buffer of the full size, as a
	// restarted application reads into its arrays.
	dst := make([][]byte, bc.ranks)
	for i := range dst {
		dst[i] = make([]byte, readBytes)
		for j := range dst[i] {
			dst[i][j] = 1
		}
	}
	t0 = time.Now()
	err = parallel(func(i int) error {
		f, err := vfd.OpenRead(d, name(i))
		if err != nil {
			return err
		}
		for off := int64(0); off < readBytes; off += int64(len(buf)) {
			n := min(int64(len(buf)), readBytes-off)
			if err := vfd.ReadFull(f, dst[i][off:off+n], off); err != nil {
				return errors.Join(err, f.Close())
			}
		}
		return f.Close()
	})
	return w, time.Since(t0), err
}

// dropCaches asks the kernel to drop clean page-cache pages so reads
// come from the device when the bench runs as root; elsewhere it does
// nothing and reads may be served from memory for both sides alike.
func dropCaches() {
	if f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0); err == nil {
		f.WriteString("1\n")
		f.Close()
	}
}

// kernels measures single-core BLAKE3 and Reed-Solomon throughput and a
// memcpy for scale, in MB/s.
func kernels() (b3, rsEnc, rsDec, memcpy float64) {
	const n = 64 << 20
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	mbps := func(bytes int, d time.Duration) float64 { return float64(bytes) / 1e6 / d.Seconds() }
	t0 := time.Now()
	h := blake3.New()
	h.Write(buf)
	_ = h.Sum(nil)
	b3 = mbps(n, time.Since(t0))

	dst := make([]byte, n)
	t0 = time.Now()
	copy(dst, buf)
	memcpy = mbps(n, time.Since(t0))

	code, err := encode.New(4, 4)
	if err != nil {
		return b3, 0, 0, memcpy
	}
	shard := n / 4
	data := [][]byte{buf[:shard], buf[shard : 2*shard], buf[2*shard : 3*shard], buf[3*shard:]}
	parity := make([][]byte, 4)
	for i := range parity {
		parity[i] = make([]byte, shard)
	}
	t0 = time.Now()
	if err := code.EncodeBlock(data, parity); err != nil {
		return b3, 0, 0, memcpy
	}
	rsEnc = mbps(n, time.Since(t0))
	shards := append(append([][]byte{}, data...), parity...)
	lost := []bool{true, true, false, false, false, false, true, true}
	for i, l := range lost {
		if l {
			shards[i] = make([]byte, shard)
		}
	}
	t0 = time.Now()
	if err := code.Reconstruct(shards, lost); err == nil {
		rsDec = mbps(n, time.Since(t0))
	}
	return b3, rsEnc, rsDec, memcpy
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
