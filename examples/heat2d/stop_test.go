package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/vfd"
)

// stopAction is what a stop test does to a running job: at the
// beginning of checkpoint begin (0: not), else delay after the start.
type stopAction struct {
	begin int64
	delay time.Duration
	do    func(p *os.Process) // nil: nothing
	what  string
}

// stopRun is what a stop test saw of one launch of the job.
type stopRun struct {
	start, final *event
	ends         []event // ckpt-end events
	done         bool
	signaled     syscall.Signal // the signal that ended the job (0: none)
	exitCode     int
	stdout       string
	stderr       string
}

// launchStop runs one launch of the job o (as runLaunch does: the test
// binary as the child) with env added, doing a to it. It fails the test
// if the job runs past 60 s.
func launchStop(t *testing.T, cmdPath string, args []string, env []string, a stopAction) *stopRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cmdPath, args...)
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	fired := false
	fire := func() {
		if !fired && a.do != nil {
			fired = true
			a.do(cmd.Process)
		}
	}
	if a.begin == 0 && a.do != nil {
		timer := time.AfterFunc(a.delay, fire)
		defer timer.Stop()
	}
	r := &stopRun{}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		e, ok := parseEvent(sc.Text())
		if !ok {
			continue
		}
		switch e.kind {
		case "start":
			r.start = &e
		case "ckpt-begin":
			if a.begin > 0 && e.int("id") == a.begin {
				if a.delay > 0 {
					time.AfterFunc(a.delay, fire)
				} else {
					fire()
				}
			}
		case "ckpt-end":
			r.ends = append(r.ends, e)
		case "final":
			r.final = &e
		case "done":
			r.done = true
		}
	}
	werr := cmd.Wait()
	require.NoError(t, ctx.Err(), "the job hung; stderr:\n%s", stderr.String())
	r.stdout, r.stderr = out.String(), stderr.String()
	var exit *exec.ExitError
	if errors.As(werr, &exit) {
		r.exitCode = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.signaled = ws.Signal()
		}
	} else {
		require.NoError(t, werr)
	}
	return r
}

// stopCase is one kind of stop trial.
type stopCase struct {
	name string
	// action returns the stop of launch 1 (rng-drawn) and the job's
	// extra arguments and environment.
	action func(rng *rand.Rand, dir string, ref time.Duration) (stopAction, []string, []string)
	// restart also stops launch 2 early, while it restarts.
	restart bool
	// measure first runs a launch stopped by the halt file in its fifth
	// checkpoint: every level's cost is then measured, and kept in the
	// run's history for the stop's choice. Unmeasured, L1 is guessed at
	// 1 s and each level above at twice the one below: a time limit
	// under 1.2 × 8 s would stop the job at its first check.
	measure bool
	// reason is in the job log's stop line.
	reason string
	// level is the final checkpoint's expected level (0: the one the
	// job's log says fits the time left).
	level int
}

func sigterm(p *os.Process) { _ = p.Signal(syscall.SIGTERM) }

func halt(dir string) func(*os.Process) {
	return func(*os.Process) {
		_ = ckpt.WriteHalt(vfd.Sec2{}, filepath.Join(dir, "meta"), ckpt.HaltRequest{Reason: "stop test"})
	}
}

// stopTrials is the number of trials of each case: HEAT2D_STOP_TRIALS,
// else 1 (2 busy cores: the whole test stays under a minute).
func stopTrials(t *testing.T) int {
	if v := os.Getenv("HEAT2D_STOP_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "HEAT2D_STOP_TRIALS")
		return n
	}
	return 1
}

// TestStopAtRandomMoments stops heat2d's child job (4 ranks on 4
// simulated nodes, levels 1-4 in turn, slow storage) with SIGTERM, the
// halt file, walltime and SLURM_JOB_END_TIME at seeded random moments:
// inside a checkpoint, between checkpoints and, for the signal, while
// the relaunch recovers. Each stopped launch must exit 0 after its final
// checkpoint, at the expected level; the next launch must resume from
// exactly that checkpoint; and the run must end bit-identical to an
// uninterrupted one. HEAT2D_STOP_SEED and HEAT2D_STOP_TRIALS change the
// seed and the trials per case.
func TestStopAtRandomMoments(t *testing.T) {
	if testing.Short() {
		t.Skip("runs some 20 child jobs; skipped with -short")
	}
	seed := uint64(30)
	if v := os.Getenv("HEAT2D_STOP_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "HEAT2D_STOP_SEED")
		seed = n
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	base := smallOptions(t, "-iters", "1200", "-ckpt-every", "100", "-frame-every", "0", "-io-latency", "5ms")
	ref, err := solveInProcess(base)
	require.NoError(t, err)
	want := fieldBytes(ref)
	// An uninterrupted launch's time sets the random moments.
	t0 := time.Now()
	r := launchStop(t, exe, jobArgs(base), nil, stopAction{})
	refTime := time.Since(t0)
	require.True(t, r.done, "reference launch: %s", r.stderr)

	cases := []stopCase{
		{name: "sigterm-in-checkpoint", reason: "signal terminated", level: 4, restart: true,
			action: func(rng *rand.Rand, _ string, _ time.Duration) (stopAction, []string, []string) {
				return stopAction{begin: 2 + rng.Int64N(6), delay: time.Duration(rng.Int64N(int64(20 * time.Millisecond))), do: sigterm, what: "SIGTERM in a checkpoint"}, nil, nil
			}},
		{name: "sigterm-random", reason: "signal terminated", level: 4, restart: true,
			action: func(rng *rand.Rand, _ string, ref time.Duration) (stopAction, []string, []string) {
				return stopAction{delay: time.Duration(rng.Float64() * 0.8 * float64(ref)), do: sigterm, what: "SIGTERM at a random moment"}, nil, nil
			}},
		{name: "sigusr1-in-checkpoint", reason: "signal user defined signal 1", level: 4,
			action: func(rng *rand.Rand, _ string, _ time.Duration) (stopAction, []string, []string) {
				return stopAction{begin: 2 + rng.Int64N(6), delay: time.Duration(rng.Int64N(int64(20 * time.Millisecond))),
					do: func(p *os.Process) { _ = p.Signal(syscall.SIGUSR1) }, what: "SIGUSR1 in a checkpoint"}, nil, nil
			}},
		{name: "halt-in-checkpoint", reason: "halt file", level: 4,
			action: func(rng *rand.Rand, dir string, _ time.Duration) (stopAction, []string, []string) {
				return stopAction{begin: 2 + rng.Int64N(6), delay: time.Duration(rng.Int64N(int64(20 * time.Millisecond))), do: halt(dir), what: "halt file in a checkpoint"}, nil, nil
			}},
		{name: "halt-random", reason: "halt file", level: 4,
			action: func(rng *rand.Rand, dir string, ref time.Duration) (stopAction, []string, []string) {
				return stopAction{delay: time.Duration(rng.Float64() * 0.8 * float64(ref)), do: halt(dir), what: "halt file at a random moment"}, nil, nil
			}},
		{name: "walltime", reason: "walltime = ", measure: true,
			action: func(rng *rand.Rand, _ string, ref time.Duration) (stopAction, []string, []string) {
				w := (1800*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second)))).Round(time.Millisecond)
				return stopAction{what: "walltime " + w.String()}, []string{"-walltime=" + w.String(), "-iters=4000"}, nil
			}},
		{name: "slurm", reason: "SLURM_JOB_END_TIME", measure: true,
			action: func(rng *rand.Rand, _ string, ref time.Duration) (stopAction, []string, []string) {
				// Slurm's end is in whole seconds.
				end := time.Now().Add(2*time.Second + time.Duration(rng.Int64N(int64(time.Second)))).Unix()
				return stopAction{what: fmt.Sprintf("Slurm job end %d", end)}, []string{"-iters=6000"}, []string{slurmEnd + "=" + strconv.FormatInt(end, 10)}
			}},
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	for _, tc := range cases {
		for trial := range stopTrials(t) {
			t.Run(fmt.Sprintf("%s/%d", tc.name, trial), func(t *testing.T) {
				o := *base
				o.dir = t.TempDir()
				var prev *event
				if tc.measure {
					l0 := launchStop(t, exe, jobArgs(&o), nil, stopAction{begin: 5, do: halt(o.dir)})
					prev = checkStopped(t, &o, "launch 0", l0, nil, "halt file", 4)
					require.NotNil(t, prev, "launch 0 finished before the halt")
				}
				a, extra, env := tc.action(rng, o.dir, refTime)
				args := append(jobArgs(&o), extra...)
				want := want
				if n := len(extra); n > 0 && strings.HasPrefix(extra[n-1], "-iters=") {
					o.iters, _ = strconv.Atoi(strings.TrimPrefix(extra[n-1], "-iters="))
					f, err := solveInProcess(&o)
					require.NoError(t, err)
					want = fieldBytes(f)
				}
				t.Logf("seed %d: %s", seed, a.what)
				l1 := launchStop(t, exe, args, env, a)
				early := l1.signaled == syscall.SIGTERM && l1.stdout == "" && prev == nil
				if early {
					// Before the job's first instruction caught it (the
					// Go runtime's start): killed as without ftigo, with
					// nothing to resume from.
					t.Logf("launch 1 got SIGTERM before it started: killed by default")
				} else {
					prev = checkStopped(t, &o, "launch 1", l1, prev, tc.reason, tc.level)
				}
				if tc.measure {
					require.NotNil(t, prev, "launch 1 finished before its time limit")
					assert.Greater(t, prev.int("iter"), l1.start.int("iter")+int64(o.ckptEvery),
						"launch 1 stopped at once: its measured costs fitted the time left")
				}
				if prev != nil && a.begin > 0 {
					assert.GreaterOrEqual(t, prev.int("id"), a.begin, "stopped in checkpoint %d: the final one is not older", a.begin)
				}
				resume := jobArgs(&o) // no stop: the last launch runs to the end
				if tc.restart && prev != nil {
					d := time.Duration(rng.Int64N(int64(150 * time.Millisecond)))
					t.Logf("launch 2: SIGTERM %v after the start, while it restarts", d)
					l2 := launchStop(t, exe, resume, nil, stopAction{delay: d, do: sigterm})
					if l2.signaled == syscall.SIGTERM && l2.stdout == "" {
						// Before the job's first instruction caught it (the
						// Go runtime's start): killed as without ftigo.
						t.Logf("launch 2 got SIGTERM before it started: killed by default")
					} else {
						prev = checkStopped(t, &o, "launch 2", l2, prev, "signal terminated", 4)
					}
				}
				if prev != nil || early {
					last := launchStop(t, exe, resume, nil, stopAction{})
					require.Zero(t, last.exitCode, "last launch: %s", last.stderr)
					require.True(t, last.done, "the last launch did not finish: %s", last.stderr)
					checkResumed(t, "last launch", last, prev)
					if early {
						require.NotNil(t, last.start, "last launch printed no start; stderr:\n%s", last.stderr)
						assert.Equal(t, "fresh", last.start.kv["status"], "launch 1 committed nothing: the last launch starts fresh")
					}
				}
				got, err := os.ReadFile(filepath.Join(o.dir, "final.f64"))
				require.NoError(t, err)
				require.Equal(t, len(want), len(got))
				assert.True(t, bytes.Equal(want, got), "final field differs from the uninterrupted run: %s", firstDiff(got, want))
			})
		}
	}
}

// slurmEnd is Slurm's job end time variable, which the runtime reads.
const slurmEnd = "SLURM_JOB_END_TIME"

// stopLine is the runtime's line when the ranks agree to stop.
var stopLine = regexp.MustCompile(`stop requested \(([^"]*)\): taking a final checkpoint at L(\d) \(time left ([^,]*), its measured cost ([^)]*)\)`)

// checkStopped checks launch l of o, which resumed from prev (nil: the
// first launch): stopped by tc (exit 0, "EVENT final" at the expected
// level, the job log saying why, no halt file left), or finished before
// the stop. It returns the checkpoint the next launch must resume from:
// the final one, else the last one l committed (nil when l finished).
func checkStopped(t *testing.T, o *options, name string, l *stopRun, prev *event, reason string, level int) *event {
	t.Helper()
	require.Zero(t, l.signaled, "%s died of a signal; stdout:\n%s\nstderr:\n%s", name, l.stdout, l.stderr)
	require.Zero(t, l.exitCode, "%s failed; stderr:\n%s", name, l.stderr)
	if prev != nil {
		checkResumed(t, name, l, prev)
	}
	if l.final == nil {
		require.True(t, l.done, "%s neither stopped nor finished; stdout:\n%s", name, l.stdout)
		t.Logf("%s finished before the stop was seen", name)
		return nil
	}
	f := l.final
	t.Logf("%s: final checkpoint %s at L%s, iteration %s", name, f.kv["id"], f.kv["level"], f.kv["iter"])
	assert.Contains(t, l.stdout, fmt.Sprintf("heat2d: final checkpoint %s at L%s (iteration %s), exiting (stopped by %s)\n", f.kv["id"], f.kv["level"], f.kv["iter"], f.kv["why"]))
	assert.Contains(t, f.kv["why"], reason, "%s: the job says why it stopped", name)
	assert.False(t, l.done, "%s stopped and finished", name)
	require.NotEmpty(t, l.ends)
	lastEnd := l.ends[len(l.ends)-1]
	for _, k := range []string{"id", "level", "iter"} {
		assert.Equal(t, f.kv[k], lastEnd.kv[k], "%s: the final checkpoint is its last one (%s)", name, k)
	}
	assert.Less(t, f.int("iter"), int64(o.iters), "%s stopped after its last iteration", name)
	log, err := os.ReadFile(filepath.Join(o.dir, "job.log"))
	require.NoError(t, err)
	ms := stopLine.FindAllStringSubmatch(string(log), -1)
	require.NotEmpty(t, ms, "%s: no stop line in the job log", name)
	m := ms[len(ms)-1]
	assert.Contains(t, m[1], reason, "%s: why it stopped", name)
	assert.Equal(t, f.kv["level"], m[2], "%s: the level agreed is the one committed", name)
	switch {
	case level > 0:
		assert.Equal(t, strconv.Itoa(level), f.kv["level"], "%s: final level", name)
	default:
		// The highest level whose cost, times 1.2, fits the time left;
		// the lowest when none does.
		left, err1 := time.ParseDuration(m[3])
		cost, err2 := time.ParseDuration(m[4])
		require.NoError(t, errors.Join(err1, err2), "%s: %s", name, m[0])
		assert.Less(t, cost, 900*time.Millisecond, "%s: the cost is a measured one, not the guess: %s", name, m[0])
		if m[2] != "1" {
			assert.LessOrEqual(t, 1.2*float64(cost), float64(left), "%s: %s", name, m[0])
		}
	}
	_, err = ckpt.ReadHalt(vfd.Sec2{}, filepath.Join(o.dir, "meta"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "%s: the halt file is removed after the final checkpoint", name)
	return f
}

// checkResumed checks that launch l restarted from checkpoint prev (its
// id, level and iteration): nothing committed was lost.
func checkResumed(t *testing.T, name string, l *stopRun, prev *event) {
	t.Helper()
	if prev == nil {
		return
	}
	require.NotNil(t, l.start, "%s printed no start; stderr:\n%s", name, l.stderr)
	assert.NotEqual(t, "fresh", l.start.kv["status"], "%s started fresh", name)
	for _, k := range []string{"id", "level", "iter"} {
		assert.Equal(t, prev.kv[k], l.start.kv[k], "%s resumed from the final checkpoint's %s", name, k)
	}
}
