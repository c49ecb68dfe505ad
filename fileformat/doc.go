// Package fileformat owns FTI-FF, the self-describing checkpoint file every
// ftigo level writes: the data of a rank's protected variables plus
// everything needed to find, check and restore each of them without any
// other file. The byte layout is specified in docs/format/ftiff.md.
//
// A file is a fixed header (magic, version, checkpoint id, rank, level) at
// offset 0, the data blocks (each a run of containers, one per variable
// fragment), the metadata block (variable records, one BMD per block, one
// VMD per chunk, the dCP block hashes) and the file block FB as the last
// 192 bytes. Every chunk is hashed with BLAKE3 in dCP blocks of a
// configurable size; the chunk hash covers its block hashes, the file
// checksum covers the chunk hashes in file order, the FB stores the
// metadata's hash and a hash of itself and the header. A file whose write
// was cut anywhere therefore fails [Open] or [Reader.Verify].
//
// # Lifecycle
//
// Writing, per checkpoint:
//
//	lay, sum, err := fileformat.Write(f, meta, vars, prevLayout, opts...)
//	// f.Sync(), f.Close(); keep lay for the next checkpoint, put sum in a manifest
//
// With [WithSync], Write syncs by itself: the data first, overlapped with
// the hashing, then the metadata and the file block, so the file block is
// never durable before the data and the hashing hides behind the flush.
//
// Each [Var] is a view of application memory ([Var.Data]); Write streams
// it to the [vfd.File] in 16 MiB pieces, starting each piece's writeback
// ([vfd.StartWriteback], a hint drivers may ignore) so that the device
// works while the rest is copied, and hashes it alongside, never copying a
// variable.
// Passing the previous [Layout] keeps existing containers in place:
// variables that grew get a new block with only the extra part, variables
// that shrank leave containers partly empty, new variables get a new block.
//
// [Plan] computes the layout and file size before writing (for FTI's maxFs,
// agreed across a group before L3 encoding). For differential checkpoints
// the file stores every chunk's dCP block hashes ([ChunkInfo.BlockHashes]);
// [HashBlocks], [DirtyBlocks] and [ChunkHash] let a later writer find and
// rewrite only the blocks that changed.
//
// # Differential checkpoints
//
// [WriteDelta] writes a delta file (docs/format/dcp.md) instead of a full
// one: it hashes every dCP block of the state, compares each with the
// block of the [Parent] image at the same variable and offset, and writes
// only the blocks that changed, with the complete metadata of the new
// image (header, metadata block, file block) and a table of the runs of
// blocks it stores; nothing else is read or written. [OpenDelta] checks a
// delta file's metadata and [Delta.Verify] its blocks. [OpenImage] opens a
// chain — a full file and the deltas after it — and returns the last
// image as a read-only [vfd.File] that reads exactly as that image's full
// file would (each block from the newest layer storing it, after checking
// that every block a delta leaves out is held by the layer before it with
// the same hash): [Open] on it restores variables with every block
// verified, and copying it writes the full file (compaction).
//
// Reading, on restart:
//
//	r, err := fileformat.Open(f)           // header, FB hash, metadata hash, structure
//	n, err := r.StoredSize(id)              // FTI's GetStoredSize
//	err = r.ReadVar(id, dst[:n])            // FTI's RecoverVar, chunk hashes checked
//	err = r.Verify()                        // whole file, bounded memory
//	next := r.Layout()                      // to keep writing the same layout
//
// A reader that goes through the whole file anyway (a copy) verifies it
// in the same pass with [Reader.NewVerifier]: the bytes it copies are
// shown to the [Verifier] in order, which checks them as Verify does
// (Verify is that checker fed by a read of the file).
//
// Global datasets: [WithDatasets] records the global arrays ([Dataset],
// FTI's DefineGlobalDataset) and the hyperslab each variable maps onto
// ([Subset], FTI's AddSubset) in an extension area of the metadata; such a
// file is format version [VersionExt] (2), a file without them stays
// version 1, byte for byte. [Reader.Datasets], [Reader.Subsets] and
// [Reader.SubsetOf] return them, [Reader.ReadVarAt] reads any byte range of
// a variable, verifying every dCP block it touches: what a restart on
// another number of ranks (package dataset) needs. [Reader.VarByName]
// finds a variable by its stored name.
//
// Errors about the content are *[CorruptionError] values naming the file,
// rank, variable, chunk and byte offset, wrapping [ErrNotFTIFF],
// [ErrVersion], [ErrTruncated], [ErrHashMismatch] or [ErrCorrupt]. No input
// makes the reader panic, and sizes and counts read from a file are
// checked against each other, against the file's size and against
// [MaxMetaSize] before anything is allocated; the metadata is then
// streamed, so a forged file block claiming gigabytes (a sparse 20 GiB
// file) costs a few MiB and gives a *CorruptionError.
//
// # Concurrency
//
// Write must not run concurrently with anything else on its file, and the
// variables' memory must not change while it runs; it hashes large chunks
// on up to [WithHashWorkers] goroutines while it writes. A [Reader] is
// immutable after Open: its methods may be called from several goroutines
// at once. [Layout] values are never modified by Write.
//
// # API stability
//
// fileformat is public API as a format package (FTI-FF,
// docs/format/ftiff.md): its exported names and their behaviour are kept
// stable. Before 1.0 an incompatible change is still possible. Applications
// use ckpt, comm (and comm/mpi), vfd and the format packages (fileformat,
// sion, gsd, dhdf, dhdf/h5, h5ckpt); levels, partner, encode and dataset are
// ftigo's machinery.
package fileformat
