package sion

import (
	"errors"
	"fmt"
	"io"

	"github.com/ftigo/ftigo/vfd"
)

// Place is where one task lies in a set: its physical file, its local
// rank there, and its blocks (block b starts at Start + b*Skip and holds
// at most Chunk bytes). A collective writer hands each rank the places
// of its tasks ([ParWriter.Place]). A reader given a task's place opens
// that task alone ([OpenTask]).
type Place struct {
	// File is the physical file's number in the set; LocalRank is the
	// task's index in that file.
	File, LocalRank int
	// Start is the offset of the task's chunk in block 0.
	Start int64
	// Skip is the size of one block (the sum of the file's chunks).
	Skip int64
	// Chunk is the task's chunk size as laid out.
	Chunk int64
}

// Place returns where this rank's i-th task lies (in the order given to
// [CreateMapped]), as rank 0 planned it.
func (pw *ParWriter) Place(i int) (Place, error) {
	if i < 0 || i >= len(pw.tasks) {
		return Place{}, fmt.Errorf("%w: %d of %d", ErrNoTask, i, len(pw.tasks))
	}
	tw, s := pw.tasks[i], pw.specs[i]
	return Place{File: s.File, LocalRank: s.LocalRank, Start: tw.start, Skip: tw.skip, Chunk: tw.chunk}, nil
}

// OpenTask opens one task of the container name (file 0 of its set)
// without decoding the other tasks' metadata: the task with global rank
// grank, at place p. It reads the magic and the fixed part of META1, its
// tail, the task's global rank and chunk size, its block count and its
// block sizes: a few hundred bytes, however many tasks the file holds.
// Each value is checked as [Open] checks it, and against grank and p: a
// file that disagrees is a [*CorruptionError] naming the physical file
// and the offset of the field (wrapping [ErrInconsistent]). The Reader
// presents the one task as task 0, of file 0 of the Reader (its
// [FileInfo] has the file's fixed fields, and the task's alone in the
// per-task slices). Close it when done.
func OpenTask(d vfd.Driver, name string, grank int64, p Place) (*Reader, error) {
	if p.File < 0 || p.LocalRank < 0 || p.Start < 0 || p.Chunk < 0 || p.Skip < p.Chunk {
		return nil, fmt.Errorf("%w: task place %+v", ErrBadArgument, p)
	}
	phys := SetMemberName(name, p.File)
	rd := &Reader{}
	f, err := vfd.OpenRead(d, phys)
	if err != nil {
		return nil, fmt.Errorf("sion: %w", err)
	}
	rd.closers = append(rd.closers, f)
	size, err := f.Size()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sion: size of %s: %w", phys, err), rd.Close())
	}
	fi, t, err := decodeTask(f, size, phys, grank, p)
	if err != nil {
		return nil, errors.Join(err, rd.Close())
	}
	rd.files, rd.data, rd.tasks = []*FileInfo{fi}, []io.ReaderAt{f}, []Task{t}
	return rd, nil
}

// decodeTask reads and checks the metadata of the task at p in one
// physical file: the file's fixed fields and the task's own entries.
func decodeTask(r io.ReaderAt, size int64, name string, grank int64, p Place) (*FileInfo, Task, error) {
	d := &fileDecoder{r: r, size: size, name: name, fi: &FileInfo{Name: name, Size: size}}
	if err := d.head(); err != nil {
		return nil, Task{}, err
	}
	fi, n, l := d.fi, d.fi.NTasks, p.LocalRank
	bad := func(off int64, field, format string, args ...any) error {
		return corrupt(name, off, field, fmt.Errorf("%w: "+format, append([]any{ErrInconsistent}, args...)...))
	}
	if l >= n {
		return nil, Task{}, bad(offNTasks, "ntasks", "%d tasks, the task's place is local rank %d", n, l)
	}
	if num := fi.FileNumber; fi.NFiles > 1 && num != p.File || fi.NFiles <= 1 && p.File != 0 {
		return nil, Task{}, bad(offFileNumber, "filenumber", "file %d of %d, the task's place is file %d", num, fi.NFiles, p.File)
	}
	mc, _, err := d.meta1Tail()
	if err != nil {
		return nil, Task{}, err
	}
	sov := fi.StartOfMeta2
	goff := meta1Fixed + 8*int64(l)
	gr, err := d.int64At(goff, fmt.Sprintf("globalrank[%d]", l))
	if err != nil {
		return nil, Task{}, err
	}
	if gr != grank {
		return nil, Task{}, bad(goff, fmt.Sprintf("globalrank[%d]", l), "%d, the task's global rank is %d", gr, grank)
	}
	coff := meta1Fixed + 8*int64(n+l)
	cfield := fmt.Sprintf("chunksize[%d]", l)
	cs, err := d.int64At(coff, cfield)
	if err != nil {
		return nil, Task{}, err
	}
	if cs < 0 || cs > size {
		return nil, Task{}, bad(coff, cfield, "%d in a file of %d bytes", cs, size)
	}
	if fi.FileFormat <= 3 {
		cs = roundUp(cs, int64(fi.FSBlkSize))
	}
	first := roundUp(Meta1Size(n), int64(fi.FSBlkSize))
	if cs != p.Chunk {
		return nil, Task{}, bad(coff, cfield, "%d, the task's place says %d", cs, p.Chunk)
	}
	if end, ok := mulAdd(p.Start, cs, 1); !ok || p.Start < first || end > sov || p.Skip > sov-first {
		return nil, Task{}, bad(coff, cfield, "the task's place (start %d, block %d) does not fit between META1 (to %d) and META2 (at %d)", p.Start, p.Skip, first, sov)
	}
	boff := sov + 8*int64(l)
	bfield := fmt.Sprintf("blockcount[%d]", l)
	bc, err := d.int64At(boff, bfield)
	if err != nil {
		return nil, Task{}, err
	}
	if bc < 0 || bc > int64(mc) {
		return nil, Task{}, bad(boff, bfield, "%d blocks, maxchunks %d", bc, mc)
	}
	t := Task{LocalRank: l, GlobalRank: gr, ChunkSize: cs, Start: p.Start, GlobalSkip: p.Skip, BlockSizes: make([]int64, bc)}
	for b := range t.BlockSizes {
		off := sov + 8*int64(n) + 8*(int64(b)*int64(n)+int64(l))
		field := fmt.Sprintf("blocksize[%d][%d]", b, l)
		v, err := d.int64At(off, field)
		if err != nil {
			return nil, Task{}, err
		}
		if v < 0 || v > cs {
			return nil, Task{}, bad(off, field, "%d bytes in a chunk of %d", v, cs)
		}
		if end, ok := mulAdd(p.Start+v, int64(b), p.Skip); !ok || end > sov {
			return nil, Task{}, bad(off, field, "block data runs past META2 at %d", sov)
		}
		t.BlockSizes[b] = v
		t.Size += v
	}
	fi.GlobalRanks, fi.ChunkSizes, fi.Start = []int64{gr}, []int64{cs}, []int64{p.Start}
	fi.GlobalSkip, fi.BlockSizes = p.Skip, [][]int64{t.BlockSizes}
	return fi, t, nil
}

// int64At reads one integer of the metadata's byte order at off.
func (d *fileDecoder) int64At(off int64, field string) (int64, error) {
	b, err := d.readAt(8, off, field)
	if err != nil {
		return 0, err
	}
	return d.i64(b, 0), nil
}
