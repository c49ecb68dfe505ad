// Package encode owns the Reed-Solomon erasure code of L3 and the header
// of parity files (docs/format/parity.md). It is ftigo's internal
// machinery, used by package partner. It does no communication and no
// file management: callers hand it byte blocks, io.ReaderAt and
// io.WriterAt values.
//
// A [Code] has k data and m parity shards (m = k by default). It is
// systematic, over GF(2^8) with a Cauchy matrix
// (github.com/klauspost/reedsolomon). A [Layout] places the data and
// parity of an L3 group on its members. There are two schemes:
//
//   - FTI's full scheme (m = k): one codeword of k data and k parity
//     shards. Any k of the 2k files may be lost.
//   - The rotated scheme (m < k): k stripes of k-m data and m parity
//     shards, one shard of each stripe per member. Any m members may be
//     lost, for an overhead of m/(k-m).
//
// [Layout.Check] tells whether an erasure pattern can be rebuilt.
// [Layout.EncodeFiles] is the in-memory reference of the encoding.
//
// # Lifecycle
//
//  1. [New] (or [NewWith]) once per group shape.
//  2. [NewLayout] for a group. Encode per block with [Code.EncodeBlock],
//     or one parity row at a time with [Code.Row] as blocks arrive
//     (distributed encoding, package partner). Files shorter than the
//     group's largest are padded with zeros in memory only
//     ([ReadBlock]).
//  3. Record the hashes ([ParityHeader]).
//  4. Rebuild: [Layout.Check] the damage, then [Code.Reconstruct] per
//     block with an erasure mask. More than m losses give an
//     [*ErasureError] naming the lost shards, never wrong data. Check
//     the rebuilt hashes against the recorded ones.
//
// # Concurrency
//
// A Code is immutable and safe for concurrent use. It may use several
// goroutines inside one call ([Options].MaxGoroutines bounds them).
// There is no package-level mutable state.
//
// # API stability
//
// encode is internal: only ftigo's own packages can import it, and its
// names may change in any release. Applications use package ckpt.
package encode
