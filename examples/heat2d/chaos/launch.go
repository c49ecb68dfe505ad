package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

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
	// The variant (variant.go) and its settings.
	variant           string
	heads, reshape    bool
	config            bool // heat2d -config DIR/config.fti (written by writeConfig)
	dcp               bool
	dcpMode, dcpBlock int
	dcpStack, ckptIO  int
}

func drawParams(rng *rand.Rand) params {
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
	a := []string{
		"-role=job", "-dir=" + dir,
		"-ranks=" + strconv.Itoa(p.ranks), "-nodes=" + strconv.Itoa(p.nodes),
		"-nx=" + strconv.Itoa(p.n), "-ny=" + strconv.Itoa(p.n),
		"-iters=" + strconv.Itoa(p.iters),
		"-ckpt-every=" + strconv.Itoa(p.ckptEvery), "-frame-every=" + strconv.Itoa(p.frameEvery),
		"-levels=" + p.levels, "-io-latency=" + p.ioLatency.String(),
		"-async=" + strconv.FormatBool(p.async && !p.config),
	}
	if p.heads {
		a = append(a, "-heads")
	}
	if p.config {
		a = append(a, "-config="+filepath.Join(dir, "config.fti"))
	}
	return a
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
	rp.heads, rp.config = false, false
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
