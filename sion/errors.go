package sion

import (
	"errors"
	"fmt"
)

// Sentinel errors of the sion package. Errors returned by readers and
// writers wrap one of these (often inside a [*CorruptionError]); match them
// with errors.Is.
var (
	// ErrBadMagic is returned when a file does not start with "sion".
	ErrBadMagic = errors.New("sion: not a SIONlib file (bad magic)")
	// ErrVersion is returned for a fileformat version this package does not read (below 3 or above 5).
	ErrVersion = errors.New("sion: unsupported fileformat version")
	// ErrTruncated is returned when META1, META2, the mapping or a data
	// block extends past the end of the file.
	ErrTruncated = errors.New("sion: file truncated")
	// ErrUnclosed is returned for a file whose writer never closed it:
	// start_of_varheader is still 0 and META2 is missing.
	ErrUnclosed = errors.New("sion: file was never closed (start_of_varheader is 0)")
	// ErrInconsistent is returned when the metadata contradicts itself:
	// negative sizes, a block count above maxchunks, a block larger than its
	// chunk, data overlapping META2, a bad mapping or a sibling that does not
	// belong to the set.
	ErrInconsistent = errors.New("sion: inconsistent metadata")
	// ErrTooLarge is returned by readers for a container beyond their
	// limits ([MaxTasks], [MaxMeta2Size], [MaxRecords]), before anything
	// of that size is allocated, and by writers asked to make one.
	ErrTooLarge = errors.New("sion: beyond the reader's limits")
	// ErrBadRecord is returned when a key-value task stream holds a record
	// whose header is cut or whose length runs past the stream.
	ErrBadRecord = errors.New("sion: bad key-value record")
	// ErrNotKeyVal is returned by the record functions on a file not written in key-value mode.
	ErrNotKeyVal = errors.New("sion: file is not in key-value mode")
	// ErrNoTask is returned for a task index outside 0..NTasks()-1.
	ErrNoTask = errors.New("sion: no such task")
	// ErrBadArgument is returned by writers for invalid sizes, ranks, file
	// counts or options.
	ErrBadArgument = errors.New("sion: bad argument")
	// ErrWriteTooLarge is returned by a writer with [PolicyStrict] (SIONlib's
	// own rule) for a single write larger than the task's chunk, and by
	// every policy for a write to a task whose chunk size is 0.
	ErrWriteTooLarge = errors.New("sion: write larger than the chunk")
	// ErrClosed is returned by writers and readers used after Close or Abort.
	ErrClosed = errors.New("sion: closed")
	// ErrPeerFailed is returned by a collective writer call on the ranks
	// whose own part succeeded when another rank's part failed.
	ErrPeerFailed = errors.New("sion: another rank failed")
)

// CorruptionError describes bad bytes in a physical file: which file, at
// which offset, what is wrong. Err wraps one of the sentinels above.
type CorruptionError struct {
	Path   string // name of the physical file ("" for NewReader without a name)
	Offset int64  // byte offset of the bad field or region
	Field  string // the field or region concerned ("magic", "blocksize[2][3]")
	Err    error
}

// Error returns "sion: PATH: offset N (FIELD): ERR".
func (e *CorruptionError) Error() string {
	p := e.Path
	if p == "" {
		p = "<reader>"
	}
	return fmt.Sprintf("%s: offset %d (%s): %v", p, e.Offset, e.Field, e.Err)
}

// Unwrap returns the underlying sentinel.
func (e *CorruptionError) Unwrap() error { return e.Err }

func corrupt(path string, off int64, field string, err error) error {
	return &CorruptionError{Path: path, Offset: off, Field: field, Err: err}
}
