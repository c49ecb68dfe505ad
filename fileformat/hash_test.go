package fileformat

import (
	"testing"

	"github.com/zeebo/blake3"
)

// TestBlockHashIsBLAKE3 checks the SIMD block hash against the format's
// reference BLAKE3 implementation at every size where the SIMD code
// changes its path (one chunk of 1 KiB, 8 and 16 chunks per batch, partial
// last chunks and blocks), on data that differs at every offset.
func TestBlockHashIsBLAKE3(t *testing.T) {
	data := make([]byte, 4<<20+3)
	x := uint32(2463534242)
	for i := range data {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		data[i] = byte(x)
	}
	sizes := []int{48 << 10, 128 << 10, 256 << 10, 512 << 10, 2 << 20, 0, 1, 63, 64, 65, 1023, 1024, 1025, 2047, 2048, 4096, 7 << 10, 8 << 10, 8<<10 + 1,
		15 << 10, 16<<10 - 1, 16 << 10, 16<<10 + 1, 17 << 10, 32 << 10, 64<<10 - 7, 64 << 10, 64<<10 + 1,
		1 << 20, 1<<20 + 1000, 4 << 20, len(data)}
	for _, n := range sizes {
		for _, off := range []int{0, 1, 3} {
			if off+n > len(data) {
				continue
			}
			p := data[off : off+n]
			if got, want := BlockHash(p), blake3.Sum256(p); got != want {
				t.Fatalf("BlockHash of %d bytes at offset %d = %x, BLAKE3 = %x", n, off, got, want)
			}
		}
	}
	// HashBlocks over a length that ends in a partial block, with and
	// without workers, agrees with the reference hash of every block.
	for _, workers := range []int{1, 3} {
		const bs = 64 << 10
		got, err := HashBlocks(data, bs, WithHashWorkers(workers))
		if err != nil {
			t.Fatal(err)
		}
		if want := (len(data) + bs - 1) / bs; len(got) != want {
			t.Fatalf("workers %d: %d block hashes, want %d", workers, len(got), want)
		}
		for i := range got {
			if want := blake3.Sum256(data[i*bs : min((i+1)*bs, len(data))]); got[i] != want {
				t.Fatalf("workers %d: block %d hash %x, want %x", workers, i, got[i], want)
			}
		}
	}
}
