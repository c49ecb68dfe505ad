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
	// ErrNotRegular is returned by Open for a name that is not a regular
	// file (a directory, a FIFO, a device, a socket): opening a FIFO for
	// reading would block until a writer appears, and a device such as
	// /dev/zero reads as an endless or empty file.
	ErrNotRegular = errors.New("vfd: not a regular file")
	// ErrTooLarge is returned by [ReadFileLimit] for a file larger than
	// the limit the caller allows.
	ErrTooLarge = errors.New("vfd: file larger than allowed")
	// ErrLocked is returned by [Lock] when another process or another
	// holder in this process has the lock.
	ErrLocked = errors.New("vfd: locked by another holder")
)

func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}
