// Command chaos runs heat2d (examples/heat2d) over and over with random
// kills, lost nodes and damaged checkpoints, and checks ftigo's promises
// after each run: the final field is bit-identical to an uninterrupted
// run's, or a relaunch refuses with a clear error; never a wrong field,
// never a panic or a hang, never a silent fresh start.
//
//	go run ./examples/heat2d/chaos -mode kill -duration 20m
//	go run ./examples/heat2d/chaos -mode corrupt -duration 20m
//	go run ./examples/heat2d/chaos -mode corrupt -seed 0x1234abcd   # replay one run
//	go run ./examples/heat2d/chaos -mode kill -async random -duration 20m
//
// With -async on, every run post-processes its L2-L4 checkpoints in the
// background (heat2d -async: inline_l2/l3/l4 = 0); with -async random,
// bit 32 of the run's seed decides, so -seed with -async random replays
// a run exactly (the other draws do not depend on it).
//
// Each run draws everything from its seed (printed for every failure):
// the shape (ranks, simulated nodes), the checkpoint interval and level
// order, the slow-storage latency, and 1-4 kills. Each kill is a SIGKILL
// of the job, at a random moment or a few milliseconds into a random
// checkpoint. After a kill, with probability 0.3, one node's local
// directory is deleted; in mode corrupt, with probability 0.7, one to
// three checkpoint artefacts are damaged (see [damage]). The job is then
// relaunched, until it finishes or refuses.
//
// Outcomes, per launch and per run:
//
//   - finished: final.f64 must equal the reference field bit for bit
//     (an uninterrupted run with the same grid, built once per grid);
//   - a refusal: the job exits non-zero, not killed, with a "heat2d:"
//     error line and no panic. It is a failure unless, earlier in the
//     run, more was damaged than the redundancy of the metadata covers: a
//     node's directory deleted, a checkpoint file (data, partner copy,
//     parity, L4 container) damaged, or both manifest copies of one
//     checkpoint damaged before a launch could repair one. Kills alone,
//     and damage to single manifest copies or to the node table, must
//     never stop a restart;
//   - a panic ("panic:", "fatal error:", "goroutine " in standard error),
//     any other exit, or no exit within the launch timeout: a failure;
//   - a silent fresh start: a relaunch whose start EVENT says
//     status=fresh while a checkpoint artefact exists, that is a manifest
//     copy (meta/ckpt*.manifest or global/manifests/ckpt*.manifest) or a
//     published file (not *.tmp) in a ckpt%08d directory of any area, of
//     a checkpoint number with neither an intent (.pending) nor a deletion
//     (.deleting) marker in meta, nor a superseded marker
//     (.superseded-N) naming a checkpoint that has a manifest copy or a
//     marker itself: a failure;
//   - a lost checkpoint: a restart from an older checkpoint than the
//     newest the previous launch recovered or committed (by its EVENT
//     lines), when since then nothing but kills and damage to single
//     manifest copies or the node table happened: a failure.
//
// Before each relaunch after damage (a deleted node directory included),
// ftigo verify --json checks the run directory, and it must agree with the relaunch: it must
// exit 0 or 1 with a report; a relaunch refused after verify passed, a
// refusal for lost metadata verify did not report, and a relaunch that
// starts although verify reported lost metadata are failures.
//
// It prints the counts at the end, and exits 1 when any run failed.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	st, err := Run(cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	if st.Failures > 0 {
		os.Exit(1)
	}
}

// Config is what one chaos session does.
type Config struct {
	Mode     string        // kill or corrupt
	Duration time.Duration // run until this much time has passed (then finish the current run)
	Runs     int           // or this many runs (0: no bound)
	Seed     uint64        // replay the one run of this seed (0: random seeds)
	Heat2d   string        // the heat2d binary (empty: built into WorkDir)
	Ftigo    string        // the ftigo binary (empty: built into WorkDir)
	WorkDir  string        // scratch directory (empty: a temporary one, removed)
	Keep     bool          // keep the run directories of failed runs
	Verbose  bool          // one line per run
	Timeout  time.Duration // per launch
	Async    string        // off, on or random: heat2d -async (background post-processing)
}

func parseFlags(args []string) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.StringVar(&c.Mode, "mode", "kill", "kill (kills and lost nodes) or corrupt (kills, lost nodes and damaged checkpoint artefacts)")
	fs.DurationVar(&c.Duration, "duration", time.Minute, "run runs until this much time has passed")
	fs.IntVar(&c.Runs, "runs", 0, "stop after this many runs (0: only -duration bounds)")
	seed := fs.String("seed", "", "replay the single run of this seed (as printed, e.g. 0x1f2e...)")
	fs.StringVar(&c.Heat2d, "heat2d", "", "heat2d binary (default: go build ./examples/heat2d once)")
	fs.StringVar(&c.Ftigo, "ftigo", "", "ftigo binary, run as ftigo verify before each relaunch after damage (default: go build ./cmd/ftigo once)")
	fs.StringVar(&c.WorkDir, "dir", "", "scratch directory (default: a temporary directory, removed at the end)")
	fs.BoolVar(&c.Keep, "keep", true, "keep the directory of every failed run (under -dir/failed)")
	fs.BoolVar(&c.Verbose, "v", false, "print one line per run")
	fs.DurationVar(&c.Timeout, "timeout", 2*time.Minute, "a launch that has not exited after this long is a hang (a failure)")
	fs.StringVar(&c.Async, "async", "off", "background post-processing of L2-L4 (heat2d -async): off, on, or random (bit 32 of each run's seed)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *seed != "" {
		s, err := strconv.ParseUint(*seed, 0, 64)
		if err != nil || s == 0 {
			return c, fmt.Errorf("-seed %q: want a non-zero number", *seed)
		}
		c.Seed = s
	}
	if c.Async != "off" && c.Async != "on" && c.Async != "random" {
		return c, fmt.Errorf("-async %q: want off, on or random", c.Async)
	}
	if c.Mode != "kill" && c.Mode != "corrupt" {
		return c, fmt.Errorf("-mode %q: want kill or corrupt", c.Mode)
	}
	return c, nil
}

// Stats are the counts of a session.
type Stats struct {
	Mode        string
	Start       time.Time
	Elapsed     time.Duration
	Runs        int
	AsyncRuns   int // runs with background post-processing (-async)
	Launches    int
	Kills       int
	Relaunches  int
	Restarts    map[int]int // restarts per level recovered from
	Fresh       int         // first launches (status fresh, nothing on disk)
	NodeLosses  int
	Damages     map[string]int // damaged artefacts per kind of damage
	Completed   int            // runs that ended bit-identical
	Refusals    int            // runs that ended with a clear refusal
	Verifies    int            // ftigo verify runs (before relaunches after damage)
	VerifyFails int            // of which exited 1
	Failures    int
	FailedSeeds []string
}

func (s *Stats) print(w io.Writer) {
	fmt.Fprintf(w, "chaos %s: %s, started %s\n", s.Mode, s.Elapsed.Round(time.Second), s.Start.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "  runs %d (bit-identical %d, refused %d, failed %d; with background post-processing %d)\n",
		s.Runs, s.Completed, s.Refusals, s.Failures, s.AsyncRuns)
	fmt.Fprintf(w, "  launches %d, kills %d, relaunches %d, node dirs deleted %d\n", s.Launches, s.Kills, s.Relaunches, s.NodeLosses)
	var lv []string
	for _, l := range slices.Sorted(mapKeys(s.Restarts)) {
		lv = append(lv, fmt.Sprintf("L%d %d", l, s.Restarts[l]))
	}
	fmt.Fprintf(w, "  restarts by level: %s\n", strings.Join(lv, ", "))
	if s.Verifies > 0 {
		fmt.Fprintf(w, "  ftigo verify before relaunches after damage: %d (exit 1: %d)\n", s.Verifies, s.VerifyFails)
	}
	if len(s.Damages) > 0 {
		var d []string
		for _, k := range slices.Sorted(mapKeys(s.Damages)) {
			d = append(d, fmt.Sprintf("%s %d", k, s.Damages[k]))
		}
		fmt.Fprintf(w, "  damages: %s\n", strings.Join(d, ", "))
	}
	for _, f := range s.FailedSeeds {
		fmt.Fprintf(w, "  FAILED seed %s\n", f)
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Run runs the session and prints its counts on out.
func Run(cfg Config, out io.Writer) (*Stats, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	work := cfg.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "ftigo-chaos-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		work = d
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	bin, err := build(cfg.Heat2d, work, "heat2d", "github.com/ftigo/ftigo/examples/heat2d")
	if err != nil {
		return nil, err
	}
	ftigo, err := build(cfg.Ftigo, work, "ftigo", "github.com/ftigo/ftigo/cmd/ftigo")
	if err != nil {
		return nil, err
	}
	st := &Stats{Mode: cfg.Mode, Start: time.Now(), Restarts: map[int]int{}, Damages: map[string]int{}}
	refs := map[string][]byte{}
	ch := &chaos{cfg: cfg, bin: bin, ftigo: ftigo, work: work, st: st, refs: refs, out: out}
	master := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed))
	deadline := st.Start.Add(cfg.Duration)
	for {
		seed := cfg.Seed
		if seed == 0 {
			seed = master.Uint64() | 1
		}
		if err := ch.run(seed); err != nil {
			return st, err
		}
		rotateForeign(work)
		if cfg.Seed != 0 || (cfg.Runs > 0 && st.Runs >= cfg.Runs) || time.Now().After(deadline) {
			break
		}
	}
	st.Elapsed = time.Since(st.Start)
	st.print(out)
	return st, nil
}

// build returns bin, or builds pkg into work/name when bin is empty.
func build(bin, work, name, pkg string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(work, name)
	if b, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", name, err, b)
	}
	return bin, nil
}

type chaos struct {
	cfg   Config
	ftigo string
	bin   string
	work  string
	st    *Stats
	refs  map[string][]byte
	out   io.Writer
}

// params are one run's heat2d settings, drawn from its seed.
type params struct {
	ranks, nodes int
	n, iters     int
	ckptEvery    int
	frameEvery   int
	levels       string
	ioLatency    time.Duration
	async        bool
}

func drawParams(rng *rand.Rand) params {
	shapes := [][2]int{{4, 4}, {8, 4}, {6, 3}, {4, 2}}
	sh := shapes[rng.IntN(len(shapes))]
	orders := []string{"1,2,3,4", "4,3,2,1", "2,3,4,1", "3,1,4,2", "1,4", "2,3"}
	lat := []time.Duration{0, time.Millisecond, 3 * time.Millisecond}
	return params{
		ranks: sh[0], nodes: sh[1],
		n:          48 + 16*rng.IntN(4),
		iters:      1200,
		ckptEvery:  []int{50, 60, 80}[rng.IntN(3)],
		frameEvery: []int{0, 100}[rng.IntN(2)],
		levels:     orders[rng.IntN(len(orders))],
		ioLatency:  lat[rng.IntN(len(lat))],
	}
}

func (p params) args(dir string) []string {
	return []string{
		"-role=job", "-dir=" + dir,
		"-ranks=" + strconv.Itoa(p.ranks), "-nodes=" + strconv.Itoa(p.nodes),
		"-nx=" + strconv.Itoa(p.n), "-ny=" + strconv.Itoa(p.n),
		"-iters=" + strconv.Itoa(p.iters),
		"-ckpt-every=" + strconv.Itoa(p.ckptEvery), "-frame-every=" + strconv.Itoa(p.frameEvery),
		"-levels=" + p.levels, "-io-latency=" + p.ioLatency.String(),
		"-async=" + strconv.FormatBool(p.async),
	}
}

// reference returns the final field of an uninterrupted run of p's grid
// (the field does not depend on the shape or the checkpoints).
func (ch *chaos) reference(p params) ([]byte, error) {
	key := fmt.Sprintf("%dx%d-%d", p.n, p.n, p.iters)
	if b, ok := ch.refs[key]; ok {
		return b, nil
	}
	dir := filepath.Join(ch.work, "ref-"+key)
	_ = os.RemoveAll(dir)
	rp := p
	rp.ranks, rp.nodes, rp.ckptEvery, rp.frameEvery, rp.ioLatency, rp.async = 4, 4, 0, 0, 0, false
	cmd := exec.Command(ch.bin, rp.args(dir)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("reference run: %v\n%s", err, b)
	}
	b, err := os.ReadFile(filepath.Join(dir, "final.f64"))
	if err != nil {
		return nil, err
	}
	_ = os.RemoveAll(dir)
	ch.refs[key] = b
	return b, nil
}

// launchResult is what one launch did.
type launchResult struct {
	start     map[string]string // the start EVENT's fields (nil: none seen)
	lastEnd   int64             // id of the last ckpt-end (0: none)
	done      bool
	killed    bool
	exitErr   error
	stderr    string
	timedOut  bool
	killWhere string
}

// killPlan: kill after delay, or delay after the ckpt-begin of checkpoint
// id atCkpt (0: time-based).
type killPlan struct {
	delay  time.Duration
	atCkpt int64
}

func (ch *chaos) launch(p params, dir string, plan *killPlan) *launchResult {
	res := &launchResult{}
	cmd := exec.Command(ch.bin, p.args(dir)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		res.exitErr = err
		return res
	}
	if err := cmd.Start(); err != nil {
		res.exitErr = err
		return res
	}
	killed := make(chan string, 1)
	kill := func(why string) {
		select {
		case killed <- why:
			_ = cmd.Process.Signal(syscall.SIGKILL)
		default:
		}
	}
	var timers []*time.Timer
	if plan != nil && plan.atCkpt == 0 {
		timers = append(timers, time.AfterFunc(plan.delay, func() { kill(fmt.Sprintf("%v after launch", plan.delay)) }))
	}
	hang := time.AfterFunc(ch.cfg.Timeout, func() {
		res.timedOut = true
		_ = cmd.Process.Signal(syscall.SIGKILL)
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		kind, kv, ok := parseEvent(sc.Text())
		if !ok {
			continue
		}
		switch kind {
		case "start":
			res.start = kv
		case "ckpt-begin":
			if plan != nil && plan.atCkpt != 0 && kv["id"] == strconv.FormatInt(plan.atCkpt, 10) {
				d := plan.delay
				timers = append(timers, time.AfterFunc(d, func() { kill(fmt.Sprintf("%v into checkpoint %d", d, plan.atCkpt)) }))
			}
		case "ckpt-end":
			res.lastEnd, _ = strconv.ParseInt(kv["id"], 10, 64)
		case "done":
			res.done = true
		}
	}
	werr := cmd.Wait()
	hang.Stop()
	for _, t := range timers {
		t.Stop()
	}
	select {
	case why := <-killed:
		res.killed, res.killWhere = true, why
		killed <- why // later kill calls stay no-ops
	default:
	}
	res.stderr = stderr.String()
	if !res.killed {
		res.exitErr = werr
	}
	return res
}

func parseEvent(line string) (string, map[string]string, bool) {
	rest, ok := strings.CutPrefix(line, "EVENT ")
	if !ok {
		return "", nil, false
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", nil, false
	}
	kv := map[string]string{}
	for _, x := range f[1:] {
		if k, v, ok := strings.Cut(x, "="); ok {
			kv[k] = v
		}
	}
	return f[0], kv, true
}

// panicked reports whether a job's standard error shows a crash rather
// than an error the job reported.
func panicked(stderr string) bool {
	return strings.Contains(stderr, "panic:") || strings.Contains(stderr, "fatal error:") ||
		strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "SIGSEGV")
}

// run is one run: launches with kills (and damage) until the job
// finishes, refuses or fails.
func (ch *chaos) run(seed uint64) error {
	st := ch.st
	st.Runs++
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := drawParams(rng)
	p.async = ch.cfg.Async == "on" || (ch.cfg.Async == "random" && seed>>32&1 == 1)
	if p.async {
		st.AsyncRuns++
	}
	ref, err := ch.reference(p)
	if err != nil {
		return err
	}
	dir := filepath.Join(ch.work, "run")
	_ = os.RemoveAll(dir)
	nKills := 1 + rng.IntN(4)
	nCkpt := int64(p.iters / p.ckptEvery)
	// An uninterrupted launch takes about this long; kills land in it.
	est := time.Duration(p.iters)*200*time.Microsecond + time.Duration(nCkpt)*(5*time.Millisecond+8*p.ioLatency)
	var log []string
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		st.Failures++
		st.FailedSeeds = append(st.FailedSeeds, fmt.Sprintf("%#x (%s): %s", seed, ch.cfg.Mode, msg))
		fmt.Fprintf(ch.out, "FAILED seed %#x (%s): %s\n  params %+v\n  history: %s\n", seed, ch.cfg.Mode, msg, p, strings.Join(log, "; "))
		if ch.cfg.Keep {
			keep := filepath.Join(ch.work, "failed", fmt.Sprintf("%#x", seed))
			_ = os.MkdirAll(filepath.Dir(keep), 0o755)
			_ = os.RemoveAll(keep)
			if err := os.Rename(dir, keep); err == nil {
				fmt.Fprintf(ch.out, "  run directory kept in %s\n", keep)
			}
		}
	}
	// damaged: anything damaged since the last launch that started (and
	// so repaired what it could); hard: more than the metadata redundancy
	// covers (a node lost, a data file, both copies of a manifest), in
	// that window or (runHard) ever in this run.
	damaged, hard, runHard := false, false, false
	copiesHit := map[string]map[string]bool{} // manifest copies damaged, by checkpoint
	var newest int64                          // newest checkpoint known committed (or recovered) by the previous launch
	for launchNo := 0; ; launchNo++ {
		var plan *killPlan
		if launchNo < nKills {
			if rng.IntN(2) == 0 {
				plan = &killPlan{delay: time.Duration(rng.Int64N(int64(est)))}
			} else {
				plan = &killPlan{atCkpt: 1 + rng.Int64N(nCkpt), delay: time.Duration(rng.Int64N(int64(4*time.Millisecond + 10*p.ioLatency)))}
			}
		}
		arte := artefacts(dir)
		var vr *verifyOutcome
		if _, err := os.Stat(filepath.Join(dir, "meta")); err == nil && damaged && launchNo > 0 {
			// (A job killed before it made its directories leaves nothing
			// to verify; ftigo verify rightly refuses such a RUN.)
			if vr, err = ch.verify(dir); err != nil {
				fail("before launch %d: %v", launchNo, err)
				return nil
			}
			log = append(log, fmt.Sprintf("verify ok=%v lost=%v", vr.ok, vr.lost))
		}
		st.Launches++
		if launchNo > 0 {
			st.Relaunches++
		}
		r := ch.launch(p, dir, plan)
		if r.killed {
			st.Kills++
		}
		status := ""
		var startID int64
		if r.start != nil {
			status = r.start["status"]
			startID, _ = strconv.ParseInt(r.start["id"], 10, 64)
			if status == "fresh" {
				if launchNo == 0 {
					st.Fresh++
				}
			} else if l, err := strconv.Atoi(r.start["level"]); err == nil {
				st.Restarts[l]++
			}
		}
		entry := fmt.Sprintf("launch %d: status=%s id=%d lastckpt=%d", launchNo, status, startID, r.lastEnd)
		if r.killed {
			entry += " killed " + r.killWhere
		}
		log = append(log, entry)
		switch {
		case r.timedOut:
			fail("launch %d did not exit within %v", launchNo, ch.cfg.Timeout)
			return nil
		case panicked(r.stderr):
			fail("launch %d crashed:\n%s", launchNo, tail(r.stderr))
			return nil
		case vr != nil && len(vr.lost) > 0 && r.start != nil:
			fail("ftigo verify reported lost metadata (%s) but launch %d started (status %s)", strings.Join(vr.lost, ", "), launchNo, status)
			return nil
		case status == "fresh" && len(arte) > 0:
			fail("launch %d started fresh while checkpoint artefacts existed: %s", launchNo, strings.Join(first(arte, 6), ", "))
			return nil
		case r.start != nil && status != "fresh" && !hard && launchNo > 0 && startID < newest:
			fail("launch %d restarted from checkpoint %d, but checkpoint %d was committed and nothing but single manifest copies was damaged (damaged=%v)", launchNo, startID, newest, damaged)
			return nil
		}
		if !r.killed {
			if r.exitErr != nil {
				if !strings.Contains(r.stderr, "heat2d:") {
					fail("launch %d exited with %v and no error message:\n%s", launchNo, r.exitErr, tail(r.stderr))
					return nil
				}
				if !runHard {
					fail("launch %d refused though only kills (and damage to single manifest copies or the node table) happened:\n%s", launchNo, tail(r.stderr))
					return nil
				}
				if vr != nil && vr.ok {
					fail("ftigo verify passed, then launch %d refused:\n%s", launchNo, tail(r.stderr))
					return nil
				}
				if vr != nil && strings.Contains(r.stderr, "checkpoint metadata lost") && len(vr.lost) == 0 {
					fail("launch %d refused for lost metadata, which ftigo verify did not report:\n%s", launchNo, tail(r.stderr))
					return nil
				}
				st.Refusals++
				if ch.cfg.Verbose {
					fmt.Fprintf(ch.out, "run %#x: refused after %d launches: %s\n  history: %s\n", seed, launchNo+1, firstLine(r.stderr), strings.Join(log, "; "))
				}
				return nil
			}
			if !r.done {
				fail("launch %d exited 0 without finishing", launchNo)
				return nil
			}
			got, err := os.ReadFile(filepath.Join(dir, "final.f64"))
			if err != nil || !bytes.Equal(got, ref) {
				fail("launch %d finished with a field that differs from the reference (read error %v)", launchNo, err)
				return nil
			}
			st.Completed++
			if ch.cfg.Verbose {
				fmt.Fprintf(ch.out, "run %#x: bit-identical after %d launches\n", seed, launchNo+1)
			}
			_ = os.RemoveAll(dir)
			return nil
		}
		// Killed: the newest checkpoint this launch knew to be committed.
		if r.start != nil {
			// It recovered (or started fresh): what it knew supersedes
			// what the launches before it knew, and damage before it.
			newest, damaged, hard = max(startID, r.lastEnd), false, false
			clear(copiesHit)
		}
		if rng.Float64() < 0.3 {
			node := rng.IntN(p.nodes)
			nodeDir := filepath.Join(dir, "local", fmt.Sprintf("node%04d", node))
			if _, err := os.Stat(nodeDir); err == nil && os.RemoveAll(nodeDir) == nil {
				st.NodeLosses++
				damaged, hard, runHard = true, true, true
				log = append(log, fmt.Sprintf("deleted node%04d", node))
			}
		}
		if ch.cfg.Mode == "corrupt" {
			snapshotMeta(dir, ch.work)
		}
		if ch.cfg.Mode == "corrupt" && rng.Float64() < 0.7 {
			for range 1 + rng.IntN(3) {
				what, ok := damage(rng, dir, ch.work)
				if ok {
					st.Damages[strings.Fields(what)[0]]++
					damaged = true
					log = append(log, what)
					for _, rel := range touched(what) {
						seq, isCopy := manifestCopy(rel)
						switch {
						case rel == filepath.Join("meta", "topology"):
						case isCopy && !copiesHit[seq][rel] && len(copiesHit[seq]) == 0:
							copiesHit[seq] = map[string]bool{rel: true}
						case isCopy && copiesHit[seq][rel]:
						default:
							hard, runHard = true, true
						}
					}
				}
			}
		}
	}
}

// verifyOutcome is what ftigo verify said of a run directory.
type verifyOutcome struct {
	ok   bool
	lost []string // metadata files it reported as lost metadata
}

// verify runs ftigo verify --json on dir: exit 0 (ok) or 1 with a JSON
// report; anything else (a crash, a usage error, no report) is an error.
func (ch *chaos) verify(dir string) (*verifyOutcome, error) {
	ch.st.Verifies++
	cmd := exec.Command(ch.ftigo, "verify", "--json", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(ch.cfg.Timeout):
		_ = cmd.Process.Kill()
		<-done
		return nil, fmt.Errorf("ftigo verify did not exit within %v", ch.cfg.Timeout)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		return nil, err
	}
	var res struct {
		OK       bool `json:"ok"`
		Metadata []struct {
			Path    string `json:"path"`
			Problem string `json:"problem"`
		} `json:"metadata"`
	}
	if code > 1 || panicked(stderr.String()) || json.Unmarshal(stdout.Bytes(), &res) != nil || res.OK != (code == 0) {
		return nil, fmt.Errorf("ftigo verify exited %d with no consistent report:\n%s%s", code, tail(stdout.String()), tail(stderr.String()))
	}
	out := &verifyOutcome{ok: res.OK}
	if !res.OK {
		ch.st.VerifyFails++
	}
	for _, m := range res.Metadata {
		if strings.Contains(m.Problem, "checkpoint metadata lost") {
			out.lost = append(out.lost, m.Path)
		}
	}
	return out, nil
}

// artefacts lists the checkpoint artefacts of run directory dir, as the
// silent-fresh-start rule defines them (package comment).
func artefacts(dir string) []string {
	meta := filepath.Join(dir, "meta")
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	var marked func(seqDir string, depth int) bool
	marked = func(seqDir string, depth int) bool {
		for _, suf := range []string{".pending", ".deleting"} {
			if exists(filepath.Join(meta, seqDir+suf)) {
				return true
			}
		}
		// A superseded marker counts when the newer checkpoint it names
		// has a manifest copy (an artefact of its own) or is marked.
		sup, _ := filepath.Glob(filepath.Join(meta, seqDir+".superseded-*"))
		for _, p := range sup {
			by := "ckpt" + strings.TrimPrefix(filepath.Base(p), seqDir+".superseded-")
			if depth < 64 && (exists(filepath.Join(meta, by+".manifest")) ||
				exists(filepath.Join(dir, "global", "manifests", by+".manifest")) || marked(by, depth+1)) {
				return true
			}
		}
		return false
	}
	var out []string
	add := func(p, seqDir string) {
		if !marked(seqDir, 0) {
			out = append(out, p)
		}
	}
	for _, d := range []string{meta, filepath.Join(dir, "global", "manifests")} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if seqDir, ok := strings.CutSuffix(e.Name(), ".manifest"); ok && strings.HasPrefix(seqDir, "ckpt") {
				add(filepath.Join(d, e.Name()), seqDir)
			}
		}
	}
	areas := []string{filepath.Join(dir, "global")}
	nodes, _ := filepath.Glob(filepath.Join(dir, "local", "node*"))
	areas = append(areas, nodes...)
	for _, a := range areas {
		ents, _ := os.ReadDir(a)
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), "ckpt") {
				continue
			}
			_ = filepath.WalkDir(filepath.Join(a, e.Name()), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".tmp") {
					add(p, e.Name())
				}
				return nil
			})
		}
	}
	return out
}

// damage damages one random checkpoint artefact of dir and says what it
// did ("kind path"): flip (one byte xor'ed), truncate (to a random
// length), empty, delete, swap (a manifest copy replaced by another
// checkpoint's, or the two primaries exchanged), foreign (a manifest copy
// or the node table replaced by another run's file of the same name, kept
// from an earlier run in work/foreign). Candidates: every file of the
// checkpoint directories of every area (data files, partner copies,
// parity, L4 containers), the manifest copies, the node table
// (meta/topology); the metadata is picked four times in ten.
func damage(rng *rand.Rand, dir, work string) (string, bool) {
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case strings.HasPrefix(rel, "meta"+string(filepath.Separator)) && (strings.HasSuffix(rel, ".manifest") || filepath.Base(rel) == "topology"):
		case strings.HasPrefix(rel, "global"+string(filepath.Separator)) || strings.HasPrefix(rel, "local"+string(filepath.Separator)):
			if strings.HasSuffix(rel, ".tmp") {
				return nil
			}
		default:
			return nil
		}
		files = append(files, p)
		return nil
	})
	if len(files) == 0 {
		return "", false
	}
	slices.Sort(files)
	pick := files
	var meta []string
	for _, f := range files {
		if strings.HasSuffix(f, ".manifest") || filepath.Base(f) == "topology" {
			meta = append(meta, f)
		}
	}
	if len(meta) > 0 && rng.Float64() < 0.4 {
		pick = meta // the metadata, four in ten times
	}
	f := pick[rng.IntN(len(pick))]
	rel, _ := filepath.Rel(dir, f)
	isMeta := strings.HasSuffix(f, ".manifest") || filepath.Base(f) == "topology"
	b, err := os.ReadFile(f)
	if err != nil {
		return "", false
	}
	// An earlier run's file of the same name, for "foreign" damage.
	var fb []byte
	if isMeta {
		fb, _ = os.ReadFile(filepath.Join(work, "foreign", foreignName(rel)))
	}
	kinds := []string{"flip", "truncate", "empty", "delete"}
	if isMeta {
		kinds = append(kinds, "swap", "foreign", "swap", "foreign")
	}
	kind := kinds[rng.IntN(len(kinds))]
	switch kind {
	case "flip":
		if len(b) == 0 {
			return "", false
		}
		i := rng.IntN(len(b))
		b[i] ^= byte(1 + rng.IntN(255))
		return fmt.Sprintf("flip %s@%d", rel, i), os.WriteFile(f, b, 0o644) == nil
	case "truncate":
		if len(b) == 0 {
			return "", false
		}
		n := rng.IntN(len(b))
		return fmt.Sprintf("truncate %s to %d", rel, n), os.Truncate(f, int64(n)) == nil
	case "empty":
		return "empty " + rel, os.Truncate(f, 0) == nil
	case "delete":
		return "delete " + rel, os.Remove(f) == nil
	case "swap":
		var others []string
		for _, o := range files {
			if o != f && strings.HasSuffix(o, ".manifest") {
				others = append(others, o)
			}
		}
		if len(others) == 0 || !strings.HasSuffix(f, ".manifest") {
			return "", false
		}
		o := others[rng.IntN(len(others))]
		ob, err := os.ReadFile(o)
		if err != nil {
			return "", false
		}
		orel, _ := filepath.Rel(dir, o)
		if rng.IntN(2) == 0 {
			// Exchange the two files.
			if os.WriteFile(f, ob, 0o644) != nil || os.WriteFile(o, b, 0o644) != nil {
				return "", false
			}
			return fmt.Sprintf("swap %s and %s", rel, orel), true
		}
		return fmt.Sprintf("swap %s replaced by %s", rel, orel), os.WriteFile(f, ob, 0o644) == nil
	case "foreign":
		if fb == nil || bytes.Equal(fb, b) {
			return "", false
		}
		return "foreign " + rel, os.WriteFile(f, fb, 0o644) == nil
	}
	return "", false
}

// foreignName is the name of rel's copy in the pool of metadata from
// earlier runs.
func foreignName(rel string) string { return strings.ReplaceAll(rel, string(filepath.Separator), "_") }

// snapshotMeta copies the metadata of run directory dir (manifest copies,
// node table) into work/foreign-next; at the end of the run that becomes
// the pool "foreign" damage draws from (another run's files).
func snapshotMeta(dir, work string) {
	next := filepath.Join(work, "foreign-next")
	_ = os.MkdirAll(next, 0o755)
	for _, pat := range []string{filepath.Join("meta", "ckpt*.manifest"), filepath.Join("global", "manifests", "ckpt*.manifest"), filepath.Join("meta", "topology")} {
		ms, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, m := range ms {
			rel, _ := filepath.Rel(dir, m)
			if b, err := os.ReadFile(m); err == nil {
				_ = os.WriteFile(filepath.Join(next, foreignName(rel)), b, 0o644)
			}
		}
	}
}

// rotateForeign makes this run's snapshots the pool of the next runs.
func rotateForeign(work string) {
	next := filepath.Join(work, "foreign-next")
	if _, err := os.Stat(next); err != nil {
		return
	}
	_ = os.RemoveAll(filepath.Join(work, "foreign"))
	_ = os.Rename(next, filepath.Join(work, "foreign"))
}

// touched returns the files a damage description names.
func touched(what string) []string {
	f := strings.Fields(what)
	if len(f) < 2 {
		return nil
	}
	out := []string{strings.Split(f[1], "@")[0]}
	if f[0] == "swap" && len(f) >= 4 && f[2] == "and" {
		out = append(out, f[3])
	}
	return out
}

// manifestCopy reports whether rel (relative to the run directory) is a
// manifest copy, and of which checkpoint.
func manifestCopy(rel string) (string, bool) {
	base := filepath.Base(rel)
	seq, ok := strings.CutSuffix(base, ".manifest")
	if !ok || !strings.HasPrefix(seq, "ckpt") {
		return "", false
	}
	switch filepath.Dir(rel) {
	case "meta", filepath.Join("global", "manifests"):
		return seq, true
	}
	return "", false
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 30 {
		lines = lines[:30]
	}
	return strings.Join(lines, "\n")
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
