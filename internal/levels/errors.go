package levels

import (
	"errors"
	"fmt"
)

// Sentinel errors of the levels package.
var (
	// ErrNoCheckpoint is returned by recovery when no committed checkpoint
	// exists at all.
	ErrNoCheckpoint = errors.New("levels: no committed checkpoint")
	// ErrUnrecoverable is returned by recovery when committed checkpoints
	// exist but none can be recovered on every rank; the error also names
	// why each one failed.
	ErrUnrecoverable = errors.New("levels: no recoverable checkpoint")
	// ErrBadManifest is wrapped by a *CorruptionError for a manifest that
	// cannot be decoded or whose hash does not match.
	ErrBadManifest = errors.New("levels: bad manifest")
	// ErrMissingFile is returned when a file a manifest lists is absent.
	ErrMissingFile = errors.New("levels: checkpoint file missing")
	// ErrSizeMismatch is returned when a file's size differs from its manifest entry.
	ErrSizeMismatch = errors.New("levels: checkpoint file size mismatch")
	// ErrDigestMismatch is returned when a file's digest differs from its manifest entry.
	ErrDigestMismatch = errors.New("levels: checkpoint file digest mismatch")
	// ErrVoteFailed is returned on every rank when the commit vote fails
	// because some rank could not write or protect its files.
	ErrVoteFailed = errors.New("levels: checkpoint rejected (a rank failed)")
	// ErrLevelUnavailable is returned for a level number with no
	// implementation registered.
	ErrLevelUnavailable = errors.New("levels: level not available")
	// ErrDigestNotRecorded is returned when a [DataReader] level's Protect
	// succeeded without recording the data digest left to it.
	ErrDigestNotRecorded = errors.New("levels: level did not record the data digest")
	// ErrMetadataLost is returned by [Engine.Open] when a checkpoint has
	// no valid manifest copy and no marker saying it was being written or
	// deleted, yet files or damaged copies of it exist: its metadata was
	// lost. The error names the checkpoint, the copies and the surviving
	// files; nothing is changed on disk.
	ErrMetadataLost = errors.New("levels: checkpoint metadata lost")
	// ErrBadParent is returned by [Engine.Checkpoint] for a differential
	// checkpoint whose parent is not a recoverable committed checkpoint at
	// the same level with the same dCP block size.
	ErrBadParent = errors.New("levels: differential checkpoint on an unusable parent")
	// ErrMissingLayer is returned for a differential checkpoint whose
	// chain holds a checkpoint that is not committed.
	ErrMissingLayer = errors.New("levels: a checkpoint of the chain is missing")
	// ErrInUse is returned by [Engine.Delete] for a checkpoint that a
	// committed differential checkpoint depends on.
	ErrInUse = errors.New("levels: a differential checkpoint depends on this checkpoint")
	// ErrTopologyMismatch is returned when a checkpoint was written with a
	// rank count or node layout the current run cannot map onto.
	ErrTopologyMismatch = errors.New("levels: topology does not match checkpoint")
)

// CorruptionError describes damaged checkpoint data: which file, whose
// rank, where, and why (Err wraps one of the sentinels).
type CorruptionError struct {
	Path   string
	Rank   int // the rank whose data the file holds, -1 if none
	Offset int64
	Err    error
}

func (e *CorruptionError) Error() string {
	if e.Rank >= 0 {
		return fmt.Sprintf("%s (rank %d) at offset %d: %v", e.Path, e.Rank, e.Offset, e.Err)
	}
	return fmt.Sprintf("%s at offset %d: %v", e.Path, e.Offset, e.Err)
}

// Unwrap returns the underlying error.
func (e *CorruptionError) Unwrap() error { return e.Err }
