// Package fileformat owns FTI-FF, the self-describing checkpoint file
// every ftigo level writes. A file holds the data of one rank's protected
// variables, plus everything needed to find, check and restore each of
// them without any other file. The byte layout is specified in
// docs/format/ftiff.md; delta files in docs/format/dcp.md.
//
// # What it owns
//
// A file is a fixed header (magic, version, checkpoint id, rank, level)
// at offset 0, the data blocks, the metadata block and the file block
// (FB) as the last 192 bytes. A data block is a run of containers, one
// per variable fragment. Every chunk is hashed with BLAKE3 in dCP blocks
// of a configurable size. The chunk hash covers its block hashes, and
// the file checksum covers the chunk hashes in file order. The FB stores
// the metadata's hash and a hash of itself and the header. So a file
// whose write was cut anywhere fails [Open] or [Reader.Verify].
//
// Global datasets: [WithDatasets] records the global arrays ([Dataset])
// and the hyperslab each variable maps onto ([Subset]). Such a file is
// format version [VersionExt] (2); a file without them stays version 1,
// byte for byte. [Reader.ReadVarAt] reads any byte range of a variable,
// verifying every dCP block it touches, for restarts on another number
// of ranks (package dataset).
//
// Differential checkpoints: [WriteDelta] writes a delta file instead of
// a full one. It stores only the dCP blocks that changed since the
// [Parent] image, with the complete metadata of the new image.
// [OpenDelta] checks a delta file's metadata and [Delta.Verify] its
// blocks. [OpenImage] opens a chain (a full file and the deltas after
// it) as a read-only [vfd.File] that reads exactly as the last image's
// full file would.
//
// # Lifecycle
//
// Writing, per checkpoint:
//
//	lay, sum, err := fileformat.Write(f, meta, vars, prevLayout, opts...)
//	// f.Sync(), f.Close(); keep lay for the next checkpoint, put sum in a manifest
//
// Each [Var] is a view of application memory ([Var.Data]). Write streams
// it to the [vfd.File] in 16 MiB pieces and hashes it alongside, never
// copying a variable. It starts each piece's writeback
// ([vfd.StartWriteback]). With [WithSync], Write syncs by itself: the
// data first, overlapped with the hashing, then the metadata and the
// file block. Passing the previous [Layout] keeps existing containers in
// place: a variable that grew gets a new block with only the extra part.
// [Plan] computes the layout and file size before writing.
//
// Reading, on restart:
//
//	r, err := fileformat.Open(f)           // header, FB hash, metadata hash, structure
//	n, err := r.StoredSize(id)              // FTI's GetStoredSize
//	err = r.ReadVar(id, dst[:n])            // FTI's RecoverVar, chunk hashes checked
//	err = r.Verify()                        // whole file, bounded memory
//	next := r.Layout()                      // to keep writing the same layout
//
// A reader that goes through the whole file anyway (a copy) can verify
// it in the same pass, with the checker [Reader.Verify] uses.
//
// Errors about the content are *[CorruptionError] values. They name the
// file, rank, variable, chunk and byte offset, and wrap [ErrNotFTIFF],
// [ErrVersion], [ErrTruncated], [ErrHashMismatch] or [ErrCorrupt]. No
// input makes the reader panic. Sizes and counts read from a file are
// checked against each other, against the file's size and against
// [MaxMetaSize] before anything is allocated. So a forged file block
// claiming gigabytes costs a few MiB and gives a *CorruptionError.
//
// # Concurrency
//
// Write must not run concurrently with anything else on its file, and
// the variables' memory must not change while it runs. It hashes large
// chunks on up to [WithHashWorkers] goroutines while it writes. A
// [Reader] is immutable after Open: its methods may be called from
// several goroutines at once. Write never modifies a [Layout].
//
// # API stability
//
// fileformat is public API as a format package: its exported names and
// their behaviour are kept stable. Before 1.0 an incompatible change is
// still possible.
package fileformat
