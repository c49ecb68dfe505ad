// Package h5 writes and reads HDF5 files of one small, fixed profile: the
// byte-level layer under packages dhdf and h5ckpt. It owns that HDF5
// encoding (File Format Specification 3.0):
//
//   - superblock version 2, version-2 object headers in one chunk;
//   - groups as compact link messages (hard and external links);
//   - contiguous datasets of int8..int64, uint8..uint64, float32 and
//     float64 n-D arrays, and fixed-length NULLPAD strings;
//   - compound and array types for tables, attribute messages version 3;
//   - virtual datasets (layout version 4, mappings in one global heap
//     collection).
//
// The exact profile is in docs/format/dhdf.md. Files of other profiles
// (other superblock versions, B-trees, chunked or compact layouts, dense
// links) are rejected with [ErrUnsupported]: it is not a general HDF5
// reader.
//
// Lifecycle of a write, in call order:
//
//	w := h5.NewWriter(f)              // f: an empty vfd.File
//	g := w.Root()
//	g.SetAttr(...); g.CreateGroup(...) // any order
//	d, _ := g.CreateDataset(name, typ, dims, data) // raw data written now (vfd.MemDraw)
//	d.SetAttr(...)
//	g.CreateExternalLink(...); g.CreateVirtual(...)
//	w.Flush() // optional: global heap (MemGHeap), object headers bottom-up (MemOHdr), Sync
//	w.Close() // Flush if not done, then the superblock at 0 (MemSuper), Sync
//
// [Writer.OneSync] drops the Sync of Flush (one barrier instead of two).
//
// [Group.ReserveDataset] allocates a dataset's raw data without writing
// it, optionally aligned, so that other writers (other ranks with their
// own handles on the file) fill it at [Dataset.Addr] before Close; what
// nobody writes reads as zeros. [File.ReadHyperslab] reads a block of a
// contiguous dataset, one read per contiguous run.
//
// Until Close has written the superblock the file starts with zeros, so a
// cut write leaves a file that every HDF5 tool refuses. Output is
// deterministic: the same calls give the same bytes (names are sorted).
//
// Reading: [Open] decodes and checks every object header (lookup3
// checksums, sizes against the superblock's end of file) before it
// returns; [File.ReadData] reads raw data on demand. No input makes the
// reader panic or allocate more than the file's size at once.
//
// Concurrency: a [Writer] and its groups and datasets belong to one
// goroutine. An opened [File] is immutable and safe for concurrent reads.
//
// # API stability
//
// h5 is public API as a format package (the HDF5 subset ftigo writes and
// reads): its exported names and their behaviour are kept stable. Before 1.0
// an incompatible change is still possible.
package h5
