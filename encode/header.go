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
	ParityMagic   = "FTIGORS\x00"
	ParityVersion = 1
	headerFixed   = 64 // magic, version, k, m, index, padded, payload hash
	headerEntry   = 40 // per data shard: size u64, BLAKE3-256
	tailLen       = 16 // trailer length u64, magic
)

// ParityHeader is the self-describing trailer of a parity file: the file is
// the parity payload (Padded bytes, from offset 0) followed by the header
// ([HeaderLen](K) bytes). The trailer comes last so that the payload and
// the whole file can be hashed while they are written.
type ParityHeader struct {
	K, M   int   // data and parity shard counts of the group
	Index  int   // which parity shard this file holds, 0..M-1
	Padded int64 // payload length: the largest data size
	// Payload is the BLAKE3-256 of the Padded payload bytes.
	Payload Hash
	// Sizes and Hashes are the data shards' real sizes and BLAKE3-256,
	// by group rank.
	Sizes  []int64
	Hashes []Hash
}

// HeaderLen is the length of the header of a parity file of a group with k
// data shards: 64 + 40k bytes of fields, a 32-byte BLAKE3 of them, and a
// 16-byte tail (the header length and the magic again).
func HeaderLen(k int) int64 { return int64(headerFixed + headerEntry*k + 32 + tailLen) }

// Len is the header's length in bytes.
func (h *ParityHeader) Len() int64 { return HeaderLen(h.K) }

// Marshal encodes the header (little-endian).
func (h *ParityHeader) Marshal() ([]byte, error) {
	if h.K < 1 || h.M < 1 || h.K+h.M > MaxShards || h.Index < 0 || h.Index >= h.M ||
		len(h.Sizes) != h.K || len(h.Hashes) != h.K || h.Padded < 0 {
		return nil, fmt.Errorf("%w: k=%d m=%d index=%d with %d sizes and %d hashes", ErrBadShape, h.K, h.M, h.Index, len(h.Sizes), len(h.Hashes))
	}
	b := make([]byte, HeaderLen(h.K))
	copy(b, ParityMagic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], ParityVersion)
	le.PutUint32(b[12:], uint32(h.K))
	le.PutUint32(b[16:], uint32(h.M))
	le.PutUint32(b[20:], uint32(h.Index))
	le.PutUint64(b[24:], uint64(h.Padded))
	copy(b[32:64], h.Payload[:])
	for i := 0; i < h.K; i++ {
		e := b[headerFixed+headerEntry*i:]
		if h.Sizes[i] < 0 || h.Sizes[i] > h.Padded {
			return nil, fmt.Errorf("%w: data size %d of shard %d outside 0..%d", ErrBadShape, h.Sizes[i], i, h.Padded)
		}
		le.PutUint64(e, uint64(h.Sizes[i]))
		copy(e[8:40], h.Hashes[i][:])
	}
	end := headerFixed + headerEntry*h.K
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
	if v := le.Uint32(b[8:]); v != ParityVersion {
		return nil, bad(8, "version %d, want %d", v, ParityVersion)
	}
	k, m, idx := le.Uint32(b[12:]), le.Uint32(b[16:]), le.Uint32(b[20:])
	if k < 1 || m < 1 || uint64(k)+uint64(m) > MaxShards {
		return nil, bad(12, "k=%d m=%d out of range", k, m)
	}
	if idx >= m {
		return nil, bad(20, "parity index %d, m=%d", idx, m)
	}
	padded := le.Uint64(b[24:])
	if padded > 1<<62 {
		return nil, bad(24, "padded size %d", padded)
	}
	h := &ParityHeader{K: int(k), M: int(m), Index: int(idx), Padded: int64(padded)}
	n := HeaderLen(h.K)
	if int64(len(b)) < n {
		return nil, bad(int64(len(b)), "%d bytes, header needs %d", len(b), n)
	}
	end := headerFixed + headerEntry*h.K
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
		e := b[headerFixed+headerEntry*i:]
		s := le.Uint64(e)
		if s > padded {
			return nil, bad(int64(headerFixed+headerEntry*i), "data size %d of shard %d exceeds padded size %d", s, i, padded)
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
	if n < HeaderLen(1) || n > HeaderLen(MaxShards) || n > size {
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
	if h.Len() != n || h.Padded != size-n {
		return nil, bad(size-n, fmt.Errorf("%w: header of %d bytes for %d data shards, payload %d bytes, header says %d",
			ErrBadHeader, n, h.K, size-n, h.Padded))
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
