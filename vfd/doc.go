// Package vfd is ftigo's virtual file layer: the only package that touches
// operating-system files. Every byte a checkpoint level, a trajectory or an
// HDF set writes goes through a [Driver] and the [File]s it opens, after
// HDF5's virtual file layer.
//
// A [File] is a format address space in io conventions (ReadAt, WriteAt,
// Size, Truncate, Sync, Close). A [Driver] opens files by name and owns the
// namespace operations a commit needs (Remove, Rename, Stat, ReadDir,
// MkdirAll, SyncDir). Optional capabilities (vectored I/O, preallocation,
// memory-type hints, early writeback, read-ahead, an address space apart
// from the end of file) are separate small interfaces found by type
// assertion, with package functions ([WriteV], [Preallocate],
// [WriteAtType], [StartWriteback], [StartReadahead]) that fall back when
// a file lacks them. [MovePages] hands memory pages from one buffer over
// to another (a restart's verified image to the variables). Drivers may
// also take exclusive locks ([Locker], [Lock]: flock(2) on disk), which
// the runtime uses so two jobs never write into one meta_dir at once.
//
// Open opens regular files only: a directory, FIFO, device or socket is
// refused with an error wrapping [ErrNotRegular] (without blocking on a
// FIFO), and [ReadFileLimit] reads small files (configuration,
// manifests, tables) with a bound, refusing a larger one with
// [ErrTooLarge] before allocating anything.
//
// # Drivers
//
//   - [Sec2]: the default. One OS file per name, pread/pwrite restarted on
//     EINTR and short transfers, fdatasync, fsync of directories.
//   - [Direct]: like Sec2 but with O_DIRECT. Aligned requests (offset,
//     length and buffer address multiples of the alignment, see
//     [AlignedBuffer]) go straight to the device; others go through a
//     bounce buffer. Where the file system refuses O_DIRECT, Open fails
//     with an error wrapping [ErrUnsupported].
//   - [Core]: a whole namespace in memory, with power-loss simulation.
//     Each file keeps its current bytes and the bytes of its last Sync;
//     each directory its current entries and those of its last SyncDir.
//     [Core.CrashClone] returns what a power cut would leave: from the
//     root down, each directory's synced entries, each file's synced
//     bytes. So a file created or renamed without a later SyncDir of its
//     directory is gone (or back under its old name), a file never synced
//     is empty, and a directory made by MkdirAll survives only once its
//     parent has been synced. [Core.CrashCloneWith] also keeps a seeded
//     random share of the pages written since the last Sync (torn writes
//     at 64 KiB granularity). Files are held in copy-on-write pages, so
//     Sync and CrashClone cost a page table, not a copy. [WithBacking]
//     writes each file's image to another driver on Sync and Close, as
//     HDF5's core driver with a backing store.
//   - [Fault]: wraps any driver and fails chosen operations: the Nth of a
//     kind ([OnNth]), the one with a global index ([OnIndex]), those on a
//     path glob ([OnPath]), seeded random ones ([Randomly]), torn writes
//     ([ShortWrite]), delays ([Latency]), or any [InjectorFunc]; or take a
//     crash clone at op k ([CrashCloneAt]). Injected errors match [ErrInjected] and the
//     chosen errno. [Fault.Ops] numbers every operation, for tests that
//     fail (or crash-clone a Core) at op k for every k.
//   - [Log]: wraps any driver and traces every operation with zap (op,
//     path, offset, size, memory type, duration, error) and counts them
//     ([Log.Stats]).
//   - [Stdio]: wraps any driver with a write-back buffer per file that
//     coalesces sequential writes.
//   - [Family]: one address space over fixed-size member files named by a
//     printf pattern ("data-%05d.bin"), byte-compatible with libhdf5's
//     family driver; opening an existing family discovers its member size
//     and rejects inconsistent members with [ErrFamilyMismatch].
//   - [Split]: metadata and raw data of one address space in two files
//     ("-m.h5" and "-r.h5") chosen by the memory-type hint of each
//     transfer, at identical addresses (each file sparse). Unlike libhdf5's
//     split driver, which relocates raw data to a second address range,
//     the files are not meant to be opened by libhdf5.
//
// [Parse] builds a driver stack from a spec such as
// "stdio:buffer=64k;family:member=1g;sec2", like HDF5_DRIVER and
// HDF5_DRIVER_CONFIG; a [Registry] takes more drivers.
// The conformance suite every driver passes is in package vfd/vfdtest.
//
// Lifecycle: choose a driver, Open (or [Create]) a file, WriteAt and ReadAt
// freely, Sync to make it durable, Close. Nothing is durable before Sync
// returns; a new or renamed name is durable only after SyncDir of its
// directory. [WriteFileAtomic] is the commit protocol used across ftigo:
// write a temporary name, sync, rename, sync the directory.
//
// # Early writeback
//
// A checkpoint writer (partner copies, parity files, FTI-FF files) writes
// a file in large blocks with CPU work between them and syncs at the end;
// left alone, the kernel keeps the blocks dirty in the page cache and the
// final Sync waits for the whole file to reach the device after the CPU
// work is over. [StartWriteback] after each block (off, n of that block)
// starts the device write at once, so it overlaps the CPU work that
// follows and the final Sync finds little left to do (RocksDB's
// bytes_per_sync):
//
//	for off := int64(0); off < size; off += block {
//		fill(buf) // hash, encode, ...
//		if _, err := f.WriteAt(buf, off); err != nil { ... }
//		if err := vfd.StartWriteback(f, off, block); err != nil { ... }
//	}
//	err := f.Sync() // still required: the hint makes nothing durable
//
// It is only a hint ([WritebackStarter]): content and size do not change,
// nothing becomes durable before Sync, and a crash clone of a [Core]
// loses bytes that were only written back. [Sec2] issues
// sync_file_range(SYNC_FILE_RANGE_WRITE) and, where the kernel or file
// system refuses it, stops trying for that file and returns nil; [Direct]
// and [Core] have nothing to start; [Stdio] first writes its buffer when
// it overlaps the range; [Log] traces and counts it; [Family] passes each
// member its part of the range and [Split] passes the range to both
// files; [Fault] shows it to its injectors as OpWriteback without a global
// index (so the indices of the other ops do not depend on whether a
// writer hints; see [Fault.NumberWriteback]).
//
// A writer of a large file that nobody will read soon (a partner copy, a
// parity file) can also keep its page-cache footprint small with
// [DropCache] on the pieces it wrote a few pieces ago: the range is
// written back, waited for and dropped, so the writer reuses its own
// pages instead of taking fresh memory for every byte, which on virtual
// machines that hand free memory back to the host costs a host fault per
// page ([CacheDropper]). [Sec2] issues sync_file_range with WAIT_BEFORE,
// WRITE and WAIT_AFTER, then posix_fadvise(POSIX_FADV_DONTNEED); the
// wrappers pass it on as they pass StartWriteback on ([Fault] and [Log]
// as OpDropCache); [Core] and [Direct] have no cache to drop.
//
// Concurrency: ReadAt, WriteAt, StartWriteback and DropCache may run concurrently on
// disjoint ranges of one File. Other methods of a File must not overlap
// with anything else on that File. Drivers are safe for concurrent use. Core, Fault and Log
// keep their state behind locks or atomics; injectors of a Fault run one
// at a time.
//
// # API stability
//
// vfd is public API: the Driver and File interfaces and the drivers are kept
// stable. Before 1.0 an incompatible change is still possible. Applications
// use ckpt, comm (and comm/mpi), vfd and the format packages (fileformat,
// sion, gsd, dhdf, dhdf/h5, h5ckpt); levels, partner, encode and dataset are
// ftigo's machinery.
package vfd
