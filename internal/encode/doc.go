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
//  2. [NewLayout] for a group; encode per block with [Code.EncodeBlock],
//     or one parity row at a time with [Code.Row] as blocks arrive
//     (distributed encoding, package partner); files shorter than the
//     group's largest are padded with zeros in memory only ([ReadBlock]).
//  3. Record the hashes ([ParityHeader]).
//  4. Rebuild: [Layout.Check] the damage, then [Code.Reconstruct] per block
//     with an erasure mask; more than m losses give an [*ErasureError]
//     naming the lost shards, never wrong data. Check the rebuilt hashes
//     against the recorded ones.
//
// # Concurrency
//
// A Code is immutable and safe for concurrent use; it may use several
// goroutines inside one call ([Options].MaxGoroutines bounds them). No
// package-level mutable state.
//
// # API stability
//
// encode is ftigo's machinery, not public API: it is exported for ckpt,
// cmd/ftigo and the tests, and its exported names may change in any release,
// before or after 1.0. Applications use package ckpt (and comm, vfd and the
// format packages).
package encode
