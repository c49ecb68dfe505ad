package levels

import (
	"errors"
	"fmt"

	"github.com/ftigo/ftigo/vfd"
)

// Deletions that cannot reach every node.
//
// A job removes a deleted checkpoint's files on its own nodes and on the
// other nodes whose storage it sees. A checkpoint written by a job on
// more nodes may keep files on node-local storage this job cannot reach.
// Dropping the deletion marker then would leave those files with no
// metadata at all: a later job on those nodes would refuse them as lost
// metadata. So the deletion marker becomes an intent marker naming those
// nodes; a job on them finds the checkpoint uncommitted and removes it.

// unreached returns the nodes among 0..nodes-1 of a checkpoint that this
// job neither has nor sees: nodes beyond its own whose area
// (Config.NodeStore) does not exist from here. Nil when the job's node
// count is unknown. Local (rank 0).
func (e *Engine) unreached(nodes int) []NodeRange {
	own := e.numNodes()
	if own == 0 {
		return nil
	}
	var out []NodeRange
	for k := own; k < nodes; k++ {
		if e.cfg.NodeStore != nil {
			s := e.cfg.NodeStore(k)
			if _, err := s.Driver.Stat(s.Dir); err == nil {
				continue // seen from here: removed with the rest
			}
		}
		if n := len(out); n > 0 && out[n-1].Last == k-1 {
			out[n-1].Last = k
		} else {
			out = append(out, NodeRange{First: k, Last: k})
		}
	}
	return out
}

// endDeletion removes the deletion marker of checkpoint seq, whose files
// this job removed, once they were on nodes 0..nodes-1 (rank 0). When
// some of those nodes are out of reach, it first writes and syncs an
// intent marker naming them. The caller syncs the meta directory after
// the removal, or leaves it to the next start-up.
func (e *Engine) endDeletion(seq uint64, nodes int) error {
	meta := e.env.Meta
	if left := e.unreached(nodes); len(left) > 0 {
		p := meta.Path(PendingName(seq))
		if err := vfd.WriteFileAtomic(meta.Driver, p, pendingContent(seq, left)); err != nil {
			return err
		}
		if err := meta.Driver.SyncDir(meta.Dir); err != nil {
			return err
		}
		e.env.Logger.Warn(fmt.Sprintf("checkpoint %s was deleted on the nodes this job reaches; files may remain on %s: its intent marker %s stays until a job on them removes them",
			CheckpointDir(seq), joinRanges(left), p))
	}
	return removeIfExists(meta.Driver, meta.Path(DeletingName(seq)))
}

// endDeletions is [Engine.endDeletion] for each checkpoint of seqs whose
// deletion this job completed, with the node counts e.dropNodes holds.
func (e *Engine) endDeletions(seqs []uint64) error {
	var errs []error
	for _, seq := range seqs {
		errs = append(errs, e.endDeletion(seq, e.dropNodes[seq]))
		delete(e.dropNodes, seq)
	}
	return errors.Join(errs...)
}
