// Package encode owns the Reed-Solomon erasure code of L3 and the header of
// parity files (docs/format/parity.md). It does no communication and no
// file management: callers hand it byte blocks, io.ReaderAt and
// io.WriterAt values.
//
// A [Code] has k data and m parity shards (m = k by default). It is
// systematic, over GF(2^8) with a Cauchy matrix
// (github.com/klauspost/reedsolomon). A [Layout] places the data and
// parity of an L3 group on its members: FTI's full scheme (m = k: one
// codeword of k data and k parity shards, any k of the 2k files may be
// lost) or the rotated scheme (m < k: k stripes of k-m data and m parity
// shards, one shard of each stripe per member, any m members may be lost,
// overhead m/(k-m)), with [Layout.Check] for erasure patterns and
// [Layout.EncodeFiles] as the in-memory reference.
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
