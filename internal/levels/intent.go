package levels

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/vfd"
)

// Intent markers: the durable note, ahead of a checkpoint's files, that
// the checkpoint is being written.

// writePending writes the intent marker of checkpoint seq in meta (rank 0).
// Only its name counts, so only the directory entry is made durable: a
// crash may leave it empty, never absent once this returns.
func writePending(meta Store, seq uint64) error {
	err := createPending(meta, seq)
	if err == nil {
		if err = meta.Driver.SyncDir(meta.Dir); err != nil {
			err = fmt.Errorf("write intent marker %s: %w", meta.Path(PendingName(seq)), err)
		}
	}
	return err
}

// createPending creates the intent marker of checkpoint seq in meta
// without syncing the directory (rank 0).
func createPending(meta Store, seq uint64) error {
	name := meta.Path(PendingName(seq))
	f, err := vfd.CreateTrunc(meta.Driver, name)
	if err == nil {
		_, err = f.WriteAt([]byte(fmt.Sprintf("ftigo-pending %d\n", seq)), 0)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		return vfd.WrapPath(err, "write intent marker", name)
	}
	return nil
}

// waitMarking blocks until the intent marker written ahead (rank 0) is
// durable or failed, and records the result for [Engine.takeIntent].
func (e *Engine) waitMarking() {
	if e.marking != nil {
		e.markErr = <-e.marking
		e.marking = nil
	}
}

// premark starts writing the intent marker of checkpoint seq, the next
// one, and syncing the meta directory, in the background on rank 0 —
// after removing the marker of checkpoint done (0: none), which the same
// sync makes durable — so that the next [Engine.Checkpoint] finds it
// durable and writes its data under the final names at once. Every rank
// records seq. Local.
func (e *Engine) premark(seq, done uint64) {
	e.intent, e.markErr = seq, nil
	if e.env.Rank != 0 {
		return
	}
	ch := make(chan error, 1)
	e.marking = ch
	meta, log := e.env.Meta, e.env.Logger // not e.env in the goroutine: it is the caller's
	go func() {
		if done != 0 {
			if err := removeIfExists(meta.Driver, meta.Path(PendingName(done))); err != nil {
				log.Warn("removing the intent marker of a committed checkpoint; the next start-up removes it", zap.Uint64("seq", done), zap.Error(err))
			}
		}
		ch <- writePending(meta, seq)
	}()
}

// takeIntent reports, identically on every rank, whether the intent
// marker of checkpoint seq was made durable ahead ([Engine.premark]):
// rank 0 waits for its background write, then every rank votes (one
// integer). Collective when a marker was written ahead for seq, local
// otherwise; either way the marker is taken (a later call returns false).
func (e *Engine) takeIntent(seq uint64) (bool, error) {
	if e.intent != seq {
		e.intent = 0
		return false, nil
	}
	e.intent = 0
	e.waitMarking()
	local := e.markErr
	e.markErr = nil
	ok, err := vote(e.env.Comm, local == nil)
	if err != nil {
		return false, err
	}
	if local != nil {
		e.env.Logger.Warn("the intent marker written ahead failed; it is written again beside the data", zap.Uint64("seq", seq), zap.Error(local))
	}
	return ok, nil
}

// dropIntent removes the intent marker written ahead, if any, once it is
// durable (rank 0).
func (e *Engine) dropIntent() {
	e.waitMarking()
	if e.intent != 0 && e.env.Rank == 0 {
		if err := removeIfExists(e.env.Meta.Driver, e.env.Meta.Path(PendingName(e.intent))); err != nil {
			e.env.Logger.Warn("removing the intent marker written ahead; the next start-up removes it", zap.Error(err))
		}
	}
	e.intent, e.markErr = 0, nil
}
