package encode

import (
	"errors"
	"fmt"
)

// Errors returned by the encode package. Their texts carry no package
// prefix: they reach users inside ckpt's errors.
var (
	// ErrTooManyErasures is returned when more shards are lost than the
	// code tolerates; the *ErasureError wrapping it names the lost shards.
	// No data is ever returned in that case.
	ErrTooManyErasures = errors.New("too many erasures")
	// ErrBadShape is returned for shard counts out of range, shards of
	// unequal length and similar misuse.
	ErrBadShape = errors.New("bad shard shape")
	// ErrBadHeader is wrapped by a *CorruptionError for a parity file
	// header that cannot be decoded.
	ErrBadHeader = errors.New("bad parity header")
	// ErrHashMismatch is wrapped by a *CorruptionError when a shard or a
	// parity payload does not match its recorded BLAKE3 hash.
	ErrHashMismatch = errors.New("hash mismatch")
)

// ErasureError reports an unrecoverable erasure pattern. It unwraps to
// [ErrTooManyErasures].
type ErasureError struct {
	K, M int
	// Lost lists the lost shard indices: 0..K-1 are data, K..K+M-1 parity.
	Lost []int
}

// Error names the lost shards.
func (e *ErasureError) Error() string {
	return fmt.Sprintf("too many erasures: %d of %d shards lost (data+parity, %d data), at most %d tolerated; lost shards %v",
		len(e.Lost), e.K+e.M, e.K, e.M, e.Lost)
}

// Unwrap returns [ErrTooManyErasures].
func (e *ErasureError) Unwrap() error { return ErrTooManyErasures }

// CorruptionError reports a damaged parity file or shard: path, offset and
// cause.
type CorruptionError struct {
	Path   string
	Offset int64
	Err    error
}

// Error returns "corrupt PATH at offset O: CAUSE".
func (e *CorruptionError) Error() string {
	return fmt.Sprintf("corrupt %s at offset %d: %v", e.Path, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *CorruptionError) Unwrap() error { return e.Err }
