package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// run is one run: launches with kills (and damage) until the job
// finishes, refuses or fails.
func (ch *chaos) run(seed uint64) error {
	rs, err := ch.newRun(seed)
	if err != nil {
		return err
	}
	for launchNo := 0; ; launchNo++ {
		if rs.step(launchNo) {
			return nil
		}
	}
}

// runState is one run, from its seed, across its launches.
type runState struct {
	ch   *chaos
	st   *Stats
	seed uint64
	rng  *rand.Rand
	p    params
	ref  []byte // the reference field
	dir  string
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

// newRun draws run seed's parameters and builds its reference field.
func (ch *chaos) newRun(seed uint64) (*runState, error) {
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
		return nil, err
	}
	dir := filepath.Join(ch.work, "run")
	_ = os.RemoveAll(dir)
	rs := &runState{ch: ch, st: st, seed: seed, rng: rng, p: p, ref: ref, dir: dir, copiesHit: map[string]map[string]bool{}}
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
	rs.st.FailedSeeds = append(rs.st.FailedSeeds, fmt.Sprintf("%#x (%s): %s", seed, ch.cfg.Mode, msg))
	fmt.Fprintf(ch.out, "FAILED seed %#x (%s): %s\n  params %+v\n  history: %s\n", seed, ch.cfg.Mode, msg, rs.p, strings.Join(rs.log, "; "))
	if ch.cfg.Keep {
		keep := filepath.Join(ch.work, "failed", fmt.Sprintf("%#x", seed))
		_ = os.MkdirAll(filepath.Dir(keep), 0o755)
		_ = os.RemoveAll(keep)
		if err := os.Rename(rs.dir, keep); err == nil {
			fmt.Fprintf(ch.out, "  run directory kept in %s\n", keep)
		}
	}
}

// step is launch launchNo and what follows it. It reports whether the
// run ended: finished, refused or failed.
func (rs *runState) step(launchNo int) bool {
	ch, st := rs.ch, rs.st
	plan := rs.killPlan(launchNo)
	arte := artefacts(rs.dir)
	var vr *verifyOutcome
	if _, err := os.Stat(filepath.Join(rs.dir, "meta")); err == nil && rs.damaged && launchNo > 0 {
		// (A job killed before it made its directories leaves nothing
		// to verify; ftigo verify rightly refuses such a RUN.)
		if vr, err = ch.verify(rs.dir); err != nil {
			rs.fail("before launch %d: %v", launchNo, err)
			return true
		}
		rs.log = append(rs.log, fmt.Sprintf("verify ok=%v lost=%v", vr.ok, vr.lost))
	}
	st.Launches++
	if launchNo > 0 {
		st.Relaunches++
	}
	r := ch.launch(rs.p, rs.dir, plan)
	status, startID := rs.record(launchNo, r)
	if rs.badStart(launchNo, r, vr, arte, status, startID) {
		return true
	}
	if !r.killed {
		rs.ended(launchNo, r, vr)
		return true
	}
	rs.afterKill(r, startID)
	return false
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
				fmt.Fprintf(ch.out, "run %#x: refused after %d launches: %s\n  history: %s\n", rs.seed, launchNo+1, firstLine(r.stderr), strings.Join(rs.log, "; "))
			}
		}
		return
	}
	if !r.done {
		rs.fail("launch %d exited 0 without finishing", launchNo)
		return
	}
	got, err := os.ReadFile(filepath.Join(rs.dir, "final.f64"))
	if err != nil || !bytes.Equal(got, rs.ref) {
		rs.fail("launch %d finished with a field that differs from the reference (read error %v)", launchNo, err)
		return
	}
	st.Completed++
	if ch.cfg.Verbose {
		fmt.Fprintf(ch.out, "run %#x: bit-identical after %d launches\n", rs.seed, launchNo+1)
	}
	_ = os.RemoveAll(rs.dir)
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
		node := rng.IntN(rs.p.nodes)
		nodeDir := filepath.Join(rs.dir, "local", fmt.Sprintf("node%04d", node))
		if _, err := os.Stat(nodeDir); err == nil && os.RemoveAll(nodeDir) == nil {
			rs.st.NodeLosses++
			rs.damaged, rs.hard, rs.runHard = true, true, true
			rs.log = append(rs.log, fmt.Sprintf("deleted node%04d", node))
		}
	}
	if rs.ch.cfg.Mode == "corrupt" {
		snapshotMeta(rs.dir, rs.ch.work)
	}
	if rs.ch.cfg.Mode == "corrupt" && rng.Float64() < 0.7 {
		for range 1 + rng.IntN(3) {
			rs.damageOnce()
		}
	}
}

// damageOnce damages one artefact and notes how hard the damage is.
func (rs *runState) damageOnce() {
	what, ok := damage(rs.rng, rs.dir, rs.ch.work)
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
