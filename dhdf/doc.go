// Package dhdf writes and reads distributed HDF sets, after the HDF NOW
// "distributed HDF files" design. A set spreads one large array (an SDS)
// over a main file (MHF, file id 0) and associated files (AHF, file ids
// 1..n). Each file is real HDF5, so h5dump, h5ls and h5py open every
// piece. dhdf owns the mapping of the design onto HDF5
// (docs/format/dhdf.md). The HDF5 bytes themselves are package
// [github.com/ftigo/ftigo/dhdf/h5].
//
// Every file carries the root attributes DHDF_SetId (string) and
// DHDF_FileId (int32) and a File_Info table {DHDF_FileId, FileName,
// HostName}. Each AHF holds its sub-arrays as contiguous datasets with the
// attributes SDSName, origin and checksum_crc32c. The MHF holds, per SDS,
// a virtual dataset /<SDS> (so HDF5 tools see the whole array) with the
// attributes datatype, rank, dimension_sizes and the user's,
// the chunk table /DHDF_ChunkTables/<SDS> {DHDF_FileId, ChunkName,
// DimSizes[32], Origins[32]} and external links /chunks/<SDS>/<chunk>.
//
// Writing, in call order:
//
//	w, _ := dhdf.Create("dir/sim", nAHF, opts)   // or CreateParallel(comm, "dir/sim", opts), collective
//	w.DefineSDS(dhdf.SDS{Name: name, Type: typ, Dims: dims, Attrs: attrs}) // every SDS, before its chunks
//	w.WriteChunk(sds, fileID, name, origin, dims, data) // raw data reaches the AHF now
//	w.Close() // AHFs finished and synced (superblock last), then the MHF
//
// Chunks of 4 MiB or more are synced as soon as they are written, while
// their CRC-32C is computed. [Options].OneSyncAHF trades the sync before
// each AHF's superblock for one fewer storage barrier (see
// docs/format/dhdf.md). The MHF is written only after every AHF is
// durable; under CreateParallel
// the ranks vote with an all-reduce first and again after rank 0 wrote the
// MHF, so a set whose MHF opens has all its AHFs. Reading:
//
//	s, _ := dhdf.Open("dir/sim.h5", opts) // checks every listed AHF is present and of this set
//	s.Files(); s.SDSs(); s.ReadSDS(name); s.ReadChunk(sds, chunk)
//	s.Close()
//
// A missing AHF is an error ([ErrMissingFile]), never fill values; chunk
// data is checked against its CRC32C on every read ([ErrChecksum]), and
// the File_Info and chunk tables against theirs when opened. [Verify]
// checks a whole set, every byte an HDF5 reader can see.
//
// Concurrency: a [Writer] belongs to one goroutine (one per rank under
// CreateParallel). A [Set] may be read from several goroutines; Close
// must not race with reads. All file access goes through the
// [vfd.Driver] in [Options].
//
// # API stability
//
// dhdf is public API as a format package (distributed HDF sets,
// docs/format/dhdf.md): its exported names and their behaviour are kept
// stable. Before 1.0 an incompatible change is still possible.
package dhdf
