package b3

import (
	"sync"
	"time"

	"github.com/zeebo/blake3"
	"lukechampine.com/blake3/guts"
)

// A hashPath is how bulk input is compressed. Both paths give the same
// digests.
type hashPath int

const (
	// pathGuts compresses guts.MaxSIMD chunks per call (16 with
	// AVX-512).
	pathGuts hashPath = iota + 1
	// pathZeebo hands the input to github.com/zeebo/blake3, 8 chunks
	// per call with AVX2.
	pathZeebo
)

// String names the path.
func (p hashPath) String() string {
	if p == pathZeebo {
		return "zeebo/blake3, 8-way"
	}
	return "guts, 16-way"
}

var (
	pathOnce sync.Once
	chosen   hashPath
)

// path returns the path this process hashes on. It is chosen once, at
// the first hash: which is faster depends on the CPU, not only on its
// instruction set. On a CPU with AVX-512 units of full width the 16-way
// path was 1.45-1.5x the 8-way one. On an AMD EPYC that splits AVX-512
// into two 256-bit halves it was 0.65-0.75x (BenchmarkHash).
func path() hashPath {
	pathOnce.Do(func() { chosen = fastPath(calibrationBytes, calibrationRounds) })
	return chosen
}

// The calibration hashes calibrationBytes on each path, calibrationRounds
// times in turn, and keeps each path's fastest round: about a
// millisecond in all.
const (
	calibrationBytes  = 16 * span
	calibrationRounds = 3
)

// fastPath times both paths on n bytes, rounds times each in turn, and
// returns the faster one's fastest round. A tie goes to guts.
func fastPath(n, rounds int) hashPath {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*131 + i>>9)
	}
	best := map[hashPath]time.Duration{}
	for range rounds {
		for _, c := range []hashPath{pathGuts, pathZeebo} {
			start := time.Now()
			timeOne(c, p)
			d := time.Since(start)
			if b, ok := best[c]; !ok || d < b {
				best[c] = d
			}
		}
	}
	if best[pathZeebo] < best[pathGuts] {
		return pathZeebo
	}
	return pathGuts
}

// timeOne hashes p on path c as the Hasher does: whole spans.
func timeOne(c hashPath, p []byte) {
	if c == pathZeebo {
		h := blake3.New()
		h.Write(p)
		h.Sum(nil)
		return
	}
	for off := 0; off+span <= len(p); off += span {
		guts.CompressBuffer((*[span]byte)(p[off:]), span, &guts.IV, uint64(off/guts.ChunkSize), 0)
	}
}
