package gsd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ftigo/ftigo/vfd"
)

// Reader reads a GSD file of version 1.0 or 2.x: the header, the namelist
// and the used part of the index are loaded when it is made; chunk data is
// read on demand. A Reader is safe for concurrent use; [Reader.Refresh]
// picks up frames a writer committed since.
type Reader struct {
	mu      sync.RWMutex
	r       io.ReaderAt
	closer  io.Closer
	sizeFn  func() (int64, error)
	path    string
	st      state
	closed  bool
	maxRead int64
}

// state is everything a Reader knows about one version of the file.
type state struct {
	size    int64
	hdr     Header
	names   []string
	ids     map[string]uint16
	entries []Entry // the used prefix of the index
	nframes uint64
}

// sizer is implemented by readers that know their current size (vfd.File).
type sizer interface{ Size() (int64, error) }

// NewReader reads the GSD file held in r, which has size bytes. When r also
// has a Size() (int64, error) method (a vfd.File does), [Reader.Refresh]
// uses it to see the file grow. Of the options only [WithMaxRead] applies.
func NewReader(r io.ReaderAt, size int64, opts ...Option) (*Reader, error) {
	rd := &Reader{r: r, maxRead: buildOptions(opts).maxRead}
	if s, ok := r.(sizer); ok {
		rd.sizeFn = s.Size
	} else {
		rd.sizeFn = func() (int64, error) { return size, nil }
	}
	st, err := load(r, size, "", false)
	if err != nil {
		return nil, err
	}
	rd.st = *st
	return rd, nil
}

// Open opens the named file read-only through d. Of the options only
// [WithMaxRead] applies.
func Open(d vfd.Driver, name string, opts ...Option) (*Reader, error) {
	f, err := vfd.OpenRead(d, name)
	if err != nil {
		return nil, fmt.Errorf("gsd: open: %w", err)
	}
	size, err := f.Size()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("gsd: size of %s: %w", name, err), f.Close())
	}
	st, err := load(f, size, name, false)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return &Reader{r: f, closer: f, sizeFn: f.Size, path: name, st: *st, maxRead: buildOptions(opts).maxRead}, nil
}

// Close releases the file of a Reader made by [Open]. It is idempotent.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.closer != nil {
		return r.closer.Close()
	}
	return nil
}

// load reads header, namelist and index. With lenient set, an index entry
// that fails validation ends the used prefix at the start of its frame
// instead of failing (used by Refresh to ignore a frame being committed).
func load(r io.ReaderAt, size int64, path string, lenient bool) (*state, error) {
	st := &state{size: size}
	hdr, err := readHeader(r, size, path)
	if err != nil {
		return nil, err
	}
	st.hdr = hdr
	names, err := readNames(r, size, path, &hdr)
	if err != nil {
		return nil, err
	}
	st.names = names
	st.ids = make(map[string]uint16, len(names))
	for i, n := range names {
		if _, dup := st.ids[n]; !dup {
			st.ids[n] = uint16(i)
		}
	}
	if err := st.loadEntries(r, path, 0, lenient); err != nil {
		return nil, err
	}
	return st, nil
}

func readHeader(r io.ReaderAt, size int64, path string) (Header, error) {
	if size < headerSize {
		if err := checkEmpty(r, size, path); err != nil {
			return Header{}, err
		}
		return Header{}, fmt.Errorf("gsd: %s: %d bytes, shorter than the header: %w", pathOr(path), size, ErrNotGSD)
	}
	b := make([]byte, headerSize)
	if err := readFull(r, b, 0); err != nil {
		return Header{}, &CorruptionError{Path: path, Part: "header", Entry: -1, Reason: "read header", Err: err}
	}
	if m := leU64(b); m != magic {
		if err := checkEmpty(r, size, path); err != nil {
			return Header{}, err
		}
		return Header{}, fmt.Errorf("gsd: %s: magic %#016x: %w", pathOr(path), m, ErrNotGSD)
	}
	h := decodeHeader(b)
	if !versionReadable(h.GSDVersion) {
		return Header{}, fmt.Errorf("gsd: %s: file version %s: %w", pathOr(path), h.GSDVersion, ErrVersion)
	}
	return h, nil
}

// maxEmptyScan is the size up to which an all-zero file counts as empty.
const maxEmptyScan = 1 << 20

// checkEmpty returns an error matching ErrEmpty (and ErrNotGSD) when the
// file, which has no valid header, holds nothing a writer could have
// committed (see ErrEmpty), and nil otherwise (or when it cannot tell).
func checkEmpty(r io.ReaderAt, size int64, path string) error {
	if size == 0 {
		return &emptyError{path, "0 bytes"}
	}
	if size > maxEmptyScan {
		return nil
	}
	b := make([]byte, size)
	if readFull(r, b, 0) != nil {
		return nil
	}
	if !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
		return &emptyError{path, fmt.Sprintf("%d zero bytes", size)}
	}
	var m [8]byte
	binary.LittleEndian.PutUint64(m[:], magic)
	if size < headerSize && bytes.HasPrefix(m[:], b[:min(len(b), 8)]) {
		return &emptyError{path, fmt.Sprintf("%d bytes, a header cut short", size)}
	}
	return nil
}

// inFile reports whether [loc, loc+count*unit) lies inside a file of size
// bytes, without overflow.
func inFile(loc int64, count uint64, unit int64, size int64) bool {
	if loc < 0 || loc > size {
		return false
	}
	return count <= uint64(size-loc)/uint64(unit)
}

func readNames(r io.ReaderAt, size int64, path string, h *Header) ([]string, error) {
	sc, err := readNamelist(r, size, path, h)
	return sc.names, err
}

// readNamelist checks the namelist block against the file and parses it
// (scanNames): it must lie inside the file and end with a NUL byte.
func readNamelist(r io.ReaderAt, size int64, path string, h *Header) (nameScan, error) {
	if h.NameAllocated == 0 {
		return nameScan{}, corruptf(path, "namelist", offNameAlloc, "namelist_allocated_entries is 0")
	}
	if !inFile(h.NameLocation, h.NameAllocated, nameBlockUnit, size) {
		return nameScan{}, corruptf(path, "namelist", h.NameLocation, "namelist block of %d×64 bytes extends past the end of file (%d bytes)", h.NameAllocated, size)
	}
	length := int64(h.NameAllocated) * nameBlockUnit
	var last [1]byte
	if err := readFull(r, last[:], h.NameLocation+length-1); err != nil {
		return nameScan{}, &CorruptionError{Path: path, Part: "namelist", Entry: -1, Offset: h.NameLocation + length - 1, Reason: "read namelist", Err: err}
	}
	if last[0] != 0 {
		return nameScan{}, corruptf(path, "namelist", h.NameLocation+length-1, "namelist block does not end with NUL")
	}
	sc, err := scanNames(r, h.NameLocation, length, h.GSDVersion < Version2)
	if err != nil {
		return sc, namelistError(path, h.NameLocation, err)
	}
	return sc, nil
}

// namelistError turns an error of scanNames into a *CorruptionError.
func namelistError(path string, loc int64, err error) error {
	var ne *errNamelist
	if errors.As(err, &ne) {
		return corruptf(path, "namelist", loc, "%s", ne.reason)
	}
	return &CorruptionError{Path: path, Part: "namelist", Entry: -1, Offset: loc, Reason: "read namelist", Err: err}
}

// entryBatch is how many index slots the first read of an index walk
// covers; each further read covers twice as many, up to maxEntryBatch
// (2 MiB), so a small index costs one small read and a large one a few
// large reads in bounded memory.
const (
	entryBatch    = 4096
	maxEntryBatch = 1 << 16
)

// scanIndex walks the index slots [from, to) of the block at loc, reading
// them in batches (entryBatch slots first, then doubling up to
// maxEntryBatch), and calls visit with each slot's number, its 32 raw
// bytes and its decoded entry until visit returns false. It is the one
// index walk of the loader, [VerifyReaderAt] and [Repair]. A failed read
// ends the walk with a *CorruptionError (part "index", the first slot of
// the failed read).
func scanIndex(r io.ReaderAt, path string, loc int64, from, to uint64, visit func(slot uint64, raw []byte, e Entry) bool) error {
	var buf []byte
	batch := uint64(entryBatch)
	for slot := from; slot < to; {
		n := min(to-slot, batch)
		batch = min(2*batch, maxEntryBatch)
		if cap(buf) < int(n)*entrySize {
			buf = make([]byte, int(n)*entrySize)
		}
		b := buf[:int(n)*entrySize]
		off := loc + int64(slot)*entrySize
		if err := readFull(r, b, off); err != nil {
			return &CorruptionError{Path: path, Part: "index", Entry: int64(slot), Offset: off, Reason: "read index", Err: err}
		}
		for k := range int(n) {
			eb := b[k*entrySize : (k+1)*entrySize]
			if !visit(slot+uint64(k), eb, decodeEntry(eb)) {
				return nil
			}
		}
		slot += n
	}
	return nil
}

// entryError is the *CorruptionError for index entry e in slot, at byte
// offset off, naming its frame and, when the name id exists, its chunk.
func entryError(path string, off, slot int64, e Entry, names []string, format string, args ...any) *CorruptionError {
	ce := corruptf(path, "index", off, format, args...)
	ce.Entry, ce.Frame = slot, e.Frame
	if int(e.ID) < len(names) {
		ce.Chunk = names[e.ID]
	}
	return ce
}

// loadEntries reads index slots from slot `from` on (keeping st.entries[:from])
// until the first unused slot, validating each.
func (st *state) loadEntries(r io.ReaderAt, path string, from int, lenient bool) error {
	h := &st.hdr
	if !inFile(h.IndexLocation, h.IndexAllocated, entrySize, st.size) {
		return corruptf(path, "index", h.IndexLocation, "index block of %d×32 bytes extends past the end of file (%d bytes)", h.IndexAllocated, st.size)
	}
	st.entries = st.entries[:from]
	var bad error
	err := scanIndex(r, path, h.IndexLocation, uint64(from), h.IndexAllocated, func(slot uint64, _ []byte, e Entry) bool {
		if e.Location == 0 {
			return false
		}
		if err := st.check(path, int64(slot), e); err != nil {
			if lenient {
				// A frame being committed: end the used prefix before it.
				st.entries = dropFrame(st.entries, e.Frame)
			} else {
				bad = err
			}
			return false
		}
		st.entries = append(st.entries, e)
		return true
	})
	if err != nil {
		return err
	}
	if bad != nil {
		return bad
	}
	st.finish()
	return nil
}

func (st *state) finish() {
	st.nframes = 0
	if n := len(st.entries); n > 0 {
		st.nframes = st.entries[n-1].Frame + 1
	}
}

// check is the validation every reader needs to be safe: a known type, data
// inside the file, a name id that exists, frames that do not go back.
func (st *state) check(path string, slot int64, e Entry) error {
	off := st.hdr.IndexLocation + slot*entrySize
	bad := func(format string, args ...any) error {
		return entryError(path, off, slot, e, st.names, format, args...)
	}
	if !e.Type.Valid() {
		return bad("unknown type %d", e.Type)
	}
	if int(e.ID) >= len(st.names) {
		return bad("name id %d beyond the %d names", e.ID, len(st.names))
	}
	if e.Location < 0 {
		return bad("negative location %d", e.Location)
	}
	ds, ok := e.DataSize()
	if !ok || ds > st.size-e.Location {
		return bad("data of %d×%d %s at %d extends past the end of file (%d bytes)", e.N, e.M, e.Type, e.Location, st.size)
	}
	if e.Frame >= st.hdr.IndexAllocated {
		return bad("frame %d not below index_allocated_entries %d", e.Frame, st.hdr.IndexAllocated)
	}
	if n := len(st.entries); n > 0 && e.Frame < st.entries[n-1].Frame {
		return bad("frame %d after frame %d (index not sorted)", e.Frame, st.entries[n-1].Frame)
	}
	return nil
}

// Refresh re-reads the header, namelist and index to see frames a writer
// has committed since the Reader was made or last refreshed. Entries of a
// frame whose commit is still in progress are ignored until a later
// Refresh. On error the Reader keeps its previous view.
func (r *Reader) Refresh() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	var err error
	for try := 0; try < 3; try++ {
		var st *state
		if st, err = r.refreshOnce(); err == nil {
			r.st = *st
			return nil
		}
	}
	return err
}

func (r *Reader) refreshOnce() (*state, error) {
	size, err := r.sizeFn()
	if err != nil {
		return nil, fmt.Errorf("gsd: size of %s: %w", pathOr(r.path), err)
	}
	hdr, err := readHeader(r.r, size, r.path)
	if err != nil {
		return nil, err
	}
	names, err := readNames(r.r, size, r.path, &hdr)
	if err != nil {
		return nil, err
	}
	st := &state{size: size, hdr: hdr, names: names}
	st.ids = make(map[string]uint16, len(names))
	for i, n := range names {
		if _, dup := st.ids[n]; !dup {
			st.ids[n] = uint16(i)
		}
	}
	from := 0
	old := &r.st
	if hdr.IndexLocation == old.hdr.IndexLocation && hdr.IndexAllocated == old.hdr.IndexAllocated && len(names) >= len(old.names) {
		// The used prefix only grows in place: keep what was read.
		st.entries = append(make([]Entry, 0, len(old.entries)+16), old.entries...)
		from = len(old.entries)
	}
	if err := st.loadEntries(r.r, r.path, from, true); err != nil {
		return nil, err
	}
	return st, nil
}

// NFrames returns the number of frames: the last committed frame + 1.
func (r *Reader) NFrames() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.st.nframes
}

// Header returns the decoded file header.
func (r *Reader) Header() Header {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.st.hdr
}

// Version returns the file format version (1.0, 2.0, ...).
func (r *Reader) Version() Version { return r.Header().GSDVersion }

// Application returns the name of the application that created the file.
func (r *Reader) Application() string { return r.Header().Application }

// Schema returns the schema name and version.
func (r *Reader) Schema() (string, Version) {
	h := r.Header()
	return h.Schema, h.SchemaVersion
}

// Size returns the file size the Reader last saw.
func (r *Reader) Size() int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.st.size
}

// Entries returns a copy of the used index entries in file order.
func (r *Reader) Entries() []Entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]Entry(nil), r.st.entries...)
}

// Name returns the chunk name of id, or "" if there is none.
func (r *Reader) Name(id uint16) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if int(id) < len(r.st.names) {
		return r.st.names[id]
	}
	return ""
}

// ChunkNames returns, in namelist order, the names that start with prefix
// ("" for all). A name is listed once it is in the namelist, whichever
// frames hold it.
func (r *Reader) ChunkNames(prefix string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for _, n := range r.st.names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// find returns the entry of name in frame.
func (st *state) find(frame uint64, name string) (Entry, bool) {
	id, ok := st.ids[name]
	if !ok || frame >= st.nframes {
		return Entry{}, false
	}
	es := st.entries
	i := sort.Search(len(es), func(i int) bool { return es[i].Frame >= frame })
	for ; i < len(es) && es[i].Frame == frame; i++ {
		if es[i].ID == id {
			return es[i], true
		}
	}
	return Entry{}, false
}

// ChunkExists reports whether frame has a chunk called name.
func (r *Reader) ChunkExists(frame uint64, name string) bool {
	_, err := r.ChunkInfo(frame, name)
	return err == nil
}

// ChunkInfo returns the index entry (type, N, M, location) of chunk name
// in frame, or an error wrapping ErrNotFound.
func (r *Reader) ChunkInfo(frame uint64, name string) (Entry, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return Entry{}, ErrClosed
	}
	e, ok := r.st.find(frame, name)
	if !ok {
		return Entry{}, fmt.Errorf("gsd: %s: frame %d, chunk %q: %w", pathOr(r.path), frame, name, ErrNotFound)
	}
	return e, nil
}

// ReadChunkRaw reads the whole chunk name of frame as little-endian bytes.
func (r *Reader) ReadChunkRaw(frame uint64, name string) ([]byte, Entry, error) {
	e, err := r.ChunkInfo(frame, name)
	if err != nil {
		return nil, e, err
	}
	b, err := r.ReadRowsRaw(frame, name, 0, e.N)
	return b, e, err
}

// ReadRowsRaw reads rows [row, row+count) of chunk name in frame as
// little-endian bytes.
func (r *Reader) ReadRowsRaw(frame uint64, name string, row, count uint64) ([]byte, error) {
	_, off, n, err := r.rowSpan(frame, name, row, count)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if err := r.readData(buf, off, frame, name); err != nil {
		return nil, err
	}
	return buf, nil
}

// rowSpan locates rows [row, row+count) of a chunk: its entry, byte offset
// and byte length, checked against the file size.
func (r *Reader) rowSpan(frame uint64, name string, row, count uint64) (Entry, int64, int64, error) {
	e, err := r.ChunkInfo(frame, name)
	if err != nil {
		return e, 0, 0, err
	}
	if row > e.N || count > e.N-row {
		return e, 0, 0, fmt.Errorf("gsd: %s: frame %d, chunk %q: rows [%d, %d) outside %d rows: %w", pathOr(r.path), frame, name, row, row+count, e.N, ErrShape)
	}
	rowBytes, _ := dataSize(1, e.M, e.Type)
	if rowBytes > 0 && count > uint64(r.maxRead/rowBytes) {
		return e, 0, 0, fmt.Errorf("gsd: %s: frame %d, chunk %q: %d rows of %d bytes, more than the read limit of %d bytes (read fewer rows): %w", pathOr(r.path), frame, name, count, rowBytes, r.maxRead, ErrTooLarge)
	}
	off := e.Location + int64(row)*rowBytes
	n := int64(count) * rowBytes
	r.mu.RLock()
	size := r.st.size
	r.mu.RUnlock()
	if off < 0 || n > size-off {
		ce := corruptf(r.path, "data", off, "%d bytes extend past the end of file (%d bytes)", n, size)
		ce.Frame, ce.Chunk = frame, name
		return e, 0, 0, ce
	}
	return e, off, n, nil
}

func (r *Reader) readData(buf []byte, off int64, frame uint64, name string) error {
	if len(buf) == 0 {
		return nil
	}
	if err := readFull(r.r, buf, off); err != nil {
		ce := &CorruptionError{Path: r.path, Part: "data", Entry: -1, Frame: frame, Chunk: name, Offset: off, Reason: "read chunk data", Err: err}
		return ce
	}
	return nil
}

func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func pathOr(p string) string {
	if p == "" {
		return "<reader>"
	}
	return p
}
