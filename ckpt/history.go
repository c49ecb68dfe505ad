package ckpt

import (
	"errors"
	"io/fs"
	"path"
	"sync"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/internal/policy"
	"github.com/ftigo/ftigo/vfd"
)

// historyKeeper is rank 0's copy of the run's history
// (meta_dir/ftigo.history, policy.History). It is rewritten atomically
// (vfd.WriteFileAtomic) by a goroutine of its own, so the solver never
// waits for the file: save hands it the newest encoding, and a crash
// loses at most the records since the last write. close writes what is
// pending and stops the goroutine.
type historyKeeper struct {
	h    *policy.History
	drv  vfd.Driver
	name string
	log  *zap.Logger

	mu      sync.Mutex
	pending []byte // the newest encoding not yet written, nil: none
	wake    chan struct{}
	done    chan struct{}
	warned  bool
}

// historyPath is the history file of meta directory dir.
func historyPath(dir string) string { return path.Join(dir, policy.HistoryName) }

// openHistory reads the history of meta directory dir. A missing file is
// an empty history. A damaged one is moved aside (name.broken) with a
// warning: the history only tunes the interval, it never stops a run.
func openHistory(drv vfd.Driver, dir string, log *zap.Logger) *historyKeeper {
	k := &historyKeeper{h: &policy.History{}, drv: drv, name: historyPath(dir), log: log}
	raw, err := vfd.ReadFileLimit(drv, k.name, policy.MaxHistorySize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return k
	case err == nil:
		h, derr := policy.UnmarshalHistory(raw)
		if derr == nil {
			k.h = h
			return k
		}
		err = derr
	}
	broken := k.name + ".broken"
	rerr := drv.Rename(k.name, broken)
	log.Warn("run history unreadable: starting a new one (the interval is learnt again)",
		zap.String("path", k.name), zap.Error(err), zap.NamedError("move-aside", rerr), zap.String("moved-to", broken))
	return k
}

// save queues the current history for writing.
func (k *historyKeeper) save() {
	b, err := k.h.Marshal()
	if err != nil {
		k.warn(err)
		return
	}
	k.mu.Lock()
	k.pending = b
	if k.wake == nil {
		k.wake, k.done = make(chan struct{}, 1), make(chan struct{})
		go k.writer(k.wake, k.done)
	}
	select {
	case k.wake <- struct{}{}:
	default:
	}
	k.mu.Unlock()
}

// writer writes the newest encoding each time it is woken, until wake
// is closed; then it closes done.
func (k *historyKeeper) writer(wake <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for range wake {
		k.flush()
	}
}

// flush writes what is pending, if anything.
func (k *historyKeeper) flush() {
	k.mu.Lock()
	b := k.pending
	k.pending = nil
	k.mu.Unlock()
	if b == nil {
		return
	}
	if err := vfd.WriteFileAtomic(k.drv, k.name, b); err != nil {
		k.warn(err)
	}
}

func (k *historyKeeper) warn(err error) {
	k.mu.Lock()
	first := !k.warned
	k.warned = true
	k.mu.Unlock()
	if first {
		k.log.Warn("run history not written (ftigo stats and ckpt_interval = auto will lack the newest records)",
			zap.String("path", k.name), zap.Error(err))
	}
}

// close writes what is pending and stops the writer.
func (k *historyKeeper) close() {
	k.mu.Lock()
	wake, done := k.wake, k.done
	k.wake, k.done = nil, nil
	k.mu.Unlock()
	if wake != nil {
		close(wake)
		<-done
	}
	k.flush()
}
