package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/ftigo/ftigo/vfd"
)

// Errors of the path checks, matched with errors.Is. A path that is not a
// regular file where one is expected wraps vfd.ErrNotRegular.
var (
	// errNotDir: a path that must be a directory is something else.
	errNotDir = errors.New("not a directory")
	// errEmpty: a file that must have content is empty.
	errEmpty = errors.New("empty file")
)

// pathError says what is wrong with a path argument: Role names the
// argument as the usage line does (FILE, RUN, --dir), Problem says what is
// wrong with it.
type pathError struct {
	Role, Path, Problem string
	Err                 error
}

func (e *pathError) Error() string { return fmt.Sprintf("%s %s: %s", e.Role, e.Path, e.Problem) }
func (e *pathError) Unwrap() error { return e.Err }

// kindOf names the kind of file a mode describes, with an article.
func kindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return fmt.Sprintf("of mode %v", m.Type())
}

// statPath stats name, turning a failure into a *pathError for role.
func statPath(d vfd.Driver, role, name string) (fs.FileInfo, error) {
	if name == "" {
		return nil, &pathError{role, `""`, "empty path", fs.ErrNotExist}
	}
	st, err := d.Stat(name)
	if err != nil {
		msg := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return nil, &pathError{role, name, msg, err}
	}
	return st, nil
}

// inputFile checks that name is an existing regular file (and not empty
// unless allowEmpty): the check every file argument passes before it is
// opened, so a FIFO or a device is refused instead of blocking or reading
// forever.
func inputFile(d vfd.Driver, role, name string, allowEmpty bool) error {
	st, err := statPath(d, role, name)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return &pathError{role, name, "is " + kindOf(st.Mode()) + ", not a regular file", vfd.ErrNotRegular}
	}
	if st.Size() == 0 && !allowEmpty {
		return &pathError{role, name, "is an empty file", errEmpty}
	}
	return nil
}

// outputFile checks that name, which a command is about to write, is a
// regular file or does not exist yet.
func outputFile(d vfd.Driver, role, name string) error {
	st, err := d.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &pathError{role, name, err.Error(), err}
	}
	if !st.Mode().IsRegular() {
		return &pathError{role, name, "exists and is " + kindOf(st.Mode()) + ", not a regular file", vfd.ErrNotRegular}
	}
	return nil
}

// inputDir checks that name is an existing directory.
func inputDir(d vfd.Driver, role, name string) error {
	st, err := statPath(d, role, name)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return &pathError{role, name, "is " + kindOf(st.Mode()) + ", not a directory", errNotDir}
	}
	return nil
}

// outputDir checks that name is a directory or does not exist yet (it
// will be created).
func outputDir(d vfd.Driver, role, name string) error {
	st, err := d.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &pathError{role, name, err.Error(), err}
	}
	if !st.IsDir() {
		return &pathError{role, name, "exists and is " + kindOf(st.Mode()) + ", not a directory", errNotDir}
	}
	return nil
}
