package vfd

import (
	"io"
	"io/fs"
	"math"
)

// MemType says what kind of bytes a write carries, after HDF5's memory
// types. Drivers may route, log or fault-inject by it; most ignore it.
type MemType uint8

// The memory types. Default is used for anything that is not a format's
// metadata (checkpoint payloads, trajectory frames).
const (
	MemDefault MemType = iota // unclassified bytes
	MemSuper                  // superblock / file header
	MemBTree                  // B-tree nodes, indexes
	MemDraw                   // raw dataset data
	MemGHeap                  // global heap
	MemLHeap                  // local heap, name lists
	MemOHdr                   // object headers, per-object metadata
	numMemTypes
)

var memTypeNames = [numMemTypes]string{"default", "super", "btree", "draw", "gheap", "lheap", "ohdr"}

// String returns the lowercase name of t.
func (t MemType) String() string {
	if t < numMemTypes {
		return memTypeNames[t]
	}
	return "memtype(?)"
}

// IsMeta reports whether t is metadata rather than raw data; the split
// driver sends metadata to one file and raw data to the other.
func (t MemType) IsMeta() bool { return t != MemDraw && t != MemDefault }

// Flag selects how [Driver.Open] opens a file. Combine with |.
type Flag uint8

// Open flags, after HDF5's H5F_ACC_* and the os package's O_* flags.
const (
	ReadOnly  Flag = 0
	ReadWrite Flag = 1 << iota // open for reading and writing
	OCreate                    // create the file if it does not exist
	OTrunc                     // truncate an existing file to zero length
	OExcl                      // with OCreate: fail with fs.ErrExist if it exists
)

// Writable reports whether f allows writing.
func (f Flag) Writable() bool { return f&ReadWrite != 0 }

// File is one format address space: a sequence of bytes addressed from 0,
// in io conventions.
//
// ReadAt follows [io.ReaderAt]: a read that reaches the end of file returns
// the bytes before it and io.EOF; holes left by sparse writes read as
// zeros. WriteAt writes all of p or returns an error; it extends the file
// as needed. Size is the physical end of file (HDF5's EOF). Nothing written
// is durable until Sync returns. After Close every method returns an error
// matching fs.ErrClosed.
//
// ReadAt and WriteAt (and [WritebackStarter.StartWriteback], where a file
// has it) may be called concurrently on disjoint ranges; the other methods
// must not run concurrently with anything else on the file.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Name is the name the file was opened with.
	Name() string
	// Size returns the physical end of file.
	Size() (int64, error)
	// Truncate sets the end of file to size, discarding or zero-extending.
	Truncate(size int64) error
	// Sync makes everything written so far durable.
	Sync() error
}

// Driver maps names to [File]s and owns the namespace operations a
// checkpoint commit needs. Names are slash-separated paths in the
// driver's namespace (for on-disk drivers, OS paths).
//
// Errors are *fs.PathError wrapping fs.ErrNotExist, fs.ErrExist and the
// like, so callers match them with errors.Is.
type Driver interface {
	// Name is the driver's short name, as used in a driver spec ("sec2").
	Name() string
	// Open opens or creates the named file as flag says.
	Open(name string, flag Flag) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a path and anything it contains; a missing path is not an error.
	RemoveAll(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// Stat describes the named file or directory.
	Stat(name string) (fs.FileInfo, error)
	// ReadDir lists a directory sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(name string, perm fs.FileMode) error
	// SyncDir makes the directory's entries (creates, renames, removes) durable.
	SyncDir(name string) error
}

// IOVec is one piece of a vectored transfer.
type IOVec struct {
	Type MemType
	Off  int64
	Buf  []byte
}

// VectorIO is the optional capability of transferring several pieces in
// one call. Use [ReadV] and [WriteV], which fall back to a loop.
type VectorIO interface {
	ReadV(vecs []IOVec) error
	WriteV(vecs []IOVec) error
}

// Preallocator is the optional capability of reserving space for
// [off, off+n) so later writes do not fail for lack of space.
type Preallocator interface {
	Preallocate(off, n int64) error
}

// WritebackStarter is the optional capability of starting the write of
// [off, off+n) to the device without waiting for it, so that a later Sync
// finds less to do: a writer that goes on computing between blocks lets
// the device work meanwhile (Linux sync_file_range with
// SYNC_FILE_RANGE_WRITE, RocksDB's bytes_per_sync). Use [StartWriteback],
// which does nothing for files without it.
//
// It is a hint. It makes nothing durable (Sync is still required, and
// only Sync is a durability point), it changes neither the content nor
// the size of the file, and a driver may ignore it. n == 0 means through
// the end of the file; a range past the end of file is no error. A
// negative off or n is an error wrapping [ErrNegativeOffset]; on a closed
// file the error matches fs.ErrClosed. Like ReadAt and WriteAt, it may
// run concurrently with ReadAt and WriteAt.
type WritebackStarter interface {
	StartWriteback(off, n int64) error
}

// CacheDropper is the optional capability of writing [off, off+n) back
// to the device, waiting for that, and dropping it from the page cache,
// so that a writer of a large file nobody reads soon (a partner copy, a
// parity file) keeps its page-cache footprint to a few pieces and reuses
// its own pages instead of taking fresh memory for every byte (Linux
// sync_file_range with SYNC_FILE_RANGE_WAIT_BEFORE|WRITE|WAIT_AFTER, then
// posix_fadvise POSIX_FADV_DONTNEED). Use [DropCache], which does nothing
// for files without it.
//
// Like [WritebackStarter] it is a hint: it changes neither the content
// nor the size of the file and makes nothing durable (it neither flushes
// the metadata nor the device's cache, so Sync is still required); later
// reads of the range go to the device. n == 0 means through the end of
// the file; a range past the end of file is no error. A negative off or n
// is an error wrapping [ErrNegativeOffset]; on a closed file the error
// matches fs.ErrClosed. It may run concurrently with ReadAt, WriteAt and
// StartWriteback on other ranges.
type CacheDropper interface {
	DropCache(off, n int64) error
}

// ReadaheadStarter is the optional capability of starting to read [off,
// off+n) from the device into the page cache in the background (Linux
// posix_fadvise POSIX_FADV_WILLNEED), so that a reader that comes later
// (a restart's verification, after its collective start-up) finds the
// bytes on their way. Use [StartReadahead], which does nothing for files
// without it.
//
// It is a hint: it changes nothing in the file and returns before the
// reading is done; later reads return the file's bytes whether or not
// they arrived this way. n == 0 means through the end of the file; a
// range past the end of file is no error. A negative off or n is an error
// wrapping [ErrNegativeOffset]; on a closed file the error matches
// fs.ErrClosed. It may run concurrently with ReadAt and WriteAt.
type ReadaheadStarter interface {
	StartReadahead(off, n int64) error
}

// StartReadahead asks f to start reading [off, off+n) (n == 0: through
// the end of file) into the page cache in the background when it can,
// and does nothing otherwise. See [ReadaheadStarter].
func StartReadahead(f File, off, n int64) error {
	if r, ok := f.(ReadaheadStarter); ok {
		return r.StartReadahead(off, n)
	}
	return nil
}

// TypedWriter is the optional capability of taking a memory-type hint on
// a write. Use [WriteAtType], which falls back to WriteAt.
type TypedWriter interface {
	WriteAtType(t MemType, p []byte, off int64) (int, error)
}

// TypedReader is the optional capability of taking a memory-type hint on
// a read. Use [ReadAtType], which falls back to ReadAt.
type TypedReader interface {
	ReadAtType(t MemType, p []byte, off int64) (int, error)
}

// AddressSpace is the optional capability of drivers that keep an end of
// allocated address (HDF5's EOA) apart from the physical end of file.
type AddressSpace interface {
	EOA() int64
	SetEOA(eoa int64) error
}

// Unwrapper is implemented by wrapping files and drivers (fault, log,
// stdio) so callers can reach the file underneath.
type Unwrapper interface {
	Unwrap() File
}

// Fder is implemented by files backed by one OS file descriptor.
type Fder interface {
	Fd() uintptr
}

// WriteAtType writes p at off with memory-type hint t when f takes hints,
// and with WriteAt otherwise.
func WriteAtType(f File, t MemType, p []byte, off int64) (int, error) {
	if tw, ok := f.(TypedWriter); ok {
		return tw.WriteAtType(t, p, off)
	}
	return f.WriteAt(p, off)
}

// ReadAtType reads p at off with memory-type hint t when f takes hints,
// and with ReadAt otherwise.
func ReadAtType(f File, t MemType, p []byte, off int64) (int, error) {
	if tr, ok := f.(TypedReader); ok {
		return tr.ReadAtType(t, p, off)
	}
	return f.ReadAt(p, off)
}

// ReadV reads every piece of vecs, each in full, using f's VectorIO when
// it has one. A piece that reaches past the end of file is an error
// wrapping io.ErrUnexpectedEOF.
func ReadV(f File, vecs []IOVec) error {
	if v, ok := f.(VectorIO); ok {
		return v.ReadV(vecs)
	}
	for _, v := range vecs {
		n, err := ReadAtType(f, v.Type, v.Buf, v.Off)
		if n == len(v.Buf) {
			continue
		}
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// WriteV writes every piece of vecs, using f's VectorIO when it has one.
func WriteV(f File, vecs []IOVec) error {
	if v, ok := f.(VectorIO); ok {
		return v.WriteV(vecs)
	}
	for _, v := range vecs {
		if _, err := WriteAtType(f, v.Type, v.Buf, v.Off); err != nil {
			return err
		}
	}
	return nil
}

// Preallocate reserves [off, off+n) when f can; otherwise it does nothing.
func Preallocate(f File, off, n int64) error {
	if p, ok := f.(Preallocator); ok {
		return p.Preallocate(off, n)
	}
	return nil
}

// StartWriteback asks f to start writing [off, off+n) to the device (n ==
// 0: through the end of file) when it can, and does nothing otherwise. It
// is only a hint that lets the device work while the caller goes on: it
// makes nothing durable, so Sync is still required. See
// [WritebackStarter].
func StartWriteback(f File, off, n int64) error {
	if w, ok := f.(WritebackStarter); ok {
		return w.StartWriteback(off, n)
	}
	return nil
}

// DropCache asks f to write [off, off+n) back (n == 0: through the end of
// file), wait for it and drop it from the page cache when it can, and
// does nothing otherwise. It is only a hint: it makes nothing durable,
// so Sync is still required. See [CacheDropper].
func DropCache(f File, off, n int64) error {
	if d, ok := f.(CacheDropper); ok {
		return d.DropCache(off, n)
	}
	return nil
}

// checkWritebackRange reports a negative offset or length of a
// StartWriteback call.
func checkWritebackRange(name string, off, n int64) error {
	if off < 0 || n < 0 {
		return pathErr("writeback", name, ErrNegativeOffset)
	}
	return nil
}

// checkDropRange reports a negative offset or length of a DropCache call.
func checkDropRange(name string, off, n int64) error {
	if off < 0 || n < 0 {
		return pathErr("dropcache", name, ErrNegativeOffset)
	}
	return nil
}

// writebackEnd returns the exclusive end of the writeback range [off,
// off+n): math.MaxInt64 for n == 0 (through the end of file) or when
// off+n does not fit.
func writebackEnd(off, n int64) int64 {
	if n == 0 || n > math.MaxInt64-off {
		return math.MaxInt64
	}
	return off + n
}

// ReadFull reads exactly len(p) bytes at off. A read cut by the end of
// file returns an error wrapping io.ErrUnexpectedEOF (io.EOF when nothing
// at all could be read).
func ReadFull(f File, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		if n == 0 && len(p) > 0 {
			return io.EOF
		}
		return io.ErrUnexpectedEOF
	}
	return err
}
