package encode

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/blake3"
)

// BenchmarkRS measures encode and decode throughput on one core (bytes of
// data shards per second) beside a memcpy of the same bytes, so the result
// reads as a ratio.
func BenchmarkRS(b *testing.B) {
	for _, s := range []struct{ k, m, shard int }{{4, 4, 1 << 20}, {4, 4, 16 << 20}, {8, 8, 1 << 20}, {8, 2, 1 << 20}} {
		shard := s.shard
		c, err := NewWith(s.k, s.m, Options{MaxGoroutines: 1})
		if err != nil {
			b.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, 2))
		data := randBlocks(r, s.k, shard)
		parity := randBlocks(r, s.m, shard)
		name := fmt.Sprintf("k=%d,m=%d,shard=%dMiB", s.k, s.m, shard>>20)
		b.Run("memcpy/"+name, func(b *testing.B) {
			dst := randBlocks(r, s.k, shard)
			b.SetBytes(int64(s.k * shard))
			for b.Loop() {
				for i := range data {
					copy(dst[i], data[i])
				}
			}
		})
		b.Run("encode/"+name, func(b *testing.B) {
			b.SetBytes(int64(s.k * shard))
			for b.Loop() {
				if err := c.EncodeBlock(data, parity); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("decode-m-data/"+name, func(b *testing.B) {
			if err := c.EncodeBlock(data, parity); err != nil {
				b.Fatal(err)
			}
			shards := append(cloneAll(data), cloneAll(parity)...)
			lost := make([]bool, s.k+s.m)
			for i := 0; i < s.m && i < s.k; i++ {
				lost[i] = true
			}
			b.SetBytes(int64(s.k * shard))
			for b.Loop() {
				if err := c.Reconstruct(shards, lost); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHasher: the SIMD stream hasher beside github.com/zeebo/blake3's
// Hasher, 64 MiB in 4 MiB writes, in one run (-benchtime 20x).
func BenchmarkHasher(b *testing.B) {
	data := make([]byte, 64<<20)
	for i := range data {
		data[i] = byte(i * 13)
	}
	b.Run("simd", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			h := NewHasher()
			for off := 0; off < len(data); off += 4 << 20 {
				h.Write(data[off : off+4<<20])
			}
			h.Sum256()
		}
	})
	b.Run("zeebo", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			h := blake3.New()
			for off := 0; off < len(data); off += 4 << 20 {
				h.Write(data[off : off+4<<20])
			}
			h.Sum(nil)
		}
	})
}
