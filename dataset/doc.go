// Package dataset maps the protected variables of many ranks onto global
// arrays and moves them between decompositions: what a restart on a
// different number of ranks needs (FTI's FTI_DefineGlobalDataset,
// FTI_AddSubset and its "variate processor restart").
//
// A [Dataset] is a global array (id, name, shape of 1 to 32 dimensions,
// element type). A [Subset] maps one rank's variable onto a hyperslab of
// it (offset and count per dimension); the variable holds the
// hyperslab's elements in row-major order. Both types are the ones
// package fileformat records in every checkpoint file, so a checkpoint
// says by itself which part of which array each variable is.
//
// A [Decomposition] is every rank's subsets together with the datasets
// they map onto. [NewDecomposition] merges what each rank declared (or
// each file recorded) and validates it: the same dataset id means the
// same definition on every rank, subsets lie inside their dataset's
// shape, no element is covered twice, and every element of a dataset
// that is not Sparse is covered once. Errors name the dataset, the ranks
// and variables involved and, for a gap, an element no subset covers.
//
// A [Plan] moves data from an old decomposition (N ranks, the
// checkpoint) to a new one (M ranks, the restart): for each new rank the
// byte runs of old ranks' variables that fill its variables ([Copy]),
// row-major, with contiguous runs merged, so blocks that are contiguous
// in both layouts move as one copy whatever their size. [Plan.Execute]
// runs a new rank's copies against a [Source] of old data (for example
// [Files], the old ranks' FTI-FF files, every block verified against its
// hash), reading large runs straight into the destination and gathering
// small ones through a bounded window.
//
// [Dims] and [Block] give the balanced process grid and block
// decomposition most applications use (MPI_Dims_create and an uneven
// block split).
//
// Concurrency: a Decomposition and a Plan are immutable once built, apart
// from the per-rank caches of a Plan, which are guarded; they may be used
// from several goroutines.
//
// # API stability
//
// dataset is ftigo's machinery, not public API: it is exported for ckpt,
// cmd/ftigo and the tests, and its exported names may change in any release,
// before or after 1.0. Applications use package ckpt (and comm, vfd and the
// format packages). ckpt's DefineDataset and AddSubset are the public way to
// describe global datasets.
package dataset
