package fileformat

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of the fileformat package. Errors about a file's content
// are returned as a *[CorruptionError] wrapping one of these, so callers
// match them with errors.Is and locate the damage with errors.As.
var (
	// ErrNotFTIFF is returned by [Open] when the file does not start with
	// the FTI-FF magic and does not end with an FTI-FF file block either:
	// it is some other kind of file.
	ErrNotFTIFF = errors.New("fileformat: not an FTI-FF file")
	// ErrVersion is returned by [Open] when the header and the file block
	// agree on a format version this package cannot read.
	ErrVersion = errors.New("fileformat: unsupported format version")
	// ErrTruncated is returned when the file is shorter than its own
	// structure says, or has no valid file block at its end (a write that
	// was cut before it finished).
	ErrTruncated = errors.New("fileformat: truncated file")
	// ErrHashMismatch is returned when a stored BLAKE3 hash (file block,
	// metadata, chunk, dCP block or file checksum) does not match the bytes.
	ErrHashMismatch = errors.New("fileformat: hash mismatch")
	// ErrCorrupt is returned when the file's structure is inconsistent
	// (sizes or offsets out of range, overlapping chunks, non-zero padding)
	// even though the hashes that cover it may match.
	ErrCorrupt = errors.New("fileformat: corrupt structure")
	// ErrNoVar is returned by [Reader.ReadVar] and [Reader.StoredSize]
	// for a variable id the file does not hold.
	ErrNoVar = errors.New("fileformat: no such variable")
	// ErrSize is returned by [Reader.ReadVar] when the destination buffer's
	// length differs from the variable's stored size.
	ErrSize = errors.New("fileformat: buffer size differs from stored size")
	// ErrInvalid is returned by [Write] for input it cannot write: duplicate
	// variable ids, a data length that is not a multiple of the element
	// size, an unknown element type, a name longer than 65535 bytes, a
	// metadata block larger than [MaxMetaSize], or a bad option value.
	ErrInvalid = errors.New("fileformat: invalid argument")
	// ErrUnhashed is returned by [Reader.Verify] for a file written with
	// [WithoutHash]: there is nothing to verify its data against.
	ErrUnhashed = errors.New("fileformat: file was written without chunk hashes")
	// ErrMovedOut is returned for a chunk whose bytes a Reader opened
	// [WithMoveOut] already handed over to a destination: they are no
	// longer in the file's memory.
	ErrMovedOut = errors.New("fileformat: chunk already moved out of the image")
)

// CorruptionError reports damage found in an FTI-FF file: which file,
// whose rank, which variable and chunk, and the byte offset in the file
// where the bad bytes start. Fields that do not apply are -1 (Rank, VarID,
// Chunk) or -1 (Offset, when no single offset can be named). Err is one of
// the package sentinels ([ErrTruncated], [ErrHashMismatch], [ErrCorrupt],
// [ErrNotFTIFF], [ErrVersion]), possibly wrapped with more detail.
type CorruptionError struct {
	Path   string
	Rank   int
	VarID  int32
	Chunk  int
	Offset int64
	Err    error
}

// Error describes the damage and where it is.
func (e *CorruptionError) Error() string {
	var b strings.Builder
	b.WriteString("fileformat: ")
	if e.Path != "" {
		b.WriteString(e.Path)
	} else {
		b.WriteString("<unnamed file>")
	}
	if e.Rank >= 0 {
		fmt.Fprintf(&b, ": rank %d", e.Rank)
	}
	if e.VarID >= 0 {
		fmt.Fprintf(&b, ": var %d", e.VarID)
	}
	if e.Chunk >= 0 {
		fmt.Fprintf(&b, ": chunk %d", e.Chunk)
	}
	if e.Offset >= 0 {
		fmt.Fprintf(&b, ": offset %d", e.Offset)
	}
	b.WriteString(": ")
	msg := e.Err.Error()
	b.WriteString(strings.TrimPrefix(msg, "fileformat: "))
	return b.String()
}

// Unwrap returns the underlying error.
func (e *CorruptionError) Unwrap() error { return e.Err }
