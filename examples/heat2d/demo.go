package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ftigo/ftigo/dhdf"
	"github.com/ftigo/ftigo/gsd"
	"github.com/ftigo/ftigo/vfd"
)

// childEnv marks a process started by runLaunch as the job, so a test
// binary re-executed as the child runs the job instead of the tests.
const childEnv = "HEAT2D_CHILD"

// event is one parsed EVENT line of the job.
type event struct {
	kind string
	kv   map[string]string
}

func (e event) int(k string) int64 {
	n, _ := strconv.ParseInt(e.kv[k], 10, 64)
	return n
}

func parseEvent(line string) (event, bool) {
	rest, ok := strings.CutPrefix(line, "EVENT ")
	if !ok {
		return event{}, false
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return event{}, false
	}
	e := event{kind: fields[0], kv: map[string]string{}}
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			if k == "why" {
				// Free text, last on the line: it takes the rest.
				_, v, _ = strings.Cut(rest, " why=")
				e.kv[k] = v
				break
			}
			e.kv[k] = v
		}
	}
	return e, true
}

// launch is what the orchestrator saw of one run of the job.
type launch struct {
	start       event
	checkpoints []event
	durable     []event // snapshot mode: ckpt-durable, with the copy and background times
	killed      bool
	killedAt    string
	done        bool
	final       *event // the final checkpoint of a stopped job ("EVENT final")
	headsDone   int    // heads that returned from Init (ckpt.ErrHead) after the application finalized
	stderr      string
	err         error
}

// killPlan decides, from the job's events, when to send SIGKILL.
type killPlan struct {
	mode  string        // none, ckpt, after, random
	n     int64         // checkpoint id for ckpt/after
	frac  float64       // random: when to kill, as a fraction of the reference run's time
	delay time.Duration // random: the delay after launch, set from frac by demo
}

func planKill(o *options) (killPlan, error) {
	if o.noKill || o.kill == "none" {
		return killPlan{mode: "none"}, nil
	}
	switch {
	case o.kill == "auto":
		// During the first checkpoint at the highest level in the list.
		hi := 0
		for _, l := range o.levels {
			hi = max(hi, l)
		}
		// Never the very first checkpoint: there must be an older
		// committed one to restart from.
		for i, l := range o.levels {
			if l == hi && i > 0 {
				return killPlan{mode: "ckpt", n: int64(i + 1)}, nil
			}
		}
		return killPlan{mode: "ckpt", n: int64(len(o.levels) + 1)}, nil
	case o.kill == "random":
		rng := rand.New(rand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15))
		// Somewhere in the first three quarters of an uninterrupted run's
		// time, measured by the reference run (demo sets the delay).
		return killPlan{mode: "random", frac: 0.75 * rng.Float64()}, nil
	case strings.HasPrefix(o.kill, "ckpt:") || strings.HasPrefix(o.kill, "after:"):
		mode, num, _ := strings.Cut(o.kill, ":")
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n < 1 {
			return killPlan{}, fmt.Errorf("-kill %s: want a checkpoint number ≥ 1", o.kill)
		}
		return killPlan{mode: mode, n: n}, nil
	}
	return killPlan{}, fmt.Errorf("-kill %q: want auto, ckpt:N, after:N, random or none", o.kill)
}

// jobArgs are the flags that reproduce o in a child job.
func jobArgs(o *options) []string {
	lv := make([]string, len(o.levels))
	for i, l := range o.levels {
		lv[i] = strconv.Itoa(l)
	}
	args := []string{
		"-role=job", "-dir=" + o.dir,
		"-ranks=" + strconv.Itoa(o.ranks), "-nodes=" + strconv.Itoa(o.nodes),
		"-nx=" + strconv.Itoa(o.nx), "-ny=" + strconv.Itoa(o.ny),
		"-iters=" + strconv.Itoa(o.iters), "-alpha=" + strconv.FormatFloat(o.alpha, 'g', -1, 64),
		"-frame-every=" + strconv.Itoa(o.frameEvery), "-ckpt-every=" + strconv.Itoa(o.ckptEvery),
		"-levels=" + strings.Join(lv, ","), "-global-latency=" + o.globalLatency.String(), "-io-latency=" + o.ioLatency.String(),
		"-keep-last=" + strconv.FormatBool(o.keepLast),
	}
	if o.walltime > 0 {
		args = append(args, "-walltime="+o.walltime.String())
	}
	if o.stopGrace > 0 {
		args = append(args, "-stop-grace="+o.stopGrace.String())
	}
	if o.config != "" {
		args = append(args, "-config="+o.config)
	}
	if o.async {
		args = append(args, "-async")
	}
	if o.snapshot {
		args = append(args, "-snapshot")
	}
	if o.heads {
		args = append(args, "-heads")
	}
	return args
}

// runLaunch starts the job as a child process, follows its events and
// kills it with SIGKILL when plan says so.
func runLaunch(o *options, plan killPlan, out io.Writer) *launch {
	exe, err := os.Executable()
	if err != nil {
		return &launch{err: err}
	}
	cmd := exec.Command(exe, jobArgs(o)...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return &launch{err: err}
	}
	if err := cmd.Start(); err != nil {
		return &launch{err: err}
	}
	l := &launch{}
	// A stop signal sent to the demonstration is the job's.
	fwd := make(chan os.Signal, 2)
	signal.Notify(fwd, syscall.SIGTERM, syscall.SIGUSR1)
	go func() {
		for s := range fwd {
			_ = cmd.Process.Signal(s)
		}
	}()
	defer func() { signal.Stop(fwd); close(fwd) }()
	kill := func(why string) {
		if !l.killed {
			l.killed, l.killedAt = true, why
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	if plan.mode == "random" {
		timer := time.AfterFunc(plan.delay, func() { kill(fmt.Sprintf("at a random moment, %v after launch", plan.delay.Round(time.Millisecond))) })
		defer timer.Stop()
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		e, ok := parseEvent(sc.Text())
		if !ok {
			continue
		}
		switch e.kind {
		case "start":
			l.start = e
		case "ckpt-begin":
			if plan.mode == "ckpt" && e.int("id") == plan.n {
				kill(fmt.Sprintf("during checkpoint %d (L%s) at iteration %s", plan.n, e.kv["level"], e.kv["iter"]))
			}
		case "ckpt-end":
			l.checkpoints = append(l.checkpoints, e)
			if plan.mode == "after" && e.int("id") == plan.n {
				kill(fmt.Sprintf("right after checkpoint %d (L%s) at iteration %s", plan.n, e.kv["level"], e.kv["iter"]))
			}
		case "ckpt-durable":
			l.durable = append(l.durable, e)
		case "done":
			l.done = true
		case "final":
			l.final = &e
		case "head":
			l.headsDone++
		}
	}
	werr := cmd.Wait()
	l.stderr = stderr.String()
	if l.killed && plan.mode == "ckpt" {
		for _, e := range l.checkpoints {
			if e.int("id") == plan.n {
				l.killedAt += "; the checkpoint had already committed when the signal landed"
			}
		}
	}
	if !l.killed && werr != nil {
		l.err = fmt.Errorf("job failed: %w\n%s", werr, strings.TrimSpace(l.stderr))
	}
	return l
}

// demo is the default run: reference, launch, kill, lose a node,
// relaunch, compare, report.
func demo(o *options, out io.Writer) error {
	cleared, unlock, err := prepareRunDir(o.dir)
	if err != nil {
		return err
	}
	defer unlock()
	plan, err := planKill(o)
	if err != nil {
		return err
	}
	if o.globalLatency == 0 && slices.Contains(o.levels, 4) && plan.mode == "ckpt" {
		// A slow parallel file system, so the kill lands while the L4 container is being written.
		o.globalLatency = 2 * time.Millisecond
	}
	shape := "one group"
	if o.config != "" {
		shape = fmt.Sprintf("node_size %d and group_size %d from %s: %s of %s", o.cfgNodeSize, o.cfgGroupSize, o.config,
			plural(o.nodes/max(o.cfgGroupSize, 1), "group"), plural(o.cfgGroupSize, "node"))
	}
	fmt.Fprintf(out, "heat2d: %d×%d grid, %d iterations, %d ranks on %d simulated nodes (%s), levels %v\n",
		o.nx, o.ny, o.iters, o.ranks, o.nodes, shape, o.levels)
	if o.config != "" {
		fmt.Fprintf(out, "node-local storage: %s (ckpt_dir of %s)\n", o.localArea(), o.config)
	}
	if o.heads {
		fmt.Fprintf(out, "heads: each node's first rank is a head that post-processes the node's L2-L4 checkpoints (head = 1, inline_lN = 0); the solver runs on the other %d ranks\n",
			o.appRanks(o.ranks, o.nodes))
	}
	relaunch := *o
	relaunch.ranks, relaunch.nodes = o.relaunchRanks, o.relaunchNodes
	if relaunch.nodes < 2 {
		// One node has no partner: the relaunch checkpoints at L1 and L4.
		relaunch.levels = slices.DeleteFunc(slices.Clone(o.levels), func(l int) bool { return l == 2 || l == 3 })
		if len(relaunch.levels) == 0 {
			relaunch.levels = []int{1}
		}
	}
	reshaped := relaunch.ranks != o.ranks || relaunch.nodes != o.nodes
	if reshaped {
		fmt.Fprintf(out, "relaunch after the kill: %d ranks on %s (levels %v); the field is the global dataset \"temperature\", redistributed onto the new bands\n",
			relaunch.ranks, plural(relaunch.nodes, "simulated node"), relaunch.levels)
	}
	if cleared {
		fmt.Fprintf(out, "run directory: %s (the previous demonstration's files removed)\n", o.dir)
	} else {
		fmt.Fprintf(out, "run directory: %s\n", o.dir)
	}

	t0 := time.Now()
	ref, err := solveInProcess(o)
	if err != nil {
		return fmt.Errorf("reference run: %w", err)
	}
	refTime := time.Since(t0)
	fmt.Fprintf(out, "reference: uninterrupted in-process run, %v\n", refTime.Round(time.Millisecond))
	if plan.mode == "random" {
		plan.delay = time.Duration(plan.frac * float64(max(refTime, 200*time.Millisecond)))
	}

	ok := true
	fmt.Fprintln(out, "\nlaunch 1:")
	l1 := runLaunch(o, plan, out)
	if l1.err != nil {
		return l1.err
	}
	if s := l1.start.kv["status"]; s != "" && s != "fresh" {
		return fmt.Errorf("launch 1 restarted (%s) from checkpoint %s of a previous run: the checkpoint directories of -config %s hold one; remove them or point the configuration elsewhere",
			s, l1.start.kv["id"], o.config)
	}
	printCheckpoints(out, l1.checkpoints)
	printSnapshotTimes(out, l1.durable)
	final := l1
	if l1.killed {
		l2, held, err := relaunchAfterKill(o, &relaunch, reshaped, l1, out)
		if err != nil {
			return err
		}
		ok = ok && held
		final = l2
	}
	if f := final.final; f != nil {
		fmt.Fprintf(out, "  stopped by %s: final checkpoint %s at L%s (iteration %s), exiting\n",
			f.kv["why"], f.kv["id"], f.kv["level"], f.kv["iter"])
		fmt.Fprintf(out, "  the job resumes from it with: %s %s\n", shellQuote(os.Args[0]), strings.Join(jobArgs(o), " "))
		return nil
	}
	if !final.done {
		fmt.Fprintln(out, "FAILED: the job did not finish")
		return errors.New("demonstration failed")
	}
	fmt.Fprintf(out, "  finished at iteration %d\n", o.iters)
	if o.heads {
		fmt.Fprintf(out, "  %s returned from Init (ckpt.ErrHead) once the application ranks finalized\n", plural(final.headsDone, "head"))
	}

	got, err := os.ReadFile(filepath.Join(o.dir, "final.f64"))
	if err != nil {
		return err
	}
	want := fieldBytes(ref)
	if bytes.Equal(got, want) {
		if reshaped && final != l1 {
			fmt.Fprintf(out, "\ncomparison: final field (computed by %d ranks after the restart) bit-identical to the uninterrupted run on %d ranks (%d values)\n",
				relaunch.ranks, o.ranks, len(ref))
		} else {
			fmt.Fprintf(out, "\ncomparison: final field bit-identical to the uninterrupted run (%d values)\n", len(ref))
		}
	} else {
		fmt.Fprintf(out, "\ncomparison: FAILED, final field differs from the uninterrupted run (%s)\n", firstDiff(got, want))
		ok = false
	}
	printOutputs(out, o)
	if !ok {
		return errors.New("demonstration failed")
	}
	fmt.Fprintln(out, "OK")
	if o.keepLast {
		printCLI(out, o, final)
	} else {
		fmt.Fprintf(out, "\nkeep_last_ckpt = 0 (%s): Finalize deleted the checkpoints, as FTI does; -keep-last keeps the last one for ftigo inspect and verify\n",
			o.keepLastSource())
	}
	return nil
}

// demoMarker marks a run directory as the demonstration's own: a later
// demonstration in it removes what the previous one left, whose kept
// checkpoint would otherwise make launch 1 a restart. demoLock is locked
// by the demonstration running in the directory, and demoHolder says
// who that is.
const (
	demoMarker = ".heat2d-demo"
	demoLock   = ".heat2d-demo.lock"
	demoHolder = ".heat2d-demo.holder"
)

// prepareRunDir creates dir, or empties it when a previous demonstration
// made it (cleared is then true), and locks it until unlock is called. A
// non-empty directory without the marker is refused: its files are not
// the demonstration's to delete. A directory another demonstration holds
// is refused, naming it, before anything in it changes.
func prepareRunDir(dir string) (cleared bool, unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, nil, err
	}
	marker := filepath.Join(dir, demoMarker)
	if _, err := os.Stat(marker); err != nil && len(entries) > 0 {
		return false, nil, fmt.Errorf("run directory %s is not empty and was not made by the demonstration (no %s): choose another -dir or empty it", dir, demoMarker)
	}
	lock, err := vfd.Lock(vfd.Sec2{}, filepath.Join(dir, demoLock))
	if errors.Is(err, vfd.ErrLocked) {
		who, _ := os.ReadFile(filepath.Join(dir, demoHolder))
		return false, nil, fmt.Errorf("run directory %s is in use by another demonstration (%s): wait for it to end or choose another -dir",
			dir, strings.TrimSpace(string(who)))
	}
	if err != nil {
		return false, nil, err
	}
	unlock = func() { _ = lock.Close() }
	host, _ := os.Hostname()
	who := fmt.Sprintf("pid %d on %s, started %s", os.Getpid(), host, time.Now().Format(time.RFC3339))
	if err := vfd.WriteFileAtomic(vfd.Sec2{}, filepath.Join(dir, demoHolder), []byte(who+"\n")); err != nil {
		unlock()
		return false, nil, err
	}
	if len(entries) == 0 {
		if err := os.WriteFile(marker, []byte("made by go run ./examples/heat2d; the next demonstration in this directory empties it\n"), 0o644); err != nil {
			unlock()
			return false, nil, err
		}
		return false, unlock, nil
	}
	for _, e := range entries {
		switch e.Name() {
		case demoMarker, demoLock, demoHolder:
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			unlock()
			return false, nil, err
		}
	}
	return true, unlock, nil
}

// printCLI ends the report with the command lines that show the
// checkpoint the last launch kept.
func printCLI(out io.Writer, o *options, final *launch) {
	run := o.dir
	if o.config != "" {
		run = o.config
	}
	what := "the last checkpoint"
	if n := len(final.checkpoints); n > 0 {
		e := final.checkpoints[n-1]
		what = fmt.Sprintf("the last checkpoint (%s, taken at L%s)", e.kv["id"], e.kv["level"])
	}
	src := ""
	if o.keepLastSet || o.config != "" {
		src = ", " + o.keepLastSource()
	}
	fmt.Fprintf(out, "\n%s is kept at L4 (keep_last_ckpt = 1%s); the command line shows and re-hashes it:\n", what, src)
	fmt.Fprintf(out, "  go run ./cmd/ftigo inspect %s\n", shellQuote(run))
	fmt.Fprintf(out, "  go run ./cmd/ftigo verify %s\n", shellQuote(run))
}

// shellQuote returns s as one word of a POSIX shell command line.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:=@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// relaunchAfterKill reports the kill of launch 1, deletes the lost node's
// local storage, relaunches the job with the relaunch options and reports
// how it restarted. held is false when the relaunch started fresh
// although a checkpoint had committed.
func relaunchAfterKill(o, relaunch *options, reshaped bool, l1 *launch, out io.Writer) (l2 *launch, held bool, err error) {
	fmt.Fprintf(out, "  killed with SIGKILL %s\n", l1.killedAt)
	lostFiles := 0
	if o.loseNode >= 0 {
		nodeDir := filepath.Join(o.localArea(), fmt.Sprintf("node%04d", o.loseNode))
		lostFiles = countFiles(nodeDir)
		if err := os.RemoveAll(nodeDir); err != nil {
			return nil, false, err
		}
		if lostFiles == 0 {
			fmt.Fprintf(out, "lost node: node%04d had no local files to delete in %s\n", o.loseNode, nodeDir)
		} else {
			fmt.Fprintf(out, "lost node: deleted node%04d's local storage (%d files) %s\n", o.loseNode, lostFiles, nodeDir)
		}
	}
	if reshaped {
		fmt.Fprintf(out, "\nlaunch 2 (restart on %d ranks, %s; launch 1 had %d ranks, %s):\n", relaunch.ranks, plural(relaunch.nodes, "node"), o.ranks, plural(o.nodes, "node"))
	} else {
		fmt.Fprintln(out, "\nlaunch 2 (restart):")
	}
	held = true
	l2 = runLaunch(relaunch, killPlan{mode: "none"}, out)
	if l2.err != nil {
		return nil, false, l2.err
	}
	s := l2.start
	switch {
	case s.kv["status"] == "fresh" && len(l1.checkpoints) == 0:
		fmt.Fprintln(out, "  started fresh: no checkpoint had committed before the kill")
	case s.kv["status"] == "fresh":
		fmt.Fprintln(out, "  FAILED: the relaunch started fresh although a checkpoint had committed")
		held = false
	default:
		fmt.Fprintf(out, "  restarted (%s) from checkpoint %s (L%s) at iteration %s\n", s.kv["status"], s.kv["id"], s.kv["level"], s.kv["iter"])
		if old, now := s.kv["oldranks"], s.kv["ranks"]; old != now {
			fmt.Fprintf(out, "  redistributed the checkpoint written by %s ranks onto %s: each new band of \"temperature\" read from the old ranks' files that hold it (every block hash verified), the iteration from rank 0's\n", old, now)
			switch {
			case o.loseNode < 0:
			case s.kv["level"] != "3":
				fmt.Fprintf(out, "  node%04d's lost files were not needed: its ranks' data came from the redundancy on the other nodes\n", o.loseNode)
			case o.loseNode >= relaunch.nodes:
				fmt.Fprintf(out, "  node%04d's lost files were rebuilt from the L3 parity (the relaunch has no node %d, a rank that sees every node's directory did it) before the data was redistributed\n", o.loseNode, o.loseNode)
			}
		}
		if o.loseNode >= 0 && (s.kv["oldranks"] == s.kv["ranks"] || s.kv["level"] == "3") {
			counts := strings.Split(s.kv["nodefiles"], ",")
			switch {
			case o.loseNode >= len(counts):
			case lostFiles == 0:
			case counts[o.loseNode] == "0":
				fmt.Fprintf(out, "  node%04d's storage stays empty: the restart from L%s read nothing from it\n", o.loseNode, s.kv["level"])
			default:
				fmt.Fprintf(out, "  rebuilt %s files onto node%04d's empty storage from the L%s redundancy before the solver resumed\n", counts[o.loseNode], o.loseNode, s.kv["level"])
			}
		}
	}
	printCheckpoints(out, l2.checkpoints)
	printSnapshotTimes(out, l2.durable)
	return l2, held, nil
}

func printCheckpoints(out io.Writer, cps []event) {
	if len(cps) == 0 {
		return
	}
	fmt.Fprintf(out, "  %-4s %-5s %-6s %10s %10s %12s\n", "id", "level", "iter", "size", "time", "bandwidth")
	for _, e := range cps {
		bytes := e.int("bytes")
		d := time.Duration(e.int("ns"))
		bw := 0.0
		if d > 0 {
			bw = float64(bytes) / (1 << 20) / d.Seconds()
		}
		fmt.Fprintf(out, "  %-4s L%-4s %-6s %7.2f MiB %10v %8.1f MiB/s\n", e.kv["id"], e.kv["level"], e.kv["iter"],
			float64(bytes)/(1<<20), d.Round(10*time.Microsecond), bw)
	}
}

// printSnapshotTimes prints, in snapshot mode, each checkpoint's copy
// into staging memory, its background work and its time to durable.
func printSnapshotTimes(out io.Writer, ds []event) {
	if len(ds) == 0 {
		return
	}
	fmt.Fprintf(out, "  snapshot mode: %-4s %10s %12s %12s\n", "id", "copy", "background", "to durable")
	for _, e := range ds {
		r := func(k string) time.Duration { return time.Duration(e.int(k)).Round(time.Microsecond) }
		fmt.Fprintf(out, "                 %-4s %10v %12v %12v\n", e.kv["id"], r("copy_ns"), r("background_ns"), r("durable_ns"))
	}
}

func printOutputs(out io.Writer, o *options) {
	fmt.Fprintln(out, "outputs:")
	if r, err := gsd.Open(vfd.Sec2{}, filepath.Join(o.dir, "heat2d.gsd")); err == nil {
		fmt.Fprintf(out, "  trajectory  %s (%d frames)\n", filepath.Join(o.dir, "heat2d.gsd"), r.NFrames())
		r.Close()
	}
	if s, err := dhdf.Open(dhdf.MHFName(filepath.Join(o.dir, "field")), dhdf.Options{}); err == nil {
		fmt.Fprintf(out, "  HDF set     %s (+%d associated files; open with h5py or h5dump)\n", dhdf.MHFName(filepath.Join(o.dir, "field")), len(s.Files())-1)
		s.Close()
	}
	fmt.Fprintf(out, "  image       %s\n", filepath.Join(o.dir, "heat2d.png"))
	fmt.Fprintf(out, "  job log     %s\n", filepath.Join(o.dir, "job.log"))
}

func countFiles(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func firstDiff(a, b []byte) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d bytes vs %d", len(a), len(b))
	}
	for i := 0; i+8 <= len(a); i += 8 {
		if !bytes.Equal(a[i:i+8], b[i:i+8]) {
			x := math.Float64frombits(binary.LittleEndian.Uint64(a[i:]))
			y := math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))
			return fmt.Sprintf("first at value %d: %v vs %v", i/8, x, y)
		}
	}
	return "no difference"
}

// plural returns "1 node" or "3 nodes".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
