package vfd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Locker is the optional capability of a driver to take an exclusive,
// advisory lock named by a file, so that two jobs (or two runtimes of one
// process) cannot write into the same directories at once. Lock creates
// the file if needed and returns at once: the lock, or an error wrapping
// [ErrLocked] when another holder has it. Closing the returned Closer
// releases the lock; the file stays. A holder that dies releases it too
// (for OS drivers, the kernel does). Use [Lock].
type Locker interface {
	Lock(name string) (io.Closer, error)
}

// Lock takes the exclusive lock name through d (see [Locker]). A driver
// without the capability returns an error wrapping [ErrUnsupported].
func Lock(d Driver, name string) (io.Closer, error) {
	if l, ok := d.(Locker); ok {
		return l.Lock(name)
	}
	return nil, pathErr("lock", name, fmt.Errorf("%w: %s driver has no locks", ErrUnsupported, d.Name()))
}

// Lock takes an flock(2) lock on name, which is created if missing.
// flock locks belong to the open file description, so a second Lock of
// the same file fails even inside the same process.
func (Sec2) Lock(name string) (io.Closer, error) { return lockOS(name) }

func lockOS(name string) (io.Closer, error) {
	fd, err := openRetry(name, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, pathErr("lock", name, err)
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		cerr := unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			err = ErrLocked
		}
		return nil, pathErr("lock", name, errors.Join(err, cerr))
	}
	return &osLock{fd: fd, name: name}, nil
}

type osLock struct {
	once sync.Once
	fd   int
	name string
}

// Close releases the lock; a second Close does nothing.
func (l *osLock) Close() error {
	var err error
	l.once.Do(func() { err = pathErr("unlock", l.name, unix.Close(l.fd)) })
	return err
}

// Lock takes an in-memory lock on name (the file is created if missing,
// as on disk). Locks are per Core value.
func (c *Core) Lock(name string) (io.Closer, error) {
	f, err := c.Open(name, ReadWrite|OCreate)
	if err != nil {
		return nil, pathErr("lock", name, err)
	}
	if err := f.Close(); err != nil {
		return nil, pathErr("lock", name, err)
	}
	key := strings.Join(splitPath(name), "/")
	c.lockMu.Lock()
	defer c.lockMu.Unlock()
	if c.locks == nil {
		c.locks = map[string]bool{}
	}
	if c.locks[key] {
		return nil, pathErr("lock", name, ErrLocked)
	}
	c.locks[key] = true
	return &coreLock{c: c, key: key}, nil
}

type coreLock struct {
	once sync.Once
	c    *Core
	key  string
}

// Close releases the lock; a second Close does nothing.
func (l *coreLock) Close() error {
	l.once.Do(func() {
		l.c.lockMu.Lock()
		delete(l.c.locks, l.key)
		l.c.lockMu.Unlock()
	})
	return nil
}

// Lock forwards to the inner driver.
func (d *Fault) Lock(name string) (io.Closer, error) { return Lock(d.inner, name) }

// Lock forwards to the inner driver.
func (d *Log) Lock(name string) (io.Closer, error) { return Lock(d.inner, name) }

// Lock forwards to the inner driver.
func (d *Stdio) Lock(name string) (io.Closer, error) { return Lock(d.inner, name) }

// Lock takes the lock through the metadata driver.
func (d *Split) Lock(name string) (io.Closer, error) { return Lock(d.meta, name) }

// Lock forwards to the inner driver (the lock file is a plain file, not a family).
func (d *Family) Lock(name string) (io.Closer, error) { return Lock(d.inner, name) }

// ReadFileLimit reads the whole of a regular file that must not be
// larger than limit bytes: a larger one is refused with an error wrapping
// [ErrTooLarge] before anything is allocated, so a huge (or sparse) file
// given in place of a small one cannot exhaust memory. Use it for
// configuration, manifests, tables and headers.
func ReadFileLimit(d Driver, name string, limit int64) ([]byte, error) {
	f, err := d.Open(name, ReadOnly)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > limit {
		return nil, pathErr("read", name, fmt.Errorf("%w: %d bytes, at most %d expected", ErrTooLarge, size, limit))
	}
	buf := make([]byte, size)
	if err := ReadFull(f, buf, 0); err != nil && !(size == 0 && errors.Is(err, io.EOF)) {
		return nil, pathErr("read", name, err)
	}
	return buf, nil
}
