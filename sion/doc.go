// Package sion reads and writes SIONlib containers: fileformat 5, as
// SIONlib 1.7.6 writes them. A container holds many tasks' byte streams
// in one physical file, or a small set of files. Each task owns a chunk
// in every fs-block aligned block. ftigo's L4 level stores a whole
// checkpoint in one such container. Files written here read with
// SIONlib's own tools (siondump, sionsplit, sioncat), and this package
// reads what SIONlib writes. The layout is specified in
// docs/format/sion.md.
//
// # What it owns
//
//   - Reading: [Open] (a file, or a multi-file set through file 0 and its
//     siblings name.000001 ...) and [NewReader] (one physical file from
//     any io.ReaderAt). It reads fileformat 3 to 5, metadata in either
//     byte order, key-value files ([Reader.EachRecord], [Reader.Records],
//     [Reader.KeyReader]) and mapped-mode files. Each task's stream is an
//     [io.SectionReader] from [Reader.TaskReader]. The metadata is in
//     [Reader.Files] and [Reader.Tasks].
//   - Writing from one process: [Create], then the per-task
//     [TaskWriter]s from [Writer.Task], then [Writer.Close]. With the same
//     inputs as SIONlib's serial API it writes the same bytes.
//   - Writing collectively over a [comm.Comm]: [ParCreate] (one task per
//     rank) or [CreateMapped] (ranks owning several logical tasks, as
//     FTI's L4 does), then [ParWriter.Close]. The bytes match
//     sion_paropen_mpi and sion_paropen_mapped_mpi.
//
// # Lifecycle
//
// Writers: Create (or the collective ParCreate or CreateMapped) creates
// name.tmp and writes META1 without its last 12 bytes. The tasks write
// their data. Close (collective for a ParWriter) then commits:
//
//  1. it syncs the data and writes META2;
//  2. it writes maxchunks and start_of_varheader into META1, and syncs
//     again;
//  3. it renames name.tmp to name (a set's siblings first, file 0 last)
//     and syncs the directory.
//
// Until the rename nothing exists under the final name. Before the second
// sync start_of_varheader is 0, which every reader rejects with
// [ErrUnclosed]. So a crash never leaves a file that looks complete.
// Abort, or any error in Close, removes the temporary files.
// [Options.NoCommit] leaves the finished files under their temporary
// names, for callers with their own commit protocol. [Options.InPlace]
// writes them under their final names and syncs data and metadata in
// one round. A crash may then leave a file that looks complete: only the
// caller's metadata, written after Close, says it is.
//
// Readers: Open (or NewReader) decodes and checks all metadata up front,
// so a reader that opened reads every task. Close releases the files.
// Every size and count read from a file is checked against the file's
// size, [MaxTasks] and [MaxMeta2Size] before anything is allocated
// ([ErrTooLarge] beyond them). The metadata is streamed, so a forged
// header of a sparse 20 GiB file costs a few MiB.
//
// # Write policy
//
// A task writer places each write as its [Policy] says. The default,
// [PolicySplit], is SIONlib's: a write that does not fit in the rest of
// the chunk starts the next block. A write larger than a whole chunk is
// spread over several chunks instead of being refused. [PolicyStrict]
// refuses it, as SIONlib 1.7.6 does. [PolicyFill] fills every chunk to its
// last byte, as key-value mode always does.
//
// # Concurrency
//
// A Reader is safe for concurrent use. Each io.SectionReader it returns
// has its own position and belongs to one goroutine. The TaskWriters of
// one Writer or ParWriter may run in parallel: they write disjoint byte
// ranges. Each TaskWriter belongs to one goroutine, and Close or Abort
// runs after every write has returned. A ParWriter belongs to its rank's
// goroutine, and its collective calls follow the rules of [comm.Comm].
//
// # API stability
//
// sion is public API as a format package: its exported names and their
// behaviour are kept stable. Before 1.0 an incompatible change is still
// possible.
package sion
