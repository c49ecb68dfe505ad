package levels

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/ftigo/ftigo/vfd"
)

// Sentinel errors of the levels package. Their texts carry no package
// prefix: they reach users inside ckpt's errors, which say "ckpt: " once.
var (
	// ErrNoCheckpoint is returned by recovery when no committed checkpoint
	// exists at all.
	ErrNoCheckpoint = errors.New("no committed checkpoint")
	// ErrUnrecoverable is returned by recovery when committed checkpoints
	// exist but none can be recovered on every rank; the error also names
	// why each one failed.
	ErrUnrecoverable = errors.New("no recoverable checkpoint")
	// ErrBadManifest is wrapped by a *CorruptionError for a manifest that
	// cannot be decoded or whose hash does not match.
	ErrBadManifest = errors.New("bad manifest")
	// ErrMissingFile is returned when a file a manifest lists is absent.
	ErrMissingFile = errors.New("checkpoint file missing")
	// ErrSizeMismatch is returned when a file's size differs from its manifest entry.
	ErrSizeMismatch = errors.New("checkpoint file size mismatch")
	// ErrDigestMismatch is returned when a file's digest differs from its manifest entry.
	ErrDigestMismatch = errors.New("checkpoint file digest mismatch")
	// ErrVoteFailed is returned on every rank when the commit vote fails
	// because some rank could not write or protect its files.
	ErrVoteFailed = errors.New("checkpoint rejected")
	// ErrLevelUnavailable is returned for a level number with no
	// implementation registered.
	ErrLevelUnavailable = errors.New("level not available")
	// ErrDigestNotRecorded is returned when a [DataReader] level's Protect
	// succeeded without recording the data digest left to it.
	ErrDigestNotRecorded = errors.New("level did not record the data digest")
	// ErrMetadataLost is returned by [Engine.Open] when a checkpoint has
	// no valid manifest copy and no marker saying it was being written or
	// deleted, yet files or damaged copies of it exist: its metadata was
	// lost. The error names the checkpoint, the copies and the surviving
	// files; nothing is changed on disk.
	ErrMetadataLost = errors.New("checkpoint metadata lost")
	// ErrBadParent is returned by [Engine.Checkpoint] for a differential
	// checkpoint whose parent is not a recoverable committed checkpoint at
	// the same level with the same dCP block size.
	ErrBadParent = errors.New("differential checkpoint on an unusable parent")
	// ErrMissingLayer is returned for a differential checkpoint whose
	// chain holds a checkpoint that is not committed.
	ErrMissingLayer = errors.New("a checkpoint of the chain is missing")
	// ErrInUse is returned by [Engine.Delete] for a checkpoint that a
	// committed differential checkpoint depends on.
	ErrInUse = errors.New("a differential checkpoint depends on this checkpoint")
	// ErrTopologyMismatch is returned when a checkpoint was written with a
	// rank count or node layout the current run cannot map onto.
	ErrTopologyMismatch = errors.New("topology does not match checkpoint")
)

// CorruptionError describes damaged checkpoint data: which file, whose
// rank, where, and why (Err wraps one of the sentinels).
type CorruptionError struct {
	Path   string
	Rank   int // the rank whose data the file holds, -1 if none
	Offset int64
	Err    error
}

// Error names the path once: a cause that names it already (an I/O
// error) is not preceded by it. A missing file has no offset.
func (e *CorruptionError) Error() string {
	what := e.Path
	if e.Rank >= 0 {
		what += fmt.Sprintf(" (rank %d)", e.Rank)
	}
	if vfd.ErrorNames(e.Err, e.Path) {
		what = "file"
		if e.Rank >= 0 {
			what = fmt.Sprintf("rank %d's file", e.Rank)
		}
	}
	if errors.Is(e.Err, ErrMissingFile) || errors.Is(e.Err, fs.ErrNotExist) {
		return fmt.Sprintf("%s: %v", what, e.Err)
	}
	return fmt.Sprintf("%s at offset %d: %v", what, e.Offset, e.Err)
}

// Unwrap returns the underlying error.
func (e *CorruptionError) Unwrap() error { return e.Err }
