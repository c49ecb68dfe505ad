// Package dataset maps the protected variables of many ranks onto
// global arrays, and moves them between decompositions. A restart on
// another number of ranks needs it: FTI's FTI_DefineGlobalDataset,
// FTI_AddSubset and "variate processor restart".
//
// # What it owns
//
// A [Dataset] is a global array: an id, a name, a shape of 1 to 32
// dimensions and an element type. A [Subset] maps one rank's variable
// onto a hyperslab of it (offset and count per dimension). The variable
// holds the hyperslab's elements in row-major order. Package fileformat
// records both types in every checkpoint file, so a checkpoint says by
// itself which part of which array each variable is.
//
// A [Decomposition] is every rank's subsets together with the datasets
// they map onto. [NewDecomposition] merges what each rank declared (or
// each file recorded) and validates it:
//
//   - the same dataset id means the same definition on every rank;
//   - subsets lie inside their dataset's shape;
//   - no element is covered twice;
//   - every element of a dataset that is not Sparse is covered once.
//
// Errors name the dataset, the ranks and variables involved and, for a
// gap, an element no subset covers.
//
// A [Plan] moves data from an old decomposition (N ranks, the
// checkpoint) to a new one (M ranks, the restart). For each new rank it
// lists the byte runs of old ranks' variables that fill its variables
// ([Copy]). Runs are row-major, and contiguous runs are merged: blocks
// contiguous in both layouts move as one copy, whatever their size.
//
// [Dims] and [Block] give the balanced process grid and block
// decomposition most applications use (MPI_Dims_create and an uneven
// block split).
//
// A check or a plan spread over many ranks needs no rank to hold every
// rank's subsets. [Bins] cuts a dataset's index space into boxes
// ([BinsFor]: about one per subset); the subsets that meet a bin go to
// the rank that holds it. There [CheckBox] finds two subsets sharing an
// element and how much of the bin they cover; [GapError] reads as
// NewDecomposition's. [Runs] gives the copies of one pair of old and new
// subsets, as [Plan.Copies] does for a whole rank.
//
// # Lifecycle
//
//  1. Each rank declares its datasets and subsets.
//  2. [NewDecomposition] validates the whole of them on one rank (a
//     file's, a tool's); a run of many ranks checks them spread over the
//     ranks with [Bins] and [CheckBox].
//  3. On a restart of another shape, a [Plan] from the checkpoint's
//     decomposition to the new one, or [Runs] per pair of subsets that
//     meet.
//  4. [Plan.Execute] runs a new rank's copies against a [Source] of old
//     data, such as [Files] (the old ranks' FTI-FF files, every block
//     verified against its hash). [Apply] runs any list of copies. Large
//     runs are read straight into the destination; small ones go
//     through a bounded window.
//
// # Concurrency
//
// A Decomposition and a Plan are immutable once built, apart from a
// Plan's per-rank caches, which are guarded. Both may be used from
// several goroutines.
//
// # API stability
//
// dataset is public API: package h5ckpt's stable API shows its types
// (File.Decomposition, a [Source] for a restart on any number of
// ranks). Its exported names and their behaviour are kept stable. Before
// 1.0 an incompatible change is still possible. Applications describe
// their datasets through ckpt's DefineDataset and AddSubset, and use
// this package to read an HDF5 checkpoint on another decomposition.
package dataset
