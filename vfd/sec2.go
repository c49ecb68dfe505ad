package vfd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sec2 is the default driver: one OS file per name, accessed with POSIX
// positioned I/O (pread/pwrite), restarting on EINTR and short transfers,
// made durable with fdatasync. Its zero value is ready to use.
type Sec2 struct{}

// Name returns "sec2".
func (Sec2) Name() string { return "sec2" }

func osFlags(flag Flag) int {
	o := os.O_RDONLY
	if flag&ReadWrite != 0 {
		o = os.O_RDWR
	}
	if flag&OCreate != 0 {
		o |= os.O_CREATE
	}
	if flag&OTrunc != 0 {
		o |= os.O_TRUNC
	}
	if flag&OExcl != 0 {
		o |= os.O_EXCL
	}
	return o
}

// Open opens or creates name. Only regular files open: any other kind of
// file (directory, FIFO, device, socket) is refused with an error
// wrapping [ErrNotRegular], without blocking on a FIFO.
func (Sec2) Open(name string, flag Flag) (File, error) {
	fd, err := openRegular(name, osFlags(flag)|syscall.O_CLOEXEC)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return &sec2File{fd: fd, name: name, flag: flag}, nil
}

// openRegular opens name with flags and returns the descriptor when it
// is a regular file. It opens with O_NONBLOCK, so that a FIFO without a
// writer does not block the open, checks the kind with fstat and clears
// O_NONBLOCK again.
func openRegular(name string, flags int) (int, error) {
	fd, err := openRetry(name, flags|syscall.O_NONBLOCK, 0o666)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return -1, errors.Join(err, unix.Close(fd))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, errors.Join(fmt.Errorf("%w (%s)", ErrNotRegular, fileKind(st.Mode)), unix.Close(fd))
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	if err != nil {
		return -1, errors.Join(err, unix.Close(fd))
	}
	return fd, nil
}

// fileKind names the kind of file of a stat mode.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return fmt.Sprintf("mode %#o", mode&unix.S_IFMT)
}

func openRetry(name string, flags int, perm uint32) (int, error) {
	for {
		fd, err := unix.Open(name, flags, perm)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// Remove removes a file or empty directory.
func (Sec2) Remove(name string) error { return os.Remove(name) }

// RemoveAll removes name and its contents.
func (Sec2) RemoveAll(name string) error { return os.RemoveAll(name) }

// Rename renames oldname to newname, replacing it.
func (Sec2) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Stat describes name.
func (Sec2) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// ReadDir lists a directory sorted by name (os.ReadDir already sorts).
func (Sec2) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// MkdirAll creates a directory and its parents.
func (Sec2) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

// SyncDir fsyncs a directory so its entries are durable.
func (Sec2) SyncDir(name string) error { return syncDirOS(name) }

func syncDirOS(name string) error {
	if name == "" {
		name = "."
	}
	fd, err := openRetry(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("syncdir", name, err)
	}
	err = fsyncRetry(fd)
	cerr := unix.Close(fd)
	if err != nil {
		return pathErr("syncdir", name, err)
	}
	return pathErr("syncdir", name, cerr)
}

func fsyncRetry(fd int) error {
	for {
		err := unix.Fsync(fd)
		if err != unix.EINTR {
			return err
		}
	}
}

type sec2File struct {
	mu     sync.RWMutex // guards fd against Close racing I/O
	fd     int
	name   string
	flag   Flag
	closed bool
	// noWriteback is set once the kernel or the file system refused
	// sync_file_range on this file; StartWriteback then does nothing.
	noWriteback atomic.Bool
	// noDrop is set once the kernel or the file system refused
	// posix_fadvise on this file; DropCache then does nothing.
	noDrop atomic.Bool
}

func (f *sec2File) Name() string { return f.name }
func (f *sec2File) Fd() uintptr  { return uintptr(f.fd) }

func (f *sec2File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("read", f.name, ErrNegativeOffset)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, pathErr("read", f.name, ErrClosed)
	}
	return preadFull(f.fd, f.name, p, off)
}

func preadFull(fd int, name string, p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.Pread(fd, p[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, pathErr("read", name, err)
		}
		if n == 0 {
			return done, io.EOF
		}
		done += n
	}
	return done, nil
}

func (f *sec2File) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("write", f.name, ErrNegativeOffset)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, pathErr("write", f.name, ErrClosed)
	}
	if !f.flag.Writable() {
		return 0, pathErr("write", f.name, ErrReadOnly)
	}
	return pwriteFull(f.fd, f.name, p, off)
}

func pwriteFull(fd int, name string, p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.Pwrite(fd, p[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, pathErr("write", name, err)
		}
		if n == 0 {
			return done, pathErr("write", name, io.ErrShortWrite)
		}
		done += n
	}
	return done, nil
}

func (f *sec2File) Size() (int64, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, pathErr("stat", f.name, ErrClosed)
	}
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return 0, pathErr("stat", f.name, err)
	}
	return st.Size, nil
}

func (f *sec2File) Truncate(size int64) error {
	if size < 0 {
		return pathErr("truncate", f.name, ErrNegativeOffset)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("truncate", f.name, ErrClosed)
	}
	if !f.flag.Writable() {
		return pathErr("truncate", f.name, ErrReadOnly)
	}
	return pathErr("truncate", f.name, ftruncateRetry(f.fd, size))
}

func ftruncateRetry(fd int, size int64) error {
	for {
		err := unix.Ftruncate(fd, size)
		if err != unix.EINTR {
			return err
		}
	}
}

func (f *sec2File) Sync() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("sync", f.name, ErrClosed)
	}
	for {
		err := unix.Fdatasync(f.fd)
		if err != unix.EINTR {
			return pathErr("sync", f.name, err)
		}
	}
}

// StartWriteback starts writing the dirty pages of [off, off+n) with
// sync_file_range(SYNC_FILE_RANGE_WRITE) and returns without waiting.
// Where the kernel or the file system refuses it (ENOSYS, EINVAL,
// EOPNOTSUPP, ESPIPE) it returns nil and does nothing more for this file.
func (f *sec2File) StartWriteback(off, n int64) error {
	if err := checkWritebackRange(f.name, off, n); err != nil {
		return err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("writeback", f.name, ErrClosed)
	}
	if f.noWriteback.Load() {
		return nil
	}
	if n > math.MaxInt64-off { // the kernel refuses a range that wraps
		n = 0
	}
	for {
		err := unix.SyncFileRange(f.fd, off, n, unix.SYNC_FILE_RANGE_WRITE)
		switch err {
		case nil:
			return nil
		case unix.EINTR:
			continue
		case unix.ENOSYS, unix.EINVAL, unix.EOPNOTSUPP, unix.ESPIPE:
			f.noWriteback.Store(true)
			return nil
		}
		return pathErr("writeback", f.name, err)
	}
}

// DropCache writes the dirty pages of [off, off+n) and waits for them
// (sync_file_range with SYNC_FILE_RANGE_WAIT_BEFORE, WRITE and
// WAIT_AFTER), then drops the range from the page cache
// (posix_fadvise POSIX_FADV_DONTNEED). Where the kernel or the file
// system refuses either call (ENOSYS, EINVAL, EOPNOTSUPP, ESPIPE) that
// step does nothing more for this file and DropCache returns nil.
func (f *sec2File) DropCache(off, n int64) error {
	if err := checkDropRange(f.name, off, n); err != nil {
		return err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("dropcache", f.name, ErrClosed)
	}
	if n > math.MaxInt64-off {
		n = 0
	}
	const wait = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	for !f.noWriteback.Load() {
		err := unix.SyncFileRange(f.fd, off, n, wait)
		if err == unix.EINTR {
			continue
		}
		if refused(err) {
			f.noWriteback.Store(true)
			break
		}
		if err != nil {
			return pathErr("dropcache", f.name, err)
		}
		break
	}
	if f.noDrop.Load() {
		return nil
	}
	err := unix.Fadvise(f.fd, off, n, unix.FADV_DONTNEED)
	if refused(err) {
		f.noDrop.Store(true)
		return nil
	}
	return pathErr("dropcache", f.name, err)
}

// StartReadahead starts reading [off, off+n) into the page cache
// (posix_fadvise POSIX_FADV_WILLNEED) and returns without waiting for
// the device. Where the kernel or the file system refuses the call
// (ENOSYS, EINVAL, EOPNOTSUPP, ESPIPE) it does nothing and returns nil.
func (f *sec2File) StartReadahead(off, n int64) error {
	if off < 0 || n < 0 {
		return pathErr("readahead", f.name, ErrNegativeOffset)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("readahead", f.name, ErrClosed)
	}
	if n > math.MaxInt64-off {
		n = 0
	}
	err := unix.Fadvise(f.fd, off, n, unix.FADV_WILLNEED)
	if err == nil || refused(err) {
		return nil
	}
	return pathErr("readahead", f.name, err)
}

// refused reports an error by which the kernel or the file system says
// it does not offer a call on a file.
func refused(err error) bool {
	return err == unix.ENOSYS || err == unix.EINVAL || err == unix.EOPNOTSUPP || err == unix.ESPIPE
}

// Preallocate reserves space with fallocate where the file system supports it.
func (f *sec2File) Preallocate(off, n int64) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("preallocate", f.name, ErrClosed)
	}
	err := unix.Fallocate(f.fd, unix.FALLOC_FL_KEEP_SIZE, off, n)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return nil
	}
	return pathErr("preallocate", f.name, err)
}

func (f *sec2File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, ErrClosed)
	}
	f.closed = true
	return pathErr("close", f.name, unix.Close(f.fd))
}

// maxIOV is the most pieces one pwritev takes (IOV_MAX on Linux).
const maxIOV = 1024

var _ VectorIO = (*sec2File)(nil)

// WriteV writes every piece of vecs; pieces that follow each other in the
// file (each starting where the one before it ends) go out together in
// one pwritev, up to maxIOV at a time, so a caller that gathers a
// contiguous file range from many buffers pays one system call, not one
// per buffer.
func (f *sec2File) WriteV(vecs []IOVec) error {
	for _, v := range vecs {
		if v.Off < 0 {
			return pathErr("write", f.name, ErrNegativeOffset)
		}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("write", f.name, ErrClosed)
	}
	if !f.flag.Writable() {
		return pathErr("write", f.name, ErrReadOnly)
	}
	bufs := make([][]byte, 0, min(len(vecs), maxIOV))
	for i := 0; i < len(vecs); {
		off := vecs[i].Off
		end := off
		bufs = bufs[:0]
		for ; i < len(vecs) && len(bufs) < maxIOV && vecs[i].Off == end; i++ {
			if len(vecs[i].Buf) > 0 {
				bufs = append(bufs, vecs[i].Buf)
			}
			end += int64(len(vecs[i].Buf))
		}
		if err := pwritevFull(f.fd, f.name, bufs, off); err != nil {
			return err
		}
	}
	return nil
}

// pwritevFull writes bufs at off, one after the other, restarting on
// EINTR and short writes.
func pwritevFull(fd int, name string, bufs [][]byte, off int64) error {
	for len(bufs) > 0 {
		if len(bufs) == 1 {
			_, err := pwriteFull(fd, name, bufs[0], off)
			return err
		}
		n, err := unix.Pwritev(fd, bufs, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return pathErr("write", name, err)
		}
		if n == 0 {
			return pathErr("write", name, io.ErrShortWrite)
		}
		off += int64(n)
		for n > 0 {
			if n < len(bufs[0]) {
				bufs[0] = bufs[0][n:]
				break
			}
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
	}
	return nil
}

// ReadV reads every piece of vecs, each in full (a piece past the end of
// file is an error wrapping io.ErrUnexpectedEOF).
func (f *sec2File) ReadV(vecs []IOVec) error {
	for _, v := range vecs {
		n, err := f.ReadAt(v.Buf, v.Off)
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
