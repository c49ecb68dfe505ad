package ckpt

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/internal/levels"
)

// Background compaction of differential chains (docs/format/dcp.md).
//
// A chain that reaches dcp_stack_size layers cannot take one more delta.
// With a background worker (some inline_lN = 0) the checkpoint that
// completed it starts a compaction after its own post-processing, in the
// same job: the rank's background goroutine writes the chain's image (read
// from the chain, every block verified) as a new full checkpoint with the
// tip's id, over its private communicator. At a level whose
// post-processing is asynchronous the image is committed at L1 and
// raised to the level as any checkpoint is: by the poster, or by the
// heads with head = 1. Retention then drops the chain. The next
// differential checkpoint builds on the compacted one. Without a
// background worker the checkpoint that would exceed the stack is
// written full on the solver's path instead (dcpParent).
//
// A compaction that fails leaves the chain as it was, committed and
// recoverable: it is logged, not reported as a failed checkpoint, and
// the next differential request at that level is taken full.

// compactLater reports whether committed checkpoint m completes a chain
// that a background compaction is to replace.
func (r *Runtime) compactLater(m *levels.Manifest) bool {
	return r.cfg.EnableDCP && r.post.c != nil && m.DCP != nil && m.Layers() >= r.cfg.DCPStackSize
}

// compactJob is what a background compaction needs beyond the poster.
type compactJob struct {
	layers int
	// at is where the image is committed: the chain's level, or L1 when
	// that level's post-processing is asynchronous (raised afterwards).
	at    func(lvl levels.ID) levels.ID
	stats levels.DataStats
}

// compactJobFor prepares the compaction of m's chain (m raised to
// raiseTo first, when not 0).
func (r *Runtime) compactJobFor(m *levels.Manifest, raiseTo levels.ID) *compactJob {
	img := r.images[m.Seq]
	async := map[levels.ID]bool{}
	for l := levels.L2; l <= levels.L4; l++ {
		async[l] = r.asyncLevel(l)
	}
	return &compactJob{
		layers: m.Layers(),
		at: func(lvl levels.ID) levels.ID {
			if async[lvl] {
				return levels.L1
			}
			return lvl
		},
		stats: fullStats(img.Summary, img.Summary.Stored != img.Summary.Logical || m.Compressed != nil),
	}
}

// compact runs job on m, the chain's committed tip, in the background
// goroutine, and returns the checkpoint that replaces it (m itself when
// the compaction failed) and whether the engine already holds it. With
// adopt, m was raised by the heads and is adopted first. Collective over
// the poster's communicators.
func (w *poster) compact(job *compactJob, m *levels.Manifest, adopt bool) (*levels.Manifest, bool) {
	if adopt {
		if err := w.eng.AdoptRaised(m, w.pc); err != nil {
			w.compactFailed(m, job, err)
			return m, false
		}
	}
	start := w.now()
	lvl := m.Level
	at := job.at(lvl)
	stats := job.stats
	nm, st, err := w.eng.Compact(m, at, w.pc, levels.WithDataStats(func() levels.DataStats { return stats }))
	if err != nil {
		w.compactFailed(m, job, err)
		return m, adopt
	}
	if at != lvl {
		var up *levels.Manifest
		if w.node != nil {
			req, rerr := w.reqOf(nm, lvl)
			if up, err = w.headRaise(nm, lvl, req, rerr, false); err == nil {
				err = w.eng.AdoptRaised(up, w.pc)
			}
		} else {
			up, err = w.raise(nm, lvl)
		}
		if err != nil {
			// The compacted image stays committed at L1, newer than the
			// chain: a restart takes it, the same data.
			if w.rank == 0 {
				w.log.Warn(fmt.Sprintf("Ckpt. ID %d: its chain of %d layers at %v was compacted at L1, but raising the copy to %v failed; the chain stays at %v: %v",
					m.ID, job.layers, lvl, lvl, lvl, err), zap.Int64("ckpt-id", m.ID), zap.Stringer("ckpt-level", lvl))
			}
			return nm, true
		}
		nm = up
	}
	if w.rank == 0 {
		wall := w.now().Sub(start)
		w.log.Info(fmt.Sprintf("Ckpt. ID %d: its chain of %d layers at %v compacted in the background into a full checkpoint in %.3f sec. (Wr %.3f, Ps %.3f, Cm %.3f)",
			m.ID, job.layers, lvl, wall.Seconds(), st.Write.Seconds(), st.Protect.Seconds(), st.Commit.Seconds()),
			zap.Int64("ckpt-id", m.ID), zap.Stringer("ckpt-level", lvl), zap.Int("dcp-layers", job.layers), zap.Duration("compact-wall", wall))
	}
	return nm, true
}

// compactFailed logs a failed compaction of m's chain (rank 0): the chain
// stays, committed.
func (w *poster) compactFailed(m *levels.Manifest, job *compactJob, err error) {
	if w.rank == 0 {
		w.log.Warn(fmt.Sprintf("Ckpt. ID %d: compacting its chain of %d layers at %v in the background failed; the chain stays committed and the next differential checkpoint at %v is written full: %v",
			m.ID, job.layers, m.Level, m.Level, err), zap.Int64("ckpt-id", m.ID), zap.Stringer("ckpt-level", m.Level))
	}
}
