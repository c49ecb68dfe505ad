package sion

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// MappedTask is one logical task a rank owns in a mapped container (after
// SIONlib's sion_paropen_mapped_mpi): its global rank, chunk size, and the
// physical file and local rank it takes there.
type MappedTask struct {
	GlobalRank int64
	ChunkSize  int64
	File       int
	LocalRank  int
}

// ParWriter is one rank's part of a container written collectively over a
// [comm.Comm]: [ParCreate] and [CreateMapped] open collectively, every rank
// then writes its own tasks without communication, and [ParWriter.Close]
// commits collectively.
type ParWriter struct {
	c      comm.Comm
	d      vfd.Driver
	log    *zap.Logger
	name   string            // file 0's name
	files  map[int]*physFile // files this rank leads (whole plans) or writes to (names only)
	lead   map[int]vfd.File  // files this rank leads (writes META1/META2, commits)
	open   map[int]vfd.File  // files this rank writes task data to (includes led ones)
	tasks  []*TaskWriter
	specs  []MappedTask
	nfiles int
	done   bool
	// inPlace: [Options.InPlace]; Close syncs the data and the metadata
	// in one round.
	inPlace bool
	// leaders (rank 0 only): the rank that leads each file, to which
	// Close hands that file's block sizes.
	leaders []int
}

// ParCreate opens a container collectively with one task per rank, as
// SIONlib's sion_paropen_mpi does: the task's global rank is c.Rank(), and
// with nfiles > 1 the ranks are split into contiguous groups, one per
// physical file (size/nfiles ranks each, the remainder in the last file),
// named name, name.000001, .... Every rank passes the same name, nfiles
// and options, and its own chunk size. A single file carries no mapping;
// file 0 of a set carries the mapping. Errors are the same on every rank
// (a rank whose own part succeeded gets [ErrPeerFailed]).
func ParCreate(c comm.Comm, d vfd.Driver, name string, chunkSize int64, nfiles int, opts *Options) (*ParWriter, error) {
	size := c.Size()
	if nfiles < 1 {
		nfiles = 1
	}
	var err error
	if nfiles > size {
		err = fmt.Errorf("%w: %d files for %d ranks", ErrBadArgument, nfiles, size)
		nfiles = size
	}
	per := size / nfiles
	r := c.Rank()
	f := min(r/per, nfiles-1)
	t := MappedTask{GlobalRank: int64(r), ChunkSize: chunkSize, File: f, LocalRank: r - f*per}
	tr := trailerNone
	if nfiles > 1 {
		tr = trailerMapping
	}
	return parCreate(c, d, name, []MappedTask{t}, nfiles, opts, tr, err)
}

// CreateMapped opens a container collectively where each rank owns any
// number of logical tasks (SIONlib's sion_paropen_mapped_mpi, the call
// FTI's L4 uses). Global ranks over all ranks must be exactly 0..N-1, and
// each file's local ranks exactly 0..n-1. File 0 always ends with the full
// mapping, even when nfiles is 1.
func CreateMapped(c comm.Comm, d vfd.Driver, name string, tasks []MappedTask, nfiles int, opts *Options) (*ParWriter, error) {
	var err error
	if nfiles < 1 {
		err = fmt.Errorf("%w: %d files", ErrBadArgument, nfiles)
		nfiles = 1
	}
	return parCreate(c, d, name, tasks, nfiles, opts, trailerMapping, err)
}

// vote combines every rank's outcome of step what. A rank that failed
// gets its own err back. When some rank failed, the others get
// ErrPeerFailed, wrapping the agreed message that names the failing
// ranks. When all succeeded it returns nil.
func vote(c comm.Comm, err error, what string) error {
	agreed := comm.Agree(c, err, what)
	_, ok := agreed.(*comm.AgreedError)
	switch {
	case agreed == nil:
		return nil
	case !ok:
		return agreed // the vote itself failed: err joined to why
	case err != nil:
		return err
	default:
		return fmt.Errorf("%w: %w", ErrPeerFailed, agreed)
	}
}

const specLen = 24 // grank i64, chunk i64, file i32, lrank i32

// encodeSpec encodes one task's layout as the ranks exchange it.
func encodeSpec(t MappedTask) []byte {
	b := make([]byte, specLen)
	binary.LittleEndian.PutUint64(b[0:], uint64(t.GlobalRank))
	binary.LittleEndian.PutUint64(b[8:], uint64(t.ChunkSize))
	binary.LittleEndian.PutUint32(b[16:], uint32(t.File))
	binary.LittleEndian.PutUint32(b[20:], uint32(t.LocalRank))
	return b
}

func parCreate(c comm.Comm, d vfd.Driver, name string, local []MappedTask, nfiles int, opts *Options, tr trailer, argErr error) (*ParWriter, error) {
	o := opts.withDefaults()
	if o.Prefix == "" {
		o.Prefix = path.Base(name) // the same in every file of a set
	}
	if argErr == nil {
		for _, t := range local {
			if t.ChunkSize < 0 || t.File < 0 || t.File >= nfiles || t.LocalRank < 0 {
				argErr = fmt.Errorf("%w: task %+v in a %d-file set", ErrBadArgument, t, nfiles)
				break
			}
		}
	}
	if err := vote(c, argErr, "check the tasks of "+name); err != nil {
		return nil, err
	}
	var msg []byte
	for _, t := range local {
		msg = append(msg, encodeSpec(t)...)
	}
	// Rank 0 alone plans the set from every rank's tasks and hands each
	// rank its part: where its tasks start and, to each file's leader,
	// that file's table. A plan error reaches every rank the same.
	all, err := comm.GathervBytes(c, 0, msg)
	if err != nil {
		return nil, fmt.Errorf("sion: gather task layout: %w", err)
	}
	var parts [][]byte
	var leaders []int
	if c.Rank() == 0 {
		parts, leaders = planParts(d, name, all, nfiles, &o, tr)
	}
	part, err := comm.ScattervBytes(c, 0, parts)
	if err != nil {
		return nil, fmt.Errorf("sion: hand out the task layout: %w", err)
	}
	pl, err := decodePart(part, len(local), nfiles)
	if err != nil {
		return nil, err
	}
	pw := &ParWriter{c: c, d: d, log: o.Logger, name: name, files: map[int]*physFile{}, lead: map[int]vfd.File{}, open: map[int]vfd.File{},
		specs: local, nfiles: nfiles, inPlace: o.InPlace, leaders: leaders}
	for _, lf := range pl.led {
		pf, err := newPhysFile(d, SetMemberName(name, lf.file), &o, lf.chunks, lf.ranks, nfiles, lf.file)
		if err != nil {
			return nil, err // rank 0 built the same file: it cannot fail here
		}
		if lf.file == 0 {
			pf.tr = tr
			if tr == trailerMapping {
				pf.mapping = lf.mapping
			}
		}
		pw.files[lf.file] = pf
	}
	for _, t := range local {
		if _, ok := pw.files[t.File]; !ok {
			pw.files[t.File] = namesOnly(d, SetMemberName(name, t.File), &o)
		}
	}
	// Leaders (owners of local rank 0) create their files and write META1.
	var lerr error
	for _, lf := range pl.led {
		f, err := pw.files[lf.file].create()
		if err != nil {
			lerr = err
			break
		}
		pw.lead[lf.file], pw.open[lf.file] = f, f
	}
	if err := vote(c, lerr, "create "+name); err != nil {
		return nil, errors.Join(err, pw.discard())
	}
	// The other ranks open the files they hold tasks in.
	var oerr error
	for _, t := range local {
		if _, ok := pw.open[t.File]; ok {
			continue
		}
		f, err := d.Open(pw.files[t.File].tmp, vfd.ReadWrite)
		if err != nil {
			oerr = fmt.Errorf("sion: open %s: %w", pw.files[t.File].tmp, err)
			break
		}
		pw.open[t.File] = f
	}
	if err := vote(c, oerr, "open "+name); err != nil {
		return nil, errors.Join(err, pw.discard())
	}
	for i, t := range local {
		pl := pl.tasks[i]
		pw.tasks = append(pw.tasks, &TaskWriter{f: pw.open[t.File], name: pw.files[t.File].tmp, index: t.LocalRank,
			start: pl.start, skip: pl.skip, chunk: pl.chunk, policy: o.Policy, kv: o.KeyVal, big: o.BigEndian})
	}
	pw.log.Debug("sion paropen", zap.String("path", name), zap.Int("local-tasks", len(local)), zap.Int("nfiles", nfiles))
	return pw, nil
}

// taskSlot is one local rank of one file of a set: the task's layout and
// the rank that holds it.
type taskSlot struct {
	spec  MappedTask
	owner int
	set   bool
}

// planSet decodes every rank's task layout (all, as gathered) into the
// slots of each file, checking that every file's local ranks are 0..n-1,
// each once, and, for a mapping trailer, builds the mapping of global
// ranks, which must be 0..total-1, each once.
func planSet(all [][]byte, nfiles int, tr trailer) (perFile [][]taskSlot, mapping []MapEntry, err error) {
	perFile = make([][]taskSlot, nfiles)
	var total int64
	for r, m := range all {
		for k := 0; k+specLen <= len(m); k += specLen {
			t := MappedTask{GlobalRank: int64(binary.LittleEndian.Uint64(m[k:])), ChunkSize: int64(binary.LittleEndian.Uint64(m[k+8:])),
				File: int(binary.LittleEndian.Uint32(m[k+16:])), LocalRank: int(binary.LittleEndian.Uint32(m[k+20:]))}
			slots := perFile[t.File]
			for len(slots) <= t.LocalRank {
				slots = append(slots, taskSlot{})
			}
			if slots[t.LocalRank].set {
				return nil, nil, fmt.Errorf("%w: file %d local rank %d is taken twice", ErrBadArgument, t.File, t.LocalRank)
			}
			slots[t.LocalRank] = taskSlot{spec: t, owner: r, set: true}
			perFile[t.File] = slots
			total++
		}
	}
	if total > MaxTasks {
		return nil, nil, fmt.Errorf("%w: %d tasks in the set, more than readers accept (%d)", ErrTooLarge, total, MaxTasks)
	}
	mapping = make([]MapEntry, total)
	seen := make([]bool, total)
	for k, slots := range perFile {
		if len(slots) == 0 {
			return nil, nil, fmt.Errorf("%w: file %d has no tasks", ErrBadArgument, k)
		}
		for l, s := range slots {
			if !s.set {
				return nil, nil, fmt.Errorf("%w: file %d has no local rank %d", ErrBadArgument, k, l)
			}
			if tr == trailerMapping {
				g := s.spec.GlobalRank
				if g < 0 || g >= total || seen[g] {
					return nil, nil, fmt.Errorf("%w: global ranks must be 0..%d, each once (got %d)", ErrBadArgument, total-1, g)
				}
				seen[g] = true
				mapping[g] = MapEntry{File: int32(k), LocalRank: int32(l)}
			}
		}
	}
	return perFile, mapping, nil
}

// discard closes every handle and lets leaders remove their temporary files.
func (pw *ParWriter) discard() error {
	var errs []error
	for k, f := range pw.open {
		if _, led := pw.lead[k]; !led {
			errs = append(errs, f.Close())
		}
	}
	for k, f := range pw.lead {
		errs = append(errs, f.Close(), pw.d.Remove(pw.files[k].tmp))
	}
	pw.open, pw.lead = map[int]vfd.File{}, map[int]vfd.File{}
	return errors.Join(errs...)
}

// NTasks returns the number of tasks this rank owns.
func (pw *ParWriter) NTasks() int { return len(pw.tasks) }

// Task returns the writer of this rank's i-th task (in the order given to
// [CreateMapped]; [ParCreate] has exactly one).
func (pw *ParWriter) Task(i int) *TaskWriter {
	if i < 0 || i >= len(pw.tasks) {
		return nil
	}
	return pw.tasks[i]
}

// Write writes to this rank's first task.
func (pw *ParWriter) Write(p []byte) (int, error) { return pw.tasks[0].Write(p) }

// Close commits the container collectively: every rank syncs its data,
// block sizes are gathered, each file's leader writes META2 and the META1
// tail, syncs, and renames its file (the siblings first, file 0 last, so a
// set never looks complete before all its files are in place). All ranks
// return an error when any rank failed; the temporary files are removed.
func (pw *ParWriter) Close() error {
	if pw.done {
		return ErrClosed
	}
	pw.done = true
	var lerr error
	for _, tw := range pw.tasks {
		tw.done = true
		if tw.err != nil && lerr == nil {
			lerr = tw.err
		}
	}
	// Every rank syncs the files it wrote, the leaders theirs (data and
	// the head of META1) too: one round of syncs, all at once, before
	// any META2 is written. In place, the same syncs run beside the
	// leaders' META2 and its sync instead (below): nothing orders data
	// and metadata, the caller's commit after Close does.
	if !pw.inPlace {
		lerr = pw.syncWritten(lerr)
	}
	if err := vote(pw.c, lerr, "write and sync "+pw.name); err != nil {
		return errors.Join(err, pw.discard())
	}
	bsOf, err := pw.exchangeBlockSizes()
	if err != nil {
		return errors.Join(err, pw.discard())
	}
	var ferr error
	for k, bs := range bsOf {
		if l := slices.IndexFunc(bs, func(b []int64) bool { return b == nil }); l >= 0 && ferr == nil {
			ferr = fmt.Errorf("%w: %s: no block sizes arrived for local rank %d", ErrInconsistent, pw.files[k].tmp, l)
		}
	}
	if pw.inPlace {
		ferr = errors.Join(ferr, pw.syncWritten(nil))
	}
	for k, f := range pw.lead {
		if ferr != nil {
			break
		}
		if err := pw.files[k].finish(f, bsOf[k], true); err != nil {
			ferr = err
		}
	}
	if err := vote(pw.c, ferr, "write the metadata of "+pw.name); err != nil {
		return errors.Join(err, pw.discard())
	}
	var cerr error
	for k, f := range pw.lead {
		if err := f.Close(); err != nil && cerr == nil {
			cerr = fmt.Errorf("sion: close %s: %w", pw.files[k].tmp, err)
		}
	}
	pw.lead = map[int]vfd.File{}
	if cerr == nil {
		for k := range pw.files {
			if k > 0 && pw.leads(k) {
				if err := pw.files[k].commit(); err != nil {
					cerr = err
					break
				}
			}
		}
	}
	if err := vote(pw.c, cerr, "commit the other files of "+pw.name); err != nil {
		return errors.Join(err, pw.removeTmp())
	}
	if pw.leads(0) {
		cerr = pw.files[0].commit()
	}
	if err := vote(pw.c, cerr, "commit "+pw.name); err != nil {
		return errors.Join(err, pw.removeTmp())
	}
	pw.log.Debug("sion parclose", zap.String("path", pw.name))
	return nil
}

// exchangeBlockSizes sends every task's block sizes to rank 0, which
// hands each leader those of its files, and returns, per file this rank
// leads, the sizes of every local rank (nil where none arrived).
func (pw *ParWriter) exchangeBlockSizes() (map[int][][]int64, error) {
	// Every task's (file, lrank, nblocks, sizes...) go to rank 0, which
	// hands each leader those of its files: no other rank receives them.
	var msg []byte
	for i, tw := range pw.tasks {
		msg = appendBlockSizes(msg, pw.specs[i].File, pw.specs[i].LocalRank, tw.blockSizes())
	}
	all, err := comm.GathervBytes(pw.c, 0, msg)
	if err != nil {
		return nil, fmt.Errorf("sion: gather block sizes: %w", err)
	}
	var parts [][]byte
	if pw.c.Rank() == 0 {
		parts = make([][]byte, pw.c.Size())
		for _, m := range all {
			for len(m) >= 12 {
				file, nb := int(binary.LittleEndian.Uint32(m)), int(binary.LittleEndian.Uint32(m[8:]))
				n := 12 + 8*nb
				if file >= len(pw.leaders) || n > len(m) {
					break // not what appendBlockSizes wrote; the leader finds the sizes missing
				}
				leader := pw.leaders[file]
				parts[leader] = append(parts[leader], m[:n]...)
				m = m[n:]
			}
		}
	}
	mine, err := comm.ScattervBytes(pw.c, 0, parts)
	if err != nil {
		return nil, fmt.Errorf("sion: hand out block sizes: %w", err)
	}
	// Keep the sizes of the files this rank leads.
	bsOf := make(map[int][][]int64, len(pw.lead))
	for k := range pw.lead {
		bsOf[k] = make([][]int64, len(pw.files[k].h.ChunkSizes))
	}
	for m := mine; len(m) >= 12; {
		file, l, nb := int(binary.LittleEndian.Uint32(m)), int(binary.LittleEndian.Uint32(m[4:])), int(binary.LittleEndian.Uint32(m[8:]))
		m = m[12:]
		if 8*nb > len(m) {
			break
		}
		sizes := make([]int64, nb)
		for b := range sizes {
			sizes[b] = int64(binary.LittleEndian.Uint64(m[8*b:]))
		}
		m = m[8*nb:]
		if bs, led := bsOf[file]; led && l < len(bs) {
			bs[l] = sizes
		}
	}
	return bsOf, nil
}

// appendBlockSizes appends one task's block sizes as Close exchanges
// them: file, local rank and block count (uint32 each), then the sizes
// (uint64 each), little-endian.
func appendBlockSizes(b []byte, file, lrank int, sizes []int64) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(file))
	b = binary.LittleEndian.AppendUint32(b, uint32(lrank))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(sizes)))
	for _, v := range sizes {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// syncWritten syncs every file this rank wrote task data to and closes
// those it does not lead, and returns lerr or, if lerr is nil, the first
// failure.
func (pw *ParWriter) syncWritten(lerr error) error {
	for k, f := range pw.open {
		if _, led := pw.lead[k]; led && pw.inPlace {
			delete(pw.open, k) // synced by finish, after its META2
			continue
		}
		if err := f.Sync(); err != nil && lerr == nil {
			lerr = fmt.Errorf("sion: sync %s: %w", pw.files[k].tmp, err)
		}
		if _, led := pw.lead[k]; led {
			continue
		}
		if err := f.Close(); err != nil && lerr == nil {
			lerr = fmt.Errorf("sion: close %s: %w", pw.files[k].tmp, err)
		}
		delete(pw.open, k)
	}
	return lerr
}

// leads reports whether this rank leads file k (owns its local rank 0).
func (pw *ParWriter) leads(k int) bool {
	for _, t := range pw.specs {
		if t.File == k && t.LocalRank == 0 {
			return true
		}
	}
	return false
}

// removeTmp removes, best effort, the temporary files this rank leads and
// the siblings already renamed after a failed commit. File 0 under its
// final name is never removed: a failed rename left the previous one
// (with [Options.InPlace] the files written are the final names, and go).
func (pw *ParWriter) removeTmp() error {
	var errs []error
	for k, pf := range pw.files {
		if !pw.leads(k) {
			continue
		}
		names := []string{pf.tmp}
		if k > 0 && !pf.noCommit {
			names = append(names, pf.name)
		}
		for _, n := range names {
			if err := pw.d.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Abort discards the container collectively: handles are closed and the
// temporary files removed.
func (pw *ParWriter) Abort() error {
	if pw.done {
		return ErrClosed
	}
	pw.done = true
	for _, tw := range pw.tasks {
		tw.done = true
	}
	err := pw.discard()
	return vote(pw.c, err, "abort "+pw.name)
}
