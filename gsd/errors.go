package gsd

import (
	"errors"
	"fmt"
)

// Sentinel errors of the gsd package. Returned errors wrap them; match with
// errors.Is.
var (
	// ErrNotGSD is returned when a file is shorter than the 256-byte header
	// or does not start with the GSD magic number.
	ErrNotGSD = errors.New("gsd: not a GSD file")
	// ErrEmpty is returned, together with ErrNotGSD, for a file that holds
	// no GSD data at all and so can be replaced without loss: 0 bytes;
	// shorter than the header and all zero or starting with (part of) the
	// magic number; or all zero and at most 1 MiB. [CreateOrAppend]
	// creates a fresh file in its place.
	ErrEmpty = errors.New("gsd: empty file, no GSD header")
	// ErrVersion is returned for a file version this package does not read
	// (anything outside [1.0, 3.0)), and when appending to a 1.0 file that
	// has not been upgraded.
	ErrVersion = errors.New("gsd: unsupported GSD file version")
	// ErrCorrupt is returned (inside a *CorruptionError) when the header,
	// namelist or index contradicts itself or the file size.
	ErrCorrupt = errors.New("gsd: corrupt GSD file")
	// ErrNotFound is returned when a chunk does not exist in the frame asked
	// for, or the frame is past the last one.
	ErrNotFound = errors.New("gsd: chunk not found")
	// ErrDuplicateChunk is returned by the writer when a frame gets a second
	// chunk with the same name.
	ErrDuplicateChunk = errors.New("gsd: duplicate chunk in frame")
	// ErrType is returned for a type id outside 1..10 on write (type 11,
	// character, breaks python3-gsd 2.7), or a typed read of a chunk stored
	// with another type.
	ErrType = errors.New("gsd: bad chunk type")
	// ErrShape is returned when N×M does not match the data length, M is 0,
	// or a row range is outside the chunk.
	ErrShape = errors.New("gsd: bad chunk shape")
	// ErrName is returned for an empty chunk name, a name that is not valid
	// UTF-8 or holds a NUL byte, a 65536th name, and an application or
	// schema name that is not valid UTF-8 or holds a NUL byte.
	ErrName = errors.New("gsd: bad chunk name")
	// ErrTooLarge is returned by a Reader for a read of chunk data larger
	// than its limit ([WithMaxRead]).
	ErrTooLarge = errors.New("gsd: read larger than the limit")
	// ErrClosed is returned by every method of a closed Writer or Reader.
	ErrClosed = errors.New("gsd: file already closed")
	// ErrSchema is returned by the HOOMD helper for a frame that breaks the
	// hoomd schema rules (a log chunk first written after frame 0, a
	// position slice whose length is not 3·N).
	ErrSchema = errors.New("gsd: hoomd schema violation")
)

// CorruptionError describes damage found in a file: which file, which part
// of it (header, namelist, or index entry with its frame and chunk), at
// which byte offset. It wraps ErrCorrupt (or ErrNotGSD) and, when there is
// one, the underlying I/O error.
type CorruptionError struct {
	// Path is the file name, or "" for a Reader made from an io.ReaderAt.
	Path string
	// Part is "header", "namelist", "index" or "data".
	Part string
	// Entry is the index slot, or -1 when the damage is not in an entry.
	Entry int64
	// Frame and Chunk identify the entry's frame and chunk name when known.
	Frame uint64
	Chunk string
	// Offset is the byte offset of the damaged field or block.
	Offset int64
	// Reason says what is wrong in words.
	Reason string
	// Err is the wrapped sentinel (ErrCorrupt unless said otherwise) or I/O error.
	Err error
}

func (e *CorruptionError) Error() string {
	where := e.Path
	if where == "" {
		where = "<reader>"
	}
	s := fmt.Sprintf("gsd: %s: corrupt %s", where, e.Part)
	if e.Entry >= 0 {
		s += fmt.Sprintf(" entry %d (frame %d", e.Entry, e.Frame)
		if e.Chunk != "" {
			s += fmt.Sprintf(", chunk %q", e.Chunk)
		}
		s += ")"
	}
	s += fmt.Sprintf(" at offset %d: %s", e.Offset, e.Reason)
	if e.Err != nil && e.Err != ErrCorrupt {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the wrapped errors: always ErrCorrupt, plus Err when it is
// something else.
func (e *CorruptionError) Unwrap() []error {
	if e.Err == nil || e.Err == ErrCorrupt {
		return []error{ErrCorrupt}
	}
	return []error{ErrCorrupt, e.Err}
}

// emptyError is the error for an empty file (see ErrEmpty); it matches
// both ErrEmpty and ErrNotGSD.
type emptyError struct{ path, detail string }

func (e *emptyError) Error() string {
	return fmt.Sprintf("gsd: %s: %s: empty file, no GSD header", pathOr(e.path), e.detail)
}

func (e *emptyError) Is(target error) bool { return target == ErrEmpty || target == ErrNotGSD }

func corruptf(path, part string, off int64, format string, args ...any) *CorruptionError {
	return &CorruptionError{Path: path, Part: part, Entry: -1, Offset: off, Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}
