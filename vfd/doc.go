// Package vfd is ftigo's virtual file layer: the only package that touches
// operating-system files. Every byte a checkpoint level, a trajectory or an
// HDF set writes goes through a [Driver] and the [File]s it opens, after
// HDF5's virtual file layer.
//
// A [File] is a format address space in io conventions (ReadAt, WriteAt,
// Size, Truncate, Sync, Close). A [Driver] opens files by name and owns the
// namespace operations a commit needs (Remove, Rename, Stat, ReadDir,
// MkdirAll, SyncDir). Optional capabilities (vectored I/O, preallocation,
// memory-type hints, an address space apart from the end of file) are
// separate small interfaces found by type assertion, with package functions
// ([WriteV], [Preallocate], [WriteAtType]) that fall back when a file lacks
// them.
//
// Lifecycle: choose a driver, Open (or [Create]) a file, WriteAt and ReadAt
// freely, Sync to make it durable, Close. Nothing is durable before Sync
// returns; a new or renamed name is durable only after SyncDir of its
// directory. [WriteFileAtomic] is the commit protocol used across ftigo:
// write a temporary name, sync, rename, sync the directory.
//
// Concurrency: ReadAt and WriteAt may run concurrently on disjoint ranges
// of one File. Other methods of a File must not overlap with anything else
// on that File. Drivers are safe for concurrent use.
package vfd
