package fileformat

import (
	"encoding/binary"
	"runtime"
	"sync"

	"github.com/ftigo/ftigo/internal/b3"
)

// parallelMin is the chunk size from which block hashing is spread over
// goroutines; below it the goroutine hand-off costs more than it saves.
const parallelMin = 1 << 20

// numBlocks returns how many dCP blocks of size bs a chunk of n bytes has.
func numBlocks(n int64, bs uint32) int64 {
	if n <= 0 {
		return 0
	}
	return (n + int64(bs) - 1) / int64(bs)
}

// hashBlocks hashes data in blocks of bs bytes into out (len(out) must be
// numBlocks(len(data), bs)), with up to workers goroutines.
func hashBlocks(data []byte, bs uint32, out [][HashSize]byte, workers int) {
	hashBlocksYield(data, bs, out, workers, false)
}

// yieldEvery is how many bytes a yielding hash worker hashes between two
// yields of its processor (about 0.4 ms of BLAKE3 per core).
const yieldEvery = 1 << 20

// hashBlocksYield is hashBlocks whose workers, with yield, give up their
// processor (runtime.Gosched) after every yieldEvery bytes. The FTI-FF
// writer hashes alongside its writes: a writer back from a write system
// call needs a processor to issue the next one, and with every processor
// busy hashing it would wait for the Go scheduler to preempt a hash
// worker, up to 10 ms, while the device idles.
func hashBlocksYield(data []byte, bs uint32, out [][HashSize]byte, workers int, yield bool) {
	hash := hashRange
	if yield {
		hash = hashRangeYield
	}
	n := len(out)
	if workers <= 1 || len(data) < parallelMin || n < 2 {
		hash(data, bs, out, 0, n)
		return
	}
	if workers > n {
		workers = n
	}
	var wg sync.WaitGroup
	per := (n + workers - 1) / workers
	for w := 0; w < workers; w++ {
		lo, hi := w*per, min((w+1)*per, n)
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			hash(data, bs, out, lo, hi)
		}()
	}
	wg.Wait()
}

// hashRange hashes blocks lo..hi-1 of data into out.
func hashRange(data []byte, bs uint32, out [][HashSize]byte, lo, hi int) {
	for i := lo; i < hi; i++ {
		out[i] = BlockHash(blockOf(data, i, bs))
	}
}

// hashRangeYield is hashRange yielding the processor after every
// yieldEvery bytes hashed.
func hashRangeYield(data []byte, bs uint32, out [][HashSize]byte, lo, hi int) {
	since := 0
	for i := lo; i < hi; i++ {
		b := blockOf(data, i, bs)
		out[i] = BlockHash(b)
		if since += len(b); since >= yieldEvery {
			since = 0
			runtime.Gosched()
		}
	}
}

// BlockHash returns the hash of one dCP block: BLAKE3-256 of p. Block
// hashing is where a checkpoint spends its CPU beyond the copy into the
// page cache. Blocks of a power-of-two multiple of 16 KiB take b3's
// 16-way SIMD path. That covers the default block size and every full
// block of it. It runs about 1.4x the per-core speed of 8-way AVX2
// (docs/performance.md). Nothing runs in the background: callers spread
// blocks over goroutines.
func BlockHash(p []byte) [HashSize]byte { return b3.Sum256(p) }

func blockOf(data []byte, i int, bs uint32) []byte {
	lo := int64(i) * int64(bs)
	hi := min(lo+int64(bs), int64(len(data)))
	return data[lo:hi]
}

// chunkHash is the chunk hash: BLAKE3 over the chunk size (u64 LE), the
// block size (u32 LE) and the block hashes in order. Wire format: never change.
func chunkHash(size int64, bs uint32, blocks [][HashSize]byte) [HashSize]byte {
	var h b3.Hasher
	var pre [12]byte
	binary.LittleEndian.PutUint64(pre[0:], uint64(size))
	binary.LittleEndian.PutUint32(pre[8:], bs)
	_, _ = h.Write(pre[:])
	for i := range blocks {
		_, _ = h.Write(blocks[i][:])
	}
	return h.Sum256()
}

// fileChecksum is BLAKE3 over the chunk hashes in file order.
// Wire format: never change.
func fileChecksum(chunks []ChunkInfo) [HashSize]byte {
	h := b3.New()
	for i := range chunks {
		_, _ = h.Write(chunks[i].Hash[:])
	}
	return h.Sum256()
}
