// Package h5ckpt writes a checkpoint as one real HDF5 file holding every
// global dataset as one dataset under its name, written in parallel by
// every rank, and reads it back on any number of ranks: FTI's HDF5 single
// file (h5_single_file_enable, level 9, ckpt_io = 5) and its "variate
// processor restart". h5py, h5dump and libhdf5 read the whole state from
// the file; libhdf5 can open it read-write. The layout is specified in
// docs/format/h5ckpt.md.
//
// # Writing (collective)
//
//	err := h5ckpt.Write(c, driver, h5ckpt.Name(dir, prefix, id), meta, vars, datasets, subsets)
//
// Every rank passes its protected variables ([fileformat.Var]), the
// global datasets it knows and the subsets of its variables. The ranks
// gather each other's declarations and validate them together (package
// dataset: no element covered twice, every element of a dataset that is
// not sparse covered once, one definition per id); every rank computes
// the same file layout; rank 0 creates the file under a temporary name;
// every rank writes its hyperslabs straight into the datasets' raw data at
// computed offsets (contiguous runs merged, writeback started as it goes)
// and its other variables into datasets of its own, hashing the bytes
// from memory while they are written (BLAKE3 per block, as FTI-FF), and
// syncs; the ranks vote; rank 0 receives the block hashes, writes the
// tables, the object headers and the superblock last, syncs, renames the
// file to its final name and syncs the directory. A crash at
// any point leaves the previous file and, under the final name, either
// nothing or the complete new file. Every rank returns the same error.
//
// # Reading
//
//	f, err := h5ckpt.Open(driver, path)   // tables, hashes, decomposition checked
//	dec := f.Decomposition()               // the writers' datasets and subsets
//	err = f.ReadVarAt(rank, id, dst, off)  // any old rank's variable bytes, verified
//	err = f.ReadSlab(datasetID, offset, count, dst)
//	err = f.VerifyRank(rank)               // one old rank's blocks (f.Verify: all)
//
// [File.TablesHash] identifies every byte of a checkpoint (the tables hold
// every block hash); [WithResult] gives it to every writing rank, which is
// how a manifest records an HDF5 L4 checkpoint (ckpt_io = 5).
//
// [File] is a [dataset.Source]: a restart on M ranks builds its own
// decomposition, a [dataset.Plan] from [File.Decomposition] to it, and
// runs [dataset.Plan.Execute] against the file; every byte returned was
// checked against its block hash.
//
// Concurrency: Write is collective, one call per rank. An opened File may
// be read from several goroutines at once.
//
// # API stability
//
// h5ckpt is public API as a format package (HDF5 checkpoints,
// docs/format/h5ckpt.md): its exported names and their behaviour are kept
// stable. Before 1.0 an incompatible change is still possible. Applications
// use ckpt, comm (and comm/mpi), vfd and the format packages (fileformat,
// sion, gsd, dhdf, dhdf/h5, h5ckpt); levels, partner, encode and dataset are
// ftigo's machinery.
package h5ckpt
