package vfd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"unsafe"
)

// Loaded is a file being read into memory by a background goroutine and,
// meanwhile, a read-only [File] over those bytes: a ReadAt returns as
// soon as the range it asks for has arrived. A reader that checks the
// bytes as it goes (hashing them) thus overlaps with the loading, and
// each byte is read from the underlying file once; [Loaded.Bytes] then
// hands over the whole image. See [Load].
type Loaded struct {
	f     File
	name  string
	buf   []byte
	piece int64
	tail  int64 // buf[tail:] is loaded first, then buf[:tail]

	mu       sync.Mutex
	cond     *sync.Cond
	head     int64 // buf[:head] has arrived
	tailDone bool  // buf[tail:] has arrived
	err      error // the load failed (or was stopped)
	stop     bool
	done     chan struct{}
}

// Load starts reading the first size bytes of f (size must not exceed
// f's size) into a new buffer of size bytes, in pieces of piece bytes
// (<= 0: 4 MiB). The last tail bytes are read first, the rest in order
// from offset 0: a file whose metadata sits at its end (FTI-FF) can be
// opened while its data is still arriving. The returned Loaded owns f
// and closes it on Close.
func Load(f File, size int64, piece int, tail int64) *Loaded {
	return LoadAligned(f, size, piece, tail, -1)
}

// LoadAligned is [Load] into a buffer placed so that its byte at offset
// align starts a memory page (align < 0: anywhere): the bytes of the
// file from align on can then be handed over page by page
// ([MovePages]) to memory that starts on a page, as a large Go slice
// does. It costs at most one page more.
func LoadAligned(f File, size int64, piece int, tail int64, align int64) *Loaded {
	if piece <= 0 {
		piece = 4 << 20
	}
	size = max(size, 0)
	tail = min(max(tail, 0), size)
	l := &Loaded{f: f, name: f.Name(), buf: AlignedBytes(size, align), piece: int64(piece), tail: size - tail, done: make(chan struct{})}
	l.cond = sync.NewCond(&l.mu)
	go l.run()
	return l
}

var errLoadStopped = errors.New("vfd: load stopped")

func (l *Loaded) run() {
	defer close(l.done)
	size := int64(len(l.buf))
	load := func(from, to int64, moved func(int64)) bool {
		for off := from; off < to; {
			n := min(l.piece, to-off)
			l.mu.Lock()
			stop := l.stop
			l.mu.Unlock()
			if stop {
				l.fail(errLoadStopped)
				return false
			}
			if err := ReadFull(l.f, l.buf[off:off+n], off); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				l.fail(fmt.Errorf("load %s at %d: %w", l.name, off, err))
				return false
			}
			off += n
			l.mu.Lock()
			moved(off)
			l.cond.Broadcast()
			l.mu.Unlock()
		}
		return true
	}
	if !load(l.tail, size, func(int64) {}) {
		return
	}
	l.mu.Lock()
	l.tailDone = true
	l.cond.Broadcast()
	l.mu.Unlock()
	load(0, l.tail, func(off int64) { l.head = off })
}

func (l *Loaded) fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.cond.Broadcast()
	l.mu.Unlock()
}

// covered reports whether [off, end) has arrived; l.mu is held.
func (l *Loaded) covered(off, end int64) bool {
	if end <= l.head {
		return true
	}
	if !l.tailDone {
		return false
	}
	return off >= l.tail || l.head >= l.tail
}

// ReadAt copies bytes of the image into p once they have arrived; it
// returns the load's error if the load fails before they do.
func (l *Loaded) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("read", l.name, ErrNegativeOffset)
	}
	size := int64(len(l.buf))
	if off >= size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := min(int64(len(p)), size-off)
	b, err := l.Range(off, off+n)
	if err != nil {
		return 0, err
	}
	copy(p, b)
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// Range waits until bytes [off, end) have arrived and returns them in
// place, without a copy: the caller must not modify them. It returns the
// load's error if the load fails before they arrive.
func (l *Loaded) Range(off, end int64) ([]byte, error) {
	if off < 0 || end < off {
		return nil, pathErr("read", l.name, ErrNegativeOffset)
	}
	if end > int64(len(l.buf)) {
		return nil, pathErr("read", l.name, fmt.Errorf("range [%d, %d) of %d bytes: %w", off, end, len(l.buf), io.ErrUnexpectedEOF))
	}
	l.mu.Lock()
	for !l.covered(off, end) && l.err == nil {
		l.cond.Wait()
	}
	ok, err := l.covered(off, end), l.err
	l.mu.Unlock()
	if !ok {
		return nil, err
	}
	return l.buf[off:end:end], nil
}

// Bytes waits until the whole file has arrived and returns the buffer
// (which the caller may keep after Close), or the load's error.
func (l *Loaded) Bytes() ([]byte, error) {
	<-l.done
	if l.err != nil {
		return nil, l.err
	}
	return l.buf, nil
}

// Name returns the underlying file's name.
func (l *Loaded) Name() string { return l.name }

// Size returns the number of bytes being loaded.
func (l *Loaded) Size() (int64, error) { return int64(len(l.buf)), nil }

// WriteAt fails: a Loaded is read-only.
func (l *Loaded) WriteAt([]byte, int64) (int, error) { return 0, pathErr("write", l.name, ErrReadOnly) }

// Truncate fails: a Loaded is read-only.
func (l *Loaded) Truncate(int64) error { return pathErr("truncate", l.name, ErrReadOnly) }

// Sync does nothing: nothing is ever written.
func (l *Loaded) Sync() error { return nil }

// Close stops the load if it is still running, waits for it and closes
// the underlying file. The buffer returned by Bytes stays valid.
func (l *Loaded) Close() error {
	l.mu.Lock()
	l.stop = true
	l.mu.Unlock()
	<-l.done
	return l.f.Close()
}

// AlignedBytes returns a new zeroed buffer of size bytes whose byte at
// offset align starts a memory page (align < 0 or >= size: a plain
// buffer), at the cost of at most one page more: a file image whose data
// from align on can be handed over page by page ([MovePages]).
func AlignedBytes(size, align int64) []byte {
	size = max(size, 0)
	if align < 0 || align >= size {
		return make([]byte, size)
	}
	ps := int64(os.Getpagesize())
	raw := make([]byte, size+ps)
	at := int64(uintptr(unsafe.Pointer(unsafe.SliceData(raw)))) + align
	shift := (ps - at%ps) % ps
	return raw[shift : shift+size : shift+size]
}

// BytesFile returns b as a read-only [File] named name (Close does
// nothing; b must not change while the file is used).
func BytesFile(name string, b []byte) File { return &bytesFile{name: name, b: b} }

type bytesFile struct {
	name string
	b    []byte
}

func (f *bytesFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("read", f.name, ErrNegativeOffset)
	}
	if off >= int64(len(f.b)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Range returns bytes [off, end) in place, without a copy (as
// [Loaded.Range] does): the caller must not modify them.
func (f *bytesFile) Range(off, end int64) ([]byte, error) {
	if off < 0 || end < off {
		return nil, pathErr("read", f.name, ErrNegativeOffset)
	}
	if end > int64(len(f.b)) {
		return nil, pathErr("read", f.name, fmt.Errorf("range [%d, %d) of %d bytes: %w", off, end, len(f.b), io.ErrUnexpectedEOF))
	}
	return f.b[off:end:end], nil
}

func (f *bytesFile) Name() string         { return f.name }
func (f *bytesFile) Size() (int64, error) { return int64(len(f.b)), nil }
func (f *bytesFile) WriteAt([]byte, int64) (int, error) {
	return 0, pathErr("write", f.name, ErrReadOnly)
}
func (f *bytesFile) Truncate(int64) error { return pathErr("truncate", f.name, ErrReadOnly) }
func (f *bytesFile) Sync() error          { return nil }
func (f *bytesFile) Close() error         { return nil }
