package sion

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ftigo/ftigo/vfd"
)

// FileInfo is the metadata of one physical file of a container: META1,
// META2 and the mapping, decoded to host byte order.
type FileInfo struct {
	// Name is the physical file's name ("" for [NewReader]).
	Name string
	// Size is the physical file's size in bytes.
	Size int64
	// BigEndian reports big-endian metadata (endianness word bit 0).
	BigEndian bool
	// DataBigEndian is the user-data byte order the writer declared
	// (informational; data bytes are never converted).
	DataBigEndian bool
	// Version and Patch are the writing library's version fields (1007, 6 for SIONlib 1.7.6).
	Version, Patch int32
	// FileFormat is the fileformat version (3..5).
	FileFormat int32
	// FSBlkSize is the alignment unit in bytes.
	FSBlkSize int32
	// NTasks is the number of tasks in this physical file.
	NTasks int
	// NFiles is the number of physical files of the set.
	NFiles int
	// FileNumber is this file's number in the set (the serial C writer stores 1 for a single file).
	FileNumber int
	// Flag1 and Flag2 are the raw flag words; Flag1's upper half is the key-value mode.
	Flag1, Flag2 int64
	// Prefix is the file name prefix stored in META1.
	Prefix string
	// GlobalRanks holds each task's global rank.
	GlobalRanks []int64
	// ChunkSizes holds each task's chunk size as used for the layout (for
	// fileformat 3, rounded up to FSBlkSize as SIONlib's reader does).
	ChunkSizes []int64
	// MaxChunks is the number of blocks.
	MaxChunks int
	// StartOfMeta2 is start_of_varheader, the offset of META2.
	StartOfMeta2 int64
	// Start holds the offset of each task's chunk in block 0.
	Start []int64
	// GlobalSkip is the size of one block (the sum of the chunk sizes).
	GlobalSkip int64
	// BlockSizes holds, per task, the bytes used in each of its blocks
	// (len = the task's block count).
	BlockSizes [][]int64
	// Mapping is the set's mapping, indexed by global rank; only file 0 of a
	// set (or a single file with a full mapping trailer) has one.
	Mapping []MapEntry
}

// KeyValMode returns the key-value mode from the upper half of Flag1
// (KeyValNone when it is 0, as older writers leave it).
func (fi *FileInfo) KeyValMode() int {
	m := int(uint64(fi.Flag1) >> 32)
	if m == 0 {
		return KeyValNone
	}
	return m
}

// Task describes one logical task of a container.
type Task struct {
	// Index is the task's position in the reader (0..NTasks-1).
	Index int
	// File is the physical file holding the task, LocalRank its index there.
	File, LocalRank int
	// GlobalRank is the task's global rank from META1.
	GlobalRank int64
	// ChunkSize is the size of each of the task's chunks.
	ChunkSize int64
	// Start is the offset of the task's chunk in block 0 of its file.
	Start int64
	// GlobalSkip is the distance between the task's consecutive chunks.
	GlobalSkip int64
	// BlockSizes holds the bytes used in each of the task's blocks.
	BlockSizes []int64
	// Size is the length of the task's logical stream (sum of BlockSizes).
	Size int64
}

// Reader reads a SIONlib container: one physical file or a multi-file set.
// Its methods are safe for concurrent use; the readers it returns are not
// (each io.Reader has its own position).
type Reader struct {
	files   []*FileInfo
	data    []io.ReaderAt
	closers []io.Closer
	tasks   []Task
}

// NewReader reads the metadata of a single physical file of the given
// size. For file 0 of a multi-file set it presents only the tasks of that
// file; use [Open] to read a whole set.
func NewReader(r io.ReaderAt, size int64) (*Reader, error) {
	fi, err := decodeFile(r, size, "")
	if err != nil {
		return nil, err
	}
	rd := &Reader{files: []*FileInfo{fi}, data: []io.ReaderAt{r}}
	rd.tasks = layoutTasks(fi, 0)
	return rd, nil
}

// Open opens the container name through d. When name is file 0 of a
// multi-file set, its siblings name.000001... are opened too and the tasks
// are presented in global-rank order through the mapping; otherwise the
// tasks are those of the one physical file in layout order. Close the
// Reader when done.
func Open(d vfd.Driver, name string) (*Reader, error) {
	rd := &Reader{}
	fail := func(err error) (*Reader, error) {
		return nil, errors.Join(err, rd.Close())
	}
	fi, err := rd.openMember(d, name)
	if err != nil {
		return fail(err)
	}
	if fi.NFiles <= 1 || fi.FileNumber != 0 {
		rd.tasks = layoutTasks(fi, 0)
		return rd, nil
	}
	if len(fi.Mapping) == 0 {
		return fail(corrupt(name, fi.StartOfMeta2, "mapping", fmt.Errorf("%w: file 0 of a %d-file set has no mapping", ErrInconsistent, fi.NFiles)))
	}
	for k := 1; k < fi.NFiles; k++ {
		sib := SetMemberName(name, k)
		sf, err := rd.openMember(d, sib)
		if err != nil {
			return fail(fmt.Errorf("open set member %d: %w", k, err))
		}
		if sf.NFiles != fi.NFiles || sf.FileNumber != k {
			return fail(corrupt(sib, offNFiles, "nfiles/filenumber",
				fmt.Errorf("%w: member %d says nfiles %d filenumber %d, file 0 says nfiles %d", ErrInconsistent, k, sf.NFiles, sf.FileNumber, fi.NFiles)))
		}
	}
	per := make([][]Task, len(rd.files))
	for k, f := range rd.files {
		per[k] = layoutTasks(f, k)
	}
	used := make([][]bool, len(rd.files))
	for k := range used {
		used[k] = make([]bool, rd.files[k].NTasks)
	}
	total := 0
	for _, f := range rd.files {
		total += f.NTasks
	}
	if len(fi.Mapping) != total {
		return fail(corrupt(name, fi.StartOfMeta2, "mapping_size",
			fmt.Errorf("%w: mapping has %d entries, the set holds %d tasks", ErrInconsistent, len(fi.Mapping), total)))
	}
	rd.tasks = make([]Task, 0, total)
	for g, m := range fi.Mapping {
		if m.File < 0 || int(m.File) >= len(rd.files) || m.LocalRank < 0 || int(m.LocalRank) >= rd.files[m.File].NTasks || used[m.File][m.LocalRank] {
			return fail(corrupt(name, fi.StartOfMeta2, fmt.Sprintf("mapping[%d]", g),
				fmt.Errorf("%w: entry (%d,%d) is out of range or repeated", ErrInconsistent, m.File, m.LocalRank)))
		}
		used[m.File][m.LocalRank] = true
		t := per[m.File][m.LocalRank]
		t.Index = g
		rd.tasks = append(rd.tasks, t)
	}
	return rd, nil
}

func (rd *Reader) openMember(d vfd.Driver, name string) (*FileInfo, error) {
	f, err := vfd.OpenRead(d, name)
	if err != nil {
		return nil, fmt.Errorf("sion: %w", err)
	}
	rd.closers = append(rd.closers, f)
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("sion: size of %s: %w", name, err)
	}
	fi, err := decodeFile(f, size, name)
	if err != nil {
		return nil, err
	}
	rd.files = append(rd.files, fi)
	rd.data = append(rd.data, f)
	return fi, nil
}

// Close closes the physical files opened by [Open]; it does nothing for a
// Reader from [NewReader].
func (rd *Reader) Close() error {
	var errs []error
	for _, c := range rd.closers {
		errs = append(errs, c.Close())
	}
	rd.closers = nil
	return errors.Join(errs...)
}

// NTasks returns the number of logical tasks (over every physical file).
func (rd *Reader) NTasks() int { return len(rd.tasks) }

// Files returns the metadata of each physical file, file 0 first. The
// returned values must not be modified.
func (rd *Reader) Files() []*FileInfo { return rd.files }

// Task returns the description of task i.
func (rd *Reader) Task(i int) (Task, error) {
	if i < 0 || i >= len(rd.tasks) {
		return Task{}, fmt.Errorf("%w: %d of %d", ErrNoTask, i, len(rd.tasks))
	}
	return rd.tasks[i], nil
}

// StartReadahead asks the storage to start reading the used part of
// every block of task i in the background ([vfd.StartReadahead]): a
// hint, for a reader that will read the task soon. Files that are not
// vfd files (a Reader from [NewReader] over other readers) are left
// alone.
func (rd *Reader) StartReadahead(i int) error {
	t, err := rd.Task(i)
	if err != nil {
		return err
	}
	f, ok := rd.data[t.File].(vfd.File)
	if !ok {
		return nil
	}
	for b, n := range t.BlockSizes {
		if n > 0 {
			if err := vfd.StartReadahead(f, t.Start+int64(b)*t.GlobalSkip, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// Tasks returns every task's description in reader order.
func (rd *Reader) Tasks() []Task { return append([]Task(nil), rd.tasks...) }

// KeyVal reports whether the container was written in key-value mode.
func (rd *Reader) KeyVal() bool { return rd.files[0].KeyValMode() == KeyValInline }

// TaskReader returns a reader of task i's logical stream: an
// io.SectionReader over the concatenation of the used part of each of the
// task's blocks, offering Read, Seek and ReadAt.
func (rd *Reader) TaskReader(i int) (*io.SectionReader, error) {
	t, err := rd.Task(i)
	if err != nil {
		return nil, err
	}
	s := &taskStream{r: rd.data[t.File], t: t}
	return io.NewSectionReader(s, 0, t.Size), nil
}

// ReadTask returns task i's whole logical stream, read into memory at
// once (a task stream may be as large as the file): stream large tasks
// with [Reader.TaskReader] instead.
func (rd *Reader) ReadTask(i int) ([]byte, error) {
	sr, err := rd.TaskReader(i)
	if err != nil {
		return nil, err
	}
	b := make([]byte, sr.Size())
	if _, err := sr.ReadAt(b, 0); err != nil && !(err == io.EOF && len(b) == 0) {
		return nil, err
	}
	return b, nil
}

// BlockReader returns a reader of the used bytes of block b of task i.
func (rd *Reader) BlockReader(i, b int) (*io.SectionReader, error) {
	t, err := rd.Task(i)
	if err != nil {
		return nil, err
	}
	if b < 0 || b >= len(t.BlockSizes) {
		return nil, fmt.Errorf("%w: task %d has no block %d", ErrNoTask, i, b)
	}
	return io.NewSectionReader(rd.data[t.File], t.Start+int64(b)*t.GlobalSkip, t.BlockSizes[b]), nil
}

// taskStream maps a task's logical offsets to its blocks.
type taskStream struct {
	r io.ReaderAt
	t Task
}

// ReadAt reads the logical stream; it never reads past the stream's end.
func (s *taskStream) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("sion: negative offset %d", off)
	}
	n := 0
	var base int64
	for b, bs := range s.t.BlockSizes {
		if len(p) == 0 {
			break
		}
		if off >= base+bs {
			base += bs
			continue
		}
		in := off - base
		k := min(int64(len(p)), bs-in)
		phys := s.t.Start + int64(b)*s.t.GlobalSkip + in
		m, err := s.r.ReadAt(p[:k], phys)
		n += m
		if m < int(k) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, fmt.Errorf("sion: read task %d block %d at %d: %w", s.t.Index, b, phys, err)
		}
		p = p[k:]
		off += k
		base += bs
	}
	if len(p) > 0 {
		return n, io.EOF
	}
	return n, nil
}

// Record is one key-value record of a task stream.
type Record struct {
	Key int64
	// Offset is the position of the record's data in the task stream (after its 16-byte header).
	Offset int64
	// Length is the number of data bytes.
	Length int64
}

// recordScanner walks the key-value records of one task stream in order
// through a bounded buffer.
type recordScanner struct {
	task int
	br   *bufio.Reader
	bo   binary.ByteOrder
	size int64 // stream length
	off  int64 // stream offset of the next unread byte
	left int64 // data bytes of the current record not yet read or skipped
	hdr  [recordHeader]byte
}

func (rd *Reader) records(i int) (*recordScanner, error) {
	if !rd.KeyVal() {
		return nil, ErrNotKeyVal
	}
	t, err := rd.Task(i)
	if err != nil {
		return nil, err
	}
	sr, err := rd.TaskReader(i)
	if err != nil {
		return nil, err
	}
	return &recordScanner{task: i, br: bufio.NewReaderSize(sr, 64<<10), bo: byteOrder(rd.files[t.File].BigEndian), size: t.Size}, nil
}

// next skips what is left of the current record and reads the next
// header; io.EOF at the end of the stream.
func (s *recordScanner) next() (Record, error) {
	if err := s.skip(s.left); err != nil {
		return Record{}, err
	}
	s.left = 0
	if s.off == s.size {
		return Record{}, io.EOF
	}
	if s.size-s.off < recordHeader {
		return Record{}, fmt.Errorf("task %d: stream offset %d: %w: header cut at end of stream", s.task, s.off, ErrBadRecord)
	}
	if _, err := io.ReadFull(s.br, s.hdr[:]); err != nil {
		return Record{}, err
	}
	key := int64(s.bo.Uint64(s.hdr[0:]))
	n := int64(s.bo.Uint64(s.hdr[8:]))
	s.off += recordHeader
	if n < 0 || n > s.size-s.off {
		return Record{}, fmt.Errorf("task %d: stream offset %d: %w: length %d, %d bytes left", s.task, s.off-recordHeader, ErrBadRecord, n, s.size-s.off)
	}
	s.left = n
	return Record{Key: key, Offset: s.off, Length: n}, nil
}

func (s *recordScanner) skip(n int64) error {
	for n > 0 {
		k, err := s.br.Discard(int(min(n, 1<<30)))
		n -= int64(k)
		s.off += int64(k)
		if err != nil {
			return err
		}
	}
	return nil
}

// Read reads data of the current record.
func (s *recordScanner) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	k, err := s.br.Read(p[:min(int64(len(p)), s.left)])
	s.left -= int64(k)
	s.off += int64(k)
	return k, err
}

// EachRecord calls fn with task i's key-value records in stream order,
// reading the stream once through a bounded buffer, however many records
// it holds; it stops at fn's first error and returns it.
func (rd *Reader) EachRecord(i int, fn func(Record) error) error {
	s, err := rd.records(i)
	if err != nil {
		return err
	}
	for {
		r, err := s.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
}

// Records returns task i's key-value records in stream order. A stream of
// more than [MaxRecords] records is refused with [ErrTooLarge] (walk it
// with [Reader.EachRecord]); on a bad record the records before it are
// returned with the error.
func (rd *Reader) Records(i int) ([]Record, error) {
	var recs []Record
	err := rd.EachRecord(i, func(r Record) error {
		if len(recs) == MaxRecords {
			return fmt.Errorf("task %d: %w: more than %d records (use EachRecord)", i, ErrTooLarge, MaxRecords)
		}
		recs = append(recs, r)
		return nil
	})
	return recs, err
}

// KeyReader returns the data of every record of task i with the given key,
// concatenated in stream order (what SIONlib's sion_fread_key returns), and
// its length. The stream is walked once to check it and add up the
// length; the reader then streams the records' data as it is read.
func (rd *Reader) KeyReader(i int, key int64) (io.Reader, int64, error) {
	var total int64
	if err := rd.EachRecord(i, func(r Record) error {
		if r.Key == key {
			total += r.Length
		}
		return nil
	}); err != nil {
		return nil, 0, err
	}
	s, err := rd.records(i)
	if err != nil {
		return nil, 0, err
	}
	return &keyStream{s: s, key: key}, total, nil
}

// keyStream reads the data of the records with one key.
type keyStream struct {
	s   *recordScanner
	key int64
}

func (k *keyStream) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for k.s.left == 0 {
		r, err := k.s.next()
		if err != nil {
			return 0, err
		}
		if r.Key != k.key { // skip its data
			if err := k.s.skip(k.s.left); err != nil {
				return 0, err
			}
			k.s.left = 0
		}
	}
	return k.s.Read(p)
}

// layoutTasks describes the tasks of physical file fi in layout order.
func layoutTasks(fi *FileInfo, file int) []Task {
	ts := make([]Task, fi.NTasks)
	for i := range ts {
		var size int64
		for _, b := range fi.BlockSizes[i] {
			size += b
		}
		ts[i] = Task{Index: i, File: file, LocalRank: i, GlobalRank: fi.GlobalRanks[i], ChunkSize: fi.ChunkSizes[i],
			Start: fi.Start[i], GlobalSkip: fi.GlobalSkip, BlockSizes: fi.BlockSizes[i], Size: size}
	}
	return ts
}

// decodeFile reads and checks META1, META2 and the mapping of one physical file.
func decodeFile(r io.ReaderAt, size int64, name string) (*FileInfo, error) {
	d := &fileDecoder{r: r, size: size, name: name, fi: &FileInfo{Name: name, Size: size}}
	if err := d.head(); err != nil {
		return nil, err
	}
	// The tail first: an unclosed or cut file is reported as such before
	// anything that depends on its size.
	mc, m2len, err := d.meta1Tail()
	if err != nil {
		return nil, err
	}
	if err := d.taskArrays(); err != nil {
		return nil, err
	}
	if err := d.meta2(mc); err != nil {
		return nil, err
	}
	if err := d.mapping(d.fi.StartOfMeta2 + m2len); err != nil {
		return nil, err
	}
	return d.fi, nil
}

// head checks the magic and decodes the fixed part of META1.
func (d *fileDecoder) head() error {
	r, size, name := d.r, d.size, d.name
	if size < 4 {
		b := make([]byte, size)
		if m, _ := r.ReadAt(b, 0); int64(m) == size && strings.HasPrefix(Magic, string(b)) && size > 0 {
			return corrupt(name, 0, "magic", ErrTruncated)
		}
		return corrupt(name, 0, "magic", ErrBadMagic)
	}
	mg, err := d.readAt(4, 0, "magic")
	if err != nil {
		return err
	}
	if string(mg) != Magic {
		return corrupt(name, 0, "magic", fmt.Errorf("%w: %q", ErrBadMagic, mg))
	}
	return d.meta1Fixed()
}

// fileDecoder reads a container's metadata into fi, part by part, each
// value checked against the file's size and the reader's limits before
// anything is allocated from it.
type fileDecoder struct {
	r    io.ReaderAt
	size int64
	name string
	fi   *FileInfo
	bo   binary.ByteOrder // of the metadata, set by meta1Fixed
}

// readAt reads n bytes at off, or fails naming field when the file is too short.
func (d *fileDecoder) readAt(n, off int64, field string) ([]byte, error) {
	if off < 0 || n < 0 || off > d.size || n > d.size-off {
		return nil, corrupt(d.name, off, field, fmt.Errorf("%w: %d bytes at %d, file has %d", ErrTruncated, n, off, d.size))
	}
	b := make([]byte, n)
	m, err := d.r.ReadAt(b, off)
	if int64(m) < n {
		if err == nil || err == io.EOF {
			err = ErrTruncated
		}
		return nil, corrupt(d.name, off, field, fmt.Errorf("read %d bytes: %w", n, err))
	}
	return b, nil
}

func (d *fileDecoder) i32(b []byte, off int) int32 { return int32(d.bo.Uint32(b[off:])) }
func (d *fileDecoder) i64(b []byte, off int) int64 { return int64(d.bo.Uint64(b[off:])) }

// meta1Fixed decodes the fixed part of META1: byte orders, versions,
// block size, task and file counts, flags, prefix.
func (d *fileDecoder) meta1Fixed() error {
	name, size, fi := d.name, d.size, d.fi
	fix, err := d.readAt(meta1Fixed, 0, "META1")
	if err != nil {
		return err
	}
	fi.BigEndian = fix[offEndian]&1 == 1
	fi.DataBigEndian = fix[offEndian+1]&1 == 1
	d.bo = byteOrder(fi.BigEndian)
	fi.Version = d.i32(fix, offVersion)
	fi.Patch = d.i32(fix, offPatch)
	fi.FileFormat = d.i32(fix, offFileFormat)
	if fi.FileFormat < 3 || fi.FileFormat > FileFormat {
		return corrupt(name, offFileFormat, "fileformat", fmt.Errorf("%w: %d (this reader reads 3..5)", ErrVersion, fi.FileFormat))
	}
	fi.FSBlkSize = d.i32(fix, offFSBlkSize)
	if fi.FSBlkSize <= 0 {
		return corrupt(name, offFSBlkSize, "fsblksize", fmt.Errorf("%w: %d", ErrInconsistent, fi.FSBlkSize))
	}
	nt := d.i32(fix, offNTasks)
	if nt <= 0 || int64(nt) > (size-meta1Fixed)/16 {
		if nt > 0 {
			return corrupt(name, offNTasks, "ntasks", fmt.Errorf("%w: %d tasks need %d bytes of META1, file has %d", ErrTruncated, nt, Meta1Size(int(nt)), size))
		}
		return corrupt(name, offNTasks, "ntasks", fmt.Errorf("%w: %d", ErrInconsistent, nt))
	}
	if nt > MaxTasks {
		return corrupt(name, offNTasks, "ntasks", fmt.Errorf("%w: %d tasks, more than the %d this reader accepts", ErrTooLarge, nt, MaxTasks))
	}
	fi.NTasks = int(nt)
	fi.NFiles = int(d.i32(fix, offNFiles))
	fi.FileNumber = int(d.i32(fix, offFileNumber))
	if fi.NFiles <= 0 {
		return corrupt(name, offNFiles, "nfiles", fmt.Errorf("%w: %d", ErrInconsistent, fi.NFiles))
	}
	if fi.NFiles > MaxTasks {
		return corrupt(name, offNFiles, "nfiles", fmt.Errorf("%w: %d files, more than the %d tasks this reader accepts", ErrTooLarge, fi.NFiles, MaxTasks))
	}
	if fi.NFiles > 1 && (fi.FileNumber < 0 || fi.FileNumber >= fi.NFiles) {
		return corrupt(name, offFileNumber, "filenumber", fmt.Errorf("%w: %d of %d files", ErrInconsistent, fi.FileNumber, fi.NFiles))
	}
	fi.Flag1 = d.i64(fix, offFlag1)
	fi.Flag2 = d.i64(fix, offFlag2)
	pre := fix[offPrefix : offPrefix+PrefixLen]
	if k := strings.IndexByte(string(pre), 0); k >= 0 {
		pre = pre[:k]
	}
	fi.Prefix = string(pre)
	return nil
}

// meta1Tail decodes the tail of META1 (maxchunks, the start of META2)
// and returns maxchunks and META2's length.
func (d *fileDecoder) meta1Tail() (mc int32, m2len int64, err error) {
	name, size, fi, n := d.name, d.size, d.fi, d.fi.NTasks
	toff := tailOffset(n)
	tb, err := d.readAt(12, toff, "META1 tail")
	if err != nil {
		return 0, 0, err
	}
	mc = d.i32(tb, 0)
	fi.StartOfMeta2 = d.i64(tb, 4)
	if fi.StartOfMeta2 == 0 {
		return 0, 0, corrupt(name, toff+4, "start_of_varheader", ErrUnclosed)
	}
	if mc < 0 {
		return 0, 0, corrupt(name, toff, "maxchunks", fmt.Errorf("%w: %d", ErrInconsistent, mc))
	}
	fi.MaxChunks = int(mc)
	sov := fi.StartOfMeta2
	if sov < Meta1Size(n) {
		return 0, 0, corrupt(name, toff+4, "start_of_varheader", fmt.Errorf("%w: %d lies inside META1", ErrInconsistent, sov))
	}
	if sov > size {
		return 0, 0, corrupt(name, toff+4, "start_of_varheader", fmt.Errorf("%w: META2 at %d, file has %d bytes", ErrTruncated, sov, size))
	}
	if int64(mc) > (size-sov)/(8*int64(n)) {
		return 0, 0, corrupt(name, sov, "META2", fmt.Errorf("%w: %d tasks x %d blocks need %d bytes at %d, file has %d",
			ErrTruncated, n, mc, 8*int64(n)*(int64(mc)+1), sov, size))
	}
	m2len = 8 * int64(n) * (int64(mc) + 1)
	if m2len > MaxMeta2Size {
		return 0, 0, corrupt(name, toff, "maxchunks", fmt.Errorf("%w: %d tasks x %d blocks make a META2 of %d bytes, more than the %d this reader accepts",
			ErrTooLarge, n, mc, m2len, int64(MaxMeta2Size)))
	}
	return mc, m2len, nil
}

// taskArrays streams META1's per-task arrays: global ranks and chunk
// sizes, from which each task's start and the global skip follow.
func (d *fileDecoder) taskArrays() error {
	r, bo, name, size, fi, n := d.r, d.bo, d.name, d.size, d.fi, d.fi.NTasks
	fi.GlobalRanks = make([]int64, n)
	if err := readInt64s(r, bo, meta1Fixed, n, name, "globalrank", func(i int, v int64) error {
		fi.GlobalRanks[i] = v
		return nil
	}); err != nil {
		return err
	}
	fi.ChunkSizes = make([]int64, n)
	fi.Start = make([]int64, n)
	pos := roundUp(Meta1Size(n), int64(fi.FSBlkSize))
	if err := readInt64s(r, bo, meta1Fixed+8*int64(n), n, name, "chunksize", func(i int, cs int64) error {
		if cs < 0 || cs > size {
			return corrupt(name, meta1Fixed+8*int64(n+i), fmt.Sprintf("chunksize[%d]", i), fmt.Errorf("%w: %d in a file of %d bytes", ErrInconsistent, cs, size))
		}
		if fi.FileFormat <= 3 {
			cs = roundUp(cs, int64(fi.FSBlkSize))
		}
		fi.ChunkSizes[i] = cs
		fi.Start[i] = pos
		var ok bool
		if pos, ok = mulAdd(pos, cs, 1); !ok {
			return corrupt(name, meta1Fixed+8*int64(n+i), fmt.Sprintf("chunksize[%d]", i), fmt.Errorf("%w: sizes overflow", ErrInconsistent))
		}
		return nil
	}); err != nil {
		return err
	}
	fi.GlobalSkip = pos - fi.Start[0]
	return nil
}

// meta2 streams META2: the block counts, then the block sizes row by row
// (block-major), keeping only each task's used blocks.
func (d *fileDecoder) meta2(mc int32) error {
	r, bo, name, fi, n := d.r, d.bo, d.name, d.fi, d.fi.NTasks
	sov := fi.StartOfMeta2
	fi.BlockSizes = make([][]int64, n)
	rows := 0
	if err := readInt64s(r, bo, sov, n, name, "blockcount", func(i int, bc int64) error {
		if bc < 0 || bc > int64(mc) {
			return corrupt(name, sov+8*int64(i), fmt.Sprintf("blockcount[%d]", i), fmt.Errorf("%w: %d blocks, maxchunks %d", ErrInconsistent, bc, mc))
		}
		fi.BlockSizes[i] = make([]int64, bc)
		rows = max(rows, int(bc))
		return nil
	}); err != nil {
		return err
	}
	return readInt64s(r, bo, sov+8*int64(n), rows*n, name, "blocksize", func(k int, v int64) error {
		b, i := k/n, k%n
		if b >= len(fi.BlockSizes[i]) {
			return nil // unused entry
		}
		off := sov + 8*int64(n) + 8*int64(k)
		if v < 0 || v > fi.ChunkSizes[i] {
			return corrupt(name, off, fmt.Sprintf("blocksize[%d][%d]", b, i), fmt.Errorf("%w: %d bytes in a chunk of %d", ErrInconsistent, v, fi.ChunkSizes[i]))
		}
		end, ok := mulAdd(fi.Start[i]+v, int64(b), fi.GlobalSkip)
		if !ok || end > sov {
			return corrupt(name, off, fmt.Sprintf("blocksize[%d][%d]", b, i), fmt.Errorf("%w: block data runs past META2 at %d", ErrInconsistent, sov))
		}
		fi.BlockSizes[i][b] = v
		return nil
	})
}

// mapping decodes the mapping at mp: read from file 0 of a set; a full
// trailer on a single file (mapped mode) is decoded when present and well
// formed.
func (d *fileDecoder) mapping(mp int64) error {
	name, size, fi := d.name, d.size, d.fi
	if fi.NFiles > 1 && fi.FileNumber == 0 {
		hb, err := d.readAt(4, mp, "mapping_size")
		if err != nil {
			return err
		}
		ms := int64(d.i32(hb, 0))
		if ms > MaxTasks {
			return corrupt(name, mp, "mapping_size", fmt.Errorf("%w: %d entries, more than the %d tasks this reader accepts", ErrTooLarge, ms, MaxTasks))
		}
		if ms <= 0 || ms > (size-mp-4)/8 {
			if ms > 0 {
				return corrupt(name, mp, "mapping", fmt.Errorf("%w: %d entries at %d, file has %d bytes", ErrTruncated, ms, mp, size))
			}
			return corrupt(name, mp, "mapping_size", fmt.Errorf("%w: %d", ErrInconsistent, ms))
		}
		mb, err := d.readAt(8*ms, mp+4, "mapping")
		if err != nil {
			return err
		}
		fi.Mapping = decodeMapping(mb, d.bo)
	} else if fi.NFiles == 1 && size-mp >= 4 {
		if hb, err := d.readAt(4, mp, "mapping_size"); err == nil {
			if ms := int64(d.i32(hb, 0)); ms > 0 && ms <= MaxTasks && ms == (size-mp-4)/8 && size-mp-4 == 8*ms {
				if mb, err := d.readAt(8*ms, mp+4, "mapping"); err == nil {
					fi.Mapping = decodeMapping(mb, d.bo)
				}
			}
		}
	}
	return nil
}

// readInt64s streams n integers of byte order bo from off through a
// bounded buffer, calling fn with each index and value in order.
func readInt64s(r io.ReaderAt, bo binary.ByteOrder, off int64, n int, name, field string, fn func(i int, v int64) error) error {
	const per = 8192
	buf := make([]byte, 8*min(n, per))
	for i := 0; i < n; i += per {
		k := min(n-i, per)
		p := buf[:8*k]
		at := off + 8*int64(i)
		if m, err := r.ReadAt(p, at); m < len(p) {
			if err == nil || err == io.EOF {
				err = ErrTruncated
			}
			return corrupt(name, at, field, fmt.Errorf("read %d bytes: %w", len(p), err))
		}
		for j := 0; j < k; j++ {
			if err := fn(i+j, int64(bo.Uint64(p[8*j:]))); err != nil {
				return err
			}
		}
	}
	return nil
}

func decodeMapping(b []byte, bo interface{ Uint32([]byte) uint32 }) []MapEntry {
	m := make([]MapEntry, len(b)/8)
	for g := range m {
		m[g] = MapEntry{File: int32(bo.Uint32(b[8*g:])), LocalRank: int32(bo.Uint32(b[8*g+4:]))}
	}
	return m
}
