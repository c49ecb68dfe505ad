package levels

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/sion"
	"github.com/ftigo/ftigo/vfd"
)

// Inline L4 names.
//
// wire format: never change — stored in manifests and read at recovery.
const (
	// AttrInContainer, set to "1" on a rank's data entry, says the data
	// was written straight into the L4 container and exists only as the
	// rank's task there: recovery reads the task from the container (the
	// entry's Where and Name name the local copy older versions of ftigo
	// staged there, still used when present), and the runtime has no data
	// file of its own to rename.
	AttrInContainer = "sion-only"
	// DigestSION, under [AttrDigest] on an L4 container entry, says the
	// container's bytes are not hashed as a whole (its Digest is zero):
	// every task is verified through the data entry naming it, and the
	// container's metadata by the sion reader.
	DigestSION = "sion"
)

// defaultChunk is the chunk size of a rank with no earlier checkpoint to
// size it from. A task larger than its chunk continues in further blocks,
// so this only affects the layout, not what fits.
const defaultChunk = 1 << 20

// OpensData reports whether the engine writes through OpenData: with Inline.
func (l Global4) OpensData() bool { return l.Inline }

// OpenData opens the L4 container collectively and returns this rank's
// task as a file: the runtime writes the rank's data straight into the
// global area, with no local copy. The chunk size is hint (the size of the
// rank's previous checkpoint) rounded up to FSBlkSize, or 1 MiB; data that
// outgrows it continues in the next blocks. Either every rank gets a file
// or every rank gets an error.
func (l Global4) OpenData(env *Env, p *Pending, hint int64) (vfd.File, error) {
	c := env.Comm
	rank, size := c.Rank(), c.Size()
	cname := path.Join(p.Dir, ContainerName)
	full := env.Global.Path(cname)
	nf, fileOf := l.place(size)
	file, lrank := fileOf(rank)
	fsblk := int64(l.FSBlkSize)
	if fsblk <= 0 {
		fsblk = sion.DefaultFSBlkSize
	}
	if hint <= 0 {
		hint = defaultChunk
	}
	chunk := roundUpTo(hint, fsblk)

	merr := env.Global.Driver.MkdirAll(path.Dir(full), 0o755)
	if err := comm.Agree(c, merr, "create L4 directory"); err != nil {
		return nil, err
	}
	tf := &taskFile{cname: cname, file: file, lrank: lrank, nfiles: nf}

	// Under the final names once the intent marker is durable (the
	// directories are synced in ProtectData); under tmp names, renamed
	// by the commit, otherwise.
	tf.final = p.Final()
	pw, err := sion.CreateMapped(c, env.Global.Driver, full,
		[]sion.MappedTask{{GlobalRank: int64(rank), ChunkSize: chunk, File: file, LocalRank: lrank}}, nf,
		&sion.Options{FSBlkSize: int32(fsblk), Policy: sion.PolicyFill, NoCommit: true, InPlace: tf.final, Logger: env.Logger})
	if err != nil {
		return nil, fmt.Errorf("open L4 container: %w", err)
	}
	// Where the task's blocks lie: the container's plan (SIONlib's
	// layout rule, docs/format/sion.md), which rank 0 made.
	tf.pw, tf.tw = pw, pw.Task(0)
	tf.start, tf.skip, tf.chunk = tf.tw.Layout()
	tf.name = env.Global.Path(sion.SetMemberName(cname, file)) + tf.suffix()
	side, oerr := env.Global.Driver.Open(tf.name, vfd.ReadWrite)
	if err := comm.Agree(c, oerr, "open L4 container task"); err != nil {
		if side != nil {
			_ = side.Close()
		}
		return nil, errors.Join(err, pw.Abort())
	}
	tf.side = side
	return tf, nil
}

// ProtectData commits the container f belongs to (META2, sync; the
// runtime renames it with the checkpoint's other files, unless it was
// written under its final names, whose directory entries rank 0 syncs
// meanwhile) and records on this rank's data entry where its task is.
// The rank leading each physical file lists that file. Nothing is
// re-read. Collective.
func (l Global4) ProtectData(env *Env, p *Pending, f vfd.File) error {
	tf, ok := f.(*taskFile)
	if !ok {
		return fmt.Errorf("levels: L4 ProtectData got a %T", f)
	}
	data := &p.Files[0]
	if data.Attrs == nil {
		data.Attrs = map[string]string{}
	}
	data.Attrs[AttrContainer] = tf.cname
	data.Attrs[AttrTask] = strconv.Itoa(env.Rank)
	data.Attrs[AttrInContainer] = "1"
	place, perr := tf.pw.Place(0)
	if perr == nil {
		data.Attrs[AttrPlace] = formatPlace(place)
	}
	var lerr error
	if tf.size != data.Size {
		lerr = fmt.Errorf("%w: task holds %d bytes, the data entry says %d", ErrSizeMismatch, tf.size, data.Size)
	}
	if err := comm.Agree(env.Comm, lerr, "check L4 task size"); err != nil {
		return errors.Join(err, tf.pw.Abort())
	}
	if err := closeContainer(env, tf.pw, tf.cname, tf.final); err != nil {
		return err
	}
	if tf.lrank != 0 {
		return nil
	}
	name := sion.SetMemberName(tf.cname, tf.file)
	fi, err := env.Global.Driver.Stat(env.Global.Path(name) + tf.suffix())
	if err != nil {
		return fmt.Errorf("stat L4 container: %w", err)
	}
	p.Files = append(p.Files, File{Role: RoleContainer, Where: Global, Name: name, Size: fi.Size(), Of: env.Rank,
		Attrs: map[string]string{AttrFile: strconv.Itoa(tf.file), AttrNFiles: strconv.Itoa(tf.nfiles), AttrDigest: DigestSION}})
	if tf.final {
		p.WroteFinal(Global, name)
	}
	env.Logger.Debug("L4 container written", zap.String("path", name), zap.Int64("size", fi.Size()))
	return nil
}

// closeContainer commits the container pw (collective: every rank syncs
// what it wrote, the leaders write and sync the metadata). Every file of
// the container exists since it was created (its leaders created them
// before the creation's vote): when they have their final names, rank 0
// makes their entries durable, and the checkpoint directory's in the
// global area, beside the container's syncs.
func closeContainer(env *Env, pw *sion.ParWriter, cname string, final bool) error {
	fns := []func() error{func() error {
		if err := pw.Close(); err != nil {
			return fmt.Errorf("commit L4 container: %w", err)
		}
		return nil
	}}
	if final && env.Rank == 0 {
		g := env.Global
		for _, dir := range []string{g.Path(path.Dir(cname)), g.Dir} {
			fns = append(fns, func() error {
				if err := g.Driver.SyncDir(dir); err != nil {
					return fmt.Errorf("sync L4 directory: %w", err)
				}
				return nil
			})
		}
	}
	return runAll(fns)
}

// AbortData discards the container f belongs to. Collective.
func (Global4) AbortData(_ *Env, _ *Pending, f vfd.File) error {
	tf, ok := f.(*taskFile)
	if !ok {
		return fmt.Errorf("levels: L4 AbortData got a %T", f)
	}
	err := tf.Close()
	if aerr := tf.pw.Abort(); aerr != nil && !errors.Is(aerr, sion.ErrClosed) {
		err = errors.Join(err, aerr)
	}
	return err
}

func roundUpTo(v, m int64) int64 { return (v + m - 1) / m * m }

// taskFile is a rank's task of an L4 container seen as a file. Appends go
// through the task writer (so the container records the task's block
// sizes); rewrites of bytes already written and reads go through a second
// handle at the task's physical offsets: logical offset o lies in block
// o/chunk at start + block*skip + o%chunk.
type taskFile struct {
	pw     *sion.ParWriter
	tw     *sion.TaskWriter
	side   vfd.File
	name   string // physical file, for errors
	cname  string // container name relative to the global area
	file   int
	lrank  int
	nfiles int
	start  int64 // the task's chunk in block 0
	skip   int64 // block size: sum of the file's chunks
	chunk  int64
	size   int64 // bytes written
	closed bool
	// final: the container's files have their final names (see
	// [Pending.Final]); otherwise their tmp names.
	final bool
}

// suffix returns the suffix of the container's file names while written.
func (t *taskFile) suffix() string {
	if t.final {
		return ""
	}
	return TmpSuffix
}

var (
	_ vfd.File             = (*taskFile)(nil)
	_ vfd.WritebackStarter = (*taskFile)(nil)
)

func (t *taskFile) phys(off int64) (int64, int64) {
	b, in := off/t.chunk, off%t.chunk
	return t.start + b*t.skip + in, t.chunk - in
}

// Name returns the physical file's name and the task.
func (t *taskFile) Name() string { return fmt.Sprintf("%s (task %d)", t.name, t.lrank) }

// Size returns the bytes written to the task.
func (t *taskFile) Size() (int64, error) { return t.size, nil }

// ReadAt reads the task's bytes at off.
func (t *taskFile) ReadAt(p []byte, off int64) (int, error) {
	if t.closed {
		return 0, fmt.Errorf("%s: %w", t.Name(), vfd.ErrClosed)
	}
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", t.Name(), off)
	}
	n := 0
	for n < len(p) && off < t.size {
		po, room := t.phys(off)
		k := min(int64(len(p)-n), room, t.size-off)
		if err := vfd.ReadFull(t.side, p[n:n+int(k)], po); err != nil {
			return n, err
		}
		n += int(k)
		off += k
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt writes p at off: bytes already written are rewritten in place,
// the rest is appended (after zeros up to off).
func (t *taskFile) WriteAt(p []byte, off int64) (int, error) {
	if t.closed {
		return 0, fmt.Errorf("%s: %w", t.Name(), vfd.ErrClosed)
	}
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", t.Name(), off)
	}
	if off > t.size {
		if err := t.grow(off); err != nil {
			return 0, err
		}
	}
	n := 0
	for n < len(p) && off < t.size {
		po, room := t.phys(off)
		k := min(int64(len(p)-n), room, t.size-off)
		if _, err := t.side.WriteAt(p[n:n+int(k)], po); err != nil {
			return n, err
		}
		n += int(k)
		off += k
	}
	if n < len(p) {
		m, err := t.tw.Write(p[n:])
		t.size += int64(m)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// grow appends zeros up to size n.
func (t *taskFile) grow(n int64) error {
	zero := make([]byte, min(n-t.size, 1<<20))
	for t.size < n {
		m, err := t.tw.Write(zero[:min(int64(len(zero)), n-t.size)])
		t.size += int64(m)
		if err != nil {
			return err
		}
	}
	return nil
}

// Truncate extends the task with zeros; a task cannot shrink (its bytes
// are already placed in the container).
func (t *taskFile) Truncate(n int64) error {
	if t.closed {
		return fmt.Errorf("%s: %w", t.Name(), vfd.ErrClosed)
	}
	if n < t.size {
		return fmt.Errorf("%s: %w: an L4 task cannot shrink from %d to %d bytes", t.Name(), ErrSizeMismatch, t.size, n)
	}
	return t.grow(n)
}

// Sync leaves the task's bytes to the container's commit
// ([Global4.ProtectData]), which the engine always runs before the
// checkpoint can commit: there every rank syncs the container files it
// wrote (a write error surfaces there), all at once, before any metadata
// is written. Syncing here too would cost one more round of flushes for
// bytes that are synced again a moment later.
func (t *taskFile) Sync() error {
	if t.closed {
		return fmt.Errorf("%s: %w", t.Name(), vfd.ErrClosed)
	}
	return nil
}

// StartWriteback starts the writeback of the task's logical range [off,
// off+n) (n == 0: through the bytes written), block by block at their
// physical offsets in the container, as the FTI-FF writer does for a
// data file of its own (a hint; see [vfd.StartWriteback]): without it
// the whole container stayed dirty until the ranks' fsyncs. The bytes
// stay in the page cache: an L4 restart in the same boot reads them.
func (t *taskFile) StartWriteback(off, n int64) error {
	if t.closed {
		return fmt.Errorf("%s: %w", t.Name(), vfd.ErrClosed)
	}
	if off < 0 || n < 0 {
		return fmt.Errorf("%s: writeback of [%d, +%d): %w", t.Name(), off, n, vfd.ErrNegativeOffset)
	}
	end := t.size
	if n > 0 {
		end = min(end, off+n)
	}
	return t.each(off, end, func(po, k int64) error { return vfd.StartWriteback(t.side, po, k) })
}

// each calls fn with the physical offset and length of every piece of
// the logical range [off, end).
func (t *taskFile) each(off, end int64, fn func(po, k int64) error) error {
	for off < end {
		po, room := t.phys(off)
		k := min(room, end-off)
		if err := fn(po, k); err != nil {
			return err
		}
		off += k
	}
	return nil
}

// Close releases the second handle; the container stays open until
// ProtectData or AbortData.
func (t *taskFile) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	return t.side.Close()
}
