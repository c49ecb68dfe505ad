package h5

import (
	"errors"
	"fmt"
)

// Sentinel errors of the h5 package; match them with errors.Is.
var (
	// ErrNotHDF5 is returned when a file does not start with the HDF5 signature.
	ErrNotHDF5 = errors.New("h5: not an HDF5 file")
	// ErrUnsupported is returned for HDF5 features outside ftigo's profile
	// (another superblock version, B-trees, chunked layouts, ...).
	ErrUnsupported = errors.New("h5: feature outside the ftigo profile")
	// ErrChecksum is returned when a lookup3 metadata checksum does not match.
	ErrChecksum = errors.New("h5: metadata checksum mismatch")
	// ErrTruncated is returned when a file is shorter than its superblock says.
	ErrTruncated = errors.New("h5: truncated file")
	// ErrCorrupt is returned for structurally invalid metadata.
	ErrCorrupt = errors.New("h5: corrupt metadata")
	// ErrNotFound is returned by lookups of a path that does not exist.
	ErrNotFound = errors.New("h5: object not found")
	// ErrInvalid is returned by the writer for arguments it cannot encode
	// (bad names, duplicate links, sizes that do not match, messages over 64 KiB).
	ErrInvalid = errors.New("h5: invalid argument")
	// ErrClosed is returned by a writer used after Close.
	ErrClosed = errors.New("h5: writer closed")
)

// CorruptionError locates a decoding failure: the file, the byte offset of
// the structure that failed and what was wrong. It wraps one of the
// sentinels above.
type CorruptionError struct {
	Path   string // file name as given to Open
	Offset int64  // address of the failing structure
	What   string // the structure, e.g. "object header"
	Err    error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("h5: %s: %s at offset %d: %v", e.Path, e.What, e.Offset, e.Err)
}

// Unwrap returns the underlying sentinel.
func (e *CorruptionError) Unwrap() error { return e.Err }
