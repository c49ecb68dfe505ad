// Package vfd is ftigo's virtual file layer, after HDF5's. It is the only
// package that touches operating-system files. Every byte a checkpoint
// level, a trajectory or an HDF set writes goes through a [Driver] and
// the [File]s it opens.
//
// # What it owns
//
// A [File] is a format address space in io conventions: ReadAt, WriteAt,
// Size, Truncate, Sync, Close. A [Driver] opens files by name. It also
// owns the namespace operations a commit needs: Remove, Rename, Stat,
// ReadDir, MkdirAll, SyncDir. [WriteFileAtomic] is the commit protocol
// used across ftigo: write a temporary name, sync, rename, sync the
// directory. [MkdirDurable] and [RenameDurable] are the durable forms of
// MkdirAll and Rename: they sync the directories whose entries changed.
//
// Optional capabilities are small interfaces found by type assertion:
// vectored I/O, preallocation, memory-type hints, early writeback,
// read-ahead, an address space apart from the end of file. Package
// functions use them and fall back when a file lacks them ([WriteV],
// [Preallocate], [WriteAtType], [StartWriteback], [StartReadahead]).
// [MovePages] hands memory pages from one buffer to another. Drivers may
// take exclusive locks ([Locker], [Lock]: flock(2) on disk).
//
// Open opens regular files only. A directory, FIFO, device or socket is
// refused with an error wrapping [ErrNotRegular], without blocking on a
// FIFO. [ReadFileLimit] reads small files with a bound, refusing a
// larger one with [ErrTooLarge] before allocating anything.
//
// The drivers:
//
//   - [Sec2], the default: one OS file per name, pread and pwrite
//     restarted on EINTR and short transfers, fdatasync, directory fsync.
//   - [Direct]: Sec2 with O_DIRECT. Aligned requests ([AlignedBuffer])
//     go straight to the device, others through a bounce buffer.
//   - [Core]: a whole namespace in memory. [Core.CrashClone] returns what
//     a power cut would leave: each directory's synced entries, each
//     file's synced bytes. [Core.CrashCloneWith] also keeps a seeded
//     share of unsynced pages (torn writes). [WithBacking] writes each
//     file to another driver on Sync and Close.
//   - [Fault]: wraps any driver and fails chosen operations: the Nth of
//     a kind ([OnNth]), by path ([OnPath]), at random ([Randomly]), torn
//     writes ([ShortWrite]), delays ([Latency]). [CrashCloneAt] takes a
//     crash clone at op k. Injected errors match [ErrInjected].
//   - [Log]: traces every operation with zap and counts them.
//   - [Stdio]: a write-back buffer per file that coalesces sequential
//     writes.
//   - [Family]: one address space over fixed-size member files,
//     byte-compatible with libhdf5's family driver.
//   - [Split]: metadata and raw data of one address space in two files,
//     chosen by each transfer's memory-type hint.
//
// [Parse] builds a driver stack from a spec such as
// "stdio:buffer=64k;family:member=1g;sec2", like HDF5_DRIVER. A
// [Registry] takes more drivers. Every driver passes the conformance
// suite in vfd/vfdtest.
//
// # Lifecycle
//
// Choose a driver, Open (or [Create]) a file, WriteAt and ReadAt freely,
// Sync to make it durable, Close. Nothing is durable before Sync returns.
// A new or renamed name is durable only after SyncDir of its directory.
//
// # Early writeback
//
// A checkpoint writer writes a file in large blocks with CPU work between
// them and syncs at the end. [StartWriteback] after each block starts the
// device write at once. It overlaps the CPU work that follows, and the
// final Sync finds little left to do (RocksDB's bytes_per_sync):
//
//	for off := int64(0); off < size; off += block {
//		fill(buf) // hash, encode, ...
//		if _, err := f.WriteAt(buf, off); err != nil { ... }
//		if err := vfd.StartWriteback(f, off, block); err != nil { ... }
//	}
//	err := f.Sync() // still required: the hint makes nothing durable
//
// It is only a hint ([WritebackStarter]): nothing becomes durable before
// Sync. [Sec2] issues sync_file_range and stops trying where the kernel
// refuses it. A writer of a large file nobody will read soon can also
// keep its page-cache footprint small with [DropCache] on the pieces it
// wrote a while ago ([CacheDropper]).
//
// # Concurrency
//
// ReadAt, WriteAt, StartWriteback and DropCache may run concurrently on
// disjoint ranges of one File. Other methods of a File must not overlap
// with anything else on it. Drivers are safe for concurrent use. Core,
// Fault and Log keep their state behind locks or atomics. The injectors
// of a Fault run one at a time.
//
// # API stability
//
// vfd is public API: the Driver and File interfaces and the drivers are
// kept stable. Before 1.0 an incompatible change is still possible.
package vfd
