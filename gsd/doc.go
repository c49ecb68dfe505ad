// Package gsd reads and writes GSD (General Simulation Data) trajectory
// files, the format of the gsd Python package, HOOMD-blue and OVITO. It
// owns the file layer: writing file format 2.0 exactly as the reference
// library lays it out, reading 1.0 and 2.x, checking ([Verify]), mending
// ([Repair]) and upgrading ([Upgrade]) files, and a helper for the hoomd
// schema ([CreateHOOMD], [HOOMDFrame]). The layout is specified in
// docs/format/gsd.md.
//
// A GSD file is a header, one live index of 32-byte entries sorted by
// (frame, name id), one live namelist and the data chunks: named N×M
// arrays of one of ten numeric types, grouped into frames. Files are
// append-only; the index and namelist are relocated to the end of the
// file when they fill up.
//
// # Writing
//
// Lifecycle: [Create] (or [OpenAppend] to continue an existing 2.x file
// after its last committed frame, or [CreateOrAppend] for either), then
// per frame any number of
// [WriteChunk] / [Writer.WriteRaw] calls and one [Writer.EndFrame];
// finally [Writer.Close]. Each name may appear once per frame. Chunk data
// goes to the end of the file at once (small chunks gathered in a write
// buffer); a frame is committed when its index entries are written.
//
// Create is atomic (the empty file is written under a temporary name,
// synced and renamed), so a killed run never leaves a 0-byte trajectory
// behind; [CreateOrAppend] also replaces such an empty file (see
// [ErrEmpty]) left by other writers.
//
// Commit order, which keeps every file a reader can open: data (and any
// relocated namelist or index) first, then fsync, then the header if a
// block moved, then the frame's index entries in one write, then fsync.
// By default EndFrame commits; [WithBuffered] commits only when a byte
// bound or time interval (measured with the injected clock) is reached,
// plus on [Writer.Flush] and Close. [WithOrderedSync] keeps only the
// fsync before the entries (one per commit; the last frame may be lost
// to a power cut but the file stays valid). [WithSync](false) skips the fsyncs
// but not the ordering: a killed process still leaves a valid file with
// every committed frame, a power loss may not.
//
// # Reading
//
// [Open] (through a vfd.Driver) or [NewReader] (any io.ReaderAt) load the
// header, the names and the used index and validate every entry against
// the file size before anything is allocated from it. Then [Reader.NFrames],
// [Reader.ChunkExists], [Reader.ChunkInfo], [ReadChunk] / [ReadRows]
// (typed) or [Reader.ReadChunkRaw] / [Reader.ReadRowsRaw] (little-endian
// bytes), [Reader.ChunkNames]. [Reader.Refresh] re-reads the file to see
// frames committed since by a writer in another process or goroutine.
//
// # Concurrency
//
// A [Writer] must be used by one goroutine. A [Reader] is safe for
// concurrent use, including Refresh. One writer and any number of readers
// may share a file: readers see only committed frames.
//
// All file access goes through the vfd package, so a trajectory can live
// on any driver (an OS file, an in-memory core file, a family of files).
// Errors wrap the sentinels of errors.go; damage in a file is reported as
// a [*CorruptionError] naming the file, the part, the index entry and the
// byte offset.
//
// # API stability
//
// gsd is public API as a format package (GSD trajectories,
// docs/format/gsd.md): its exported names and their behaviour are kept
// stable. Before 1.0 an incompatible change is still possible.
package gsd
