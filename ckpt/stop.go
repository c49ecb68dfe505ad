package ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/policy"
	"github.com/ftigo/ftigo/vfd"
)

// Stopping: a stop signal, the halt file or the allocation's end make
// the next Checkpoint or Snapshot call (or NeedCheckpoint) of every
// rank agree to take a final checkpoint, at the highest level whose
// measured cost fits the time left. ShouldExit then says the job should
// end. A signal is caught into a buffered channel (signal.Notify), read
// only at those calls: it is never lost and never interrupts a write.

// stopState is a rank's stop state.
type stopState struct {
	// sig receives the stop signals (nil: none configured); signal is
	// the first one received.
	sig    chan os.Signal
	notify bool // sig is fed by watchSignal, from raw
	raw    chan os.Signal
	// seen is closed once a call took the signal; quit stops the watch.
	seen, quit chan struct{}
	signal     string
	// signum is the signal's number for the check vector, sigUnnamed
	// for one that has none, 0 before any.
	signum int64
	// deadline is this rank's time limit: Init plus walltime, or Slurm's
	// job end (zero: none); why says which.
	deadline time.Time
	why      string
	// lastPoll is when rank 0 last read the halt file, halt what it
	// said (nil: no halt file).
	lastPoll time.Time
	halt     *HaltRequest
	haltErr  string // the last read's error, warned once
	// agreed: the ranks agreed to stop, the final checkpoint is being
	// taken; final: it was taken (or failed), ShouldExit is true.
	agreed, final bool
	// reason says why (rank 0's words); level is the final level.
	reason string
	level  int
}

// sigUnnamed stands in the check vector for a stop signal that is no
// syscall.Signal: above every signal number.
const sigUnnamed = 1 << 40

// slurmEndVar is Slurm's job end time, Unix seconds.
const slurmEndVar = "SLURM_JOB_END_TIME"

// startStop registers the stop signals and sets the rank's deadline.
func (r *Runtime) startStop(o options, start time.Time) {
	st := &r.pol.stop
	if o.signals != nil {
		st.sig = o.signals
	} else if sigs := r.cfg.Policy.signals(); len(sigs) > 0 {
		ss := make([]os.Signal, len(sigs))
		for i, s := range sigs {
			ss[i] = s
		}
		st.sig, st.seen, st.quit = make(chan os.Signal, 1), make(chan struct{}), make(chan struct{})
		st.raw = make(chan os.Signal, 1)
		signal.Notify(st.raw, ss...)
		go watchSignal(st.raw, st.sig, st.seen, st.quit, r.cfg.Policy.grace())
		st.notify = true
	}
	if w := r.cfg.Policy.Walltime; w > 0 {
		st.deadline, st.why = start.Add(w), fmt.Sprintf("walltime = %v", w)
	}
	if v := r.pol.getenv(slurmEndVar); v != "" {
		sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil || sec <= 0:
			if r.c.Rank() == 0 {
				r.log.Warn(fmt.Sprintf("%s = %q is not a Unix time in seconds: ignored", slurmEndVar, v))
			}
		case st.deadline.IsZero() || time.Unix(sec, 0).Before(st.deadline):
			st.deadline, st.why = time.Unix(sec, 0), fmt.Sprintf("the Slurm job ends at %s (%s)", time.Unix(sec, 0).Format(time.RFC3339), slurmEndVar)
		}
	}
}

// watchSignal catches the stop signals from raw and hands the first to
// sig (when not nil), for the next Checkpoint or Snapshot call. A program that makes
// no such call within grace (it is blocked, or never checkpoints) gets
// the signal back with its default action, as without ftigo: a caught
// signal never keeps a process alive. quit, or a call that took the
// signal (seen), ends the watch and the catching.
func watchSignal(raw, sig chan os.Signal, seen, quit chan struct{}, grace time.Duration) {
	defer signal.Stop(raw)
	var s os.Signal
	select {
	case s = <-raw:
	case <-quit:
		return
	}
	if sig != nil {
		sig <- s // sig is buffered and this is its only sender
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-seen:
	case <-quit:
	case <-t.C:
		signal.Stop(raw)
		if ss, ok := s.(syscall.Signal); ok {
			_ = syscall.Kill(os.Getpid(), ss)
		}
	}
}

// stopSignals stops catching the stop signals.
func (r *Runtime) stopSignals() {
	st := &r.pol.stop
	if st.notify {
		close(st.quit)
		st.notify = false
	}
}

// pollSignal reports whether a stop signal has arrived (sticky).
func (r *Runtime) pollSignal() bool {
	st := &r.pol.stop
	if st.signal == "" && st.sig != nil {
		select {
		case s := <-st.sig:
			st.signal, st.signum = s.String(), sigUnnamed
			if n, ok := s.(syscall.Signal); ok && n > 0 {
				st.signum = int64(n)
			}
			if st.seen != nil {
				// The next signal acts by default from now on.
				signal.Stop(st.raw)
				close(st.seen)
			}
		default:
		}
	}
	return st.signal != ""
}

// pollHalt reads the halt file, at most every pollEvery (rank 0), and
// at every Checkpoint call. The file is read again each time: one
// rewritten (a deadline changed or dropped) or removed (ftigo halt
// --clear) before the ranks agreed to stop counts as it is now.
func (r *Runtime) pollHalt(now time.Time) (*HaltRequest, bool) {
	st := &r.pol.stop
	if st.lastPoll.IsZero() || now.Sub(st.lastPoll) >= pollEvery {
		st.lastPoll = now
		h, err := ReadHalt(r.env.Meta.Driver, r.env.Meta.Dir)
		switch {
		case err == nil:
			st.halt = &h
		case errors.Is(err, fs.ErrNotExist):
			st.halt = nil
		default:
			if err.Error() != st.haltErr { // once per error, not every second
				r.log.Warn("halt file unreadable: ignored", zap.Error(err))
			}
		}
		st.haltErr = ""
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			st.haltErr = err.Error()
		}
	}
	return st.halt, st.halt != nil
}

// stopLevel decides, from check c, whether the ranks stop now and at
// which level. The time left is the earliest deadline minus rank 0's
// clock; a signal leaves at most stop_grace. A deadline alone stops
// the run once the time left, less two gaps between checks, no longer
// holds 1.2 times the top level's total cost. The level is the highest
// whose total cost, times 1.2, fits the time left (the lowest when none
// does). Every rank decides the same from the same c.
func (r *Runtime) stopLevel(c check) (int, bool) {
	st := &r.pol.stop
	if st.final || st.agreed || len(r.pol.avail) == 0 {
		return 0, false
	}
	left := time.Duration(math.MaxInt64)
	if c.deadline != 0 {
		left = time.Duration(c.deadline - c.now)
	}
	now := c.signal || c.halt == 1
	if c.signal {
		left = min(left, r.cfg.Policy.grace())
	}
	avail := r.pol.avail
	total := func(l int) time.Duration { return max(r.pol.total[l], 0) }
	fits := func(l int) bool { return float64(total(l))*1.2 <= float64(left) }
	if !now {
		top := total(avail[len(avail)-1])
		if c.deadline == 0 || float64(left-2*r.pol.gap) > 1.2*float64(top) {
			return 0, false
		}
	}
	lvl := avail[0]
	for i := len(avail) - 1; i >= 0; i-- {
		if fits(avail[i]) {
			lvl = avail[i]
			break
		}
	}
	st.agreed, st.level = true, lvl
	if r.c.Rank() == 0 {
		st.reason = r.stopReason(c)
		tl := "no limit"
		if left != time.Duration(math.MaxInt64) {
			tl = left.Round(time.Millisecond).String()
		}
		r.log.Info(fmt.Sprintf("stop requested (%s): taking a final checkpoint at L%d (time left %s, its measured cost %v)",
			st.reason, lvl, tl, total(lvl).Round(time.Millisecond)),
			zap.String("stop-reason", st.reason), zap.Int("ckpt-level", lvl), zap.Duration("time-left", left))
	}
	return lvl, true
}

// stopReason says, on rank 0, what asked the ranks to stop.
func (r *Runtime) stopReason(c check) string {
	st := &r.pol.stop
	var why []string
	if c.signal {
		sig := st.signal
		switch {
		case sig != "":
		case c.signum != sigUnnamed:
			// The signal reached other ranks first (in one process, a
			// rank that polled before it arrived): named from the check.
			sig = syscall.Signal(c.signum).String() + " on another rank"
		default:
			sig = "on another rank"
		}
		why = append(why, "signal "+sig)
	}
	if c.halt > 0 && st.halt != nil {
		w := "halt file " + haltPath(r.env.Meta.Dir)
		if st.halt.Reason != "" {
			w += " (" + st.halt.Reason + ")"
		}
		if !st.halt.Deadline.IsZero() {
			w += ", to end by " + st.halt.Deadline.Format(time.RFC3339)
		}
		why = append(why, w)
	}
	if len(why) == 0 {
		w := st.why
		if w == "" {
			w = "a deadline"
		}
		why = append(why, w)
	}
	return strings.Join(why, "; ")
}

// finishStop ends a stop once its final checkpoint at lvl ran (err: it
// failed): ShouldExit is now true; rank 0 records the stop and removes
// the halt file that asked for it.
func (r *Runtime) finishStop(lvl int, err error) {
	st := &r.pol.stop
	st.final = true
	if r.c.Rank() != 0 {
		return
	}
	if err == nil {
		r.log.Info(fmt.Sprintf("final checkpoint committed at L%d: the job should end (ShouldExit), then call Close", lvl),
			zap.Int("ckpt-level", lvl), zap.String("stop-reason", st.reason))
		if st.halt != nil {
			if rerr := ClearHalt(r.env.Meta.Driver, r.env.Meta.Dir); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				r.log.Warn("halt file not removed", zap.Error(rerr))
			}
		}
	} else {
		r.log.Error("final checkpoint failed: the job should end all the same; the previous checkpoint stays", zap.Error(err))
	}
	if h := r.pol.hist; h != nil {
		if l := h.h.Current(); l != nil {
			now := r.now().UnixNano()
			l.Ending, l.StopReason, l.End, l.Seen = policy.EndStop, st.reason, now, now
		}
		h.save()
	}
}

// stopPending says whether a stop was agreed and its final checkpoint
// is still to be taken: the next checkpoint (Checkpoint, or an
// incremental one from BeginICP to FinalizeICP) is the final one. The
// same on every rank.
func (r *Runtime) stopPending() bool {
	st := &r.pol.stop
	return r.pol.started && st.agreed && !st.final
}

// ShouldExit reports whether the job should end: a stop was asked for
// (a signal, the halt file, the end of the allocation) and the final
// checkpoint was taken, or failed. The job then calls Close, not
// Finalize (which would delete the checkpoints), and exits with status
// 0; the next launch restarts from the final checkpoint. Local; the same
// on every rank after the same calls. A nil runtime reports false.
func (r *Runtime) ShouldExit() bool {
	return r != nil && r.pol.stop.final
}

// StopLevel returns the level of the final checkpoint once ShouldExit
// is true (0 before, and for a nil runtime). Local.
func (r *Runtime) StopLevel() int {
	if !r.ShouldExit() {
		return 0
	}
	return r.pol.stop.level
}

// StopReason says why the job was asked to stop (a signal, the halt
// file with its reason, the time left) once a stop was agreed, in rank
// 0's words: it is empty before, and on every other rank. Local.
func (r *Runtime) StopReason() string {
	if r == nil || !r.pol.stop.agreed {
		return ""
	}
	return r.pol.stop.reason
}

// NeedCheckpoint reports whether a stop was agreed, for a program that
// calls Checkpoint itself: it should call Checkpoint now, which takes
// the final checkpoint, then end when ShouldExit says so. Collective:
// every rank calls it as often. Like Snapshot, it agrees with the other
// ranks only at checks, at least every second (from the mean time
// between calls) and every max_sync_intv calls, so it may be called in
// every iteration.
func (r *Runtime) NeedCheckpoint() (bool, error) {
	if err := r.usable("NeedCheckpoint"); err != nil {
		return false, err
	}
	st := &r.pol.stop
	if st.final {
		return false, nil
	}
	if st.agreed {
		return true, nil
	}
	a := &r.pol.need
	if !a.started {
		*a = autoState{started: true, origin: r.now(), iter: 1, next: 2, syncIntv: 1, lastIter: 1}
		return false, nil
	}
	a.iter++
	if a.iter < a.next {
		return false, nil
	}
	c, err := r.agree(r.now().Sub(a.origin))
	if err != nil {
		return false, fmt.Errorf("ckpt: need checkpoint: %w", err)
	}
	if a.iter > a.lastIter && c.elapsed > a.lastSync {
		a.meanIter = (c.elapsed - a.lastSync) / time.Duration(a.iter-a.lastIter)
	}
	a.lastSync, a.lastIter = c.elapsed, a.iter
	a.syncIntv = min(a.syncIntv*2, int64(max(r.cfg.MaxSyncIntv, 1)))
	a.next = a.iter + min(a.syncIntv, iterationsIn(pollEvery, a.meanIter))
	_, stop := r.stopLevel(c)
	return stop, nil
}

// stopAtCheckpoint is Checkpoint's check: it returns the level to take
// (the caller's, or the final level when the ranks agree to stop) and
// whether this checkpoint is the final one. vote, when not nil, is
// snapshot mode's vote (snapcopy.go): it is reduced with Max in the
// check's reduction, or alone when no check is due, so that the call
// makes one reduction either way. Collective.
func (r *Runtime) stopAtCheckpoint(id int64, level int, vote []int64) (int, bool, error) {
	st := &r.pol.stop
	if !r.pol.started || st.final || st.agreed {
		lvl, final := level, false
		if r.pol.started && !st.final {
			lvl, final = st.level, true // NeedCheckpoint agreed already
		}
		if vote != nil {
			if err := comm.AllreduceInt64s(r.c, vote, comm.Max); err != nil {
				return lvl, final, fmt.Errorf("ckpt: checkpoint %d: %w", id, err)
			}
		}
		return lvl, final, nil
	}
	// A checkpoint costs far more than reading the halt file: rank 0
	// reads it at every Checkpoint call.
	st.lastPoll = time.Time{}
	c, err := r.agreeWith(r.now().Sub(r.pol.start), vote)
	if err != nil {
		return level, false, fmt.Errorf("ckpt: checkpoint %d: %w", id, err)
	}
	if lvl, ok := r.stopLevel(c); ok {
		return lvl, true, nil
	}
	return level, false, nil
}

// pollIters caps a Snapshot check distance so a stop is seen within
// pollEvery.
func (r *Runtime) pollIters(n int64, mean time.Duration) int64 {
	if mean <= 0 {
		return n
	}
	return max(min(n, iterationsIn(pollEvery, mean)), 1)
}

// agreeClock is Snapshot's check with FTI's intervals: the agreed clock,
// with the stop flags beside it. Collective.
func (r *Runtime) agreeClock(mine int64) (int64, check, error) {
	if !r.pol.started {
		v, err := r.c.AllreduceInt64(mine, comm.Max)
		return v, check{}, err
	}
	c, err := r.agree(time.Duration(mine))
	return int64(c.elapsed), c, err
}

// finalCheckpoint takes Snapshot's final checkpoint at lvl.
func (r *Runtime) finalCheckpoint(lvl int) error {
	id := r.lastID + 1
	_, err := r.checkpoint(id, levels.ID(lvl), false)
	r.finishStop(lvl, err)
	if err != nil {
		return r.logFailed(id, lvl, err)
	}
	return nil
}

// HaltRequest is what the halt file asks for (ftigo halt).
type HaltRequest struct {
	// Reason is shown in the job's log (may be empty).
	Reason string
	// Deadline, when set, asks for the job to have ended by then: the
	// final checkpoint is taken once its measured cost no longer leaves
	// room to wait. Zero: stop at the next check.
	Deadline time.Time
}

// HaltName is the halt file's name in meta_dir.
//
// wire format: never change.
const HaltName = "ftigo.halt"

// haltMagic is the first line of the halt file.
//
// wire format: never change.
const haltMagic = "ftigo-halt 1"

// maxHaltSize bounds the halt file read.
const maxHaltSize = 64 << 10

func haltPath(metaDir string) string { return path.Join(metaDir, HaltName) }

// WriteHalt asks the job whose meta_dir is metaDir to stop: it writes
// the halt file atomically (the line "ftigo-halt 1", then "reason R" and
// "deadline T" in RFC 3339, each when set). The job's rank 0 reads it
// at most every second at its checks, takes the final checkpoint and
// removes it. A halt file left when no job runs stops the next launch at
// its first check.
func WriteHalt(d vfd.Driver, metaDir string, h HaltRequest) error {
	if strings.ContainsAny(h.Reason, "\n\r\x00") {
		return fmt.Errorf("%w: the halt reason must be one line", ErrNilArgument)
	}
	var b bytes.Buffer
	b.WriteString(haltMagic + "\n")
	if h.Reason != "" {
		b.WriteString("reason " + h.Reason + "\n")
	}
	if !h.Deadline.IsZero() {
		b.WriteString("deadline " + h.Deadline.Format(time.RFC3339Nano) + "\n")
	}
	return vfd.WriteFileAtomic(d, haltPath(metaDir), b.Bytes())
}

// ReadHalt reads the halt file of metaDir; an error matching
// fs.ErrNotExist when there is none.
func ReadHalt(d vfd.Driver, metaDir string) (HaltRequest, error) {
	name := haltPath(metaDir)
	raw, err := vfd.ReadFileLimit(d, name, maxHaltSize)
	if err != nil {
		return HaltRequest{}, err
	}
	return parseHalt(name, raw)
}

// parseHalt decodes a halt file.
func parseHalt(name string, raw []byte) (HaltRequest, error) {
	var h HaltRequest
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) == 0 || lines[0] != haltMagic {
		return h, fmt.Errorf("%s: at byte 0: not a halt file (want the line %q)", name, haltMagic)
	}
	off := len(lines[0]) + 1
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, " ")
		switch k {
		case "reason":
			h.Reason = v
		case "deadline":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return h, fmt.Errorf("%s: at byte %d: deadline %q is not an RFC 3339 time", name, off, v)
			}
			h.Deadline = t
		default:
			return h, fmt.Errorf("%s: at byte %d: unknown line %q (want reason or deadline)", name, off, l)
		}
		off += len(l) + 1
	}
	return h, nil
}

// ClearHalt removes the halt file of metaDir (an error matching
// fs.ErrNotExist when there is none).
func ClearHalt(d vfd.Driver, metaDir string) error {
	name := haltPath(metaDir)
	if err := d.Remove(name); err != nil {
		return err
	}
	return d.SyncDir(metaDir)
}

// catchStopSignals holds the stop signals on a head rank while it
// serves its node, so that the application ranks can take their final
// checkpoint (the heads raise it); it returns the release. As on an
// application rank, a signal still held after stop_grace gets its
// default action back.
func catchStopSignals(cfg Config) func() {
	sigs := cfg.Policy.signals()
	if len(sigs) == 0 {
		return func() {}
	}
	raw := make(chan os.Signal, 1)
	ss := make([]os.Signal, len(sigs))
	for i, s := range sigs {
		ss[i] = s
	}
	signal.Notify(raw, ss...)
	quit := make(chan struct{})
	go watchSignal(raw, nil, nil, quit, cfg.Policy.grace())
	return func() { close(quit) }
}
