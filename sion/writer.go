package sion

import (
	"errors"
	"fmt"
	"path"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/vfd"
)

// Policy says how a task writer places a write that does not fit in the
// rest of the current chunk.
type Policy int

const (
	// PolicySplit is SIONlib's placement (sion_ensure_free_space): a write
	// that does not fit in what is left of the chunk starts the next block,
	// leaving the tail unused. Unlike SIONlib, a write larger than a whole
	// chunk is not refused: it fills the current chunk and continues in the
	// next blocks. For writes no larger than the chunk the bytes are
	// identical to SIONlib 1.7.6's.
	PolicySplit Policy = iota
	// PolicyStrict is SIONlib 1.7.6 exactly: like PolicySplit, but a single
	// write larger than the chunk fails with [ErrWriteTooLarge].
	PolicyStrict
	// PolicyFill treats the task as a byte stream and fills every chunk to
	// its last byte, as SIONlib's key-value writes do. Key-value mode
	// always uses it.
	PolicyFill
)

// Options configure a writer. The zero value (or nil) gives SIONlib's
// defaults: fsblksize 4096, chunk sizes rounded up to it, PolicySplit,
// little-endian metadata, prefix = base name of the file.
type Options struct {
	// FSBlkSize is the alignment unit; <= 0 means [DefaultFSBlkSize].
	FSBlkSize int32
	// ExactChunks keeps the chunk sizes as requested instead of rounding
	// them up to FSBlkSize (readers accept both; SIONlib rounds).
	ExactChunks bool
	// Policy places writes that do not fit in the current chunk.
	Policy Policy
	// KeyVal writes a key-value container (flag1 = 51<<32): tasks take
	// records through WriteRecord.
	KeyVal bool
	// Prefix is the name stored in META1; "" means path.Base of the file name.
	Prefix string
	// BigEndian writes big-endian metadata (as a big-endian host would).
	BigEndian bool
	// DataBigEndian declares the user data big-endian (informational).
	DataBigEndian bool
	// NoCommit leaves every finished file under its temporary name
	// (name + TmpSuffix, for sets each member's name + TmpSuffix) for
	// callers that run their own commit protocol, as the L4 level does.
	// The files are still synced at Close, META2 and the META1 tail last.
	NoCommit bool
	// InPlace writes every file under its final name from the start:
	// nothing is renamed at Close (it implies NoCommit), and Abort
	// removes the files under their final names. A collective Close
	// then syncs the data and the metadata in one round, unordered (the
	// ranks' syncs beside the leaders' META2 and its sync), so a crash
	// may leave a file that looks complete without its data. For callers
	// whose own commit protocol, after Close, makes a partly written file
	// under its final name harmless (the L4 level, once its checkpoint's
	// intent marker is durable); the caller syncs the directories.
	InPlace bool
	// Logger receives debug lines; nil means none.
	Logger *zap.Logger
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.FSBlkSize <= 0 {
		v.FSBlkSize = DefaultFSBlkSize
	}
	if v.Logger == nil {
		v.Logger = zap.NewNop()
	}
	if v.KeyVal {
		v.Policy = PolicyFill
	}
	return v
}

func (o *Options) flag1() int64 {
	if o.KeyVal {
		return KeyValInline << 32
	}
	return KeyValNone << 32
}

// TmpSuffix is appended to a container's file names while it is being
// written; Close renames the files to their final names.
//
// wire format: never change — tools and restarts recognise leftovers by it.
const TmpSuffix = ".tmp"

// TaskWriter writes one task's logical stream into its chunks. It is not
// safe for concurrent use, but the TaskWriters of different tasks may be
// used from different goroutines at once.
type TaskWriter struct {
	f      vfd.File
	name   string
	index  int
	start  int64 // chunk 0 of the task
	skip   int64 // block size (globalskip)
	chunk  int64
	policy Policy
	kv     bool
	big    bool
	blocks []int64 // bytes used per block
	done   bool
	err    error // first write error; sticky
}

// Layout returns where the task's blocks lie in its physical file:
// block b starts at start + b*skip and holds at most chunk bytes.
func (tw *TaskWriter) Layout() (start, skip, chunk int64) { return tw.start, tw.skip, tw.chunk }

// Write appends p to the task's stream as the writer's [Policy] says. It
// writes all of p or returns an error. In a key-value container Write
// appends raw stream bytes (the caller then owns the record framing, as
// when copying a stream); use WriteRecord for records.
func (tw *TaskWriter) Write(p []byte) (int, error) {
	if err := tw.check(); err != nil {
		return 0, err
	}
	return tw.write(p)
}

func (tw *TaskWriter) check() error {
	if tw.done {
		return ErrClosed
	}
	return tw.err
}

func (tw *TaskWriter) write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n := int64(len(p))
	if tw.chunk == 0 {
		return 0, fmt.Errorf("%w: task %d has chunk size 0", ErrWriteTooLarge, tw.index)
	}
	switch {
	case tw.policy == PolicyFill || (tw.policy == PolicySplit && n > tw.chunk):
		return tw.fill(p)
	case n > tw.chunk:
		return 0, fmt.Errorf("%w: task %d: %d bytes, chunk size %d", ErrWriteTooLarge, tw.index, n, tw.chunk)
	}
	tw.ensure(n)
	if err := tw.put(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// EnsureFreeSpace moves to the next block unless n bytes fit in what is
// left of the current chunk (SIONlib's sion_ensure_free_space). n larger
// than the chunk size is an error wrapping [ErrWriteTooLarge].
func (tw *TaskWriter) EnsureFreeSpace(n int64) error {
	if err := tw.check(); err != nil {
		return err
	}
	if n < 0 || n > tw.chunk {
		return fmt.Errorf("%w: task %d: %d bytes, chunk size %d", ErrWriteTooLarge, tw.index, n, tw.chunk)
	}
	tw.ensure(n)
	return nil
}

// WriteRecord appends one key-value record [key][len(data)][data] to the
// stream of a key-value container; records are split across chunks freely.
func (tw *TaskWriter) WriteRecord(key int64, data []byte) error {
	if !tw.kv {
		return fmt.Errorf("%w: task %d", ErrNotKeyVal, tw.index)
	}
	if err := tw.check(); err != nil {
		return err
	}
	var hdr [recordHeader]byte
	bo := byteOrder(tw.big)
	bo.PutUint64(hdr[0:], uint64(key))
	bo.PutUint64(hdr[8:], uint64(len(data)))
	if _, err := tw.fill(hdr[:]); err != nil {
		return err
	}
	_, err := tw.fill(data)
	return err
}

// Size returns the bytes written to the task so far.
func (tw *TaskWriter) Size() int64 {
	var s int64
	for _, b := range tw.blocks {
		s += b
	}
	return s
}

// Blocks returns the number of blocks the task uses (at least 1).
func (tw *TaskWriter) Blocks() int { return max(len(tw.blocks), 1) }

func (tw *TaskWriter) ensure(n int64) {
	if len(tw.blocks) == 0 {
		tw.blocks = append(tw.blocks, 0)
	}
	if tw.chunk-tw.blocks[len(tw.blocks)-1] < n {
		tw.blocks = append(tw.blocks, 0)
	}
}

// fill writes p into the current chunk and as many following ones as it needs.
func (tw *TaskWriter) fill(p []byte) (int, error) {
	if len(p) > 0 && tw.chunk == 0 {
		return 0, fmt.Errorf("%w: task %d has chunk size 0", ErrWriteTooLarge, tw.index)
	}
	done := 0
	for len(p) > 0 {
		if len(tw.blocks) == 0 || tw.blocks[len(tw.blocks)-1] == tw.chunk {
			tw.blocks = append(tw.blocks, 0)
		}
		k := min(int64(len(p)), tw.chunk-tw.blocks[len(tw.blocks)-1])
		if err := tw.put(p[:k]); err != nil {
			return done, err
		}
		done += int(k)
		p = p[k:]
	}
	return done, nil
}

// put writes p at the current position of the current block, which has room.
func (tw *TaskWriter) put(p []byte) error {
	b := len(tw.blocks) - 1
	off := tw.start + int64(b)*tw.skip + tw.blocks[b]
	if _, err := tw.f.WriteAt(p, off); err != nil {
		tw.err = vfd.WrapPathAt(err, fmt.Sprintf("sion: write task %d block %d of", tw.index, b), tw.name, off)
		return tw.err
	}
	tw.blocks[b] += int64(len(p))
	return nil
}

// blockSizes returns the used bytes per block, at least one entry.
func (tw *TaskWriter) blockSizes() []int64 {
	if len(tw.blocks) == 0 {
		return []int64{0}
	}
	return append([]int64(nil), tw.blocks...)
}

// physFile is one physical file being written.
type physFile struct {
	d        vfd.Driver
	name     string // final name
	tmp      string // name written to
	h        header
	tr       trailer
	mapping  []MapEntry
	noCommit bool // leave the finished file under tmp
}

// layout fills the start pointers of the file's tasks.
func (pf *physFile) starts() (starts []int64, skip int64) {
	n := len(pf.h.ChunkSizes)
	pos := roundUp(Meta1Size(n), int64(pf.h.FSBlkSize))
	starts = make([]int64, n)
	s0 := pos
	for i, c := range pf.h.ChunkSizes {
		starts[i] = pos
		pos += c
	}
	return starts, pos - s0
}

// finish writes META2 and the META1 tail for the given per-task block
// sizes and syncs the file. With synced the data and the head of META1
// are durable already (every writer synced them); otherwise they are
// synced first.
func (pf *physFile) finish(f vfd.File, blockSizes [][]int64, synced bool) error {
	starts, skip := pf.starts()
	maxc := 1
	for _, bs := range blockSizes {
		maxc = max(maxc, len(bs))
	}
	if m2 := 8 * int64(len(blockSizes)) * int64(maxc+1); m2 > MaxMeta2Size {
		return fmt.Errorf("sion: %s: %w: %d tasks x %d blocks make a META2 of %d bytes, more than readers accept (%d): use larger chunks",
			pf.tmp, ErrTooLarge, len(blockSizes), maxc, m2, int64(MaxMeta2Size))
	}
	pf.h.MaxChunks = int32(maxc)
	pf.h.StartOfMeta2 = starts[0] + int64(maxc)*skip
	// Data and the head of META1 reach storage before the metadata that
	// makes the file readable.
	if !synced {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sion: sync %s: %w", pf.tmp, err)
		}
	}
	m2 := encodeMeta2(pf.h.BigEndian, blockSizes, maxc, pf.tr, pf.mapping)
	if _, err := vfd.WriteAtType(f, vfd.MemSuper, m2, pf.h.StartOfMeta2); err != nil {
		return fmt.Errorf("sion: write META2 of %s: %w", pf.tmp, err)
	}
	if err := f.Truncate(pf.h.StartOfMeta2 + int64(len(m2))); err != nil {
		return fmt.Errorf("sion: truncate %s: %w", pf.tmp, err)
	}
	if _, err := vfd.WriteAtType(f, vfd.MemSuper, encodeTail(&pf.h), tailOffset(len(pf.h.ChunkSizes))); err != nil {
		return fmt.Errorf("sion: write META1 tail of %s: %w", pf.tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sion: sync %s: %w", pf.tmp, err)
	}
	return nil
}

// commit renames the finished file to its final name and syncs the directory.
func (pf *physFile) commit() error {
	if pf.noCommit {
		return nil
	}
	if err := pf.d.Rename(pf.tmp, pf.name); err != nil {
		return fmt.Errorf("sion: commit %s: %w", pf.name, err)
	}
	if err := pf.d.SyncDir(path.Dir(pf.name)); err != nil {
		return fmt.Errorf("sion: sync dir of %s: %w", pf.name, err)
	}
	return nil
}

// create creates the temporary file and writes META1 without its tail.
func (pf *physFile) create() (vfd.File, error) {
	f, err := vfd.CreateTrunc(pf.d, pf.tmp)
	if err != nil {
		return nil, fmt.Errorf("sion: create %s: %w", pf.tmp, err)
	}
	if _, err := vfd.WriteAtType(f, vfd.MemSuper, encodeMeta1(&pf.h, false), 0); err != nil {
		return nil, errors.Join(fmt.Errorf("sion: write META1 of %s: %w", pf.tmp, err), f.Close(), pf.d.Remove(pf.tmp))
	}
	return f, nil
}

func newPhysFile(d vfd.Driver, name string, o *Options, chunks, ranks []int64, nfiles, filenr int) (*physFile, error) {
	if len(chunks) == 0 {
		return nil, fmt.Errorf("%w: no tasks", ErrBadArgument)
	}
	if len(chunks) > MaxTasks {
		return nil, fmt.Errorf("%w: %d tasks in one file, more than readers accept (%d)", ErrTooLarge, len(chunks), MaxTasks)
	}
	prefix := o.Prefix
	if prefix == "" {
		prefix = path.Base(name)
	}
	if len(prefix) >= PrefixLen {
		return nil, fmt.Errorf("%w: prefix of %d bytes (limit %d)", ErrBadArgument, len(prefix), PrefixLen-1)
	}
	cs := make([]int64, len(chunks))
	for i, c := range chunks {
		if c < 0 {
			return nil, fmt.Errorf("%w: task %d: chunk size %d", ErrBadArgument, i, c)
		}
		if !o.ExactChunks {
			c = roundUp(c, int64(o.FSBlkSize))
		}
		cs[i] = c
	}
	pf := namesOnly(d, name, o)
	pf.h = header{BigEndian: o.BigEndian, DataBigEnd: o.DataBigEndian, Version: LibVersion, Patch: LibPatch,
		FileFormat: FileFormat, FSBlkSize: o.FSBlkSize, NTasks: int32(len(cs)), NFiles: int32(nfiles),
		FileNumber: int32(filenr), Flag1: o.flag1(), Prefix: prefix, GlobalRanks: append([]int64(nil), ranks...), ChunkSizes: cs}
	return pf, nil
}

func (pf *physFile) taskWriter(f vfd.File, i int, o *Options) *TaskWriter {
	starts, skip := pf.starts()
	return &TaskWriter{f: f, name: pf.tmp, index: i, start: starts[i], skip: skip, chunk: pf.h.ChunkSizes[i],
		policy: o.Policy, kv: o.KeyVal, big: pf.h.BigEndian}
}

// Writer writes a single-file container from one process, after SIONlib's
// serial API (sion_open "wb"). Create it, write each task through
// [Writer.Task], then Close to commit.
type Writer struct {
	pf    *physFile
	f     vfd.File
	tasks []*TaskWriter
	log   *zap.Logger
	done  bool
}

// Create starts a container of len(chunkSizes) tasks at name. globalRanks
// gives each task's global rank (nil means 0..n-1). The file is written as
// name+".tmp" and appears (unless opts.NoCommit) under name at Close. As
// SIONlib's serial writer does, it stores filenumber 1 and ends with an
// empty mapping (4 zero bytes).
func Create(d vfd.Driver, name string, chunkSizes, globalRanks []int64, opts *Options) (*Writer, error) {
	o := opts.withDefaults()
	if globalRanks == nil {
		globalRanks = make([]int64, len(chunkSizes))
		for i := range globalRanks {
			globalRanks[i] = int64(i)
		}
	}
	if len(globalRanks) != len(chunkSizes) {
		return nil, fmt.Errorf("%w: %d global ranks for %d tasks", ErrBadArgument, len(globalRanks), len(chunkSizes))
	}
	pf, err := newPhysFile(d, name, &o, chunkSizes, globalRanks, 1, 1)
	if err != nil {
		return nil, err
	}
	pf.tr = trailerEmpty
	f, err := pf.create()
	if err != nil {
		return nil, err
	}
	w := &Writer{pf: pf, f: f, log: o.Logger}
	for i := range chunkSizes {
		w.tasks = append(w.tasks, pf.taskWriter(f, i, &o))
	}
	w.log.Debug("sion create", zap.String("path", pf.tmp), zap.Int("ntasks", len(chunkSizes)), zap.Int32("fsblksize", o.FSBlkSize))
	return w, nil
}

// NTasks returns the number of tasks.
func (w *Writer) NTasks() int { return len(w.tasks) }

// Task returns the writer of task i (0-based layout index).
func (w *Writer) Task(i int) *TaskWriter {
	if i < 0 || i >= len(w.tasks) {
		return nil
	}
	return w.tasks[i]
}

// Close writes META2 and the META1 tail, syncs, renames the file to its
// final name and syncs the directory. On error the temporary file is
// removed. Every TaskWriter must be idle.
func (w *Writer) Close() error {
	if w.done {
		return ErrClosed
	}
	w.done = true
	bs := make([][]int64, len(w.tasks))
	var errs []error
	for i, tw := range w.tasks {
		tw.done = true
		if tw.err != nil {
			errs = append(errs, tw.err)
		}
		bs[i] = tw.blockSizes()
	}
	if len(errs) == 0 {
		errs = append(errs, w.pf.finish(w.f, bs, false))
	}
	errs = append(errs, w.f.Close())
	if err := errors.Join(errs...); err != nil {
		return errors.Join(err, w.pf.d.Remove(w.pf.tmp))
	}
	if err := w.pf.commit(); err != nil {
		return errors.Join(err, w.pf.d.Remove(w.pf.tmp))
	}
	w.log.Debug("sion commit", zap.String("path", w.pf.name), zap.Int64("size", w.pf.h.StartOfMeta2))
	return nil
}

// Abort discards the container: the temporary file is closed and removed.
func (w *Writer) Abort() error {
	if w.done {
		return ErrClosed
	}
	w.done = true
	for _, tw := range w.tasks {
		tw.done = true
	}
	return errors.Join(w.f.Close(), w.pf.d.Remove(w.pf.tmp))
}
