package vfd

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
)

// The file name extensions HDF5's split driver uses by default. Wire
// format (file naming shared with libhdf5): never change.
const (
	DefaultSplitMetaExt = "-m.h5"
	DefaultSplitRawExt  = "-r.h5"
)

// Split sends metadata and raw data of one address space to two files by
// the memory-type hint of each transfer, after HDF5's split driver: a
// write whose [MemType.IsMeta] is true goes to name+metaExt through the
// meta driver, any other write (and a write without a hint) to
// name+rawExt through the raw driver. Addresses are the same in both
// files, so each is sparse where the other holds data, and a read with
// the same hint as the write finds the bytes. The size of the address
// space is the larger of the two file sizes; a read below it that runs
// past the end of its own file reads zeros.
//
// Remove, RemoveAll, Rename and Stat act on both files of a split name;
// for a name that is neither (a directory), and for ReadDir, MkdirAll and
// SyncDir, they act on the meta driver and, when it is another driver, on
// the raw driver too.
type Split struct {
	meta, raw       Driver
	metaExt, rawExt string
}

// NewSplit returns a split driver. Empty extensions default to
// DefaultSplitMetaExt and DefaultSplitRawExt.
func NewSplit(meta Driver, metaExt string, raw Driver, rawExt string) *Split {
	if metaExt == "" {
		metaExt = DefaultSplitMetaExt
	}
	if rawExt == "" {
		rawExt = DefaultSplitRawExt
	}
	return &Split{meta: meta, raw: raw, metaExt: metaExt, rawExt: rawExt}
}

// Name returns "split".
func (d *Split) Name() string { return "split" }

func (d *Split) same() bool { return d.meta == d.raw }

// Open opens (or creates) both files of name.
func (d *Split) Open(name string, flag Flag) (File, error) {
	_, serr := d.meta.Stat(name + d.metaExt)
	m, err := d.meta.Open(name+d.metaExt, flag)
	if err != nil {
		return nil, err
	}
	r, err := d.raw.Open(name+d.rawExt, flag)
	if err != nil {
		err = errors.Join(err, m.Close())
		if errors.Is(serr, fs.ErrNotExist) { // this call created it: undo
			err = errors.Join(err, d.meta.Remove(name+d.metaExt))
		}
		return nil, err
	}
	return &splitFile{name: name, flag: flag, meta: m, raw: r}, nil
}

// both applies fn to the meta driver and, when different, the raw driver.
func (d *Split) both(fn func(Driver) error) error {
	err := fn(d.meta)
	if d.same() {
		return err
	}
	return errors.Join(err, fn(d.raw))
}

// isSplit reports whether name's meta file exists.
func (d *Split) isSplit(name string) bool {
	_, err := d.meta.Stat(name + d.metaExt)
	return err == nil
}

// Remove removes both files of name, or a directory.
func (d *Split) Remove(name string) error {
	if !d.isSplit(name) {
		if _, err := d.raw.Stat(name + d.rawExt); err == nil {
			return d.raw.Remove(name + d.rawExt)
		}
		return d.both(func(x Driver) error { return x.Remove(name) })
	}
	err := d.meta.Remove(name + d.metaExt)
	if rerr := d.raw.Remove(name + d.rawExt); !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// RemoveAll removes both files of name, or a directory tree.
func (d *Split) RemoveAll(name string) error {
	return errors.Join(d.meta.RemoveAll(name+d.metaExt), d.raw.RemoveAll(name+d.rawExt),
		d.both(func(x Driver) error { return x.RemoveAll(name) }))
}

// Rename renames both files of oldname, or a directory.
func (d *Split) Rename(oldname, newname string) error {
	if !d.isSplit(oldname) {
		return d.both(func(x Driver) error { return x.Rename(oldname, newname) })
	}
	if err := d.raw.Rename(oldname+d.rawExt, newname+d.rawExt); err != nil {
		return err
	}
	return d.meta.Rename(oldname+d.metaExt, newname+d.metaExt)
}

// Stat describes a split name (its size is the larger of the two files)
// or a directory of the meta driver.
func (d *Split) Stat(name string) (fs.FileInfo, error) {
	mi, err := d.meta.Stat(name + d.metaExt)
	if errors.Is(err, fs.ErrNotExist) {
		return d.meta.Stat(name)
	}
	if err != nil {
		return nil, err
	}
	ri, err := d.raw.Stat(name + d.rawExt)
	if err != nil {
		return nil, err
	}
	return coreInfo{name: path.Base(name), size: max(mi.Size(), ri.Size()), mode: mi.Mode(), mod: mi.ModTime()}, nil
}

// ReadDir lists a directory; with two drivers, the union of both listings.
func (d *Split) ReadDir(name string) ([]fs.DirEntry, error) {
	ents, err := d.meta.ReadDir(name)
	if d.same() || err != nil {
		return ents, err
	}
	more, err := d.raw.ReadDir(name)
	if err != nil {
		return nil, err
	}
	for _, e := range more {
		if !slices.ContainsFunc(ents, func(x fs.DirEntry) bool { return x.Name() == e.Name() }) {
			ents = append(ents, e)
		}
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, nil
}

// MkdirAll creates directories in both drivers.
func (d *Split) MkdirAll(name string, perm fs.FileMode) error {
	return d.both(func(x Driver) error { return x.MkdirAll(name, perm) })
}

// SyncDir syncs a directory in both drivers.
func (d *Split) SyncDir(name string) error {
	return d.both(func(x Driver) error { return x.SyncDir(name) })
}

type splitFile struct {
	name      string
	flag      Flag
	meta, raw File

	mu     sync.RWMutex // guards closed against Close racing I/O
	closed bool
}

func (f *splitFile) Name() string { return f.name }

func (f *splitFile) route(t MemType) File {
	if t.IsMeta() {
		return f.meta
	}
	return f.raw
}

func (f *splitFile) ReadAt(p []byte, off int64) (int, error) {
	return f.ReadAtType(MemDefault, p, off)
}

func (f *splitFile) ReadAtType(t MemType, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("read", f.name, ErrNegativeOffset)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, pathErr("read", f.name, ErrClosed)
	}
	n, err := f.route(t).ReadAt(p, off)
	if err != io.EOF {
		return n, err
	}
	size, serr := f.size()
	if serr != nil {
		return n, serr
	}
	// The other file reaches further: zeros up to the size of the space.
	end := min(off+int64(len(p)), max(size, off))
	if m := int(end - off); m > n {
		clear(p[n:m])
		n = m
	}
	if n == len(p) {
		return n, nil
	}
	return n, io.EOF
}

func (f *splitFile) WriteAt(p []byte, off int64) (int, error) {
	return f.WriteAtType(MemDefault, p, off)
}

func (f *splitFile) WriteAtType(t MemType, p []byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, pathErr("write", f.name, ErrClosed)
	}
	return f.route(t).WriteAt(p, off)
}

func (f *splitFile) size() (int64, error) {
	m, err := f.meta.Size()
	if err != nil {
		return 0, err
	}
	r, err := f.raw.Size()
	if err != nil {
		return 0, err
	}
	return max(m, r), nil
}

// Size returns the larger of the two file sizes.
func (f *splitFile) Size() (int64, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, pathErr("stat", f.name, ErrClosed)
	}
	return f.size()
}

// Truncate truncates both files to size.
func (f *splitFile) Truncate(size int64) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("truncate", f.name, ErrClosed)
	}
	if err := f.meta.Truncate(size); err != nil {
		return err
	}
	return f.raw.Truncate(size)
}

// StartWriteback passes the hint on to both files, whose addresses are
// the same.
func (f *splitFile) StartWriteback(off, n int64) error {
	if err := checkWritebackRange(f.name, off, n); err != nil {
		return err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("writeback", f.name, ErrClosed)
	}
	return errors.Join(StartWriteback(f.meta, off, n), StartWriteback(f.raw, off, n))
}

// DropCache passes the hint on to both files, whose addresses are the
// same.
func (f *splitFile) DropCache(off, n int64) error {
	if err := checkDropRange(f.name, off, n); err != nil {
		return err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("dropcache", f.name, ErrClosed)
	}
	return errors.Join(DropCache(f.meta, off, n), DropCache(f.raw, off, n))
}

// Sync syncs both files.
func (f *splitFile) Sync() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("sync", f.name, ErrClosed)
	}
	return errors.Join(f.meta.Sync(), f.raw.Sync())
}

// Close closes both files.
func (f *splitFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, ErrClosed)
	}
	f.closed = true
	return errors.Join(f.meta.Close(), f.raw.Close())
}
