// Package sion reads and writes SIONlib containers (fileformat 5, as
// SIONlib 1.7.6 writes them): many tasks' byte streams in one physical file,
// or a small set of files, each task owning a chunk in every fs-block
// aligned block. ftigo's L4 level stores a whole checkpoint in one such
// container; files written here read with SIONlib's own tools (siondump,
// sionsplit, sioncat) and this package reads what SIONlib writes. The layout
// is specified in docs/format/sion.md.
//
// # What it owns
//
//   - Reading: [Open] (a file or a multi-file set through file 0 and its
//     siblings name.000001 ...) and [NewReader] (one physical file from any
//     io.ReaderAt). Fileformat 3 to 5, metadata in either byte order,
//     key-value files ([Reader.EachRecord], [Reader.Records],
//     [Reader.KeyReader]) and mapped-mode files. Each task's logical stream is an [io.SectionReader] from
//     [Reader.TaskReader] (Read, Seek and ReadAt across its blocks).
//     Metadata is in [Reader.Files] and [Reader.Tasks].
//   - Writing from one process: [Create], then the per-task [TaskWriter]s
//     from [Writer.Task], then [Writer.Close]. With the same inputs as
//     SIONlib's serial API it writes the same bytes.
//   - Writing collectively over a [comm.Comm]: [ParCreate] (one task per
//     rank, optional multi-file set with SIONlib's rank-to-file split) and
//     [CreateMapped] (ranks owning several logical tasks, as FTI's L4 does),
//     then [ParWriter.Close]. The bytes match sion_paropen_mpi and
//     sion_paropen_mapped_mpi.
//
// # Lifecycle
//
// Writers: Create (or ParCreate/CreateMapped, collective) creates name.tmp
// and writes META1 without its last 12 bytes; tasks write their data;
// Close (collective for ParWriter) syncs the data, writes META2 and then
// maxchunks and start_of_varheader into META1, syncs again, renames
// name.tmp to name (set siblings first, file 0 last) and syncs the
// directory. Until that rename nothing exists under the final name, and
// before the second sync start_of_varheader is 0, which every reader
// rejects with [ErrUnclosed]: a crash never leaves a file that looks
// complete. Abort (or any error in Close) removes the temporary files.
// [Options.NoCommit] leaves the finished files under their temporary
// names for callers with their own commit protocol; [Options.InPlace]
// writes them under their final names from the start and syncs data and
// metadata in one round, unordered, for callers whose protocol makes that
// safe (a crash may then leave a file that looks complete: only the
// caller's metadata, written after Close, says it is).
//
// Readers: Open (or NewReader) decodes and checks all metadata up front,
// so a reader that opened reads every task; Close releases the files.
// Every size and count read from a file is checked against the file's
// size and against [MaxTasks] and [MaxMeta2Size] before anything is
// allocated ([ErrTooLarge] beyond them), and the metadata is streamed, so
// a forged header of a sparse 20 GiB file costs a few MiB. Key-value
// records are walked through a bounded buffer ([Reader.EachRecord],
// [Reader.KeyReader]).
//
// # Write policy
//
// A task writer places each write as its [Policy] says. The default,
// [PolicySplit], is SIONlib's: a write that does not fit in the rest of the
// chunk starts the next block (the tail stays unused), but a write larger
// than a whole chunk is spread over several chunks instead of being
// refused; [PolicyStrict] refuses it as SIONlib 1.7.6 does; [PolicyFill]
// fills every chunk to its last byte (key-value mode always does).
//
// # Concurrency
//
// A Reader is safe for concurrent use; each io.SectionReader it returns
// has its own position and belongs to one goroutine. The TaskWriters of
// one Writer or ParWriter may run in parallel (they write disjoint byte
// ranges), but each TaskWriter belongs to one goroutine, and Close or
// Abort must run after every write has returned. A ParWriter belongs to
// its rank's goroutine; its collective calls follow the rules of
// [comm.Comm].
//
// # API stability
//
// sion is public API as a format package (SIONlib containers,
// docs/format/sion.md): its exported names and their behaviour are kept
// stable. Before 1.0 an incompatible change is still possible. Applications
// use ckpt, comm (and comm/mpi), vfd and the format packages (fileformat,
// sion, gsd, dhdf, dhdf/h5, h5ckpt); levels, partner, encode and dataset are
// ftigo's machinery.
package sion
