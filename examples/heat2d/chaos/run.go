package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// run is one run: launches with kills (and damage) until the job
// finishes, refuses or fails. A run of variant shared is two jobs on
// the same global and node-local roots, launched at the same time.
func (ch *chaos) run(seed uint64) error {
	v := variantOf(ch.cfg.Variant, seed)
	ch.st.Variants[v]++
	if v == "shared" {
		return ch.runShared(seed)
	}
	rs, err := ch.newRun(seed, v, ownLayout(filepath.Join(ch.work, "run")), seed)
	if err != nil {
		return err
	}
	for launchNo := 0; ; launchNo++ {
		if rs.step(launchNo) {
			return nil
		}
	}
}

// runShared runs two jobs, a and b, whose config.fti name the same
// ckpt_dir and glbl_dir (each its own meta_dir, so each its own run).
// Their launches start together; each is killed on its own plan. While
// one job is not running (killed or finished) and the other still is,
// none of the first one's files may change.
func (ch *chaos) runShared(seed uint64) error {
	shared := filepath.Join(ch.work, "shared")
	_ = os.RemoveAll(shared)
	var rss [2]*runState
	for i, name := range []string{"run-a", "run-b"} {
		lay := layout{dir: filepath.Join(ch.work, name), local: filepath.Join(shared, "local"), global: filepath.Join(shared, "global")}
		rs, err := ch.newRun(seed, "shared", lay, seed^uint64(i)*0x2545f4914f6cdd1d)
		if err != nil {
			return err
		}
		rs.name, rss[i] = " "+name, rs
	}
	next := [2]int{}
	ended := [2]bool{}
	var frozen [2]map[string][32]byte // an ended job's files
	for !ended[0] || !ended[1] {
		var pre [2]*preLaunch
		for i, rs := range rss {
			if !ended[i] {
				if pre[i], ended[i] = rs.prepare(next[i]); ended[i] {
					pre[i] = nil
				}
			}
		}
		var res [2]*launchResult
		var after [2]map[string][32]byte
		var wg sync.WaitGroup
		for i, rs := range rss {
			if pre[i] == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i] = ch.launch(rs.launchParams(), rs.lay.dir, pre[i].plan)
				after[i] = digestDirs(rs.lay.runDirs())
			}()
		}
		wg.Wait()
		for i, rs := range rss {
			if pre[i] == nil {
				continue
			}
			if moved := changed(after[i], digestDirs(rs.lay.runDirs())); len(moved) > 0 {
				ch.st.Touched++
				rs.fail("files of %s changed after its launch %d exited, while the other job ran: %s", rs.name, next[i], strings.Join(first(moved, 6), ", "))
				ended[i] = true
				continue
			}
			if ended[i] = rs.judge(next[i], pre[i], res[i]); ended[i] {
				frozen[i] = after[i]
			}
			next[i]++
		}
		for i, rs := range rss {
			if frozen[i] == nil || pre[i] != nil {
				continue
			}
			// Ended before this step: the other job ran alone.
			if moved := changed(frozen[i], digestDirs(rs.lay.runDirs())); len(moved) > 0 {
				ch.st.Touched++
				rs.fail("files of %s changed after it ended, while the other job ran: %s", rs.name, strings.Join(first(moved, 6), ", "))
				frozen[i] = nil
			}
		}
	}
	_ = os.RemoveAll(shared)
	return nil
}

// preLaunch is what is known before a launch.
type preLaunch struct {
	plan *killPlan
	arte []string
	vr   *verifyOutcome
}

// step is launch launchNo and what follows it. It reports whether the
// run ended: finished, refused or failed.
func (rs *runState) step(launchNo int) bool {
	pre, done := rs.prepare(launchNo)
	if done {
		return true
	}
	return rs.judge(launchNo, pre, rs.ch.launch(rs.launchParams(), rs.lay.dir, pre.plan))
}

// prepare draws launch launchNo's kill and shape, lists the artefacts
// and runs ftigo verify after damage. It reports whether that failed the run.
func (rs *runState) prepare(launchNo int) (*preLaunch, bool) {
	ch := rs.ch
	pre := &preLaunch{plan: rs.killPlan(launchNo), arte: artefacts(rs.lay)}
	if rs.p.reshape && launchNo > 0 {
		sh := shapes[rs.rng.IntN(len(shapes))]
		rs.shape = sh
		rs.maxNodes = max(rs.maxNodes, sh[1])
	}
	if _, err := os.Stat(filepath.Join(rs.lay.dir, "meta")); err == nil && rs.damaged && launchNo > 0 {
		// (A job killed before it made its directories leaves nothing
		// to verify; ftigo verify rightly refuses such a RUN.)
		vr, err := ch.verify(rs.lay.dir)
		if err != nil {
			rs.fail("before launch %d: %v", launchNo, err)
			return nil, true
		}
		pre.vr = vr
		rs.log = append(rs.log, fmt.Sprintf("verify ok=%v lost=%v", vr.ok, vr.lost))
	}
	return pre, false
}

// launchParams are the heat2d settings of the next launch: the run's,
// on the launch's shape.
func (rs *runState) launchParams() params {
	p := rs.p
	p.ranks, p.nodes = rs.shape[0], rs.shape[1]
	return p
}

// judge counts and checks launch launchNo, which ran with pre and did r,
// then damages after a kill. It reports whether the run ended.
func (rs *runState) judge(launchNo int, pre *preLaunch, r *launchResult) bool {
	st := rs.st
	st.Launches++
	if launchNo > 0 {
		st.Relaunches++
	}
	status, startID := rs.record(launchNo, r)
	if rs.badStart(launchNo, r, pre.vr, pre.arte, status, startID) {
		return true
	}
	if !r.killed {
		rs.ended(launchNo, r, pre.vr)
		return true
	}
	rs.afterKill(r, startID)
	return false
}

// runState is one run, from its seed, across its launches.
type runState struct {
	ch   *chaos
	st   *Stats
	seed uint64
	rng  *rand.Rand
	p    params
	ref  []byte // the reference field
	lay  layout // where the job's files are
	name string // which job of a shared run ("" for a run of one job)
	// shape is the ranks and nodes of the next launch (another with
	// variant reshape at each relaunch); maxNodes the most nodes so far.
	shape    [2]int
	maxNodes int
	// nKills launches are killed; nCkpt checkpoints an uninterrupted launch takes.
	nKills int
	nCkpt  int64
	// est is how long an uninterrupted launch takes; kills land in it.
	est time.Duration
	log []string
	// damaged: anything damaged since the last launch that started (and
	// so repaired what it could). hard: more than the metadata redundancy
	// covers (a node lost, a data file, both copies of a manifest), in
	// that window. runHard: the same, ever in this run.
	damaged, hard, runHard bool
	copiesHit              map[string]map[string]bool // manifest copies damaged, by checkpoint
	newest                 int64                      // newest checkpoint known committed (or recovered) by the previous launch
}

// newRun draws the parameters of run seed's job of variant v from
// stream, writes its config.fti, if any, in lay.dir and builds its
// reference field.
func (ch *chaos) newRun(seed uint64, v string, lay layout, stream uint64) (*runState, error) {
	st := ch.st
	st.Runs++
	rng := rand.New(rand.NewPCG(stream, stream^0x9e3779b97f4a7c15))
	p := drawParams(rng)
	drawVariant(rng, &p, v)
	p.async = ch.cfg.Async == "on" || (ch.cfg.Async == "random" && seed>>32&1 == 1)
	if p.async {
		st.AsyncRuns++
	}
	ref, err := ch.reference(p)
	if err != nil {
		return nil, err
	}
	_ = os.RemoveAll(lay.dir)
	if p.config {
		if err := writeConfig(p, lay); err != nil {
			return nil, err
		}
	}
	rs := &runState{ch: ch, st: st, seed: seed, rng: rng, p: p, ref: ref, lay: lay, copiesHit: map[string]map[string]bool{},
		shape: [2]int{p.ranks, p.nodes}, maxNodes: p.nodes}
	rs.nKills = 1 + rng.IntN(4)
	rs.nCkpt = int64(p.iters / p.ckptEvery)
	rs.est = time.Duration(p.iters)*200*time.Microsecond + time.Duration(rs.nCkpt)*(5*time.Millisecond+8*p.ioLatency)
	return rs, nil
}

// fail counts the run as failed and says why, with its history.
func (rs *runState) fail(format string, args ...any) {
	ch, seed := rs.ch, rs.seed
	msg := fmt.Sprintf(format, args...)
	rs.st.Failures++
	rs.st.FailedSeeds = append(rs.st.FailedSeeds, fmt.Sprintf("%#x (%s, %s%s): %s", seed, ch.cfg.Mode, rs.p.variant, rs.name, msg))
	fmt.Fprintf(ch.out, "FAILED seed %#x (%s, %s%s): %s\n  params %+v\n  history: %s\n", seed, ch.cfg.Mode, rs.p.describe(), rs.name, msg, rs.p, strings.Join(rs.log, "; "))
	if ch.cfg.Keep {
		keep := filepath.Join(ch.work, "failed", fmt.Sprintf("%#x%s", seed, strings.ReplaceAll(rs.name, " ", "-")))
		_ = os.MkdirAll(filepath.Dir(keep), 0o755)
		_ = os.RemoveAll(keep)
		if rs.name != "" {
			// The shared roots too (a copy: the other job still runs).
			_ = exec.Command("cp", "-a", filepath.Dir(rs.lay.global), keep+"-shared").Run()
		}
		if err := os.Rename(rs.lay.dir, keep); err == nil {
			fmt.Fprintf(ch.out, "  run directory kept in %s\n", keep)
		}
	}
}

// killPlan draws how launch launchNo is killed (nil: it is not).
func (rs *runState) killPlan(launchNo int) *killPlan {
	if launchNo >= rs.nKills {
		return nil
	}
	rng := rs.rng
	if rng.IntN(2) == 0 {
		return &killPlan{delay: time.Duration(rng.Int64N(int64(rs.est)))}
	}
	return &killPlan{atCkpt: 1 + rng.Int64N(rs.nCkpt), delay: time.Duration(rng.Int64N(int64(4*time.Millisecond + 10*rs.p.ioLatency)))}
}

// record counts what launch launchNo did and logs it. It returns the
// start status and the checkpoint id the launch started from.
func (rs *runState) record(launchNo int, r *launchResult) (status string, startID int64) {
	st := rs.st
	if r.killed {
		st.Kills++
	}
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
	rs.log = append(rs.log, entry)
	return status, startID
}

// badStart checks how launch launchNo started, against verify's report
// vr and the artefacts arte before it. It reports whether that failed the run.
func (rs *runState) badStart(launchNo int, r *launchResult, vr *verifyOutcome, arte []string, status string, startID int64) bool {
	switch {
	case r.timedOut:
		rs.fail("launch %d did not exit within %v", launchNo, rs.ch.cfg.Timeout)
	case panicked(r.stderr):
		rs.fail("launch %d crashed:\n%s", launchNo, tail(r.stderr))
	case vr != nil && len(vr.lost) > 0 && r.start != nil:
		rs.fail("ftigo verify reported lost metadata (%s) but launch %d started (status %s)", strings.Join(vr.lost, ", "), launchNo, status)
	case status == "fresh" && len(arte) > 0:
		rs.st.SilentFresh++
		rs.fail("launch %d started fresh while checkpoint artefacts existed: %s", launchNo, strings.Join(first(arte, 6), ", "))
	case r.start != nil && status != "fresh" && !rs.hard && launchNo > 0 && startID < rs.newest:
		rs.fail("launch %d restarted from checkpoint %d, but checkpoint %d was committed and nothing but single manifest copies was damaged (damaged=%v)", launchNo, startID, rs.newest, rs.damaged)
	default:
		return false
	}
	return true
}

// ended judges launch launchNo, which exited without being killed: it
// finished with the reference field, or refused when it may.
func (rs *runState) ended(launchNo int, r *launchResult, vr *verifyOutcome) {
	ch, st := rs.ch, rs.st
	if r.exitErr != nil {
		switch {
		case !strings.Contains(r.stderr, "heat2d:"):
			rs.fail("launch %d exited with %v and no error message:\n%s", launchNo, r.exitErr, tail(r.stderr))
		case !rs.runHard:
			rs.fail("launch %d refused though only kills (and damage to single manifest copies or the node table) happened:\n%s", launchNo, tail(r.stderr))
		case vr != nil && vr.ok:
			rs.fail("ftigo verify passed, then launch %d refused:\n%s", launchNo, tail(r.stderr))
		case vr != nil && strings.Contains(r.stderr, "checkpoint metadata lost") && len(vr.lost) == 0:
			rs.fail("launch %d refused for lost metadata, which ftigo verify did not report:\n%s", launchNo, tail(r.stderr))
		default:
			st.Refusals++
			if ch.cfg.Verbose {
				fmt.Fprintf(ch.out, "run %#x (%s%s): refused after %d launches: %s\n  history: %s\n", rs.seed, rs.p.describe(), rs.name, launchNo+1, firstLine(r.stderr), strings.Join(rs.log, "; "))
			}
		}
		return
	}
	if !r.done {
		rs.fail("launch %d exited 0 without finishing", launchNo)
		return
	}
	got, err := os.ReadFile(filepath.Join(rs.lay.dir, "final.f64"))
	if err != nil || !bytes.Equal(got, rs.ref) {
		st.Wrong++
		rs.fail("launch %d finished with a field that differs from the reference (read error %v)", launchNo, err)
		return
	}
	st.Completed++
	if ch.cfg.Verbose {
		fmt.Fprintf(ch.out, "run %#x (%s%s): bit-identical after %d launches\n", rs.seed, rs.p.describe(), rs.name, launchNo+1)
	}
	if rs.name == "" {
		_ = os.RemoveAll(rs.lay.dir)
	}
}

// afterKill updates what is known after a killed launch that started
// from checkpoint startID, then may lose a node and damage artefacts.
func (rs *runState) afterKill(r *launchResult, startID int64) {
	// Killed: the newest checkpoint this launch knew to be committed.
	if r.start != nil {
		// It recovered (or started fresh): what it knew supersedes
		// what the launches before it knew, and damage before it.
		rs.newest, rs.damaged, rs.hard = max(startID, r.lastEnd), false, false
		clear(rs.copiesHit)
	}
	rng := rs.rng
	if rng.Float64() < 0.3 {
		node := rng.IntN(rs.maxNodes)
		nodeDir := filepath.Join(rs.lay.local, fmt.Sprintf("node%04d", node))
		run := runOf(rs.lay.dir)
		if rs.name != "" {
			// Of a shared node-local root, only this job's run directory.
			nodeDir = filepath.Join(nodeDir, run)
		}
		// A shared job whose meta_dir names no run (killed before it
		// wrote ftigo.run, or its run retired) has no node directory of
		// its own: the shared root is the other job's too.
		if rs.name != "" && run == "" {
			nodeDir = ""
		}
		if _, err := os.Stat(nodeDir); nodeDir != "" && err == nil && os.RemoveAll(nodeDir) == nil {
			rs.st.NodeLosses++
			rs.damaged, rs.hard, rs.runHard = true, true, true
			rs.log = append(rs.log, fmt.Sprintf("deleted node%04d", node))
		}
	}
	if rs.ch.cfg.Mode == "corrupt" {
		snapshotMeta(rs.lay, rs.ch.work)
	}
	if rs.ch.cfg.Mode == "corrupt" && rng.Float64() < 0.7 {
		for range 1 + rng.IntN(3) {
			rs.damageOnce()
		}
	}
}

// damageOnce damages one artefact and notes how hard the damage is.
func (rs *runState) damageOnce() {
	what, ok := damage(rs.rng, rs.lay, rs.ch.work)
	if !ok {
		return
	}
	rs.st.Damages[strings.Fields(what)[0]]++
	rs.damaged = true
	rs.log = append(rs.log, what)
	for _, rel := range touched(what) {
		seq, isCopy := manifestCopy(rel)
		switch {
		case rel == filepath.Join("meta", "topology"):
		case isCopy && !rs.copiesHit[seq][rel] && len(rs.copiesHit[seq]) == 0:
			rs.copiesHit[seq] = map[string]bool{rel: true}
		case isCopy && rs.copiesHit[seq][rel]:
		default:
			rs.hard, rs.runHard = true, true
		}
	}
}

// tail returns the first 30 lines of s, trimmed, for a message.
func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 30 {
		lines = lines[:30]
	}
	return strings.Join(lines, "\n")
}

// firstLine returns the first line of s, trimmed.
func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// first returns the first n elements of s at most.
func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
