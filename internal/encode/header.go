package encode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Parity file header constants; see docs/format/parity.md.
//
// wire format: never change.
const (
	ParityMagic = "FTIGORS\x00"
	// ParityVersion is the version of full-scheme parity files (m == k).
	ParityVersion = 1
	// ParityVersionRotated is the version of rotated-scheme parity files
	// (m < k); their header has the stripe unit after the padded size.
	ParityVersionRotated = 2
	headerFixed          = 64 // magic, version, k, m, index, padded, payload hash
	headerUnit           = 8  // version 2: stripe unit u64 after the fixed part
	headerEntry          = 40 // per data shard: size u64, BLAKE3-256
	tailLen              = 16 // trailer length u64, magic
)

// ParityHeader is the self-describing trailer of a parity file: the file is
// the parity payload ([Layout.ParitySize] bytes, from offset 0) followed by
// the header ([HeaderLen](K, M) bytes). The trailer comes last so that the
// payload and the whole file can be hashed while they are written.
type ParityHeader struct {
	K, M  int // group members and parity shards per codeword (M == K: full scheme, M < K: rotated)
	Index int // the group member holding this file, 0..K-1
	// Padded is the largest data size of the group.
	Padded int64
	// Unit is the stripe unit of the rotated scheme (0 in the full scheme).
	Unit int
	// Payload is the BLAKE3-256 of the payload bytes.
	Payload Hash
	// Sizes and Hashes are the data shards' real sizes and BLAKE3-256,
	// by group rank.
	Sizes  []int64
	Hashes []Hash
}

// fixedLen is the length of the fields before the entries.
func fixedLen(k, m int) int {
	if m < k {
		return headerFixed + headerUnit
	}
	return headerFixed
}

// HeaderLen is the length of a parity file's header, for a group of k
// members and m parity shards. It has 64 bytes of fixed fields. The
// rotated scheme (m < k) adds the stripe unit: 72 bytes. Then come 40
// bytes per member and a 32-byte BLAKE3 of them. A 16-byte tail ends it:
// the header length and the magic again.
func HeaderLen(k, m int) int64 { return int64(fixedLen(k, m) + headerEntry*k + 32 + tailLen) }

// Len is the header's length in bytes.
func (h *ParityHeader) Len() int64 { return HeaderLen(h.K, h.M) }

// Layout returns the group layout the header describes.
func (h *ParityHeader) Layout() (Layout, error) {
	unit := h.Unit
	if h.M == h.K {
		unit = 1 << 20 // any unit: the full scheme does not depend on it
	}
	return NewLayout(h.K, h.M, h.Padded, unit)
}

// Marshal encodes the header (little-endian): version 1 when M == K,
// version 2 (with Unit) when M < K.
func (h *ParityHeader) Marshal() ([]byte, error) {
	if h.K < 1 || h.M < 1 || h.M > h.K || h.K+h.M > MaxShards || h.Index < 0 || h.Index >= h.K ||
		len(h.Sizes) != h.K || len(h.Hashes) != h.K || h.Padded < 0 || (h.M < h.K && h.Unit < 1) {
		return nil, fmt.Errorf("%w: k=%d m=%d index=%d unit=%d with %d sizes and %d hashes",
			ErrBadShape, h.K, h.M, h.Index, h.Unit, len(h.Sizes), len(h.Hashes))
	}
	b := make([]byte, h.Len())
	copy(b, ParityMagic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], ParityVersion)
	le.PutUint32(b[12:], uint32(h.K))
	le.PutUint32(b[16:], uint32(h.M))
	le.PutUint32(b[20:], uint32(h.Index))
	le.PutUint64(b[24:], uint64(h.Padded))
	copy(b[32:64], h.Payload[:])
	fixed := fixedLen(h.K, h.M)
	if h.M < h.K {
		le.PutUint32(b[8:], ParityVersionRotated)
		le.PutUint64(b[headerFixed:], uint64(h.Unit))
	}
	for i := 0; i < h.K; i++ {
		e := b[fixed+headerEntry*i:]
		if h.Sizes[i] < 0 || h.Sizes[i] > h.Padded {
			return nil, fmt.Errorf("%w: data size %d of shard %d outside 0..%d", ErrBadShape, h.Sizes[i], i, h.Padded)
		}
		le.PutUint64(e, uint64(h.Sizes[i]))
		copy(e[8:40], h.Hashes[i][:])
	}
	end := fixed + headerEntry*h.K
	s := Sum(b[:end])
	copy(b[end:], s[:])
	le.PutUint64(b[end+32:], uint64(len(b)))
	copy(b[end+40:], ParityMagic)
	return b, nil
}

// ParseParityHeader decodes the header at the start of b (b may hold more);
// offsets in errors are relative to the header's start. path only names the
// file in errors, which are *CorruptionError wrapping [ErrBadHeader] or
// [ErrHashMismatch].
func ParseParityHeader(path string, b []byte) (*ParityHeader, error) {
	bad := func(off int64, format string, a ...any) error {
		return &CorruptionError{Path: path, Offset: off, Err: fmt.Errorf("%w: "+format, append([]any{ErrBadHeader}, a...)...)}
	}
	if len(b) < headerFixed {
		return nil, bad(int64(len(b)), "%d bytes, header needs at least %d", len(b), headerFixed)
	}
	if string(b[:8]) != ParityMagic {
		return nil, bad(0, "magic %q", b[:8])
	}
	le := binary.LittleEndian
	v := le.Uint32(b[8:])
	if v != ParityVersion && v != ParityVersionRotated {
		return nil, bad(8, "version %d, want %d or %d", v, ParityVersion, ParityVersionRotated)
	}
	k, m, idx := le.Uint32(b[12:]), le.Uint32(b[16:]), le.Uint32(b[20:])
	if k < 1 || m < 1 || uint64(k)+uint64(m) > MaxShards {
		return nil, bad(12, "k=%d m=%d out of range", k, m)
	}
	switch {
	case v == ParityVersion && m != k:
		return nil, bad(16, "version 1 with m=%d < k=%d: the layout where members 0..m-1 held whole parity shards is no longer supported (re-run the checkpoint)", m, k)
	case v == ParityVersionRotated && m >= k:
		return nil, bad(16, "version 2 (rotated) with m=%d >= k=%d", m, k)
	}
	if idx >= k {
		return nil, bad(20, "member index %d, k=%d", idx, k)
	}
	padded := le.Uint64(b[24:])
	if padded > 1<<62 {
		return nil, bad(24, "padded size %d", padded)
	}
	h := &ParityHeader{K: int(k), M: int(m), Index: int(idx), Padded: int64(padded)}
	fixed := fixedLen(h.K, h.M)
	if len(b) < fixed {
		return nil, bad(int64(len(b)), "%d bytes, header needs at least %d", len(b), fixed)
	}
	if v == ParityVersionRotated {
		u := le.Uint64(b[headerFixed:])
		if u < 1 || u > 1<<40 {
			return nil, bad(headerFixed, "stripe unit %d", u)
		}
		h.Unit = int(u)
	}
	n := h.Len()
	if int64(len(b)) < n {
		return nil, bad(int64(len(b)), "%d bytes, header needs %d", len(b), n)
	}
	end := fixed + headerEntry*h.K
	if s := Sum(b[:end]); Hash(b[end:end+32]) != s {
		return nil, &CorruptionError{Path: path, Offset: int64(end), Err: fmt.Errorf("%w: header hash", ErrHashMismatch)}
	}
	if t := b[end+32:]; int64(le.Uint64(t)) != n || string(t[8:16]) != ParityMagic {
		return nil, bad(int64(end+32), "trailer tail does not match (length %d, magic %q)", le.Uint64(t), t[8:16])
	}
	copy(h.Payload[:], b[32:64])
	h.Sizes = make([]int64, h.K)
	h.Hashes = make([]Hash, h.K)
	for i := 0; i < h.K; i++ {
		e := b[fixed+headerEntry*i:]
		s := le.Uint64(e)
		if s > padded {
			return nil, bad(int64(fixed+headerEntry*i), "data size %d of shard %d exceeds padded size %d", s, i, padded)
		}
		h.Sizes[i] = int64(s)
		copy(h.Hashes[i][:], e[8:40])
	}
	return h, nil
}

// ReadParityHeader reads and decodes the header at the end of a parity
// file of size bytes and checks that the file holds exactly the payload and
// the header. Error offsets are file offsets.
func ReadParityHeader(r io.ReaderAt, size int64, path string) (*ParityHeader, error) {
	bad := func(off int64, err error) error { return &CorruptionError{Path: path, Offset: off, Err: err} }
	if size < tailLen {
		return nil, bad(0, fmt.Errorf("%w: file of %d bytes has no parity trailer", ErrBadHeader, size))
	}
	var tail [tailLen]byte
	if err := readFull(r, tail[:], size-tailLen); err != nil {
		return nil, fmt.Errorf("read parity trailer of %s: %w", path, err)
	}
	if string(tail[8:]) != ParityMagic {
		return nil, bad(size-8, fmt.Errorf("%w: trailer magic %q", ErrBadHeader, tail[8:]))
	}
	n := int64(binary.LittleEndian.Uint64(tail[:8]))
	if n < HeaderLen(1, 1) || n > HeaderLen(MaxShards, 1) || n > size {
		return nil, bad(size-tailLen, fmt.Errorf("%w: header length %d in a file of %d bytes", ErrBadHeader, n, size))
	}
	b := make([]byte, n)
	if err := readFull(r, b, size-n); err != nil {
		return nil, fmt.Errorf("read parity header of %s: %w", path, err)
	}
	h, err := ParseParityHeader(path, b)
	if err != nil {
		var ce *CorruptionError
		if errors.As(err, &ce) {
			ce.Offset += size - n
		}
		return nil, err
	}
	lay, err := h.Layout()
	if err != nil {
		return nil, bad(size-n, fmt.Errorf("%w: %w", ErrBadHeader, err))
	}
	if h.Len() != n || lay.ParitySize() != size-n {
		return nil, bad(size-n, fmt.Errorf("%w: header of %d bytes for %d members, payload %d bytes, header says %d",
			ErrBadHeader, n, h.K, size-n, lay.ParitySize()))
	}
	return h, nil
}

func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}
