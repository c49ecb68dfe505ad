package encode

import (
	"errors"
	"fmt"
	"io"

	"github.com/zeebo/blake3"
)

// Hash is a BLAKE3-256 digest.
type Hash [32]byte

// Sum returns the BLAKE3-256 of b.
func Sum(b []byte) Hash { return Hash(blake3.Sum256(b)) }

// PaddedSize is the shard length of a group of files: the largest size.
func PaddedSize(sizes []int64) int64 {
	var p int64
	for _, s := range sizes {
		p = max(p, s)
	}
	return p
}

// ReadBlock fills buf with the bytes of a logical shard at off: the first
// size bytes come from r, everything beyond is zero (padding that exists
// only in memory).
func ReadBlock(r io.ReaderAt, size int64, buf []byte, off int64) error {
	n := 0
	if off < size {
		n = int(min(int64(len(buf)), size-off))
		got, err := r.ReadAt(buf[:n], off)
		if got < n {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read at %d: %w", off+int64(got), err)
		}
	}
	clear(buf[n:])
	return nil
}

// StreamResult holds the hashes computed while streaming.
type StreamResult struct {
	// Padded is the shard length (the largest data size).
	Padded int64
	// Data holds the BLAKE3 of each data shard's real bytes (without padding).
	Data []Hash
	// Parity holds the BLAKE3 of each parity shard's Padded bytes.
	Parity []Hash
}

// EncodeStream encodes k data shards read from data (shard i has sizes[i]
// bytes, logically zero-padded to the largest size) into m parity shards
// written to parity at offset 0, in blocks of blockSize bytes. It holds
// (k+m) blocks in memory.
func (c *Code) EncodeStream(data []io.ReaderAt, sizes []int64, parity []io.WriterAt, blockSize int) (*StreamResult, error) {
	if len(data) != c.k || len(sizes) != c.k || len(parity) != c.m || blockSize <= 0 {
		return nil, fmt.Errorf("%w: EncodeStream with %d readers, %d sizes, %d writers, block %d (k=%d m=%d)",
			ErrBadShape, len(data), len(sizes), len(parity), blockSize, c.k, c.m)
	}
	padded := PaddedSize(sizes)
	res := &StreamResult{Padded: padded, Data: make([]Hash, c.k), Parity: make([]Hash, c.m)}
	dh, ph := hashers(c.k), hashers(c.m)
	dbuf, pbuf := blocks(c.k, blockSize), blocks(c.m, blockSize)
	for off := int64(0); off < padded; off += int64(blockSize) {
		n := int(min(int64(blockSize), padded-off))
		d, p := trim(dbuf, n), trim(pbuf, n)
		for i := range d {
			if err := ReadBlock(data[i], sizes[i], d[i], off); err != nil {
				return nil, fmt.Errorf("encode: data shard %d: %w", i, err)
			}
			if off < sizes[i] {
				dh[i].Write(d[i][:min(int64(n), sizes[i]-off)])
			}
		}
		if err := c.EncodeBlock(d, p); err != nil {
			return nil, err
		}
		for j := range p {
			ph[j].Write(p[j])
			if _, err := parity[j].WriteAt(p[j], off); err != nil {
				return nil, fmt.Errorf("encode: write parity shard %d at %d: %w", j, off, err)
			}
		}
	}
	sums(dh, res.Data)
	sums(ph, res.Parity)
	return res, nil
}

// ReconstructStream rebuilds lost shards in blocks of blockSize bytes.
// shards has k+m entries (data first); a lost entry's reader is ignored and
// may be nil. sizes gives the k data sizes (parity shards are
// PaddedSize(sizes) long). out[i] receives rebuilt shard i for every lost
// i (data shards up to their size, parity shards in full), at offset 0.
// The result carries the hash of every shard, surviving or rebuilt, for the
// caller to check against recorded hashes. More than m losses return an
// *ErasureError before anything is read or written.
func (c *Code) ReconstructStream(shards []io.ReaderAt, sizes []int64, lost []bool, out []io.WriterAt, blockSize int) (*StreamResult, error) {
	t := c.k + c.m
	if len(shards) != t || len(sizes) != c.k || len(lost) != t || len(out) != t || blockSize <= 0 {
		return nil, fmt.Errorf("%w: ReconstructStream with %d readers, %d sizes, %d flags, %d writers, block %d (k=%d m=%d)",
			ErrBadShape, len(shards), len(sizes), len(lost), len(out), blockSize, c.k, c.m)
	}
	var gone []int
	for i, l := range lost {
		if l {
			gone = append(gone, i)
			if out[i] == nil {
				return nil, fmt.Errorf("%w: no writer for lost shard %d", ErrBadShape, i)
			}
		} else if shards[i] == nil {
			return nil, fmt.Errorf("%w: no reader for shard %d", ErrBadShape, i)
		}
	}
	if len(gone) > c.m {
		return nil, &ErasureError{K: c.k, M: c.m, Lost: gone}
	}
	padded := PaddedSize(sizes)
	size := func(i int) int64 {
		if i < c.k {
			return sizes[i]
		}
		return padded
	}
	res := &StreamResult{Padded: padded, Data: make([]Hash, c.k), Parity: make([]Hash, c.m)}
	h := hashers(t)
	buf := blocks(t, blockSize)
	for off := int64(0); off < padded; off += int64(blockSize) {
		n := int(min(int64(blockSize), padded-off))
		b := trim(buf, n)
		for i := range b {
			if !lost[i] {
				if err := ReadBlock(shards[i], size(i), b[i], off); err != nil {
					return nil, fmt.Errorf("encode: shard %d: %w", i, err)
				}
			}
		}
		if err := c.Reconstruct(b, lost); err != nil {
			return nil, err
		}
		for i := range b {
			if off >= size(i) {
				continue
			}
			part := b[i][:min(int64(n), size(i)-off)]
			h[i].Write(part)
			if lost[i] {
				if _, err := out[i].WriteAt(part, off); err != nil {
					return nil, fmt.Errorf("encode: write shard %d at %d: %w", i, off, err)
				}
			}
		}
	}
	sums(h[:c.k], res.Data)
	sums(h[c.k:], res.Parity)
	return res, nil
}

// HashReader returns the BLAKE3 of the first size bytes of r, read in
// blockSize pieces.
func HashReader(r io.ReaderAt, size int64, blockSize int) (Hash, error) {
	h := blake3.New()
	buf := make([]byte, min(int64(max(blockSize, 1)), max(size, 1)))
	for off := int64(0); off < size; {
		n := int(min(int64(len(buf)), size-off))
		if err := ReadBlock(r, size, buf[:n], off); err != nil {
			return Hash{}, err
		}
		h.Write(buf[:n])
		off += int64(n)
	}
	var s Hash
	copy(s[:], h.Sum(nil))
	return s, nil
}

func hashers(n int) []*blake3.Hasher {
	h := make([]*blake3.Hasher, n)
	for i := range h {
		h[i] = blake3.New()
	}
	return h
}

func sums(h []*blake3.Hasher, out []Hash) {
	for i := range h {
		copy(out[i][:], h[i].Sum(nil))
	}
}

func blocks(n, size int) [][]byte {
	b := make([][]byte, n)
	for i := range b {
		b[i] = make([]byte, size)
	}
	return b
}

func trim(b [][]byte, n int) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = b[i][:n]
	}
	return out
}
