package fileformat

import (
	"fmt"
	"math/bits"
	"slices"
)

// The word-sparse form of a block stores which of its 8-byte words are
// not zero and only those words (docs/format/ftiff.md, "Version 3"). It
// is a zstd skippable frame (RFC 8878, magic sparseMagic) whose user data
// is the block's length, a bitmap with one bit per word, then the
// nonzero words in order. Wire format: never change.
//
// Data with most words zero (sparse fields, 90% zero doubles) takes it
// at memory speed: zstd's fastest level runs at a few hundred MB/s on
// such data, and the bitmap costs 1/64 of the block, about what zstd's
// sequences cost.
const (
	sparseMagic = 0x184D2A5E
	// sparseHdr is the magic, the frame's user data length and the
	// block's length, each a u32.
	sparseHdr = 12
)

// sparseMaxFill is the largest fraction of nonzero words, in 1/64ths,
// for which a block takes the word-sparse form (1/4): fuller blocks go
// to zstd, which also finds repeated values.
const sparseMaxFill = 16

// sparseLen is the stored length of the word-sparse form of n bytes with
// nnz nonzero words.
func sparseLen(n, nnz int) int { return sparseHdr + (n/8+7)/8 + 8*nnz }

// appendSparse appends the word-sparse form of b to dst when b's length
// is a multiple of 8 and at most sparseMaxFill/64 of its words are not
// zero; it returns dst unchanged and false otherwise. Dense data costs a
// look at its first 32 words. The rest goes 64 words at a time
// (sparseGroup), and the quarter limit is checked once per 64 words.
func appendSparse(dst, b []byte) ([]byte, bool) {
	n := len(b)
	if n%8 != 0 || n < zeroMin || n > MaxBlockSize {
		return dst, false
	}
	nnz := 0
	for i := 0; i < 256 && i < n; i += 8 {
		if le.Uint64(b[i:]) != 0 {
			nnz++
		}
	}
	if nnz > 16 {
		return dst, false
	}
	words := n / 8
	limit := words * sparseMaxFill / 64
	nb := (words + 7) / 8
	start := len(dst)
	// Room for limit values plus a group of 64 words past it: the limit
	// is checked once per group.
	dst = slices.Grow(dst, sparseHdr+nb+8*(limit+64))
	f := dst[start : start+sparseHdr+nb+8*(limit+64)]
	bm := f[sparseHdr : sparseHdr+nb]
	vals := f[sparseHdr+nb:]
	k := 0
	full := words / 64 * 64
	for i0 := 0; i0 < full; i0 += 64 {
		m, c := sparseGroup((*[512]byte)(vals[8*k:]), (*[512]byte)(b[8*i0:]))
		k += c
		if k > limit {
			return dst[:start], false
		}
		le.PutUint64(bm[i0/8:], m)
	}
	if full < words {
		// The last, partial group goes through a zeroed copy.
		var g [512]byte
		copy(g[:], b[8*full:])
		m, c := sparseGroup((*[512]byte)(vals[8*k:]), &g)
		k += c
		if k > limit {
			return dst[:start], false
		}
		for q := full / 8; q < nb; q++ {
			bm[q] = byte(m)
			m >>= 8
		}
	}
	size := sparseLen(n, k)
	le.PutUint32(f[0:], sparseMagic)
	le.PutUint32(f[4:], uint32(size-8))
	le.PutUint32(f[8:], uint32(n))
	return dst[:start+size], true
}

// sparseGroup stores the nonzero words of the 64 words of g at the start
// of v, in order, and returns the bitmap of g's nonzero words and their
// count. A first pass builds the bitmap without a branch on the data
// ((w | -w) >> 63 is 1 when w is not zero), in four independent lanes;
// a second one visits only its set bits. On 90% zero words that takes
// about two thirds of the time of storing every word at the next
// value's place (BenchmarkAppendSparse).
func sparseGroup(v, g *[512]byte) (uint64, int) {
	var m0, m1, m2, m3 uint64
	for t := uint(0); t < 64; t += 4 {
		q := (*[32]byte)(g[(8*t)&480:])
		w0 := le.Uint64(q[0:])
		w1 := le.Uint64(q[8:])
		w2 := le.Uint64(q[16:])
		w3 := le.Uint64(q[24:])
		m0 |= ((w0 | -w0) >> 63) << t
		m1 |= ((w1 | -w1) >> 63) << t
		m2 |= ((w2 | -w2) >> 63) << t
		m3 |= ((w3 | -w3) >> 63) << t
	}
	m := m0 | m1<<1 | m2<<2 | m3<<3
	c := 0
	for r := m; r != 0; r &= r - 1 {
		i := uint(bits.TrailingZeros64(r))
		le.PutUint64(v[(8*uint(c))&504:], le.Uint64(g[(8*i)&504:]))
		c++
	}
	return m, c
}

// isSparseFrame reports whether src starts as a word-sparse frame.
func isSparseFrame(src []byte) bool {
	return len(src) >= sparseHdr && le.Uint32(src) == sparseMagic
}

// decodeSparse decodes the word-sparse frame src into dst, whose length
// is the block's. It checks every length against dst and the bitmap
// before writing, so a damaged frame never writes past dst. The form is
// canonical: a stored value that is zero is refused too.
func decodeSparse(dst, src []byte) error {
	n := len(dst)
	if len(src) < sparseHdr || int(le.Uint32(src[4:])) != len(src)-8 || int(le.Uint32(src[8:])) != n || n%8 != 0 {
		return fmt.Errorf("%w: word-sparse frame of %d bytes does not describe a block of %d", errDecode, len(src), n)
	}
	words := n / 8
	nb := (words + 7) / 8
	if len(src) < sparseHdr+nb {
		return fmt.Errorf("%w: word-sparse frame of %d bytes is too short for its bitmap", errDecode, len(src))
	}
	bm := src[sparseHdr : sparseHdr+nb]
	vals := src[sparseHdr+nb:]
	nnz := 0
	for _, x := range bm {
		nnz += bits.OnesCount8(x)
	}
	if words%8 != 0 && bm[nb-1]>>(words%8) != 0 {
		return fmt.Errorf("%w: word-sparse bitmap marks words past the block", errDecode)
	}
	if len(vals) != 8*nnz {
		return fmt.Errorf("%w: word-sparse frame holds %d value bytes for %d nonzero words", errDecode, len(vals), nnz)
	}
	clear(dst)
	k := 0
	for i := 0; i < nb; i += 8 {
		var m uint64
		if i+8 <= nb {
			m = le.Uint64(bm[i:])
		} else {
			for j := nb - 1; j >= i; j-- {
				m = m<<8 | uint64(bm[j])
			}
		}
		for m != 0 {
			t := bits.TrailingZeros64(m)
			m &= m - 1
			w := le.Uint64(vals[8*k:])
			if w == 0 {
				return fmt.Errorf("%w: word-sparse frame stores a zero word (value %d)", errDecode, k)
			}
			le.PutUint64(dst[8*(8*i+t):], w)
			k++
		}
	}
	return nil
}
