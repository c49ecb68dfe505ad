package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ftigo/ftigo/vfd"
)

// Values of --storage.
const (
	storageFiles  = "files"
	storageMemory = "memory"
)

// defaultScaleSizes are the bytes per rank of a scale sweep without
// --size or --sweep-sizes.
var defaultScaleSizes = []int64{4 << 10, 64 << 10}

// checkScale checks the flags of a scale sweep and returns its grid.
func (bf *benchFlags) checkScale(cmd *cobra.Command) (rankCounts []int, sizes []int64, err error) {
	changed := cmd.Flags().Changed
	for _, f := range []string{"ranks", "cold", "async", "dcp-dirty"} {
		if changed(f) {
			return nil, nil, usagef("the scale sweep (--sweep-ranks, --mpi) takes no --%s", f)
		}
	}
	switch {
	case changed("sweep-sizes") && changed("size"):
		return nil, nil, usagef("--size and --sweep-sizes both set the bytes per rank: give one")
	case changed("sweep-sizes"):
		sizes = bf.sweepSizes
	case changed("size"):
		sizes = []int64{int64(bf.size)}
	default:
		sizes = defaultScaleSizes
	}
	if bf.groupSize < 1 {
		return nil, nil, usagef("--group-size %d: at least 1", bf.groupSize)
	}
	switch {
	case bf.storage != storageFiles && bf.storage != storageMemory:
		return nil, nil, usagef("--storage %q: files or memory", bf.storage)
	case bf.storage == storageMemory && (bf.mpi || changed("dir")):
		return nil, nil, usagef("--storage memory keeps the files in this process: it takes no --mpi or --dir")
	}
	if bf.timeLimit < 0 {
		return nil, nil, usagef("--time-limit %s: not negative", bf.timeLimit)
	}
	rankCounts = bf.sweepRanks
	if bf.mpi {
		if changed("sweep-ranks") {
			return nil, nil, usagef("--mpi measures the processes of the MPI job: drop --sweep-ranks (mpirun -np sets the count)")
		}
		if bf.dir == "" {
			return nil, nil, usagef("--mpi needs --dir, a directory every process sees (tmpfs such as /dev/shm for the protocol alone)")
		}
		return nil, sizes, nil
	}
	for _, n := range rankCounts {
		if n%bf.groupSize != 0 {
			return nil, nil, usagef("--sweep-ranks %d: not a multiple of --group-size %d", n, bf.groupSize)
		}
	}
	return rankCounts, sizes, nil
}

// checkWorld checks that the levels fit a world of ranks ranks in groups
// of group.
func checkWorld(levels []int, ranks, group int) error {
	if ranks%group != 0 {
		return usagef("%d ranks: not a multiple of --group-size %d", ranks, group)
	}
	if slices.ContainsFunc(levels, func(l int) bool { return l == 2 || l == 3 }) && (ranks < 2 || group < 2) {
		return usagef("L2 and L3 need groups of at least 2 ranks (nodes): %d ranks in groups of %d", ranks, group)
	}
	return nil
}

// runScaleBench measures a scale sweep in process or, with --mpi, over
// the processes of an MPI job, and prints and draws it on the lead
// process.
func (a *app) runScaleBench(bf *benchFlags, rankCounts []int, sizes []int64) error {
	var w scaleWorld = inProcWorld{}
	finish := func(err error) error { return err }
	if bf.mpi {
		mw, fin, err := newMPIWorld()
		if err != nil {
			return err
		}
		w, finish, rankCounts = mw, fin, []int{mw.size()}
	}
	for _, n := range rankCounts {
		if err := checkWorld(bf.levels, n, bf.groupSize); err != nil {
			return finish(err)
		}
	}
	if !w.perProcess() {
		if note := prepareProcess(slices.Max(rankCounts), bf.storage == storageFiles); note != "" {
			fmt.Fprintf(a.stderr, "ftigo bench: note: %s\n", note)
		}
	}
	dir := "/ftigo-bench" // in the in-memory driver's namespace
	cleanup := func() {}
	var err error
	if bf.storage == storageFiles {
		err = w.once(func() (err error) { dir, cleanup, err = benchDir(bf.dir); return err })
		if bf.dir != "" {
			dir = bf.dir
		}
	}
	if err != nil {
		return finish(err)
	}
	defer cleanup()
	stop := func() {}
	if w.lead() {
		if stop, err = startCPUProfile(bf.cpuProfile); err != nil {
			return finish(err)
		}
	}
	var p *progress
	if w.lead() {
		p = a.newProgress(bf.jsonOut, "bench", int64(len(rankCounts)*len(sizes)*len(bf.levels)*bf.repeats), false)
	}
	res, err := measureScale(w, rankCounts, sizes, bf, dir, func() { p.Add(1) })
	p.Done()
	stop()
	if err == nil && w.lead() {
		err = writeMemProfile(bf.memProfile)
	}
	if err = finish(openFilesHint(err)); err != nil {
		if !w.lead() {
			return exitStatus(1)
		}
		return err
	}
	if !w.lead() {
		return nil
	}
	return a.reportScale(bf, res)
}

// writeMemProfile writes the profile of the memory allocated so far
// into file (nothing when file is "").
func writeMemProfile(file string) error {
	if file == "" {
		return nil
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	return errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
}

// reportScale draws, prints or writes a scale sweep as the flags ask.
func (a *app) reportScale(bf *benchFlags, res *scaleResult) error {
	return a.report(bf, res, func(name string) error { return writeScalePlot(name, res) }, func(w io.Writer) { printScale(w, res) })
}

// savedKind is what tells the saved results apart.
type savedKind struct {
	Kind string `json:"kind"`
}

// readScaleResults merges saved scale sweeps; the goals are computed
// again over every row.
func readScaleResults(files []string) (*scaleResult, error) {
	out := &scaleResult{Kind: "scale", Rows: []scaleRow{}, Skipped: []string{}}
	var descs, worlds []string
	for i, name := range files {
		b, err := vfd.ReadFileLimit(vfd.Sec2{}, name, 64<<20)
		if err != nil {
			return nil, fmt.Errorf("--from %s: %w", name, err)
		}
		var r scaleResult
		if err := json.Unmarshal(b, &r); err != nil || r.Kind != "scale" {
			return nil, fmt.Errorf("--from %s: not a scale sweep of ftigo bench --json (the files of one --from are of one kind)", name)
		}
		for j, row := range r.Rows {
			if !slices.Contains([]string{"init", "checkpoint", "restart"}, row.Kind) || row.Level < 0 || row.Level > 4 || row.Ranks < 1 || row.BytesRank < 1 {
				return nil, fmt.Errorf("--from %s: row %d (%q) is not a scale row", name, j, row.Case)
			}
		}
		out.Rows = append(out.Rows, r.Rows...)
		out.Skipped = append(out.Skipped, r.Skipped...)
		descs = append(descs, r.Description)
		if !slices.Contains(worlds, r.World) {
			worlds = append(worlds, r.World)
		}
		out.DecodedCounter = out.DecodedCounter || r.DecodedCounter
		if i == 0 {
			out.LoadStart, out.GroupSize = r.LoadStart, r.GroupSize
		}
		out.LoadEnd = r.LoadEnd
	}
	out.World = strings.Join(worlds, "; ")
	out.Description = descs[0]
	if len(descs) > 1 {
		out.Description = fmt.Sprintf("%d results merged: %s", len(descs), strings.Join(descs, "; "))
	}
	out.Goals = scaleGoals(out.Rows)
	return out, nil
}

// isScaleResult says whether the saved result in file is a scale sweep.
func isScaleResult(file string) bool {
	b, err := vfd.ReadFileLimit(vfd.Sec2{}, file, 64<<20)
	if err != nil {
		return false
	}
	var k savedKind
	return json.Unmarshal(b, &k) == nil && k.Kind == "scale"
}

// approxBytes formats a byte count to three significant digits.
func approxBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%.0f B", v)
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, units[i])
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, units[i])
	}
	return fmt.Sprintf("%.2f %s", v, units[i])
}

// fmtCount formats a mean count: whole numbers as such, else one decimal.
func fmtCount(v float64) string {
	if v == math.Trunc(v) || v >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// fmtRatio formats a goal ratio; -1 (undefined) is "inf".
func fmtRatio(r float64) string {
	if r < 0 {
		return "inf"
	}
	return fmt.Sprintf("%.2fx", r)
}

// scaleTable renders the rows of a scale sweep.
func scaleTable(rows []scaleRow) string {
	header := []string{"case", "ranks", "per rank", "wall s (min-max)", "cpu/rank ms", "msgs recv/rank (max)", "bytes recv/rank (max)",
		"decoded/rank (max)", "alloc/rank", "peak heap/rank", "max rss", "files"}
	right := []bool{false, true, true, true, true, true, true, true, true, true, true, true}
	cells := make([][]string, len(rows))
	for i, r := range rows {
		decoded := "n/a"
		if r.Decoded != nil {
			decoded = fmt.Sprintf("%s (%s)", approxBytes(r.Decoded.Mean), approxBytes(float64(r.Decoded.Max)))
		}
		cells[i] = []string{
			r.Case,
			fmt.Sprint(r.Ranks),
			humanBytes(r.BytesRank),
			fmt.Sprintf("%.3f (%.3f-%.3f)", r.Wall.Median, r.Wall.Min, r.Wall.Max),
			fmt.Sprintf("%.3f", r.CPURank*1e3),
			fmt.Sprintf("%s (%d)", fmtCount(r.MsgsRecv.Mean), r.MsgsRecv.Max),
			fmt.Sprintf("%s (%s)", approxBytes(r.BytesRecv.Mean), approxBytes(float64(r.BytesRecv.Max))),
			decoded,
			approxBytes(r.AllocRank),
			approxBytes(r.PeakHeapRank),
			approxBytes(float64(r.MaxRSS)),
			fmt.Sprint(r.OpenFiles),
		}
	}
	return renderTable(header, cells, right)
}

// goalTable renders the goal check of a scale sweep.
func goalTable(goals []scaleGoal) string {
	header := []string{"what", "per rank", "ranks", "cpu/rank", "bytes recv/rank", "goal", "verdict", "msgs recv/rank", "bytes recv max", "decoded/rank"}
	right := []bool{false, true, true, true, true, true, false, true, true, false}
	cells := make([][]string, len(goals))
	for i, g := range goals {
		verdict, decoded := "MISS", "n/a"
		if g.Pass {
			verdict = "PASS"
		}
		if g.Decoded != nil {
			decoded = fmtRatio(*g.Decoded)
		}
		cells[i] = []string{g.Case, humanBytes(g.BytesRank), fmt.Sprintf("%d -> %d", g.From, g.To), fmtRatio(g.CPU), fmtRatio(g.Bytes),
			fmt.Sprintf("<= %gx", g.Goal), verdict, fmtRatio(g.Msgs), fmtRatio(g.BytesMax), decoded}
	}
	return renderTable(header, cells, right)
}

func printScale(w io.Writer, r *scaleResult) {
	fmt.Fprintln(w, r.Description)
	fmt.Fprintf(w, "load average %.1f %.1f %.1f at the start, %.1f %.1f %.1f at the end\n",
		r.LoadStart[0], r.LoadStart[1], r.LoadStart[2], r.LoadEnd[0], r.LoadEnd[1], r.LoadEnd[2])
	fmt.Fprint(w, scaleTable(r.Rows))
	fmt.Fprintln(w, "cpu/rank: the CPU time of the processes over the operation, divided by the ranks; msgs and bytes recv: what a rank received (comm counters), the mean over the ranks and the most one rank received.")
	fmt.Fprintln(w, "alloc, peak heap: what the processes allocated, and their heap and stacks at the highest over the start, divided by the ranks; max rss: a process's high-water mark; files: the most files a process held open.")
	if !r.DecodedCounter {
		fmt.Fprintln(w, "decoded: n/a, this engine does not count the metadata it decodes.")
	}
	if len(r.Goals) > 0 {
		fmt.Fprintf(w, "\ngoal: each per-rank figure at the largest count over the one at the smallest; CPU and bytes received per rank at most %gx for checkpoints and restarts, %gx for Init\n",
			goalCkptRestart, goalInit)
		fmt.Fprint(w, goalTable(r.Goals))
		pass := 0
		for _, g := range r.Goals {
			if g.Pass {
				pass++
			}
		}
		fmt.Fprintf(w, "%d of %d PASS\n", pass, len(r.Goals))
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
}
