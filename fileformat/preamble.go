package fileformat

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/ftigo/ftigo/vfd"
)

// A preamble carries what [Open] reads of an FTI-FF file (its header, its
// metadata block and its file block) without the data, so that a process
// that receives the file's bytes over the network can check them as they
// arrive ([OpenPreamble], then [Reader.NewVerifier]) before it has any of
// them. It is small: the metadata of a file, not its data.
//
// Layout (little endian), never stored, only sent between the ranks of
// one run:
//
//	0   8  magic "FTIFFPRE"
//	8   8  file size
//	16  8  offset of the metadata block in the file
//	24     the file's header (HeaderSize bytes)
//	       the file's bytes from the metadata block to its end
var preambleMagic = [8]byte{'F', 'T', 'I', 'F', 'F', 'P', 'R', 'E'}

// preambleFixed is the length of a preamble's magic, size and offset.
const preambleFixed = 24

// ErrNotInPreamble is returned when a [Reader] built by [OpenPreamble] is
// asked for bytes of the file that its preamble does not carry (the data).
var ErrNotInPreamble = errors.New("fileformat: bytes not in the preamble")

// Preamble returns r's preamble: the header, metadata block and file
// block of r's file, read from the file (the header as read at [Open]),
// with the file's size. A receiver builds a Reader of the file from it
// with [OpenPreamble]. The metadata is read again, so a file changed since
// Open gives a preamble that fails OpenPreamble's checks.
func (r *Reader) Preamble() ([]byte, error) {
	size := r.fb.fs
	tail := size - r.fb.metaOff
	b := make([]byte, preambleFixed+HeaderSize+tail)
	copy(b, preambleMagic[:])
	le.PutUint64(b[8:], uint64(size))
	le.PutUint64(b[16:], uint64(r.fb.metaOff))
	copy(b[preambleFixed:], r.hb[:])
	if err := r.readAt(vfd.MemOHdr, b[preambleFixed+HeaderSize:], r.fb.metaOff); err != nil {
		return nil, err
	}
	return b, nil
}

// OpenPreamble builds a [Reader] of the file named name from its preamble
// b ([Reader.Preamble]), with every check [Open] makes on the header,
// metadata and file block (the metadata hash, the structure, the file
// checksum over the chunk hashes). The Reader knows the file's structure
// and hashes but holds none of its data: [Reader.NewVerifier] checks the
// file's bytes as they stream past; reading a variable or [Reader.Verify]
// fails with [ErrNotInPreamble]. A malformed preamble is a
// *[CorruptionError] wrapping [ErrCorrupt], [ErrTruncated] or
// [ErrNotFTIFF] (offsets are in the preamble), or one of Open's
// *CorruptionErrors (offsets in the file). Open's
// options apply.
func OpenPreamble(name string, b []byte, opts ...Option) (*Reader, error) {
	bad := func(off int64, err error, format string, args ...any) error {
		return &CorruptionError{Path: name + " (preamble)", Rank: -1, VarID: -1, Chunk: -1, Offset: off,
			Err: fmt.Errorf("%w: %s", err, fmt.Sprintf(format, args...))}
	}
	if len(b) < preambleFixed+HeaderSize {
		return nil, bad(int64(len(b)), ErrTruncated, "%d bytes, shorter than a preamble's fixed part", len(b))
	}
	if !bytes.Equal(b[:8], preambleMagic[:]) {
		return nil, bad(0, ErrCorrupt, "bad preamble magic %x", b[:8])
	}
	size, metaOff := le.Uint64(b[8:]), le.Uint64(b[16:])
	tail := uint64(len(b) - preambleFixed - HeaderSize)
	switch {
	case size > 1<<62:
		return nil, bad(8, ErrCorrupt, "file size %d", size)
	case metaOff < HeaderSize || metaOff > size:
		return nil, bad(16, ErrCorrupt, "metadata offset %d in a %d-byte file", metaOff, size)
	case size-metaOff != tail:
		return nil, bad(int64(len(b)), ErrCorrupt, "%d bytes after the header, the file's tail from %d to %d is %d", tail, metaOff, size, size-metaOff)
	}
	pf := &preambleFile{name: name, size: int64(size), head: b[preambleFixed : preambleFixed+HeaderSize],
		tailOff: int64(metaOff), tail: b[preambleFixed+HeaderSize:]}
	r, err := Open(pf, opts...)
	if err != nil {
		var ce *CorruptionError
		if !errors.As(err, &ce) {
			// Not FTI-FF at all (Open names no offset): the header
			// the preamble carries at preambleFixed is not one.
			return nil, &CorruptionError{Path: name + " (preamble)", Rank: -1, VarID: -1, Chunk: -1, Offset: preambleFixed, Err: err}
		}
		return nil, err
	}
	if r.fb.metaOff != int64(metaOff) {
		return nil, bad(16, ErrCorrupt, "metadata offset %d, the file block says %d", metaOff, r.fb.metaOff)
	}
	return r, nil
}

// preambleFile is a file of which only the header and the tail from the
// metadata block on are known: the rest reads as ErrNotInPreamble.
type preambleFile struct {
	name    string
	size    int64
	head    []byte
	tailOff int64
	tail    []byte
}

func (f *preambleFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s at %d: %w", f.name, off, vfd.ErrNegativeOffset)
	}
	if off >= f.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), f.size)
	var n int
	switch {
	case end <= int64(len(f.head)):
		n = copy(p, f.head[off:end])
	case off >= f.tailOff:
		n = copy(p, f.tail[off-f.tailOff:end-f.tailOff])
	default:
		return 0, fmt.Errorf("read %s at %d: %w", f.name, off, ErrNotInPreamble)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *preambleFile) WriteAt([]byte, int64) (int, error) {
	return 0, fmt.Errorf("%s: %w", f.name, vfd.ErrReadOnly)
}
func (f *preambleFile) Close() error         { return nil }
func (f *preambleFile) Name() string         { return f.name }
func (f *preambleFile) Size() (int64, error) { return f.size, nil }
func (f *preambleFile) Truncate(int64) error { return fmt.Errorf("%s: %w", f.name, vfd.ErrReadOnly) }
func (f *preambleFile) Sync() error          { return nil }
