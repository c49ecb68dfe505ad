// Package b3 is a sequential BLAKE3-256 hasher for the bulk hashing of
// checkpoint files: partner copies, parity files, data files read back.
// It is internal to ftigo.
//
// It computes the same digests as any BLAKE3 implementation, on one of
// two paths. The guts path compresses 16 chunks (16 KiB) at a time with
// the AVX-512 compression functions of lukechampine.com/blake3/guts where
// the CPU has them, and AVX2 or portable code elsewhere. The zeebo path
// hands the input to github.com/zeebo/blake3, which hashes 8 chunks at a
// time with AVX2. Which is faster depends on the CPU (BenchmarkHash):
//
//   - guts was 1.45-1.5x zeebo per core on a CPU with full-width AVX-512
//     units (docs/performance-archive.md);
//   - on an AMD EPYC, which splits AVX-512 into two 256-bit halves, it
//     was 0.65-0.75x.
//
// So the process times both on 256 KiB at its first hash, about a
// millisecond, and keeps the faster one.
//
// lukechampine.com/blake3's own Hasher hashes every 16 KiB of a large
// write on a goroutine of its own. Neither path here starts goroutines:
// the callers already hash on a goroutine per rank, with at least one
// rank per core.
//
// Lifecycle: [New] (or a zero [Hasher]), Write any number of times, then
// [Hasher.Sum256]; writing may go on after it. [Sum256] hashes a slice.
//
// Concurrency: a Hasher is used by one goroutine at a time; Clone gives
// an independent copy. There is no package-level mutable state.
//
// API stability: internal to ftigo; its names may change in any release.
package b3
