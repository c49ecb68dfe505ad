// Package encode owns the Reed-Solomon erasure code of L3 and the header of
// parity files (docs/format/parity.md). It does no communication and no
// file management: callers hand it byte blocks, io.ReaderAt and
// io.WriterAt values.
//
// A [Code] has k data and m parity shards (m = k by default, FTI's
// tolerance: any k of the 2k shards may be lost; m < k for cheaper,
// SCR/redset-style parity). It is systematic, over GF(2^8) with a Cauchy
// matrix (github.com/klauspost/reedsolomon).
//
// # Lifecycle
//
//  1. [New] (or [NewWith]) once per group shape.
//  2. Encode: [Code.EncodeBlock] per block, or [Code.AddData] per member
//     with the partial parities summed by [XOR] (distributed encoding), or
//     [Code.EncodeStream] over whole files of different sizes, padded with
//     zeros in memory only.
//  3. Record the hashes ([StreamResult], [ParityHeader]).
//  4. Rebuild: [Code.Reconstruct] per block with an erasure mask, or
//     [Code.ReconstructStream] over files; more than m losses give an
//     [*ErasureError] naming the lost shards, never wrong data. Check the
//     rebuilt hashes against the recorded ones.
//
// # Concurrency
//
// A Code is immutable and safe for concurrent use; it may use several
// goroutines inside one call ([Options].MaxGoroutines bounds them). Stream
// functions hold k+m blocks of blockSize bytes. No package-level mutable
// state.
package encode
