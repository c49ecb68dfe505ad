// Package h5ckpt writes a checkpoint as one real HDF5 file, written in
// parallel by every rank, and reads it back on any number of ranks. The
// file holds every global dataset as one dataset under its name. It is
// FTI's HDF5 single file (h5_single_file_enable, level 9, ckpt_io = 5)
// and the source of its "variate processor restart". h5py, h5dump and
// libhdf5 read the whole state from the file; libhdf5 can open it
// read-write. The layout is specified in docs/format/h5ckpt.md.
//
// # Writing (collective)
//
//	err := h5ckpt.Write(c, driver, h5ckpt.Name(dir, prefix, id), meta, vars, datasets, subsets)
//
// Every rank passes its protected variables ([fileformat.Var]), the
// global datasets it knows and the subsets of its variables. Then:
//
//  1. The ranks send their declarations to rank 0, which validates them
//     together (package dataset).
//  2. Rank 0 creates the file under a temporary name and computes its
//     layout. It hands each rank only its own part: where its variables
//     go, and its share of collective buffering.
//  3. Every rank writes its hyperslabs straight into the datasets' raw
//     data, and its other variables into datasets of its own. It hashes
//     the bytes from memory as they are written (BLAKE3 per block, as
//     FTI-FF), then syncs. Hyperslabs of short runs, such as blocks that
//     cut the rows, go through collective buffering: each rank writes
//     one contiguous domain of the file, gathered over c.
//  4. The ranks vote. Rank 0 receives the block hashes and writes the
//     tables, the object headers and, last, the superblock. It syncs,
//     renames the file to its final name and syncs the directory.
//
// A crash at any point leaves the previous file. Under the final name
// there is either nothing or the complete new file. Every rank returns
// the same error.
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
// A restart on the same N ranks need not have every rank parse and hash
// the tables, which grow with N: one rank opens the file and hands each
// rank [File.RankView] of its own variables (a message of the rank's own
// records and block hashes), and that rank opens it with [OpenView],
// which reads only the rank's blocks, each still checked against its
// hash (ftigo's HDF5 L4 restart does this from rank 0).
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
// Compression: datasets are written contiguous and unfiltered, exact,
// whatever [basic] compression or a variable's lossy mode says. HDF5's
// deflate filter is not written: it needs chunked datasets, and every
// reader would pay zlib's speed. This is a documented difference
// from FTI-FF.
//
// h5ckpt is public API as a format package (HDF5 checkpoints,
// docs/format/h5ckpt.md): its exported names and their behaviour are kept
// stable. Before 1.0 an incompatible change is still possible.
package h5ckpt
