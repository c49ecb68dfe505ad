package partner

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/ftigo/ftigo/vfd"
)

// Errors returned by topology construction and validation. Their texts
// carry no package prefix: they reach users inside ckpt's errors.
var (
	// ErrBadRanks is returned when the number of ranks is not a positive
	// multiple of node_size: change node_size or the number of ranks.
	ErrBadRanks = errors.New("number of ranks is not a multiple of node_size")
	// ErrBadNodeSize is returned when a node does not hold exactly node_size
	// ranks: launch node_size ranks on every node or change node_size.
	ErrBadNodeSize = errors.New("a node does not hold exactly node_size ranks")
	// ErrBadGroupSize is returned when the number of nodes is not a positive
	// multiple of group_size: change group_size or the number of nodes.
	ErrBadGroupSize = errors.New("number of nodes is not a multiple of group_size")
	// ErrGroupTooSmall is returned by [Topology.Validate] when L2 or L3 is
	// requested with a group of fewer than two nodes: raise group_size.
	ErrGroupTooSmall = errors.New("group too small for L2/L3 (group_size must be at least 2)")
	// ErrBadTable is returned when a stored node table cannot be parsed or
	// does not match the current run.
	ErrBadTable = errors.New("bad node table")
	// ErrBadArgument is returned for out-of-range ranks, nodes or groups and
	// mismatched lengths.
	ErrBadArgument = errors.New("bad argument")
	// ErrHashMismatch is returned when a transferred or rebuilt file does not
	// match its recorded BLAKE3 hash.
	ErrHashMismatch = errors.New("hash mismatch")
	// ErrUnrecoverable is returned when a group has lost more than it can
	// tolerate; the error names the ranks whose data is gone.
	ErrUnrecoverable = errors.New("data unrecoverable")
)

// CorruptionError reports a damaged file: which file, whose data, at what
// offset, and why. It unwraps to the cause (often [ErrHashMismatch]).
type CorruptionError struct {
	Path   string
	Rank   int
	Offset int64
	Err    error
}

// Error returns "corrupt PATH (rank R) at offset O: CAUSE", or "missing
// PATH (rank R): CAUSE" when the file does not exist. A cause that names
// the path already (an I/O error) is not preceded by it: "missing file of
// rank R: open PATH: no such file or directory".
func (e *CorruptionError) Error() string {
	what := fmt.Sprintf("%s (rank %d)", e.Path, e.Rank)
	if vfd.ErrorNames(e.Err, e.Path) {
		what = fmt.Sprintf("file of rank %d", e.Rank)
	}
	if errors.Is(e.Err, fs.ErrNotExist) {
		return fmt.Sprintf("missing %s: %v", what, e.Err)
	}
	return fmt.Sprintf("corrupt %s at offset %d: %v", what, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *CorruptionError) Unwrap() error { return e.Err }
