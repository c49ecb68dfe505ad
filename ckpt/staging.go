package ckpt

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/vfd"
)

// StageStatus is the state of a staging request, with FTI's FTI_SI_*
// values.
type StageStatus int

// Staging request states (FTI_SI_NINI .. FTI_SI_FAIL).
const (
	// StageUnknown: no such request (FTI_SI_NINI).
	StageUnknown StageStatus = 0
	// StagePending: queued, not started (FTI_SI_PEND).
	StagePending StageStatus = 1
	// StageActive: being copied (FTI_SI_ACTV).
	StageActive StageStatus = 2
	// StageDone: the copy is durable at its destination (FTI_SI_SCES).
	StageDone StageStatus = 3
	// StageFailed: the copy failed; nothing is left at the destination
	// (FTI_SI_FAIL).
	StageFailed StageStatus = 4
)

// String returns "pending", "active", "done", "failed" or "unknown".
func (s StageStatus) String() string {
	switch s {
	case StagePending:
		return "pending"
	case StageActive:
		return "active"
	case StageDone:
		return "done"
	case StageFailed:
		return "failed"
	}
	return "unknown"
}

// stageDirName is the staging directory inside the node-local area.
const stageDirName = "stage"

// stager copies files from node-local to global storage in the
// background, one at a time, in the order they were queued.
type stager struct {
	mu    sync.Mutex
	cond  *sync.Cond
	reqs  []*stageReq // by id
	queue []*stageReq
	idle  bool // no worker running
	busy  int  // requests not finished
}

type stageReq struct {
	id       int
	src, dst string
	status   StageStatus
	err      error
}

// StageDir returns this rank's staging directory,
// ckpt_dir/node%04d/<run>/stage (FTI_GetStageDir), creating it: files put there are removed at
// Finalize. Local; without enable_staging it returns an error wrapping
// [ErrStaging].
func (r *Runtime) StageDir() (string, error) {
	if err := r.stagingUsable("StageDir"); err != nil {
		return "", err
	}
	dir := r.env.Local.Path(stageDirName)
	if err := r.env.Local.Driver.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("ckpt: staging directory %s: %w", dir, err)
	}
	return dir, nil
}

func (r *Runtime) stagingUsable(call string) error {
	if err := r.usable(call); err != nil {
		return err
	}
	if !r.cfg.EnableStaging {
		return fmt.Errorf("%w: %s needs enable_staging = 1", ErrStaging, call)
	}
	return nil
}

// SendFile queues a copy of the node-local file local (read through the
// local driver) to remote on global storage (through the global driver;
// a relative path is taken inside glbl_dir) and returns the request's id
// (FTI_SendFile). The copy is made in the background, one request at a
// time in queue order, in transfer_size pieces, to remote+".tmp", synced,
// renamed into place and its directory synced: remote is either absent
// (or as it was) or complete. The source is left alone. Local; without
// enable_staging it returns an error wrapping [ErrStaging]. Unlike FTI,
// which copies in the head rank or synchronously without one, ftigo
// always copies in a goroutine of the rank.
func (r *Runtime) SendFile(local, remote string) (int, error) {
	if err := r.stagingUsable("SendFile"); err != nil {
		return -1, err
	}
	if local == "" || remote == "" {
		return -1, fmt.Errorf("%w: SendFile(%q, %q): empty path", ErrStaging, local, remote)
	}
	if !path.IsAbs(remote) {
		remote = path.Join(r.cfg.GlblDir, remote) // glbl_dir itself: staged files are outputs, not the run's
	}
	s := &r.stage
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cond == nil {
		s.cond = sync.NewCond(&s.mu)
		s.idle = true
	}
	q := &stageReq{id: len(s.reqs), src: local, dst: remote, status: StagePending}
	s.reqs = append(s.reqs, q)
	s.queue = append(s.queue, q)
	s.busy++
	if s.idle {
		s.idle = false
		go r.stageWorker()
	}
	return q.id, nil
}

// stageWorker copies the queued requests until the queue is empty.
func (r *Runtime) stageWorker() {
	s := &r.stage
	local, global, piece, log := r.env.Local.Driver, r.env.Global.Driver, r.cfg.TransferSize, r.log
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.idle = true
			s.mu.Unlock()
			return
		}
		q := s.queue[0]
		s.queue = s.queue[1:]
		q.status = StageActive
		s.mu.Unlock()

		err := stageCopy(global, q.dst, local, q.src, piece)
		s.mu.Lock()
		if err != nil {
			q.status, q.err = StageFailed, fmt.Errorf("ckpt: staging request %d (%s -> %s): %w", q.id, q.src, q.dst, err)
			log.Warn("staging failed", zap.Int("request", q.id), zap.Error(q.err))
		} else {
			q.status = StageDone
			log.Debug("staged", zap.Int("request", q.id), zap.String("from", q.src), zap.String("to", q.dst))
		}
		s.busy--
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// stageCopy copies src to dst atomically: dst.tmp, sync, rename, sync dir.
func stageCopy(dd vfd.Driver, dst string, sd vfd.Driver, src string, piece int) error {
	if err := dd.MkdirAll(path.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if _, err := vfd.CopyFile(dd, tmp, sd, src, piece); err != nil {
		return errors.Join(err, removeQuiet(dd, tmp))
	}
	if err := dd.Rename(tmp, dst); err != nil {
		return errors.Join(err, removeQuiet(dd, tmp))
	}
	return dd.SyncDir(path.Dir(dst))
}

func removeQuiet(d vfd.Driver, name string) error {
	if err := d.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// StageStatus returns the state of staging request id
// (FTI_GetStageStatus) and, for a failed one, why. An id never returned
// by SendFile is StageUnknown. Local.
func (r *Runtime) StageStatus(id int) (StageStatus, error) {
	if err := r.stagingUsable("StageStatus"); err != nil {
		return StageUnknown, err
	}
	s := &r.stage
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 0 || id >= len(s.reqs) {
		return StageUnknown, nil
	}
	q := s.reqs[id]
	return q.status, q.err
}

// StageWait blocks until staging request id has finished and returns its
// failure, if any; an id never returned by SendFile is an error wrapping
// [ErrStaging]. Local.
func (r *Runtime) StageWait(id int) error {
	if err := r.stagingUsable("StageWait"); err != nil {
		return err
	}
	s := &r.stage
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 0 || id >= len(s.reqs) {
		return fmt.Errorf("%w: no staging request %d", ErrStaging, id)
	}
	q := s.reqs[id]
	for q.status == StagePending || q.status == StageActive {
		s.cond.Wait()
	}
	return q.err
}

// drainStaging waits for every queued staging request (Finalize, Close).
func (r *Runtime) drainStaging() {
	s := &r.stage
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.busy > 0 {
		s.cond.Wait()
	}
}

// cleanStageDir removes the staging directory (Finalize, after a
// barrier), as FTI does: the node's first rank, once every rank's copies
// are done.
func (r *Runtime) cleanStageDir() {
	if !r.cfg.EnableStaging || r.topo.LocalIndex(r.c.Rank()) != 0 {
		return
	}
	dir := r.env.Local.Path(stageDirName)
	if err := r.env.Local.Driver.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Warn("removing the staging directory", zap.String("dir", dir), zap.Error(err))
	}
}
