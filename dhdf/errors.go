package dhdf

import (
	"errors"
	"fmt"
)

// Sentinel errors of the dhdf package; match them with errors.Is. Errors
// from the HDF5 layer (h5.ErrChecksum, h5.ErrTruncated, ...) are wrapped
// unchanged.
var (
	// ErrNotSet is returned when a file lacks the DHDF attributes or tables.
	ErrNotSet = errors.New("dhdf: not a distributed HDF set file")
	// ErrMissingFile is returned by Open when a file listed in File_Info is
	// absent; it also wraps fs.ErrNotExist.
	ErrMissingFile = errors.New("dhdf: file of the set is missing")
	// ErrForeignFile is returned when a listed file carries another set id or file id.
	ErrForeignFile = errors.New("dhdf: file belongs to another set")
	// ErrInconsistent is returned when the chunk tables, the virtual dataset
	// mappings and the chunk datasets disagree.
	ErrInconsistent = errors.New("dhdf: inconsistent set metadata")
	// ErrChecksum is returned when a chunk's data does not match its CRC32C attribute.
	ErrChecksum = errors.New("dhdf: chunk data checksum mismatch")
	// ErrNotFound is returned for an unknown SDS or chunk name.
	ErrNotFound = errors.New("dhdf: no such SDS or chunk")
	// ErrInvalid is returned for arguments the writer cannot store (bad
	// names, shapes, types, chunks outside their SDS, overlapping chunks).
	ErrInvalid = errors.New("dhdf: invalid argument")
	// ErrTooLarge is returned when reading a whole SDS would exceed Options.MaxRead.
	ErrTooLarge = errors.New("dhdf: SDS larger than the read limit")
	// ErrVote is returned on every rank when a parallel write failed on some rank.
	ErrVote = errors.New("dhdf: a rank failed to write its files")
	// ErrClosed is returned by a Writer or Set used after Close.
	ErrClosed = errors.New("dhdf: closed")
)

// CorruptionError names the file and offset where set metadata or chunk
// data was found bad. It wraps one of the sentinels above or of package h5.
type CorruptionError struct {
	Path   string
	Offset int64 // -1 when the problem is not at one place
	Err    error
}

func (e *CorruptionError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("dhdf: %s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("dhdf: %s at offset %d: %v", e.Path, e.Offset, e.Err)
}

// Unwrap returns the underlying error.
func (e *CorruptionError) Unwrap() error { return e.Err }
