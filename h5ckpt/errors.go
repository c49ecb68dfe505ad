package h5ckpt

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of the h5ckpt package.
var (
	// ErrInvalid is input Write cannot store: bad variables, subsets that
	// do not fit their variables, dataset names HDF5 cannot hold side by
	// side, ranks that disagree. The message names the rank.
	ErrInvalid = errors.New("h5ckpt: invalid input")
	// ErrNotCheckpoint is an HDF5 file (or other file) that is not an
	// ftigo HDF5 checkpoint.
	ErrNotCheckpoint = errors.New("h5ckpt: not an ftigo HDF5 checkpoint")
	// ErrVersion is a checkpoint of a layout version this package does not know.
	ErrVersion = errors.New("h5ckpt: unsupported layout version")
	// ErrCorrupt is a checkpoint whose tables are inconsistent with each
	// other or with the HDF5 objects they describe.
	ErrCorrupt = errors.New("h5ckpt: corrupt checkpoint")
	// ErrHashMismatch is data or metadata that does not match its BLAKE3 hash.
	ErrHashMismatch = errors.New("h5ckpt: hash mismatch")
	// ErrNoVar is a variable the checkpoint does not hold.
	ErrNoVar = errors.New("h5ckpt: no such variable")
	// ErrFailed is returned on every rank when Write failed on some rank;
	// on the failing ranks it also wraps the local error.
	ErrFailed = errors.New("h5ckpt: checkpoint write failed")
)

// CorruptionError locates damage in a checkpoint file: the file, the old
// rank and variable (-1 when not about one) and the file offset (-1 when
// none applies).
type CorruptionError struct {
	Path   string
	Rank   int
	VarID  int32
	Offset int64
	Err    error
}

func (e *CorruptionError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "h5ckpt: %s", e.Path)
	if e.Rank >= 0 {
		fmt.Fprintf(&b, ": rank %d", e.Rank)
	}
	if e.VarID >= 0 {
		fmt.Fprintf(&b, ": var %d", e.VarID)
	}
	if e.Offset >= 0 {
		fmt.Fprintf(&b, ": offset %d", e.Offset)
	}
	fmt.Fprintf(&b, ": %s", strings.TrimPrefix(e.Err.Error(), "h5ckpt: "))
	return b.String()
}

// Unwrap returns the underlying error.
func (e *CorruptionError) Unwrap() error { return e.Err }
