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
)

// ParityHeader is the self-describing header at the start of a parity file;
// the parity payload (Padded bytes) follows it at [HeaderLen](K).
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
// data shards: 64 + 40k bytes of fields and a 32-byte BLAKE3 of them.
func HeaderLen(k int) int64 { return int64(headerFixed + headerEntry*k + 32) }

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
	return b, nil
}

// ParseParityHeader decodes the header at the start of b (b may hold more).
// path only names the file in errors, which are *CorruptionError wrapping
// [ErrBadHeader].
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

// ReadParityHeader reads and decodes the header of a parity file and checks
// that the file holds the whole payload (size is the file size).
func ReadParityHeader(r io.ReaderAt, size int64, path string) (*ParityHeader, error) {
	buf := make([]byte, min(size, HeaderLen(MaxShards)))
	if _, err := r.ReadAt(buf[:min(int64(len(buf)), headerFixed)], 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read parity header of %s: %w", path, err)
	}
	if int64(len(buf)) >= headerFixed {
		k := binary.LittleEndian.Uint32(buf[12:])
		if k >= 1 && k < MaxShards {
			buf = buf[:min(int64(len(buf)), HeaderLen(int(k)))]
		}
		if _, err := r.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read parity header of %s: %w", path, err)
		}
	}
	h, err := ParseParityHeader(path, buf)
	if err != nil {
		return nil, err
	}
	if want := h.Len() + h.Padded; size != want {
		return nil, &CorruptionError{Path: path, Offset: size, Err: fmt.Errorf("%w: file has %d bytes, header says %d", ErrBadHeader, size, want)}
	}
	return h, nil
}
