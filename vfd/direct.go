package vfd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Defaults of the [Direct] driver.
const (
	DefaultDirectAlignment = 4096
	DefaultDirectBounce    = 4 << 20
)

// Direct is the O_DIRECT driver, after HDF5's direct driver: one OS file
// per name opened with O_DIRECT so transfers bypass the page cache. A
// request whose offset, length and buffer address are all multiples of
// the alignment goes straight to pread/pwrite. Any other read reads only
// the aligned blocks covering it, through an aligned bounce buffer (a
// read longer than the bounce buffer whose address lines up with the
// blocks takes its whole blocks straight into the caller's buffer, only
// its ends through the bounce buffer). Any other write goes through a
// bounce buffer (read-modify-write of the covering aligned blocks, then
// the file is cut back to its true size). Bounce buffers are pooled per
// driver. Where the file system refuses O_DIRECT, Open fails with an
// error wrapping [ErrUnsupported] and the errno. Sync is fdatasync. The
// namespace operations are those of [Sec2]. A direct file keeps its size
// in memory, so another writer of the same file behind its back is not
// seen.
type Direct struct {
	Sec2
	align  int
	bounce int
	// setDirect turns O_DIRECT on for fd; tests replace it to simulate a
	// file system that refuses it.
	setDirect func(fd int) error
	// onPread, when set, is told of every pread a direct file issues;
	// tests count the bytes asked of the device with it.
	onPread func(off int64, n int)
	// Aligned bounce buffers shared by the driver's files: edge holds
	// buffers of edgeSize bytes (two blocks, enough for any request that
	// fits in a block and for the partial blocks at the ends of a
	// request), bulk buffers of bounce bytes for long misaligned spans.
	edgeSize   int
	edge, bulk sync.Pool
}

// NewDirect returns an O_DIRECT driver with the given alignment (a power
// of two; DefaultDirectAlignment when <= 0) and bounce-buffer size
// (rounded up to the alignment; DefaultDirectBounce when <= 0).
func NewDirect(alignment, bounce int) (*Direct, error) {
	if alignment <= 0 {
		alignment = DefaultDirectAlignment
	}
	if alignment&(alignment-1) != 0 {
		return nil, fmt.Errorf("direct: alignment %d is not a power of two: %w", alignment, fs.ErrInvalid)
	}
	if bounce <= 0 {
		bounce = DefaultDirectBounce
	}
	bounce = (bounce + alignment - 1) &^ (alignment - 1)
	d := &Direct{align: alignment, bounce: bounce, setDirect: setODirect, edgeSize: min(2*alignment, bounce)}
	d.edge.New = func() any { b := alignedBuf(d.edgeSize, d.align); return &b }
	d.bulk.New = func() any { b := alignedBuf(d.bounce, d.align); return &b }
	return d, nil
}

// buffer returns a pooled aligned buffer for a bounce transfer spanning
// span bytes of whole blocks: an edge buffer when the span fits in one,
// a bounce-sized one otherwise. Give it back with release.
func (d *Direct) buffer(span int64) *[]byte {
	if span <= int64(d.edgeSize) && d.edgeSize < d.bounce {
		return d.edge.Get().(*[]byte)
	}
	return d.bulk.Get().(*[]byte)
}

func (d *Direct) release(b *[]byte) {
	if len(*b) < d.bounce {
		d.edge.Put(b)
		return
	}
	d.bulk.Put(b)
}

// Name returns "direct".
func (d *Direct) Name() string { return "direct" }

// Alignment returns the alignment in use.
func (d *Direct) Alignment() int { return d.align }

func setODirect(fd int) error {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_DIRECT)
	return err
}

// Open opens or creates name and switches it to O_DIRECT. A file this
// call created is removed again when O_DIRECT is refused.
func (d *Direct) Open(name string, flag Flag) (File, error) {
	existed := true
	if flag&OCreate != 0 {
		_, err := d.Stat(name)
		existed = err == nil
	}
	fd, err := openRegular(name, osFlags(flag)|syscall.O_CLOEXEC)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if err := d.setDirect(fd); err != nil {
		cerr := unix.Close(fd)
		var rerr error
		if !existed {
			rerr = d.Remove(name)
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			err = fmt.Errorf("%w: the file system refuses O_DIRECT: %w", ErrUnsupported, err)
		}
		return nil, pathErr("open", name, errors.Join(err, cerr, rerr))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, pathErr("open", name, errors.Join(err, unix.Close(fd)))
	}
	return &directFile{sec2File: sec2File{fd: fd, name: name, flag: flag}, d: d, size: st.Size}, nil
}

// directFile keeps its size itself: O_DIRECT writes cover whole aligned
// blocks, so the file is cut back to size after a write past the end.
type directFile struct {
	sec2File // fd, name, flag, closed; its mu guards Close against I/O
	d        *Direct
	wmu      sync.Mutex // serialises writes and truncates
	smu      sync.RWMutex
	size     int64 // guarded by smu, changed under wmu
}

// AlignedBuffer returns a zeroed buffer of n bytes whose address is a
// multiple of align (a power of two), for transfers that take the
// [Direct] driver's fast path.
func AlignedBuffer(n, align int) []byte { return alignedBuf(n, align) }

func alignedBuf(n, align int) []byte {
	b := make([]byte, n+align)
	shift := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) & uintptr(align-1)); r != 0 {
		shift = align - r
	}
	return b[shift : shift+n : shift+n]
}

func (f *directFile) aligned(p []byte, off int64) bool {
	a := f.d.align
	return len(p) > 0 && off%int64(a) == 0 && len(p)%a == 0 && uintptr(unsafe.Pointer(&p[0]))%uintptr(a) == 0
}

func (f *directFile) curSize() int64 {
	f.smu.RLock()
	defer f.smu.RUnlock()
	return f.size
}

func (f *directFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("read", f.name, ErrNegativeOffset)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, pathErr("read", f.name, ErrClosed)
	}
	size := f.curSize()
	if off >= size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := p[:min(int64(len(p)), size-off)]
	var err error
	if f.aligned(want, off) {
		_, err = f.pread(want, off)
	} else {
		err = f.bounceRead(want, off)
	}
	if err != nil && err != io.EOF {
		return 0, err
	}
	if len(want) < len(p) {
		return len(want), io.EOF
	}
	return len(want), nil
}

// pread reads p at off from the file, telling the test hook.
func (f *directFile) pread(p []byte, off int64) (int, error) {
	if f.d.onPread != nil {
		f.d.onPread(off, len(p))
	}
	return preadFull(f.fd, f.name, p, off)
}

// bounceRead reads p at off (inside the file), which is not aligned as
// a whole. It reads only the aligned blocks that cover the request. When
// the request spans more than one bounce buffer (so the bounce path would
// take several preads anyway) and the address of p lines up with the
// file's blocks, the whole blocks inside it go straight into p in one
// pread and only the partial blocks at its ends go through a bounce
// buffer; otherwise everything does, in one pread per bounce buffer.
func (f *directFile) bounceRead(p []byte, off int64) error {
	a := int64(f.d.align)
	end := off + int64(len(p))
	lo, hi := (off+a-1)&^(a-1), end&^(a-1) // the whole blocks inside the request
	span := (end+a-1)&^(a-1) - off&^(a-1)
	if span > int64(f.d.bounce) && lo < hi && uintptr(unsafe.Pointer(&p[lo-off]))%uintptr(a) == 0 {
		mid := p[lo-off : hi-off]
		n, err := f.pread(mid, lo)
		if err != nil && err != io.EOF {
			return err
		}
		clear(mid[n:])
		if err := f.readThrough(p[:lo-off], off); err != nil {
			return err
		}
		return f.readThrough(p[hi-off:], hi)
	}
	return f.readThrough(p, off)
}

// readThrough reads p at off through a pooled aligned buffer, one piece
// of at most the buffer's size at a time, each piece the aligned blocks
// covering it.
func (f *directFile) readThrough(p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	a := int64(f.d.align)
	bp := f.d.buffer((off+int64(len(p))+a-1)&^(a-1) - off&^(a-1))
	defer f.d.release(bp)
	buf := *bp
	for done := 0; done < len(p); {
		pos := off + int64(done)
		start := pos &^ (a - 1)
		end := min((pos+int64(len(p)-done)+a-1)&^(a-1), start+int64(len(buf)))
		chunk := buf[:end-start]
		n, err := f.pread(chunk, start)
		if err != nil && err != io.EOF {
			return err
		}
		clear(chunk[n:])
		done += copy(p[done:], chunk[pos-start:])
	}
	return nil
}

func (f *directFile) WriteAt(p []byte, off int64) (int, error) {
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
	if len(p) == 0 {
		return 0, nil
	}
	f.wmu.Lock()
	defer f.wmu.Unlock()
	size := f.curSize()
	newSize := max(size, off+int64(len(p)))
	if f.aligned(p, off) {
		if n, err := pwriteFull(f.fd, f.name, p, off); err != nil {
			return n, err
		}
	} else {
		if err := f.bounceWrite(p, off, size); err != nil {
			return 0, err
		}
		// The last block went down whole: cut the file back to its size.
		a := int64(f.d.align)
		if (off+int64(len(p))+a-1)&^(a-1) > newSize {
			if err := ftruncateRetry(f.fd, newSize); err != nil {
				return 0, pathErr("write", f.name, err)
			}
		}
	}
	f.smu.Lock()
	f.size = newSize
	f.smu.Unlock()
	return len(p), nil
}

// bounceWrite writes p at off by read-modify-write of aligned blocks;
// size is the file's true size (blocks past it read as zeros).
func (f *directFile) bounceWrite(p []byte, off, size int64) error {
	a := int64(f.d.align)
	bp := f.d.buffer((off+int64(len(p))+a-1)&^(a-1) - off&^(a-1))
	defer f.d.release(bp)
	buf := *bp
	for done := 0; done < len(p); {
		pos := off + int64(done)
		start := pos &^ (a - 1)
		end := min((pos+int64(len(p)-done)+a-1)&^(a-1), start+int64(len(buf)))
		chunk := buf[:end-start]
		// Only the first and last blocks can be partly covered by p.
		clear(chunk)
		if start < size && (pos > start || off+int64(len(p)) < end) {
			n, err := f.pread(chunk, start)
			if err != nil && err != io.EOF {
				return err
			}
			clear(chunk[n:])
		}
		n := copy(chunk[pos-start:], p[done:])
		if _, err := pwriteFull(f.fd, f.name, chunk, start); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// StartWriteback has nothing to start: O_DIRECT writes bypass the page
// cache, so no dirty pages wait for writeback. It checks the range and
// that the file is open.
func (f *directFile) StartWriteback(off, n int64) error {
	if err := checkWritebackRange(f.name, off, n); err != nil {
		return err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("writeback", f.name, ErrClosed)
	}
	return nil
}

// DropCache has nothing to drop: O_DIRECT writes bypass the page cache.
// It checks the range and that the file is open.
func (f *directFile) DropCache(off, n int64) error {
	if err := checkDropRange(f.name, off, n); err != nil {
		return err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("dropcache", f.name, ErrClosed)
	}
	return nil
}

func (f *directFile) Size() (int64, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, pathErr("stat", f.name, ErrClosed)
	}
	return f.curSize(), nil
}

func (f *directFile) Truncate(size int64) error {
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
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if err := ftruncateRetry(f.fd, size); err != nil {
		return pathErr("truncate", f.name, err)
	}
	f.smu.Lock()
	f.size = size
	f.smu.Unlock()
	return nil
}
