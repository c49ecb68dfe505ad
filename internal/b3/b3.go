package b3

import (
	"math/bits"

	"github.com/zeebo/blake3"
	"lukechampine.com/blake3/guts"
)

// Size is the length of a digest in bytes.
const Size = 32

// span is what one SIMD call compresses: guts.MaxSIMD chunks.
const span = guts.MaxSIMD * guts.ChunkSize

// Hasher is an incremental BLAKE3-256 hasher. The zero value is ready to
// use. It is not safe for concurrent use.
type Hasher struct {
	// z hashes instead when this process took zeebo's path ([fastPath]);
	// it is made at the first Write.
	z *blake3.Hasher
	// stack holds the chaining values of complete subtrees of span bytes
	// and more, one per bit set in counter (in chunks).
	stack   [64 - 4][8]uint32
	counter uint64
	// buf holds the last up to span bytes written: they are compressed
	// only once more input follows, since the last node of the tree is
	// finalised differently.
	buf    [span]byte
	buflen int
}

// New returns a new Hasher.
func New() *Hasher { return new(Hasher) }

// Clone returns an independent copy of h's state.
func (h *Hasher) Clone() *Hasher {
	c := *h
	if h.z != nil {
		c.z = h.z.Clone()
	}
	return &c
}

// Reset forgets everything written.
func (h *Hasher) Reset() {
	h.counter, h.buflen = 0, 0
	if h.z != nil {
		h.z.Reset()
	}
}

// Write hashes p. It never fails.
func (h *Hasher) Write(p []byte) (int, error) {
	n := len(p)
	if h.z != nil || (n > 0 && path() == pathZeebo) {
		if h.z == nil {
			h.z = blake3.New()
		}
		return h.z.Write(p)
	}
	if h.buflen > 0 {
		k := copy(h.buf[h.buflen:], p)
		h.buflen += k
		p = p[k:]
		if len(p) == 0 {
			return n, nil
		}
		// More follows: the buffer is full and not the last span.
		h.push(&h.buf)
		h.buflen = 0
	}
	for len(p) > span {
		h.push((*[span]byte)(p))
		p = p[span:]
	}
	h.buflen = copy(h.buf[:], p)
	return n, nil
}

// push compresses one full span that is not the end of the input and
// merges it into the stack.
func (h *Hasher) push(b *[span]byte) {
	cv := guts.ChainingValue(guts.CompressBuffer(b, span, &guts.IV, h.counter, 0))
	// The span is a subtree at height log2(MaxSIMD) in chunks: merge it
	// with the complete subtrees to its left of the same height.
	const height = 4
	i := height
	for h.counter&(1<<i) != 0 {
		cv = guts.ChainingValue(guts.ParentNode(h.stack[i-height], cv, &guts.IV, 0))
		i++
	}
	h.stack[i-height] = cv
	h.counter += 1 << height
}

// Sum256 returns the digest of everything written so far; the hasher
// may go on being written to.
func (h *Hasher) Sum256() [Size]byte {
	if h.z != nil {
		var out [Size]byte
		h.z.Sum(out[:0])
		return out
	}
	n := guts.CompressBuffer(&h.buf, h.buflen, &guts.IV, h.counter, 0)
	for i := bits.TrailingZeros64(h.counter); i < bits.Len64(h.counter); i++ {
		if h.counter&(1<<i) != 0 {
			n = guts.ParentNode(h.stack[i-4], guts.ChainingValue(n), &guts.IV, 0)
		}
	}
	n.Flags |= guts.FlagRoot
	w := guts.WordsToBytes(guts.CompressNode(n))
	var out [Size]byte
	copy(out[:], w[:Size])
	return out
}

// Sum appends the digest to b (hash.Hash's Sum).
func (h *Hasher) Sum(b []byte) []byte {
	s := h.Sum256()
	return append(b, s[:]...)
}

// Size returns the digest length (hash.Hash).
func (h *Hasher) Size() int { return Size }

// BlockSize returns BLAKE3's block size (hash.Hash).
func (h *Hasher) BlockSize() int { return guts.BlockSize }

// Sum256 returns the BLAKE3-256 digest of p. On the guts path an input
// of a power-of-two number of spans (16 KiB, 32 KiB, ..., every full dCP
// block of the default size) is a complete BLAKE3 tree. It is hashed
// where it lies, 16 chunks per SIMD call. Any other input, and every
// input on the zeebo path, goes to github.com/zeebo/blake3's one-shot
// hash, which needs no hasher state: the cheaper path for short inputs.
// Both give the same digest.
func Sum256(p []byte) [Size]byte {
	if path() == pathGuts {
		if out, ok := sumTree(p); ok {
			return out
		}
	}
	return blake3.Sum256(p)
}

// sumTree hashes p if its length is a power-of-two multiple of span and
// reports false otherwise.
func sumTree(p []byte) (out [Size]byte, ok bool) {
	m := len(p) / span
	if m == 0 || len(p)%span != 0 || m&(m-1) != 0 {
		return out, false
	}
	subtree := func(i int) guts.Node {
		return guts.CompressBuffer((*[span]byte)(p[i*span:]), span, &guts.IV, uint64(i*guts.MaxSIMD), 0)
	}
	root := func(n guts.Node) [Size]byte {
		n.Flags |= guts.FlagRoot
		w := guts.WordsToBytes(guts.CompressNode(n))
		copy(out[:], w[:Size])
		return out
	}
	if m == 1 {
		return root(subtree(0)), true
	}
	// Merge subtrees left to right on a stack of chaining values, as the
	// Hasher does. The last merge is the root.
	var stack [64][8]uint32
	depth := 0
	for i := 0; i < m; i++ {
		cv := guts.ChainingValue(subtree(i))
		for k := i + 1; k&1 == 0; k >>= 1 {
			depth--
			n := guts.ParentNode(stack[depth], cv, &guts.IV, 0)
			if depth == 0 && i == m-1 {
				return root(n), true
			}
			cv = guts.ChainingValue(n)
		}
		stack[depth] = cv
		depth++
	}
	return out, false // not reached: m is a power of two
}
