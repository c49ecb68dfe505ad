package levels

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/vfd"
)

// Intent markers: the durable note, ahead of a checkpoint's files, that
// the checkpoint is being written.

// writePending writes the intent marker of checkpoint seq in meta (rank 0),
// naming the job's nodes 0..nodes-1 (none when nodes is 0). Its name says
// that the checkpoint may have files; its content says on which nodes.
// Both are durable once this returns.
func writePending(meta Store, seq uint64, nodes int) error {
	err := createPending(meta, seq, nodes)
	if err == nil {
		if err = meta.Driver.SyncDir(meta.Dir); err != nil {
			err = fmt.Errorf("write intent marker %s: %w", meta.Path(PendingName(seq)), err)
		}
	}
	return err
}

// createPending creates the intent marker of checkpoint seq in meta,
// naming the nodes 0..nodes-1, and syncs it, without syncing the
// directory (rank 0).
func createPending(meta Store, seq uint64, nodes int) error {
	name := meta.Path(PendingName(seq))
	f, err := vfd.CreateTrunc(meta.Driver, name)
	if err == nil {
		var span []NodeRange
		if nodes > 0 {
			span = []NodeRange{{First: 0, Last: nodes - 1}}
		}
		_, err = f.WriteAt(pendingContent(seq, span), 0)
		if err == nil {
			err = f.Sync()
		}
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
	meta, log, nodes := e.env.Meta, e.env.Logger, e.numNodes() // not e.env in the goroutine: it is the caller's
	go func() {
		if done != 0 {
			if err := removeIfExists(meta.Driver, meta.Path(PendingName(done))); err != nil {
				log.Warn("removing the intent marker of a committed checkpoint; the next start-up removes it", zap.Uint64("seq", done), zap.Error(err))
			}
		}
		ch <- writePending(meta, seq, nodes)
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

// numNodes is the number of nodes of the job, 0 when unknown.
func (e *Engine) numNodes() int {
	if e.env.Topo == nil {
		return 0
	}
	return e.env.Topo.NumNodes()
}

// NodeRange is the nodes First..Last (node indices, as in
// ckpt_dir/node%04d), both included.
type NodeRange struct{ First, Last int }

// String returns "node0003" or "node0003-node0005".
func (r NodeRange) String() string {
	if r.First == r.Last {
		return fmt.Sprintf("node%04d", r.First)
	}
	return fmt.Sprintf("node%04d-node%04d", r.First, r.Last)
}

// maxPendingSize bounds the bytes read from an intent marker.
const maxPendingSize = 1 << 20

// pendingContent is the content of the intent marker of checkpoint seq
// whose files may be on the nodes of span: "ftigo-pending <seq>\n",
// then "nodes 0-3,7-7\n" unless span is empty.
//
// wire format: never change.
func pendingContent(seq uint64, span []NodeRange) []byte {
	b := fmt.Appendf(nil, "ftigo-pending %d\n", seq)
	if len(span) == 0 {
		return b
	}
	b = append(b, "nodes "...)
	for i, r := range span {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%d-%d", r.First, r.Last)
	}
	return append(b, '\n')
}

// parsePending returns the nodes the intent marker raw of checkpoint seq
// names. It returns false when it names none: a marker written before
// markers named nodes, or left empty by a crash (then the checkpoint's
// files are taken to be on the nodes of the job that cleans them, as
// before). The ranges come back sorted and disjoint.
func parsePending(raw []byte, seq uint64) ([]NodeRange, bool) {
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) != 2 || lines[0] != fmt.Sprintf("ftigo-pending %d", seq) {
		return nil, false
	}
	list, ok := strings.CutPrefix(lines[1], "nodes ")
	if !ok || list == "" {
		return nil, false
	}
	var span []NodeRange
	for _, part := range strings.Split(list, ",") {
		lo, hi, ok := strings.Cut(part, "-")
		first, err1 := strconv.Atoi(lo)
		last, err2 := strconv.Atoi(hi)
		if !ok || err1 != nil || err2 != nil || first < 0 || last < first ||
			(len(span) > 0 && first <= span[len(span)-1].Last) {
			return nil, false
		}
		span = append(span, NodeRange{First: first, Last: last})
	}
	return span, true
}

// outside returns the nodes of span that are not among 0..nodes-1.
func outside(span []NodeRange, nodes int) []NodeRange {
	var out []NodeRange
	for _, r := range span {
		if r.Last < nodes {
			continue
		}
		out = append(out, NodeRange{First: max(r.First, nodes), Last: r.Last})
	}
	return out
}
