// Package b3 is a sequential BLAKE3-256 hasher for the bulk hashing of
// checkpoint files: partner copies, parity files, data files read back.
// It is internal to ftigo.
//
// It computes the same digests as any BLAKE3 implementation. It
// compresses 16 chunks (16 KiB) at a time with the AVX-512 compression
// functions of lukechampine.com/blake3/guts where the CPU has them, and
// AVX2 or portable code elsewhere. On the machine ftigo is measured on
// that is about 1.45-1.5x the throughput per core of
// github.com/zeebo/blake3's incremental hasher, which hashes 8 chunks at
// a time with AVX2 (BenchmarkHash; docs/performance-archive.md).
// lukechampine.com/blake3's own Hasher hashes every 16 KiB of a large
// write on a goroutine of its own. This one starts no goroutines: the
// callers already hash on a goroutine per rank, with at least one rank
// per core.
//
// Lifecycle: [New] (or a zero [Hasher]), Write any number of times, then
// [Hasher.Sum256]; writing may go on after it. [Sum256] hashes a slice.
//
// Concurrency: a Hasher is used by one goroutine at a time; Clone gives
// an independent copy. There is no package-level mutable state.
//
// API stability: internal to ftigo; its names may change in any release.
package b3
