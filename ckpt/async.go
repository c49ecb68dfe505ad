package ckpt

import (
	"fmt"
	"runtime"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
)

// Asynchronous post-processing (inline_lL = 0, Config.Async): a
// checkpoint at level L is committed at L1 on the solver's path, and a
// goroutine of the rank (the "poster") raises it to L in the background
// with levels.Engine.Raise, over a private communicator split from the
// rank's at Init, so that its messages never mix with the solver's. The
// same job then compacts a differential chain that reached
// dcp_stack_size (compact.go). At most one job is in flight per rank
// (FTI's rule): the next Checkpoint waits for it first. While the poster runs it owns the
// engine; every Runtime method that uses the engine calls drainPost
// first, and the poster's result reaches the rank's goroutine through a
// channel, so the Runtime stays a one-goroutine object.

// postState is a rank's asynchronous post-processing state.
type postState struct {
	c       comm.Comm        // private communicator (nil: no asynchronous level)
	running chan postResult  // the job in flight, nil when none
	job     *levels.Manifest // the L1 checkpoint being raised
	// err is a background failure not yet reported by Checkpoint or
	// Finalize (CheckpointDone and CheckpointWait report it without
	// clearing it).
	err error
	// hook, when set, runs in the poster before its work (tests).
	hook func()
	// node, with head = 1, joins this rank to its node's head (rank 0),
	// which post-processes instead of a private communicator (heads.go);
	// adopt is the checkpoint the heads raised, not yet adopted by the
	// engine.
	node  comm.Comm
	adopt *levels.Manifest
}

// closed is a closed channel: comm.Wait on it serves once.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// waitServing receives from ch; where c is a comm.Server the caller serves
// meanwhile the calls of the goroutine it waits for (the poster's, below
// MPI_THREAD_MULTIPLE).
func waitServing(c comm.Comm, ch <-chan postResult) postResult {
	if _, ok := c.(comm.Server); !ok {
		return <-ch
	}
	select {
	case res := <-ch:
		return res
	default:
	}
	done := make(chan struct{})
	var res postResult
	go func() {
		res = <-ch
		close(done)
	}()
	comm.Wait(c, done)
	return res
}

// postResult is what the poster hands back.
type postResult struct {
	m   *levels.Manifest // the checkpoint as the job left it (nil on failure)
	err error
	// adopted says the engine already holds m (the poster adopted the
	// heads' result itself before compacting).
	adopted bool
	// done is when the job finished (the poster's clock).
	done time.Time
	// snap is set by a snapshot-mode job (snapcopy.go).
	snap *snapDone
}

// asyncLevel reports whether a checkpoint at lvl is post-processed in the
// background: Async[lvl] is set and the level can be raised from L1 (the
// L4 of ckpt_io = 5 is one HDF5 file the ranks write themselves).
func (r *Runtime) asyncLevel(lvl levels.ID) bool {
	switch {
	case lvl <= levels.L1 || !lvl.Valid() || !r.cfg.Async[lvl] || (r.post.c == nil && r.post.node == nil):
		return false
	case lvl == levels.L4 && r.cfg.CkptIO == 5:
		return false
	}
	return true
}

// anyAsync reports whether some level is configured asynchronous.
func (c Config) anyAsync() bool { return c.Async[2] || c.Async[3] || c.Async[4] }

// openPost splits the private communicator of the poster when some level
// is asynchronous. Collective.
func (r *Runtime) openPost() error {
	if !r.cfg.anyAsync() && !r.cfg.Snapshot {
		return nil
	}
	if r.post.node != nil {
		if r.c.Rank() == 0 {
			r.log.Info("head = 1: checkpoints at the asynchronous levels commit at L1 and are raised to their level by the heads")
		}
		if !r.cfg.EnableDCP && !r.cfg.Snapshot {
			return nil
		}
		// dCP: the ranks' background goroutines compact full chains,
		// over a private communicator (compact.go).
	}
	pc, err := r.c.Split(0, r.c.Rank())
	if err != nil {
		return fmt.Errorf("ckpt: communicator for background post-processing: %w", err)
	}
	r.post.c = pc
	if r.c.Rank() == 0 && r.post.node == nil {
		var ls []string
		for l := 2; l <= 4; l++ {
			if r.cfg.Async[l] {
				ls = append(ls, levels.ID(l).String())
			}
		}
		r.log.Info(fmt.Sprintf("asynchronous post-processing at %v: checkpoints commit at L1 and are raised to their level in the background", ls))
		if r.cfg.Async[4] && r.cfg.CkptIO == 5 {
			r.log.Warn("inline_l4 = 0 with ckpt_io = 5: the L4 HDF5 file is written by the ranks themselves, synchronously")
		}
	}
	return nil
}

// closePost drains the poster, stops the node's head (head = 1) and
// frees the poster's communicator.
func (r *Runtime) closePost() {
	r.drainPost()
	r.scopy.release() // the staging copy (snapcopy.go)
	r.stopHead()
	if r.post.c != nil {
		_ = r.post.c.Close()
		r.post.c = nil
	}
}

// startPost starts the background work of committed checkpoint m: its
// raise from L1 to raiseTo (0: none, m is at its level), then, with
// compact, the compaction of its chain (compact.go).
func (r *Runtime) startPost(m *levels.Manifest, raiseTo levels.ID, compact bool) {
	ch := make(chan postResult, 1)
	r.post.running, r.post.job = ch, m
	w := r.poster()
	var cj *compactJob
	if compact {
		cj = r.compactJobFor(m, raiseTo)
	}
	var req headRequest
	var rerr error
	if raiseTo != 0 && w.node != nil {
		// The request leaves from the rank's goroutine, so that the head
		// starts at once even where only its thread may call MPI.
		req, rerr = r.headRequestFor(m, raiseTo)
		if rerr == nil {
			rerr = askHead(w.node, req)
		}
	}
	hook := r.post.hook
	go func() {
		if hook != nil {
			hook()
		}
		res := postResult{m: m}
		if raiseTo != 0 {
			var up *levels.Manifest
			var err error
			if w.node != nil {
				up, err = w.headRaise(m, raiseTo, req, rerr, true)
			} else {
				up, err = w.raise(m, raiseTo)
			}
			if err != nil {
				ch <- postResult{err: backgroundFailed(w.log, w.rank, m, raiseTo, err)}
				return
			}
			res.m = up
		}
		if cj != nil {
			res.m, res.adopted = w.compact(cj, res.m, raiseTo != 0 && w.node != nil)
		}
		res.done = w.now()
		ch <- res
	}()
}

// poster holds what the background goroutine uses, copied from the
// Runtime on the rank's goroutine: the goroutine touches nothing else.
type poster struct {
	eng   *levels.Engine
	pc    comm.Comm // private communicator (nil with heads and no compaction)
	node  comm.Comm // the node's head (head = 1), nil otherwise
	log   *zap.Logger
	now   func() time.Time
	rank  int
	reqOf func(m *levels.Manifest, lvl levels.ID) (headRequest, error)
}

// poster returns the background goroutine's view of the runtime.
func (r *Runtime) poster() *poster {
	return &poster{eng: r.eng, pc: r.post.c, node: r.post.node, log: r.log, now: r.now, rank: r.c.Rank(), reqOf: r.headRequestFor}
}

// raise raises committed L1 checkpoint m to lvl over the private
// communicator and logs it (rank 0).
func (w *poster) raise(m *levels.Manifest, lvl levels.ID) (*levels.Manifest, error) {
	start := w.now()
	up, st, err := w.eng.Raise(m, lvl, w.pc)
	if err == nil && w.rank == 0 {
		wall := w.now().Sub(start)
		w.log.Info(fmt.Sprintf("Ckpt. ID %d (L1 -> %v) post-processed in the background in %.3f sec. (Ps %.3f, Cm %.3f, Cl %.3f)",
			m.ID, lvl, wall.Seconds(), st.Protect.Seconds(), st.Commit.Seconds(), st.Clean.Seconds()),
			zap.Int64("ckpt-id", m.ID), zap.Stringer("ckpt-level", lvl), zap.Duration("post-wall", wall),
			zap.Duration("post", st.Protect), zap.Duration("commit", st.Commit), zap.Duration("clean", st.Clean))
	}
	return up, err
}

// headRaise has the node's head raise m to lvl (head = 1) with request
// req (rerr: the request could not be built or sent) and logs it (rank
// 0). With sent, req has already been sent (askHead).
func (w *poster) headRaise(m *levels.Manifest, lvl levels.ID, req headRequest, rerr error, sent bool) (*levels.Manifest, error) {
	start := w.now()
	if rerr == nil && !sent {
		rerr = askHead(w.node, req)
	}
	if rerr != nil {
		return nil, rerr
	}
	up, err := headReplied(w.node)
	if err == nil && w.rank == 0 {
		wall := w.now().Sub(start)
		w.log.Info(fmt.Sprintf("Ckpt. ID %d (L1 -> %v) post-processed by the heads in %.3f sec.", m.ID, lvl, wall.Seconds()),
			zap.Int64("ckpt-id", m.ID), zap.Stringer("ckpt-level", lvl), zap.Duration("post-wall", wall))
	}
	return up, err
}

// backgroundFailed wraps err, the failure to raise m to lvl in the
// background, in [ErrBackground] with what it means for m, and logs it
// once (rank 0).
func backgroundFailed(log *zap.Logger, rank int, m *levels.Manifest, lvl levels.ID, err error) error {
	err = fmt.Errorf("%w: checkpoint %d (%s) stays committed at L1, not raised to %v: %w", ErrBackground, m.ID, m.Dir(), lvl, err)
	if rank == 0 {
		log.Warn(err.Error(), zap.Int64("ckpt-id", m.ID), zap.Stringer("ckpt-level", lvl))
	}
	return err
}

// drainPost waits for the job in flight, if any, applies its result and
// returns how long it waited. Local.
func (r *Runtime) drainPost() time.Duration {
	if r.post.running == nil {
		return 0
	}
	start := r.now()
	r.applyPost(waitServing(r.c, r.post.running))
	return r.now().Sub(start)
}

// applyPost takes the poster's result on the rank's goroutine.
func (r *Runtime) applyPost(res postResult) {
	job := r.post.job
	r.post.running, r.post.job = nil, nil
	r.observePost(job, res)
	if res.snap != nil {
		r.applySnap(res)
		return
	}
	if res.err != nil {
		r.post.err = res.err
		return
	}
	if r.post.node != nil && !res.adopted && res.m.Seq == job.Seq && res.m != job {
		r.post.adopt = res.m // the engine adopts it at the next collective call
	}
	if img, ok := r.images[job.Seq]; ok {
		r.keepImage(res.m, img)
	}
	if r.last != nil && r.last.Seq == job.Seq {
		r.setLast(res.m)
	}
}

// awaitPost waits for the job in flight and returns how long it waited;
// an unreported background failure is returned (and cleared) instead.
// Every rank returns the same: the failure was agreed by the raise's
// vote.
func (r *Runtime) awaitPost() (time.Duration, error) {
	waited := r.drainPost()
	r.adoptPost()
	if err := r.takePostError(); err != nil {
		return waited, err
	}
	return waited, nil
}

// takePostError returns the background failure not yet reported and
// clears it.
func (r *Runtime) takePostError() error {
	err := r.post.err
	r.post.err = nil
	return err
}

// CheckpointDone reports, without blocking, whether the background
// post-processing of the last checkpoint (inline_lL = 0: its raise, and
// the compaction of a differential chain it completed) has finished on
// this rank: true when nothing is in flight. err is a background failure
// (wrapping [ErrBackground], naming the checkpoint, the level, the failed
// ranks and why) that the next Checkpoint or Finalize will report; it is
// not cleared here. Local; FTI has no such call (VeloC's
// VELOC_Checkpoint_finished is the model). A nil runtime reports true and
// an error wrapping [ErrNilArgument].
//
// While the work is in flight, CheckpointDone yields the processor
// (runtime.Gosched) before it returns false: a solver that polls it from
// a busy loop lets the background goroutines, woken on its processor,
// run now instead of at the Go runtime's next preemption of the loop
// (every 10 ms), which is what paced the background work when the ranks
// outnumber GOMAXPROCS.
func (r *Runtime) CheckpointDone() (done bool, err error) {
	if err := r.usable("CheckpointDone"); err != nil {
		return true, err
	}
	if r.post.running != nil {
		// Below MPI_THREAD_MULTIPLE the poster's calls move only when
		// this goroutine serves them: once per poll.
		comm.Wait(r.c, closed)
		select {
		case res := <-r.post.running:
			r.applyPost(res)
		default:
			runtime.Gosched()
			return false, nil
		}
	}
	return true, r.post.err
}

// CheckpointWait blocks until the background post-processing of the last
// checkpoint has finished on this rank and returns its failure, if any
// (not cleared: the next Checkpoint or Finalize reports it too). Since
// every rank's post-processing commits collectively, when it returns nil
// the checkpoint is committed at its level on every rank. Local.
func (r *Runtime) CheckpointWait() error {
	if err := r.usable("CheckpointWait"); err != nil {
		return err
	}
	r.drainPost()
	return r.post.err
}
