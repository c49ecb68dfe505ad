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
// With -variant (heads, dcp, reshape, hdf5, shared, or all in turn) the
// runs also use heads, differential checkpoints (levels 5-8), relaunches
// on another rank count, ckpt_io = 5, or two jobs at once on one
// ckpt_dir and glbl_dir, none of whose files may change while only the
// other job runs (variant.go; docs/robustness.md).
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
//     copy (meta/ckpt*.manifest or global/<run>/manifests/ckpt*.manifest) or a
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
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	Variant  string        // plain, heads, dcp, reshape, hdf5, shared, or all (in turn)
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
	fs.StringVar(&c.Variant, "variant", "plain", "what the runs exercise: "+strings.Join(variants, ", ")+", or all (each in turn, by bits 40-47 of the seed)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Variant != "all" && !slices.Contains(variants, c.Variant) {
		return c, fmt.Errorf("-variant %q: want %s or all", c.Variant, strings.Join(variants, ", "))
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
	Variants    map[string]int // runs per variant (a shared run counts once here, as two runs above)
	Wrong       int            // runs that finished with a wrong field
	SilentFresh int            // launches that started fresh while a checkpoint existed
	Touched     int            // shared runs: a job's files changed while only the other ran
}

func (s *Stats) print(w io.Writer) {
	fmt.Fprintf(w, "chaos %s: %s, started %s\n", s.Mode, s.Elapsed.Round(time.Second), s.Start.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "  runs %d (bit-identical %d, refused %d, failed %d; with background post-processing %d)\n",
		s.Runs, s.Completed, s.Refusals, s.Failures, s.AsyncRuns)
	var vs []string
	for _, v := range slices.Sorted(mapKeys(s.Variants)) {
		vs = append(vs, fmt.Sprintf("%s %d", v, s.Variants[v]))
	}
	fmt.Fprintf(w, "  variants: %s\n", strings.Join(vs, ", "))
	fmt.Fprintf(w, "  wrong fields %d, silent fresh starts %d, files touched by the other job %d\n", s.Wrong, s.SilentFresh, s.Touched)
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
	if cfg.Variant == "" {
		cfg.Variant = "plain"
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
	st := &Stats{Mode: cfg.Mode, Start: time.Now(), Restarts: map[int]int{}, Damages: map[string]int{}, Variants: map[string]int{}}
	refs := map[string][]byte{}
	ch := &chaos{cfg: cfg, bin: bin, ftigo: ftigo, work: work, st: st, refs: refs, out: out}
	master := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed))
	deadline := st.Start.Add(cfg.Duration)
	for i := 0; ; i++ {
		seed := cfg.Seed
		if seed == 0 {
			seed = withVariant(master.Uint64()|1, i)
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
