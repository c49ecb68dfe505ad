package encode

import (
	"errors"
	"fmt"
	"io"

	"github.com/ftigo/ftigo/internal/b3"
)

// Hash is a BLAKE3-256 digest.
type Hash [32]byte

// Sum returns the BLAKE3-256 of b.
func Sum(b []byte) Hash { return Hash(b3.Sum256(b)) }

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

// HashReader returns the BLAKE3 of the first size bytes of r, read in
// blockSize pieces.
func HashReader(r io.ReaderAt, size int64, blockSize int) (Hash, error) {
	h := b3.New()
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
