package vfd

import (
	"errors"
	"io/fs"
)

// Sentinel errors of the vfd package. Errors from drivers wrap these or the
// io/fs sentinels (fs.ErrNotExist, fs.ErrExist, fs.ErrClosed,
// fs.ErrPermission), so callers match with errors.Is.
var (
	// ErrClosed is returned by every method of a closed File. It is fs.ErrClosed.
	ErrClosed = fs.ErrClosed
	// ErrReadOnly is returned when a file opened ReadOnly is written, truncated or synced for writing.
	ErrReadOnly = errors.New("vfd: file is read-only")
	// ErrUnsupported is returned when a driver cannot do what is asked
	// (for example O_DIRECT on a file system that refuses it).
	ErrUnsupported = errors.New("vfd: operation not supported by driver")
	// ErrNegativeOffset is returned for reads, writes and truncates at a
	// negative offset, and for a writeback range with a negative offset or length.
	ErrNegativeOffset = errors.New("vfd: negative offset")
	// ErrFamilyMismatch is returned when an existing family's members do not fit the configured member size.
	ErrFamilyMismatch = errors.New("vfd: family member size mismatch")
	// ErrBadSpec is returned by Parse for a malformed driver spec.
	ErrBadSpec = errors.New("vfd: bad driver spec")
)

func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}
