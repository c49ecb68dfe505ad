package encode

import (
	"fmt"
	"math/rand/v2"
	"testing"
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

// BenchmarkRow measures one parity shard computed from k data shards of
// 1 MiB (what each group member does per row in L3's full scheme): k
// multiply-adds (Row.Add) against one k-input pass (Row.Combine), on one
// core, in bytes of data shards per second.
func BenchmarkRow(b *testing.B) {
	for _, k := range []int{4, 8} {
		c, err := NewWith(k, k, Options{MaxGoroutines: 1})
		if err != nil {
			b.Fatal(err)
		}
		row, err := c.Row(1)
		if err != nil {
			b.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, 2))
		data := randBlocks(r, k, 1<<20)
		acc := make([]byte, 1<<20)
		idx := make([]int, k)
		for i := range idx {
			idx[i] = i
		}
		b.Run(fmt.Sprintf("add/k=%d", k), func(b *testing.B) {
			b.SetBytes(int64(k << 20))
			for b.Loop() {
				clear(acc)
				for i, d := range data {
					if err := row.Add(d, i, acc); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("combine/k=%d", k), func(b *testing.B) {
			b.SetBytes(int64(k << 20))
			for b.Loop() {
				if err := row.Combine(data, idx, acc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
