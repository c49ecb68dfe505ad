package fileformat

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/ftigo/ftigo/internal/b3"
)

// VersionCodec is the format version of a file holding a compressed or
// lossy variable (docs/format/ftiff.md, "Version 3"). Such a file adds a
// table of stored block sizes and a table of error bounds to the
// metadata block. Wire format: never change.
const VersionCodec = 3

// flagExt marks a version-3 file whose metadata block ends with an
// extension area (version 2 always has one).
const flagExt = 1 << 1

// Codec is the lossless compression of a variable's dCP blocks. Each
// block is compressed on its own, and kept raw when that does not make
// it smaller. The numeric values are stored in files. Wire format: never
// change.
type Codec uint8

// The codecs.
const (
	// CodecNone stores every block as it is.
	CodecNone Codec = 0
	// CodecZstd stores each block as one Zstandard frame (RFC 8878) when
	// the frame is smaller than the block.
	CodecZstd Codec = 1

	numCodecs Codec = 2
)

// String names c as the configuration does ("none", "zstd").
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// ParseCodec reads a codec name: "none" (or "" and "0") or "zstd".
func ParseCodec(s string) (Codec, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none", "0", "off", "false":
		return CodecNone, nil
	case "zstd":
		return CodecZstd, nil
	}
	return 0, fmt.Errorf("%w: compression %q (use none or zstd)", ErrInvalid, s)
}

// LossyMode is a lossy reduction of a floating-point variable before it
// is stored. The numeric values are stored in files. Wire format: never
// change.
type LossyMode uint8

// The lossy modes. None is ever the default.
const (
	// Exact stores the values as they are.
	Exact LossyMode = 0
	// ToFloat32 stores a float64 variable as float32, rounded to nearest
	// (FTI's FTI_CPC_SINGLE).
	ToFloat32 LossyMode = 1
	// ToFloat16 stores a float64 or float32 variable as IEEE 754 binary16,
	// rounded to nearest (FTI's FTI_CPC_HALF). Values beyond ±65504
	// become infinite.
	ToFloat16 LossyMode = 2
	// Mantissa keeps the first Bits bits of each float64 or float32
	// mantissa and zeroes the rest (truncation toward zero; FTI's
	// FTI_CPC_STRIP, the precision-based dCP idea).
	Mantissa LossyMode = 3
)

// String names m ("exact", "float32", "float16", "mantissa").
func (m LossyMode) String() string {
	switch m {
	case Exact:
		return "exact"
	case ToFloat32:
		return "float32"
	case ToFloat16:
		return "float16"
	case Mantissa:
		return "mantissa"
	}
	return fmt.Sprintf("lossy(%d)", uint8(m))
}

// Lossy is a variable's lossy mode and its parameter.
type Lossy struct {
	Mode LossyMode
	// Bits is the number of mantissa bits kept by [Mantissa] (0..52 for
	// float64, 0..23 for float32); 0 for the other modes.
	Bits uint8
}

// String describes l ("exact", "float32", "mantissa:20").
func (l Lossy) String() string {
	if l.Mode == Mantissa {
		return fmt.Sprintf("mantissa:%d", l.Bits)
	}
	return l.Mode.String()
}

// storedElem returns the element size of t's values as l stores them, or
// false when l does not apply to t.
func (l Lossy) storedElem(t ElemType) (uint32, bool) {
	switch l.Mode {
	case Exact:
		return 0, l.Bits == 0
	case ToFloat32:
		return 4, t == Float64 && l.Bits == 0
	case ToFloat16:
		return 2, (t == Float64 || t == Float32) && l.Bits == 0
	case Mantissa:
		switch t {
		case Float64:
			return 8, l.Bits <= 52
		case Float32:
			return 4, l.Bits <= 23
		}
	}
	return 0, false
}

// Check reports whether l applies to a variable of type t (an error
// wrapping [ErrInvalid] when it does not).
func (l Lossy) Check(t ElemType) error { return checkLossy(l, t) }

// checkLossy checks that l applies to a variable of type t.
func checkLossy(l Lossy, t ElemType) error {
	if _, ok := l.storedElem(t); !ok {
		return fmt.Errorf("%w: lossy mode %v does not apply to %v (float32 and float16 take float64; float16 and mantissa take float64 or float32, mantissa up to 52 or 23 bits)",
			ErrInvalid, l, t)
	}
	return nil
}

// ErrorBound is the largest error a lossy variable's stored values have,
// measured when they were written: absolute and relative to each value
// (0 for an exact variable; +Inf when a value overflowed the stored type).
type ErrorBound struct {
	Abs, Rel float64
}

// lossyEncode returns the stored representation of data (type t) under l
// and the error it introduced.
func lossyEncode(l Lossy, t ElemType, data []byte) ([]byte, ErrorBound) {
	var eb ErrorBound
	note := func(x, y float64) {
		if x == y || (math.IsNaN(x) && math.IsNaN(y)) {
			return
		}
		d := math.Abs(x - y)
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		eb.Abs = max(eb.Abs, d)
		if x != 0 {
			eb.Rel = max(eb.Rel, d/math.Abs(x))
		} else {
			eb.Rel = math.Inf(1)
		}
	}
	switch {
	case t == Float64:
		n := len(data) / 8
		es, _ := l.storedElem(t)
		out := make([]byte, n*int(es))
		for i := 0; i < n; i++ {
			x := math.Float64frombits(le.Uint64(data[8*i:]))
			var y float64
			switch l.Mode {
			case ToFloat32:
				f := float32(x)
				le.PutUint32(out[4*i:], math.Float32bits(f))
				y = float64(f)
			case ToFloat16:
				h := f64ToF16(x)
				le.PutUint16(out[2*i:], h)
				y = f16ToF64(h)
			case Mantissa:
				b := truncMantissa64(math.Float64bits(x), l.Bits)
				le.PutUint64(out[8*i:], b)
				y = math.Float64frombits(b)
			}
			note(x, y)
		}
		return out, eb
	case t == Float32:
		n := len(data) / 4
		es, _ := l.storedElem(t)
		out := make([]byte, n*int(es))
		for i := 0; i < n; i++ {
			xb := le.Uint32(data[4*i:])
			x := float64(math.Float32frombits(xb))
			var y float64
			switch l.Mode {
			case ToFloat16:
				h := f64ToF16(x)
				le.PutUint16(out[2*i:], h)
				y = float64(float32(f16ToF64(h)))
			case Mantissa:
				b := xb
				if l.Bits < 23 {
					b &^= 1<<(23-l.Bits) - 1
				}
				le.PutUint32(out[4*i:], b)
				y = float64(math.Float32frombits(b))
			}
			note(x, y)
		}
		return out, eb
	}
	return data, eb
}

// lossyDecode expands stored values (type t under l) into dst, whose
// length is the variable's bytes for those elements.
func lossyDecode(l Lossy, t ElemType, stored, dst []byte) {
	switch {
	case l.Mode == Mantissa:
		copy(dst, stored)
	case t == Float64 && l.Mode == ToFloat32:
		for i := 0; i < len(dst)/8; i++ {
			le.PutUint64(dst[8*i:], math.Float64bits(float64(math.Float32frombits(le.Uint32(stored[4*i:])))))
		}
	case t == Float64 && l.Mode == ToFloat16:
		for i := 0; i < len(dst)/8; i++ {
			le.PutUint64(dst[8*i:], math.Float64bits(f16ToF64(le.Uint16(stored[2*i:]))))
		}
	case t == Float32 && l.Mode == ToFloat16:
		for i := 0; i < len(dst)/4; i++ {
			le.PutUint32(dst[4*i:], math.Float32bits(float32(f16ToF64(le.Uint16(stored[2*i:])))))
		}
	default:
		copy(dst, stored)
	}
}

// truncMantissa64 keeps the first bits bits of the mantissa of the
// float64 with bit pattern b (infinities and NaNs unchanged).
func truncMantissa64(b uint64, bits uint8) uint64 {
	if bits >= 52 || (b>>52)&0x7ff == 0x7ff {
		return b
	}
	return b &^ (1<<(52-bits) - 1)
}

// f64ToF16 converts x to IEEE 754 binary16, rounding to nearest even.
func f64ToF16(x float64) uint16 {
	b := math.Float64bits(x)
	sign := uint16(b>>48) & 0x8000
	exp := int((b >> 52) & 0x7ff)
	man := b & (1<<52 - 1)
	switch {
	case exp == 0x7ff:
		if man != 0 {
			return sign | 0x7e00 // NaN
		}
		return sign | 0x7c00
	case exp == 0 && man == 0:
		return sign
	}
	e := exp - 1023 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	full := man | 1<<52 // 53 significant bits
	var shift uint
	if e <= 0 {
		// Subnormal half: the value is full * 2^(exp-1075); a subnormal
		// half's unit is 2^-24.
		shift = uint(43 - e)
		e = 0
	} else {
		shift = 42
	}
	if shift >= 64 {
		return sign
	}
	m := full >> shift
	rem := full & (1<<shift - 1)
	half := uint64(1) << (shift - 1)
	if rem > half || (rem == half && m&1 == 1) {
		m++
	}
	if e == 0 {
		// m holds the subnormal mantissa; a carry into bit 10 makes it
		// the smallest normal, which the same bits encode.
		return sign | uint16(m)
	}
	// m holds 11 bits (implicit 1 included); a carry may make it 12.
	if m>>11 != 0 {
		m >>= 1
		e++
		if e >= 0x1f {
			return sign | 0x7c00
		}
	}
	return sign | uint16(e)<<10 | uint16(m&0x3ff)
}

// f16ToF64 converts the binary16 value h to float64 (exactly).
func f16ToF64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0:
		return sign * math.Ldexp(m, -24)
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1024+m, e-25)
}

// compressor is the encoder the writers use.
type compressor = *zstd.Encoder

// Encoders and decoders are pooled: each serves one goroutine at a time,
// with concurrency 1, so it starts no goroutines and holds one state.
// A writer takes one per group of blocks and returns it afterwards.
var (
	encPool, decPool sync.Pool
)

// getEncoder returns a pooled zstd encoder: fastest level, no checksum
// (the block hashes check the data), literals stored raw. Huffman-coding
// the literals of a 16 KiB block cost 3-6x the rest of its compression
// on float data (heat, sparse) and gained under 1% of size: a float's
// low mantissa bytes, the literals left after matching, look random.
func getEncoder() (*zstd.Encoder, error) {
	if e, ok := encPool.Get().(*zstd.Encoder); ok {
		return e, nil
	}
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(1), zstd.WithSingleSegment(true), zstd.WithZeroFrames(true),
		zstd.WithNoEntropyCompression(true))
}

func putEncoder(e *zstd.Encoder) {
	if e != nil {
		encPool.Put(e)
	}
}

// getDecoder returns a pooled zstd decoder bounded to MaxBlockSize.
func getDecoder() (*zstd.Decoder, error) {
	if d, ok := decPool.Get().(*zstd.Decoder); ok {
		return d, nil
	}
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(MaxBlockSize), zstd.WithDecoderMaxWindow(MaxBlockSize))
}

func putDecoder(d *zstd.Decoder) {
	if d != nil {
		decPool.Put(d)
	}
}

// zeroForm is what is known of an all-zero block of one length: its
// hash and its stored frame.
type zeroForm struct {
	hash  [HashSize]byte
	frame []byte
}

// zeroMin is the shortest block the zero fast path takes.
const zeroMin = 64

// zeroForms caches a *zeroForm per block length: in practice the dCP
// block size and a few chunks' last blocks. At most maxZeroForms are
// kept; other lengths are computed each time.
var (
	zeroForms  sync.Map
	zeroFormsN atomic.Int32
)

const maxZeroForms = 16

// zeros is compared with blocks piece by piece.
var zeros [64 << 10]byte

// zeroFormOf returns the zeroForm of n bytes (n >= zeroMin).
func zeroFormOf(n int) *zeroForm {
	if z, ok := zeroForms.Load(n); ok {
		return z.(*zeroForm)
	}
	h := b3.New()
	for left := n; left > 0; left -= len(zeros) {
		_, _ = h.Write(zeros[:min(left, len(zeros))])
	}
	z := &zeroForm{frame: zeroFrame(n)}
	h.Sum(z.hash[:0])
	if zeroFormsN.Add(1) > maxZeroForms {
		zeroFormsN.Add(-1)
		return z
	}
	v, loaded := zeroForms.LoadOrStore(n, z)
	if loaded {
		zeroFormsN.Add(-1)
	}
	return v.(*zeroForm)
}

// allZero reports whether b holds only zeros, at memory speed (several
// times BLAKE3's).
func allZero(b []byte) bool {
	if len(b) == 0 || b[0] != 0 || b[len(b)-1] != 0 {
		return len(b) == 0
	}
	for len(b) > 0 {
		k := min(len(b), len(zeros))
		if !bytes.Equal(b[:k], zeros[:k]) {
			return false
		}
		b = b[k:]
	}
	return true
}

// zeroOf returns the zeroForm of b's length when b is all zeros and long
// enough for the fast path, or nil.
func zeroOf(b []byte) *zeroForm {
	if len(b) < zeroMin || !allZero(b) {
		return nil
	}
	return zeroFormOf(len(b))
}

// zeroFrameLen is len(zeroFrame(n)).
func zeroFrameLen(n int) int {
	hdr := 6
	switch {
	case n >= 65536+256:
		hdr = 9
	case n >= 256:
		hdr = 7
	}
	return hdr + 4*((n+zeroBlockMax-1)/zeroBlockMax)
}

// isZeroFrame reports whether src is zeroFrame(n), without allocating
// unless its length is that frame's.
func isZeroFrame(src []byte, n int) bool {
	if n < zeroMin || len(src) != zeroFrameLen(n) || src[0] != 0x28 {
		return false
	}
	if z, ok := zeroForms.Load(n); ok {
		return bytes.Equal(src, z.(*zeroForm).frame)
	}
	return bytes.Equal(src, zeroFrame(n))
}

// zeroBlockMax is the largest zstd block (RFC 8878: 128 KiB).
const zeroBlockMax = 128 << 10

// zeroFrame builds the zstd frame (RFC 8878) of n zero bytes: a single
// segment frame header stating n, then RLE blocks of at most 128 KiB
// repeating byte 0. Every zstd decoder reads it; the readers recognise
// it byte for byte and clear the block instead of decoding it.
func zeroFrame(n int) []byte {
	f := make([]byte, 0, zeroFrameLen(n))
	f = append(f, 0x28, 0xb5, 0x2f, 0xfd)
	switch {
	case n < 256:
		f = append(f, 0x20, byte(n))
	case n < 65536+256:
		f = append(f, 0x60, byte(n-256), byte((n-256)>>8))
	default:
		f = append(f, 0xa0, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	}
	for left := n; left > 0; {
		k := min(left, zeroBlockMax)
		left -= k
		h := uint32(k)<<3 | 1<<1 // RLE block
		if left == 0 {
			h |= 1 // last block
		}
		f = append(f, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	return f
}

// compressBlock appends the stored form of block b to dst and returns it
// with the stored length: a zstd frame when it is smaller than b, b
// itself otherwise. An all-zero block takes zeroFrame and a block of
// mostly zero words the word-sparse form (appendSparse), both without
// the encoder.
func compressBlock(enc *zstd.Encoder, dst, b []byte) ([]byte, uint32) {
	if z := zeroOf(b); z != nil {
		return append(dst, z.frame...), uint32(len(z.frame))
	}
	start := len(dst)
	if out, ok := appendSparse(dst, b); ok {
		return out, uint32(len(out) - start)
	}
	return encodeBlock(enc, dst, b)
}

// encodeBlock is compressBlock for a block already known to be neither
// all zero nor word-sparse: a zstd frame when it is smaller than b, b
// itself otherwise.
func encodeBlock(enc *zstd.Encoder, dst, b []byte) ([]byte, uint32) {
	start := len(dst)
	dst = enc.EncodeAll(b, dst)
	if n := len(dst) - start; n < len(b) {
		return dst, uint32(n)
	}
	dst = append(dst[:start], b...)
	return dst, uint32(len(b))
}

// probeSample is how much of a block the writer compresses to probe data
// that did not shrink: when the sample does not shrink either, the block
// is stored raw without compressing it whole. 2 KiB in one block of
// probeEvery (1/128 of random data) costs about 2% of hashing it.
const probeSample = 2 << 10

// sampleShrinks reports whether the first probeSample bytes of b shrink
// under zstd (scratch is a buffer to compress into; it is returned).
func sampleShrinks(enc *zstd.Encoder, scratch, b []byte) (bool, []byte) {
	s := b[:min(len(b), probeSample)]
	scratch = enc.EncodeAll(s, scratch[:0])
	return len(scratch) < len(s), scratch
}

// MaxZstdRatio bounds a compressed block's length over its stored
// length. A zstd frame needs at least 4 bytes (an RLE block) for each
// 128 KiB of content, so no frame expands further. Open refuses a block
// whose stored length claims more, so a small file never makes its
// reader allocate much more than the file's size times this ratio.
const MaxZstdRatio = 1 << 15

// errDecode is the reason a stored block does not decode to its length.
var errDecode = errors.New("stored block does not decompress to its recorded length")

// decompressBlock decodes the stored form src of a block into dst, whose
// length is the block's. src as long as dst is the raw block. Otherwise
// src must be one zstd frame that states exactly len(dst) bytes of
// content in its header: a frame claiming more is refused before
// anything is allocated, and the decoder never writes past dst. The
// decoder comes from the pool.
func decompressBlock(dst, src []byte) error {
	_, err := decodeBlock(dst, src)
	return err
}

// decodeBlock is decompressBlock that also reports whether src was the
// zero frame of len(dst) bytes (zeroFrame): dst is then cleared, not
// decoded, and the caller may compare the block's recorded hash with the
// zero block's instead of hashing dst.
func decodeBlock(dst, src []byte) (zero bool, err error) {
	if len(src) == len(dst) {
		copy(dst, src)
		return false, nil
	}
	if len(src) > len(dst) || len(src) == 0 {
		return false, fmt.Errorf("%w: %d stored bytes for %d", errDecode, len(src), len(dst))
	}
	if isZeroFrame(src, len(dst)) {
		clear(dst)
		return true, nil
	}
	if isSparseFrame(src) {
		return false, decodeSparse(dst, src)
	}
	return false, decodeFrame(dst, src)
}

// decodeFrame decodes the zstd frame src into dst (decompressBlock).
func decodeFrame(dst, src []byte) error {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return fmt.Errorf("%w: %v", errDecode, err)
	}
	if h.Skippable || !h.SingleSegment || !h.HasFCS || h.FrameContentSize != uint64(len(dst)) || h.DictionaryID != 0 {
		return fmt.Errorf("%w: the frame claims %d bytes (single segment %v), the block has %d", errDecode, h.FrameContentSize, h.SingleSegment, len(dst))
	}
	dec, err := getDecoder()
	if err != nil {
		return err
	}
	out, err := dec.DecodeAll(src, dst[:0:len(dst)])
	putDecoder(dec)
	if err != nil {
		return fmt.Errorf("%w: %v", errDecode, err)
	}
	if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
		return fmt.Errorf("%w: decoded %d bytes", errDecode, len(out))
	}
	return nil
}

// CodecRate is what [MeasureCodec] measured: the time to compress and to
// decompress a buffer block by block on one goroutine, and the bytes
// its blocks took stored.
type CodecRate struct {
	Logical, Stored  int64
	Compress, Decode time.Duration
}

// MeasureCodec compresses every block of data (bs bytes each, the last
// one shorter) with c as a writer stores it, without probing, then
// decodes every compressed block, all on the calling goroutine. It is a
// microbenchmark: the rates per core of the codec on such data.
func MeasureCodec(c Codec, data []byte, bs int) (CodecRate, error) {
	if c != CodecZstd || bs < 1 {
		return CodecRate{}, fmt.Errorf("%w: measure codec %v, block size %d", ErrInvalid, c, bs)
	}
	enc, err := getEncoder()
	if err != nil {
		return CodecRate{}, err
	}
	defer putEncoder(enc)
	r := CodecRate{Logical: int64(len(data))}
	n := (len(data) + bs - 1) / bs
	sizes := make([]uint32, n)
	out := make([]byte, 0, len(data))
	t0 := time.Now()
	for j := range n {
		b := data[j*bs : min((j+1)*bs, len(data))]
		out, sizes[j] = compressBlock(enc, out, b)
	}
	r.Compress = time.Since(t0)
	r.Stored = int64(len(out))
	dst := make([]byte, bs)
	t0 = time.Now()
	off := 0
	for j := range n {
		d := dst[:min(bs, len(data)-j*bs)]
		if err := decompressBlock(d, out[off:off+int(sizes[j])]); err != nil {
			return r, fmt.Errorf("measure codec: block %d: %w", j, err)
		}
		off += int(sizes[j])
	}
	r.Decode = time.Since(t0)
	return r, nil
}
