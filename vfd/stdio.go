package vfd

import (
	"errors"
	"io/fs"
	"sync"
)

// DefaultStdioBuffer is the write-back buffer size of [Stdio] when none
// is configured.
const DefaultStdioBuffer = 1 << 20

// Stdio is a buffering driver over another driver, after HDF5's stdio
// driver: each file has a write-back buffer that collects sequential
// writes and goes to the underlying file in one piece when it is full, on
// a write elsewhere, on Sync, Truncate, Size and Close, and before a read
// that overlaps it. Writes at least as large as the buffer go straight
// through. Reads are not cached. Namespace operations go to the
// underlying driver unchanged.
type Stdio struct {
	inner   Driver
	bufSize int
}

// NewStdio returns a buffering driver over inner with a buffer of bufSize
// bytes per file (DefaultStdioBuffer when bufSize <= 0).
func NewStdio(inner Driver, bufSize int) *Stdio {
	if bufSize <= 0 {
		bufSize = DefaultStdioBuffer
	}
	return &Stdio{inner: inner, bufSize: bufSize}
}

// Name returns "stdio".
func (d *Stdio) Name() string { return "stdio" }

// Inner returns the underlying driver.
func (d *Stdio) Inner() Driver { return d.inner }

// Open opens name through the underlying driver and buffers it.
func (d *Stdio) Open(name string, flag Flag) (File, error) {
	f, err := d.inner.Open(name, flag)
	if err != nil {
		return nil, err
	}
	return &stdioFile{f: f, flag: flag, size: d.bufSize}, nil
}

// Remove removes name through the underlying driver.
func (d *Stdio) Remove(name string) error { return d.inner.Remove(name) }

// RemoveAll removes name and its contents through the underlying driver.
func (d *Stdio) RemoveAll(name string) error { return d.inner.RemoveAll(name) }

// Rename renames through the underlying driver.
func (d *Stdio) Rename(oldname, newname string) error { return d.inner.Rename(oldname, newname) }

// Stat describes name through the underlying driver. A file with
// unflushed writes shows its flushed size.
func (d *Stdio) Stat(name string) (fs.FileInfo, error) { return d.inner.Stat(name) }

// ReadDir lists a directory through the underlying driver.
func (d *Stdio) ReadDir(name string) ([]fs.DirEntry, error) { return d.inner.ReadDir(name) }

// MkdirAll creates directories through the underlying driver.
func (d *Stdio) MkdirAll(name string, perm fs.FileMode) error { return d.inner.MkdirAll(name, perm) }

// SyncDir syncs a directory through the underlying driver.
func (d *Stdio) SyncDir(name string) error { return d.inner.SyncDir(name) }

type stdioFile struct {
	f    File
	flag Flag
	size int // buffer capacity

	mu     sync.Mutex // guards everything below; I/O on the file is serialised
	buf    []byte     // pending bytes for [off, off+len(buf))
	off    int64
	closed bool
}

func (f *stdioFile) Name() string { return f.f.Name() }
func (f *stdioFile) Unwrap() File { return f.f }

// flush writes the pending bytes; f.mu must be held. On error the
// pending bytes stay so a later flush can retry.
func (f *stdioFile) flush() error {
	if len(f.buf) == 0 {
		return nil
	}
	n, err := f.f.WriteAt(f.buf, f.off)
	if err != nil {
		f.buf = f.buf[:copy(f.buf, f.buf[n:])]
		f.off += int64(n)
		return err
	}
	f.buf = f.buf[:0]
	return nil
}

func (f *stdioFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("read", f.Name(), ErrNegativeOffset)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, pathErr("read", f.Name(), ErrClosed)
	}
	if len(f.buf) > 0 && off < f.off+int64(len(f.buf)) && off+int64(len(p)) > f.off {
		if err := f.flush(); err != nil {
			return 0, err
		}
	}
	return f.f.ReadAt(p, off)
}

func (f *stdioFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("write", f.Name(), ErrNegativeOffset)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, pathErr("write", f.Name(), ErrClosed)
	}
	if !f.flag.Writable() {
		return 0, pathErr("write", f.Name(), ErrReadOnly)
	}
	if len(f.buf) > 0 && off == f.off+int64(len(f.buf)) && len(f.buf)+len(p) <= f.size {
		f.buf = append(f.buf, p...)
		return len(p), nil
	}
	if err := f.flush(); err != nil {
		return 0, err
	}
	if len(p) >= f.size {
		return f.f.WriteAt(p, off)
	}
	if f.buf == nil {
		f.buf = make([]byte, 0, f.size)
	}
	f.buf = append(f.buf, p...)
	f.off = off
	return len(p), nil
}

// StartWriteback writes the pending buffer first when it overlaps [off,
// off+n) (n == 0: through the end of file), then passes the hint on.
func (f *stdioFile) StartWriteback(off, n int64) error {
	if err := checkWritebackRange(f.Name(), off, n); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return pathErr("writeback", f.Name(), ErrClosed)
	}
	if len(f.buf) > 0 && off < f.off+int64(len(f.buf)) && writebackEnd(off, n) > f.off {
		if err := f.flush(); err != nil {
			return err
		}
	}
	return StartWriteback(f.f, off, n)
}

// DropCache writes the pending buffer first when it overlaps [off, off+n)
// (n == 0: through the end of file), then passes the hint on.
func (f *stdioFile) DropCache(off, n int64) error {
	if err := checkDropRange(f.Name(), off, n); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return pathErr("dropcache", f.Name(), ErrClosed)
	}
	if len(f.buf) > 0 && off < f.off+int64(len(f.buf)) && writebackEnd(off, n) > f.off {
		if err := f.flush(); err != nil {
			return err
		}
	}
	return DropCache(f.f, off, n)
}

func (f *stdioFile) Size() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, pathErr("stat", f.Name(), ErrClosed)
	}
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.f.Size()
}

func (f *stdioFile) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return pathErr("truncate", f.Name(), ErrClosed)
	}
	if err := f.flush(); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *stdioFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return pathErr("sync", f.Name(), ErrClosed)
	}
	if err := f.flush(); err != nil {
		return err
	}
	return f.f.Sync()
}

// Close flushes and closes; the file is closed even when the flush fails.
func (f *stdioFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return pathErr("close", f.Name(), ErrClosed)
	}
	f.closed = true
	return errors.Join(f.flush(), f.f.Close())
}
