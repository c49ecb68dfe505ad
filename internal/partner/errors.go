package partner

import (
	"errors"
	"fmt"
	"io/fs"
)

// Errors returned by topology construction and validation.
var (
	// ErrBadRanks is returned when the number of ranks is not a positive
	// multiple of node_size: change node_size or the number of ranks.
	ErrBadRanks = errors.New("partner: number of ranks is not a multiple of node_size")
	// ErrBadNodeSize is returned when a node does not hold exactly node_size
	// ranks: launch node_size ranks on every node or change node_size.
	ErrBadNodeSize = errors.New("partner: a node does not hold exactly node_size ranks")
	// ErrBadGroupSize is returned when the number of nodes is not a positive
	// multiple of group_size: change group_size or the number of nodes.
	ErrBadGroupSize = errors.New("partner: number of nodes is not a multiple of group_size")
	// ErrGroupTooSmall is returned by [Topology.Validate] when L2 or L3 is
	// requested with a group of fewer than two nodes: raise group_size.
	ErrGroupTooSmall = errors.New("partner: group too small for L2/L3 (group_size must be at least 2)")
	// ErrBadTable is returned when a stored node table cannot be parsed or
	// does not match the current run.
	ErrBadTable = errors.New("partner: bad node table")
	// ErrBadArgument is returned for out-of-range ranks, nodes or groups and
	// mismatched lengths.
	ErrBadArgument = errors.New("partner: bad argument")
	// ErrHashMismatch is returned when a transferred or rebuilt file does not
	// match its recorded BLAKE3 hash.
	ErrHashMismatch = errors.New("partner: hash mismatch")
	// ErrUnrecoverable is returned when a group has lost more than it can
	// tolerate; the error names the ranks whose data is gone.
	ErrUnrecoverable = errors.New("partner: data unrecoverable")
)

// CorruptionError reports a damaged file: which file, whose data, at what
// offset, and why. It unwraps to the cause (often [ErrHashMismatch]).
type CorruptionError struct {
	Path   string
	Rank   int
	Offset int64
	Err    error
}

// Error returns "partner: corrupt PATH (rank R) at offset O: CAUSE", or
// "partner: missing PATH (rank R): CAUSE" when the file does not exist.
func (e *CorruptionError) Error() string {
	if errors.Is(e.Err, fs.ErrNotExist) {
		return fmt.Sprintf("partner: missing %s (rank %d): %v", e.Path, e.Rank, e.Err)
	}
	return fmt.Sprintf("partner: corrupt %s (rank %d) at offset %d: %v", e.Path, e.Rank, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *CorruptionError) Unwrap() error { return e.Err }
