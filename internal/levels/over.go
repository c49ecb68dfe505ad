package levels

import "github.com/ftigo/ftigo/comm"

// CheckpointOver is [Engine.Checkpoint] with c, when not nil, in place of
// the environment's communicator for every collective call, as for
// [Engine.Raise]. ckpt's snapshot mode writes a checkpoint from its
// staging copy this way, in a background goroutine of the rank, over a
// private communicator whose messages never mix with the solver's. While
// it runs, no other method of the engine may be called. Collective over c.
func (e *Engine) CheckpointOver(c comm.Comm, id int64, lvl ID, write WriteFunc, opts ...CheckpointOption) (*Manifest, Stats, error) {
	if c != nil {
		e.Wait()
		defer e.useComm(c)()
	}
	return e.Checkpoint(id, lvl, write, opts...)
}
