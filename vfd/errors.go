package vfd

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
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

// WrapPath returns err in the context of operation op on the file or
// directory name: "op name: err". When err's message names name
// already, as every error of a vfd driver does (an *fs.PathError), the
// path is not repeated: a one-word op ("open", "write") adds nothing and
// err is returned as it is; a longer op stays in front, without a
// trailing "of" ("write intent marker: open /m/x: ..."). So a path
// appears once in a message however many layers wrap it. errors.Is and
// errors.As see err either way; a nil err stays nil.
func WrapPath(err error, op, name string) error {
	switch {
	case err == nil:
		return nil
	case !ErrorNames(err, name):
		return fmt.Errorf("%s %s: %w", op, name, err)
	}
	if op = context(op); op == "" {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// WrapPathAt is [WrapPath] for an operation at offset off of name: "op
// name at off: err", or err followed by "(at offset off)" when err names
// name.
func WrapPathAt(err error, op, name string, off int64) error {
	switch {
	case err == nil:
		return nil
	case !ErrorNames(err, name):
		return fmt.Errorf("%s %s at %d: %w", op, name, off, err)
	}
	if op = context(op); op == "" {
		return fmt.Errorf("%w (at offset %d)", err, off)
	}
	return fmt.Errorf("%s: %w (at offset %d)", op, err, off)
}

// ErrorNames reports whether err's message names the path name: name
// occurs in it, and not only as the start of a longer name (P.tmp does
// not name P). A name with a qualifier in parentheses, as "P (task 2)"
// for a part of P, is named when P is. A nil err names nothing.
func ErrorNames(err error, name string) bool {
	if err == nil || name == "" {
		return false
	}
	if i := strings.LastIndex(name, " ("); i > 0 && strings.HasSuffix(name, ")") {
		name = name[:i]
	}
	msg := err.Error()
	for i := 0; ; {
		j := strings.Index(msg[i:], name)
		if j < 0 {
			return false
		}
		end := i + j + len(name)
		if end == len(msg) || !pathByte(msg[end]) {
			return true
		}
		i += j + 1
	}
}

// pathByte reports whether b may continue a file name.
func pathByte(b byte) bool {
	return b == '.' || b == '_' || b == '-' || b == '/' || b == '~' ||
		'0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// context is what op adds to an error that names its path: nothing for
// one word, else op without a trailing "of".
func context(op string) string {
	op = strings.TrimSuffix(op, " of")
	if !strings.Contains(op, " ") {
		return ""
	}
	return op
}
