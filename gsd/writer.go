package gsd

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/vfd"
)

// Writer appends frames to a GSD 2.0 file. Chunks written with
// [WriteChunk] or [Writer.WriteRaw] belong to the current frame;
// [Writer.EndFrame] ends it and, by default, commits it. A Writer is not
// safe for concurrent use.
type Writer struct {
	f    vfd.File
	path string
	o    options
	log  *zap.Logger

	hdr      Header
	ids      map[string]uint16
	nnames   int
	nameBuf  []byte // the namelist's used bytes (names, each NUL-terminated)
	nameDisk int    // bytes of nameBuf known to be on disk
	used     uint64 // committed index entries
	eof      int64  // where the next data goes
	frame    uint64 // current frame number
	cur      []Entry
	ended    []Entry // entries of ended, uncommitted frames, sorted
	pending  int64   // bytes of data in ended, uncommitted frames
	curBytes int64
	wbuf     []byte
	wbufOff  int64
	lastSync time.Time
	commits  uint64
	closed   bool
	sticky   error
	ibuf     []byte // reused for the index entries of a commit
}

// Create creates a GSD 2.0 file called name through d, with the given
// application and schema names (valid UTF-8 without NUL; at most 63 bytes
// each are kept, cut at a character boundary) and schema version. The
// file is laid out as the reference library does: header, a 128-slot
// index, a 1 KiB namelist, then data. It fails with an error matching
// fs.ErrExist when the file exists, unless [WithOverwrite].
//
// Creation is atomic: the header and the empty blocks are written to
// name + ".tmp", synced, and renamed over name, and the directory is
// synced, so a process killed (or a machine losing power) at any point
// leaves either no file (or the previous file, with WithOverwrite) or a
// complete empty GSD file, never a 0-byte or header-less name. (The
// existence check and the rename are two steps: two processes creating
// the same name at once both succeed, the last rename wins.)
func Create(d vfd.Driver, name, application, schema string, schemaVersion Version, opts ...Option) (*Writer, error) {
	o := buildOptions(opts)
	for _, s := range [...]struct{ what, v string }{{"application", application}, {"schema", schema}} {
		if err := checkHeaderString(s.what, s.v); err != nil {
			return nil, fmt.Errorf("gsd: create %s: %w", name, err)
		}
	}
	if !o.overwrite {
		if _, err := d.Stat(name); err == nil {
			return nil, fmt.Errorf("gsd: create: %w", &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist})
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("gsd: create: %w", err)
		}
	}
	indexCap := uint64(initIndexSlots)
	for indexCap < o.indexCap {
		indexCap *= 2
	}
	hdr := Header{
		IndexLocation:  headerSize,
		IndexAllocated: indexCap,
		NameLocation:   headerSize + int64(indexCap)*entrySize,
		NameAllocated:  initNameBlocks,
		SchemaVersion:  schemaVersion,
		GSDVersion:     Version2,
		Application:    application,
		Schema:         schema,
	}
	eof := hdr.NameLocation + initNameBlocks*nameBlockUnit
	init := make([]byte, eof)
	copy(init, hdr.encode())
	if err := createAtomic(d, name, init, o.sync); err != nil {
		return nil, err
	}
	f, err := d.Open(name, vfd.ReadWrite)
	if err != nil {
		return nil, fmt.Errorf("gsd: create: reopen: %w", err)
	}
	w := newWriter(f, name, o)
	w.hdr = hdr
	w.eof = eof
	w.wbufOff = eof
	return w, nil
}

// createAtomic writes init to name + ".tmp", syncs it (with sync), renames
// it to name and syncs the directory (with sync). On failure the
// temporary file is removed and name is as it was.
func createAtomic(d vfd.Driver, name string, init []byte, sync bool) error {
	tmp := name + ".tmp"
	f, err := d.Open(tmp, vfd.ReadWrite|vfd.OCreate|vfd.OTrunc)
	if err != nil {
		return fmt.Errorf("gsd: create %s: %w", name, err)
	}
	fail := func(err error) error { return errors.Join(err, d.Remove(tmp)) }
	if _, err := vfd.WriteAtType(f, vfd.MemSuper, init, 0); err != nil {
		return fail(errors.Join(fmt.Errorf("gsd: create %s: write header: %w", name, err), f.Close()))
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fail(errors.Join(fmt.Errorf("gsd: create %s: sync: %w", name, err), f.Close()))
		}
	}
	if err := f.Close(); err != nil {
		return fail(fmt.Errorf("gsd: create %s: close: %w", name, err))
	}
	if err := d.Rename(tmp, name); err != nil {
		return fail(fmt.Errorf("gsd: create %s: %w", name, err))
	}
	if sync {
		if err := d.SyncDir(path.Dir(name)); err != nil {
			return fmt.Errorf("gsd: create %s: sync directory: %w", name, err)
		}
	}
	return nil
}

// CreateOrAppend opens name for appending ([OpenAppend]) when it holds a
// GSD file, and creates it ([Create], atomically) when it does not exist
// or is empty: 0 bytes, shorter than the 256-byte header and either all
// zero or starting with (part of) the GSD magic number, or all zero and at
// most 1 MiB long (what a writer killed while creating a file with a
// non-atomic create leaves). Such a file cannot hold a frame, so nothing
// is lost by replacing it. Any other file that is not GSD is refused with
// ErrNotGSD and left alone. application, schema and schemaVersion are used
// only when the file is created.
func CreateOrAppend(d vfd.Driver, name, application, schema string, schemaVersion Version, opts ...Option) (*Writer, error) {
	w, err := OpenAppend(d, name, opts...)
	switch {
	case err == nil:
		return w, nil
	case errors.Is(err, fs.ErrNotExist):
		return Create(d, name, application, schema, schemaVersion, opts...)
	case errors.Is(err, ErrEmpty):
		o := buildOptions(opts)
		o.logger.Info("replacing an empty GSD file", zap.String("gsd-file", name), zap.Error(err))
		return Create(d, name, application, schema, schemaVersion, append(opts, WithOverwrite())...)
	}
	return nil, err
}

func newWriter(f vfd.File, name string, o options) *Writer {
	return &Writer{f: f, path: name, o: o, log: o.logger.With(zap.String("gsd-file", name)),
		ids: map[string]uint16{}, lastSync: o.clock()}
}

// OpenAppend opens an existing GSD 2.x file for appending: the next frame
// is the one after the last committed frame, new data goes after the end
// of file (after any bytes a killed writer left behind). A 1.0 file must
// be upgraded first ([Upgrade]); OpenAppend returns ErrVersion for it.
func OpenAppend(d vfd.Driver, name string, opts ...Option) (*Writer, error) {
	o := buildOptions(opts)
	f, err := d.Open(name, vfd.ReadWrite)
	if err != nil {
		return nil, fmt.Errorf("gsd: open for append: %w", err)
	}
	size, err := f.Size()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("gsd: size of %s: %w", name, err), f.Close())
	}
	st, err := load(f, size, name, false)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	if st.hdr.GSDVersion < Version2 {
		return nil, errors.Join(fmt.Errorf("gsd: %s: append to a %s file (upgrade it first): %w", name, st.hdr.GSDVersion, ErrVersion), f.Close())
	}
	w := newWriter(f, name, o)
	w.hdr = st.hdr
	for i, n := range st.names {
		w.ids[n] = uint16(i)
		w.nameBuf = append(append(w.nameBuf, n...), 0)
	}
	w.nnames = len(st.names)
	w.nameDisk = len(w.nameBuf)
	w.used = uint64(len(st.entries))
	w.frame = st.nframes
	w.eof = size
	w.wbufOff = size
	return w, nil
}

// Frame returns the number of the frame being written (the number of
// ended frames, counting committed and uncommitted ones).
func (w *Writer) Frame() uint64 { return w.frame }

// NFrames returns the number of ended frames.
func (w *Writer) NFrames() uint64 { return w.frame }

// Commits returns how many commits (index writes) the Writer has made.
func (w *Writer) Commits() uint64 { return w.commits }

// Path returns the file name.
func (w *Writer) Path() string { return w.path }

func (w *Writer) usable() error {
	if w.closed {
		return ErrClosed
	}
	return w.sticky
}

// WriteRaw writes an n×m chunk of type t called name into the current
// frame; data holds its n·m·size(t) little-endian bytes.
func (w *Writer) WriteRaw(name string, t Type, n uint64, m uint32, data []byte) error {
	if !t.writable() {
		return fmt.Errorf("gsd: write %q: type %d: %w", name, t, ErrType)
	}
	if m == 0 {
		return fmt.Errorf("gsd: write %q: M is 0: %w", name, ErrShape)
	}
	ds, ok := dataSize(n, m, t)
	if !ok || ds != int64(len(data)) {
		return fmt.Errorf("gsd: write %q: %d bytes for %d×%d %s: %w", name, len(data), n, m, t, ErrShape)
	}
	return w.writeChunk(name, t, n, m, data)
}

func (w *Writer) writeChunk(name string, t Type, n uint64, m uint32, data []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	if name == "" || strings.IndexByte(name, 0) >= 0 || !utf8.ValidString(name) {
		return fmt.Errorf("gsd: write %q: empty, holds NUL or not valid UTF-8 (python3-gsd decodes names as UTF-8): %w", name, ErrName)
	}
	id, known := w.ids[name]
	if known {
		for _, e := range w.cur {
			if e.ID == id {
				return fmt.Errorf("gsd: write %q in frame %d: %w", name, w.frame, ErrDuplicateChunk)
			}
		}
	} else {
		if w.nnames >= maxNames {
			return fmt.Errorf("gsd: write %q: more than %d names: %w", name, maxNames, ErrName)
		}
		if len(w.nameBuf)+len(name)+1 > maxNameBytes {
			return fmt.Errorf("gsd: write %q: names would take more than %d bytes: %w", name, maxNameBytes, ErrName)
		}
		id = uint16(w.nnames)
	}
	loc, err := w.appendData(data)
	if err != nil {
		w.sticky = err
		return err
	}
	if !known {
		w.ids[name] = id
		w.nnames++
		w.nameBuf = append(append(w.nameBuf, name...), 0)
	}
	w.cur = append(w.cur, Entry{Frame: w.frame, N: n, M: m, Location: loc, ID: id, Type: t})
	w.curBytes += int64(len(data))
	return nil
}

// appendData places data at the end of file, gathering small pieces in the
// write buffer, and returns its location.
func (w *Writer) appendData(data []byte) (int64, error) {
	loc := w.eof
	if len(data) < w.o.bufSize {
		if len(w.wbuf)+len(data) > w.o.bufSize {
			if err := w.flushBuf(); err != nil {
				return 0, err
			}
		}
		if w.wbuf == nil {
			w.wbuf = make([]byte, 0, w.o.bufSize)
		}
		w.wbuf = append(w.wbuf, data...)
	} else {
		if err := w.flushBuf(); err != nil {
			return 0, err
		}
		if len(data) > 0 {
			if _, err := vfd.WriteAtType(w.f, vfd.MemDraw, data, loc); err != nil {
				return 0, fmt.Errorf("gsd: %s: write chunk data at %d: %w", w.path, loc, err)
			}
		}
		w.wbufOff = loc + int64(len(data))
	}
	w.eof += int64(len(data))
	return loc, nil
}

func (w *Writer) flushBuf() error {
	if len(w.wbuf) > 0 {
		if _, err := vfd.WriteAtType(w.f, vfd.MemDraw, w.wbuf, w.wbufOff); err != nil {
			return fmt.Errorf("gsd: %s: write chunk data at %d: %w", w.path, w.wbufOff, err)
		}
	}
	w.wbuf = w.wbuf[:0]
	w.wbufOff = w.eof
	return nil
}

// EndFrame ends the current frame and starts the next one. By default it
// commits the frame; in buffered mode ([WithBuffered]) it commits when the
// byte bound or the interval is reached. A frame without chunks leaves no
// trace in the file unless a later frame has chunks.
func (w *Writer) EndFrame() error {
	if err := w.usable(); err != nil {
		return err
	}
	slices.SortFunc(w.cur, func(a, b Entry) int { return int(a.ID) - int(b.ID) })
	w.ended = append(w.ended, w.cur...)
	w.cur = w.cur[:0]
	w.pending += w.curBytes
	w.curBytes = 0
	w.frame++
	buffered := w.o.maxBytes > 0 || w.o.interval > 0
	if !buffered ||
		(w.o.maxBytes > 0 && w.pending >= w.o.maxBytes) ||
		(w.o.interval > 0 && w.o.clock().Sub(w.lastSync) >= w.o.interval) {
		return w.commit()
	}
	return nil
}

// Flush commits every ended frame now, whatever the mode. Chunks of the
// frame being written are not committed.
func (w *Writer) Flush() error {
	if err := w.usable(); err != nil {
		return err
	}
	return w.commit()
}

// Close commits every ended frame and closes the file. Chunks written to a
// frame that was not ended are discarded (their bytes stay as dead space).
// After a failed write or commit, Close only closes the file and returns
// that first error again.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	err := w.sticky
	if err == nil {
		err = w.commit()
	}
	if err == nil && w.o.ordered {
		err = w.sync("on close")
	}
	w.closed = true
	return errors.Join(err, w.f.Close())
}

func (w *Writer) sync(what string) error {
	if !w.o.sync {
		return nil
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("gsd: %s: sync %s: %w", w.path, what, err)
	}
	return nil
}

// commit makes the ended frames part of the file: data and any relocated
// namelist or index first, fsync, header if it changed, then the index
// entries, first slot last, then fsync.
func (w *Writer) commit() error {
	if err := w.commitInner(); err != nil {
		w.sticky = err
		return err
	}
	return nil
}

func (w *Writer) commitInner() error {
	newNames := len(w.nameBuf) > w.nameDisk
	if len(w.ended) == 0 && !newNames {
		return w.flushBuf()
	}
	if err := w.flushBuf(); err != nil {
		return err
	}
	headerDirty := false
	if newNames {
		moved, err := w.writeNames()
		if err != nil {
			return err
		}
		headerDirty = headerDirty || moved
	}
	if len(w.ended) > 0 {
		moved, err := w.growIndex()
		if err != nil {
			return err
		}
		headerDirty = headerDirty || moved
	}
	if err := w.sync("data"); err != nil {
		return err
	}
	if headerDirty {
		if _, err := vfd.WriteAtType(w.f, vfd.MemSuper, w.hdr.encode(), 0); err != nil {
			return fmt.Errorf("gsd: %s: write header: %w", w.path, err)
		}
		if err := w.sync("header"); err != nil {
			return err
		}
	}
	if len(w.ended) == 0 {
		return nil
	}
	if cap(w.ibuf) < len(w.ended)*entrySize {
		w.ibuf = make([]byte, len(w.ended)*entrySize)
	}
	buf := w.ibuf[:len(w.ended)*entrySize]
	for i, e := range w.ended {
		encodeEntry(buf[i*entrySize:], e)
	}
	off := w.hdr.IndexLocation + int64(w.used)*entrySize
	// One write for the whole batch: a kill leaves all of it or none, and
	// never a non-zero slot after a zero one (which reference readers, who
	// binary-search for the first unused slot, could take as corrupt).
	if _, err := vfd.WriteAtType(w.f, vfd.MemBTree, buf, off); err != nil {
		return fmt.Errorf("gsd: %s: write index entries: %w", w.path, err)
	}
	if !w.o.ordered {
		if err := w.sync("index"); err != nil {
			return err
		}
	}
	w.used += uint64(len(w.ended))
	w.ended = w.ended[:0]
	w.pending = 0
	w.lastSync = w.o.clock()
	w.commits++
	return nil
}

// alignEOF moves the end of file up to a multiple of 32 for a new index
// block so that no entry straddles a page.
func (w *Writer) alignEOF() {
	if r := w.eof % entrySize; r != 0 {
		w.eof += entrySize - r
	}
	w.wbufOff = w.eof
}

// writeNames writes the names added since the last commit: in place when
// the block has room, else the whole list at the end of file in a block
// of twice the size. It reports whether the namelist moved.
func (w *Writer) writeNames() (bool, error) {
	block := int64(w.hdr.NameAllocated) * nameBlockUnit
	if int64(len(w.nameBuf)) <= block {
		tail := w.nameBuf[w.nameDisk:]
		if int64(len(w.nameBuf)) < block {
			// Also write the terminating empty name, in case the block
			// held other bytes there.
			tail = append(slices.Clone(tail), 0)
		}
		if _, err := vfd.WriteAtType(w.f, vfd.MemLHeap, tail, w.hdr.NameLocation+int64(w.nameDisk)); err != nil {
			return false, fmt.Errorf("gsd: %s: write namelist: %w", w.path, err)
		}
		w.nameDisk = len(w.nameBuf)
		return false, nil
	}
	for block < int64(len(w.nameBuf)) {
		block *= 2
	}
	blk := make([]byte, block)
	copy(blk, w.nameBuf)
	loc := w.eof
	if _, err := vfd.WriteAtType(w.f, vfd.MemLHeap, blk, loc); err != nil {
		return false, fmt.Errorf("gsd: %s: write relocated namelist: %w", w.path, err)
	}
	w.log.Debug("namelist relocated", zap.Int64("offset", loc), zap.Int64("bytes", block))
	w.eof += block
	w.wbufOff = w.eof
	w.hdr.NameLocation, w.hdr.NameAllocated = loc, uint64(block/nameBlockUnit)
	w.nameDisk = len(w.nameBuf)
	return true, nil
}

// growIndex relocates the index to the end of file with doubled capacity
// when the ended entries do not fit or a frame number would reach the
// capacity. It reports whether the index moved.
func (w *Writer) growIndex() (bool, error) {
	need := w.used + uint64(len(w.ended))
	if last := w.ended[len(w.ended)-1].Frame + 1; last > need {
		need = last
	}
	capacity := w.hdr.IndexAllocated
	if need <= capacity {
		return false, nil
	}
	capacity = max(capacity, 1)
	for capacity < need {
		capacity *= 2
	}
	blk := make([]byte, capacity*entrySize)
	if w.used > 0 {
		if err := vfd.ReadFull(w.f, blk[:w.used*entrySize], w.hdr.IndexLocation); err != nil {
			return false, fmt.Errorf("gsd: %s: read index for relocation: %w", w.path, err)
		}
	}
	w.alignEOF()
	loc := w.eof
	if _, err := vfd.WriteAtType(w.f, vfd.MemBTree, blk, loc); err != nil {
		return false, fmt.Errorf("gsd: %s: write relocated index: %w", w.path, err)
	}
	w.log.Debug("index relocated", zap.Int64("offset", loc), zap.Uint64("slots", capacity))
	w.eof += int64(len(blk))
	w.wbufOff = w.eof
	w.hdr.IndexLocation, w.hdr.IndexAllocated = loc, capacity
	return true, nil
}
