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
// blockSize pieces. With more than one piece, a reader goroutine reads
// ahead (up to two pieces) while the caller hashes. So the read of a file
// not in the page cache overlaps with the hashing. r must then allow a
// ReadAt from another goroutine. The goroutine has ended when HashReader
// returns.
func HashReader(r io.ReaderAt, size int64, blockSize int) (Hash, error) {
	h := b3.New()
	piece := min(int64(max(blockSize, 1)), max(size, 1))
	var s Hash
	if size <= piece {
		buf := make([]byte, piece)
		n := max(size, 0)
		if err := ReadBlock(r, size, buf[:n], 0); err != nil {
			return Hash{}, err
		}
		h.Write(buf[:n])
		copy(s[:], h.Sum(nil))
		return s, nil
	}
	type block struct {
		b   []byte
		err error
	}
	const ahead = 2
	ready := make(chan block, ahead)
	free := make(chan []byte, ahead+1)
	for range ahead + 1 {
		free <- make([]byte, piece)
	}
	stop := make(chan struct{})
	go func() {
		defer close(ready)
		for off := int64(0); off < size; {
			var buf []byte
			select {
			case buf = <-free:
			case <-stop:
				return
			}
			n := min(piece, size-off)
			err := ReadBlock(r, size, buf[:n], off)
			select {
			case ready <- block{buf[:n], err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
			off += n
		}
	}()
	defer func() {
		close(stop)
		for range ready { // wait for the reader to end
		}
	}()
	for blk := range ready {
		if blk.err != nil {
			return Hash{}, blk.err
		}
		h.Write(blk.b)
		free <- blk.b[:cap(blk.b)]
	}
	copy(s[:], h.Sum(nil))
	return s, nil
}
