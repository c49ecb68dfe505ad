package dhdf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/vfd"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// earlySyncSize is the chunk size from which WriteChunk syncs the data
// while it computes the checksum.
const earlySyncSize = 4 << 20

// ahf is one associated file being written.
type ahf struct {
	id   int32
	f    vfd.File
	w    *h5.Writer
	done bool
}

// chunkRec is a written chunk, as gathered for the MHF.
type chunkRec struct {
	SDS    string
	FileID int32
	Name   string
	Origin []uint64
	Dims   []uint64
}

// Writer writes one distributed HDF set: the AHFs as chunks arrive and the
// MHF on Close. Create it with [Create] (one process writes every AHF) or
// [CreateParallel] (each rank writes its own AHF). A Writer belongs to one
// goroutine.
type Writer struct {
	opts   Options
	base   string
	setID  string
	nfiles int32 // AHFs are 1..nfiles
	c      comm.Comm
	ahfs   map[int32]*ahf
	sds    map[string]SDS
	order  []string // SDS declaration order
	chunks []chunkRec
	placed map[string]*chunkSet // per SDS, the blocks of its chunks in w.chunks
	seq    map[string]int
	hosts  map[int32]string
	closed bool
}

// Create starts a set with base path base (the MHF is base+".h5") and
// nfiles associated files numbered 1..nfiles, written by this process.
// Existing files of the same names are replaced.
func Create(base string, nfiles int, opts Options) (*Writer, error) {
	if nfiles < 1 || nfiles > 1<<20 {
		return nil, fmt.Errorf("%w: %d associated files", ErrInvalid, nfiles)
	}
	if err := checkBase(base, int32(nfiles)); err != nil {
		return nil, err
	}
	if err := checkHost(opts); err != nil {
		return nil, err
	}
	w := newWriter(base, int32(nfiles), nil, opts)
	if err := w.opts.Driver.MkdirAll(dirOf(base), 0o755); err != nil {
		return nil, fmt.Errorf("dhdf: create directory: %w", err)
	}
	w.setID = w.makeSetID(0)
	for id := int32(1); id <= w.nfiles; id++ {
		w.hosts[id] = w.opts.HostName
	}
	return w, nil
}

// CreateParallel starts a set written by every rank of c: rank r writes
// the AHF with file id r+1, rank 0 writes the MHF. It is collective: every
// rank calls it with the same base, and later DefineSDS calls and Close
// in the same order; WriteChunk is local.
func CreateParallel(c comm.Comm, base string, opts Options) (*Writer, error) {
	if err := checkBase(base, int32(c.Size())); err != nil {
		return nil, err
	}
	if err := checkHost(opts); err != nil {
		return nil, err
	}
	w := newWriter(base, int32(c.Size()), c, opts)
	if err := w.opts.Driver.MkdirAll(dirOf(base), 0o755); err != nil {
		return nil, fmt.Errorf("dhdf: create directory: %w", err)
	}
	id := []byte(w.makeSetID(0))
	if c.Rank() != 0 {
		id = nil
	}
	got, err := comm.BcastBytes(c, 0, id)
	if err != nil {
		return nil, fmt.Errorf("dhdf: broadcast set id: %w", err)
	}
	w.setID = string(got)
	w.hosts[int32(c.Rank()+1)] = w.opts.HostName
	// Create this rank's AHF now, so that after the next collective call
	// every file of the set has its directory entry.
	if _, err := w.localFile(int32(c.Rank() + 1)); err != nil {
		return nil, err
	}
	return w, nil
}

// checkBase checks that every file name of the set fits File_Info's
// FileName field.
func checkBase(base string, n int32) error {
	name := baseName(AHFName(base, n))
	if baseName(base) == "" || strings.ContainsRune(name, 0) || len(name) >= nameLen {
		return fmt.Errorf("%w: set name %q (file names must be under %d bytes)", ErrInvalid, base, nameLen)
	}
	return nil
}

// checkHost checks that the host name fits File_Info's HostName field.
func checkHost(opts Options) error {
	if h := opts.withDefaults().HostName; !validHost(h) {
		return fmt.Errorf("%w: host name %q (under %d bytes, no NUL)", ErrInvalid, h, nameLen)
	}
	return nil
}

func newWriter(base string, n int32, c comm.Comm, opts Options) *Writer {
	return &Writer{
		opts: opts.withDefaults(), base: base, nfiles: n, c: c,
		ahfs: map[int32]*ahf{}, sds: map[string]SDS{}, placed: map[string]*chunkSet{}, seq: map[string]int{}, hosts: map[int32]string{},
	}
}

func (w *Writer) makeSetID(rank int) string {
	return fmt.Sprintf("%s %s %d", w.opts.Now().UTC().Format(time.RFC3339Nano), baseName(MHFName(w.base)), rank)
}

// SetID is the set's DHDF_SetId.
func (w *Writer) SetID() string { return w.setID }

// DefineSDS declares a distributed array. Under CreateParallel every rank
// declares the same SDSs in the same order.
func (w *Writer) DefineSDS(s SDS) error {
	if w.closed {
		return ErrClosed
	}
	if err := s.validate(); err != nil {
		return err
	}
	if _, dup := w.sds[s.Name]; dup {
		return fmt.Errorf("%w: SDS %q defined twice", ErrInvalid, s.Name)
	}
	s.Dims = append([]uint64(nil), s.Dims...)
	s.Attrs = append([]h5.Attribute(nil), s.Attrs...)
	w.sds[s.Name] = s
	w.order = append(w.order, s.Name)
	return nil
}

// localFile returns the AHF this process writes for id, creating it.
func (w *Writer) localFile(id int32) (*ahf, error) {
	if w.c != nil && id != int32(w.c.Rank()+1) {
		return nil, fmt.Errorf("%w: rank %d writes file %d, not %d", ErrInvalid, w.c.Rank(), w.c.Rank()+1, id)
	}
	if id < 1 || id > w.nfiles {
		return nil, fmt.Errorf("%w: file id %d not in 1..%d", ErrInvalid, id, w.nfiles)
	}
	if a, ok := w.ahfs[id]; ok {
		return a, nil
	}
	name := AHFName(w.base, id)
	f, err := vfd.CreateTrunc(w.opts.Driver, name)
	if err != nil {
		return nil, fmt.Errorf("dhdf: create %s: %w", name, err)
	}
	a := &ahf{id: id, f: f, w: h5.NewWriter(f)}
	if w.opts.OneSyncAHF {
		a.w.OneSync()
	}
	w.ahfs[id] = a
	return a, nil
}

// WriteChunk writes one sub-array of SDS sds into the AHF with file id
// fileID (under CreateParallel: this rank's, 0 meaning "mine"). origin
// and dims place it in the global array; data holds its elements in
// row-major order. An empty name picks "<sds>_<fileID>_<n>".
func (w *Writer) WriteChunk(sds string, fileID int32, name string, origin, dims []uint64, data []byte) error {
	if w.closed {
		return ErrClosed
	}
	s, ok := w.sds[sds]
	if !ok {
		return fmt.Errorf("%w: SDS %q is not defined", ErrNotFound, sds)
	}
	if w.c != nil && fileID == 0 {
		fileID = int32(w.c.Rank() + 1)
	}
	if name == "" {
		key := fmt.Sprintf("%s_%d", sds, fileID)
		name = fmt.Sprintf("%s_%d", key, w.seq[key])
		w.seq[key]++
	}
	c := Chunk{FileID: fileID, Name: name, Origin: append([]uint64(nil), origin...), Dims: append([]uint64(nil), dims...)}
	if err := s.checkChunk(c); err != nil {
		return err
	}
	if uint64(len(data)) != nbytes(s.Type, c.Dims) {
		return fmt.Errorf("%w: chunk %q: %d bytes for %v elements of %d bytes", ErrInvalid, name, len(data), dims, s.Type.Size)
	}
	placed := w.placed[sds]
	if placed == nil {
		placed = newChunkSet(len(s.Dims))
		w.placed[sds] = placed
	}
	if j, ok := placed.first(c.Origin, c.Dims); ok {
		return fmt.Errorf("%w: chunk %q overlaps chunk %q of SDS %q", ErrInvalid, name, w.chunks[j].Name, sds)
	}
	a, err := w.localFile(fileID)
	if err != nil {
		return err
	}
	d, err := a.w.Root().CreateDataset(name, s.Type, c.Dims, data)
	if err != nil {
		return fmt.Errorf("dhdf: write chunk %q to %s: %w", name, a.f.Name(), err)
	}
	// A large chunk is pushed to storage while its checksum is computed,
	// so the CPU work hides behind the I/O wait and the sync in Close has
	// only the metadata left.
	var crc uint32
	if len(data) >= earlySyncSize {
		synced := make(chan error, 1)
		go func() { synced <- a.f.Sync() }()
		crc = crc32.Checksum(data, castagnoli)
		if err := <-synced; err != nil {
			return fmt.Errorf("dhdf: sync chunk %q to %s: %w", name, a.f.Name(), err)
		}
	} else {
		crc = crc32.Checksum(data, castagnoli)
	}
	origin64 := make([]int64, len(c.Origin))
	for i, o := range c.Origin {
		origin64[i] = int64(o)
	}
	for _, at := range []h5.Attribute{
		h5.StringAttr(attrSDSName, sds),
		h5.MustAttr(attrOrigin, origin64),
		h5.MustAttr(attrCRC, crc),
	} {
		if err := d.SetAttr(at); err != nil {
			return err
		}
	}
	placed.add(c.Origin, c.Dims, len(w.chunks))
	w.chunks = append(w.chunks, chunkRec{SDS: sds, FileID: fileID, Name: name, Origin: c.Origin, Dims: c.Dims})
	return nil
}

func (w *Writer) rootAttrs(g *h5.Group, id int32) error {
	for _, a := range []h5.Attribute{
		h5.StringAttr(AttrSetID, w.setID),
		h5.MustAttr(AttrFileID, id),
		h5.MustAttr(AttrVersion, int32(formatVersion)),
	} {
		if err := g.SetAttr(a); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) fileInfoTable(g *h5.Group, rows []FileInfo) error {
	data := encodeFileInfo(rows)
	d, err := g.CreateDataset(FileInfoName, fileInfoType, []uint64{uint64(len(rows))}, data)
	if err != nil {
		return err
	}
	return tableAttrs(d, FileInfoClass, data)
}

// tableAttrs gives a table its CLASS and the CRC-32C of its data (in the
// object header, so the header's checksum covers it), which makes every
// byte of the table, host names included, checked on open.
func tableAttrs(d *h5.Dataset, class string, data []byte) error {
	if err := d.SetAttr(h5.StringAttr(attrClass, class)); err != nil {
		return err
	}
	return d.SetAttr(h5.MustAttr(attrCRC, crc32.Checksum(data, castagnoli)))
}

// finishAHF writes the AHF's root attributes and File_Info, then closes
// its HDF5 writer (superblock last, synced) and the file.
func (w *Writer) finishAHF(a *ahf) error {
	root := a.w.Root()
	err := w.rootAttrs(root, a.id)
	if err == nil {
		err = w.fileInfoTable(root, []FileInfo{
			{ID: 0, Name: baseName(MHFName(w.base)), Host: w.hostOf(0)},
			{ID: a.id, Name: baseName(AHFName(w.base, a.id)), Host: w.hostOf(a.id)},
		})
	}
	if err == nil {
		err = a.w.Close()
	}
	a.done = true
	return errors.Join(err, a.f.Close())
}

func (w *Writer) hostOf(id int32) string {
	if h, ok := w.hosts[id]; ok {
		return h
	}
	return w.opts.HostName
}

// closeLocal finishes every AHF this process writes (creating empty ones
// so every listed file exists) and, when syncDir is set, syncs their directory.
func (w *Writer) closeLocal(syncDir bool) error {
	ids := []int32{}
	if w.c != nil {
		ids = append(ids, int32(w.c.Rank()+1))
	} else {
		for id := int32(1); id <= w.nfiles; id++ {
			ids = append(ids, id)
		}
	}
	var errs []error
	for _, id := range ids {
		a, err := w.localFile(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := w.finishAHF(a); err != nil {
			errs = append(errs, fmt.Errorf("dhdf: finish %s: %w", a.f.Name(), err))
		}
	}
	if syncDir {
		errs = append(errs, w.syncDir())
	}
	return errors.Join(errs...)
}

// syncDir makes the set directory's entries durable.
func (w *Writer) syncDir() error {
	if err := w.opts.Driver.SyncDir(dirOf(w.base)); err != nil && !errors.Is(err, vfd.ErrUnsupported) {
		return fmt.Errorf("dhdf: sync directory: %w", err)
	}
	return nil
}

func dirOf(base string) string {
	d := path.Dir(base)
	if d == "" {
		return "."
	}
	return d
}

// mhfFile is a main file whose body is written and synced and whose
// superblock is not yet written.
type mhfFile struct {
	f  vfd.File
	hw *h5.Writer
}

// prepareMHF writes the main file from the gathered chunk records, all
// but its superblock.
func (w *Writer) prepareMHF(chunks []chunkRec) (*mhfFile, error) {
	name := MHFName(w.base)
	f, err := vfd.CreateTrunc(w.opts.Driver, name)
	if err != nil {
		return nil, fmt.Errorf("dhdf: create %s: %w", name, err)
	}
	hw := h5.NewWriter(f)
	err = w.buildMHF(hw.Root(), chunks)
	if err == nil {
		err = hw.Flush()
	}
	if err != nil {
		return nil, fmt.Errorf("dhdf: write %s: %w", name, errors.Join(err, f.Close()))
	}
	return &mhfFile{f: f, hw: hw}, nil
}

// commit writes the main file's superblock and syncs it. The caller has
// made the directory entries of the set durable, the MHF's included.
func (m *mhfFile) commit(w *Writer, nchunks int) error {
	name := MHFName(w.base)
	if err := errors.Join(m.hw.Close(), m.f.Close()); err != nil {
		return fmt.Errorf("dhdf: commit %s: %w", name, err)
	}
	w.opts.Logger.Info("dhdf set written", zap.String("mhf", name), zap.Int("files", int(w.nfiles)+1), zap.Int("sds", len(w.order)), zap.Int("chunks", nchunks))
	return nil
}

// abandon closes and removes a main file that must not be committed.
func (m *mhfFile) abandon(w *Writer) {
	_ = m.f.Close()
	_ = w.opts.Driver.Remove(MHFName(w.base))
}

// writeMHF writes the main file, makes its directory entry durable and
// commits it.
func (w *Writer) writeMHF(chunks []chunkRec) error {
	m, err := w.prepareMHF(chunks)
	if err == nil {
		err = w.syncDir()
	}
	if err != nil {
		if m != nil {
			m.abandon(w)
		}
		return err
	}
	return m.commit(w, len(chunks))
}

func (w *Writer) buildMHF(root *h5.Group, chunks []chunkRec) error {
	if err := w.rootAttrs(root, 0); err != nil {
		return err
	}
	rows := []FileInfo{{ID: 0, Name: baseName(MHFName(w.base)), Host: w.hostOf(0)}}
	for id := int32(1); id <= w.nfiles; id++ {
		rows = append(rows, FileInfo{ID: id, Name: baseName(AHFName(w.base, id)), Host: w.hostOf(id)})
	}
	if err := w.fileInfoTable(root, rows); err != nil {
		return err
	}
	// Deterministic order: chunks by (file id, name).
	sort.Slice(chunks, func(i, j int) bool {
		if chunks[i].FileID != chunks[j].FileID {
			return chunks[i].FileID < chunks[j].FileID
		}
		return chunks[i].Name < chunks[j].Name
	})
	tables, err := root.CreateGroup(ChunkTablesDir)
	if err != nil {
		return err
	}
	links, err := root.CreateGroup(ChunkLinksDir)
	if err != nil {
		return err
	}
	for _, name := range w.order {
		s := w.sds[name]
		var cs []Chunk
		placed := newChunkSet(len(s.Dims))
		var maps []h5.Mapping
		lg, err := links.CreateGroup(name)
		if err != nil {
			return err
		}
		for _, r := range chunks {
			if r.SDS != name {
				continue
			}
			c := Chunk{FileID: r.FileID, Name: r.Name, Origin: r.Origin, Dims: r.Dims}
			if err := s.checkChunk(c); err != nil {
				return err
			}
			if j, ok := placed.first(c.Origin, c.Dims); ok {
				return fmt.Errorf("%w: chunk %q overlaps chunk %q of SDS %q", ErrInvalid, c.Name, cs[j].Name, name)
			}
			placed.add(c.Origin, c.Dims, len(cs))
			cs = append(cs, c)
			file := baseName(AHFName(w.base, r.FileID))
			maps = append(maps, h5.Mapping{File: file, Dataset: "/" + r.Name, Start: r.Origin, Count: r.Dims})
			if err := lg.CreateExternalLink(r.Name, file, "/"+r.Name); err != nil {
				return err
			}
		}
		v, err := root.CreateVirtual(name, s.Type, s.Dims, s.Fill, maps)
		if err != nil {
			return fmt.Errorf("SDS %q: %w", name, err)
		}
		dims := make([]int64, len(s.Dims))
		for i, d := range s.Dims {
			dims[i] = int64(d)
		}
		attrs := append([]h5.Attribute{
			h5.StringAttr(attrDatatype, s.Type.Name()),
			h5.MustAttr(attrRank, int32(len(s.Dims))),
			h5.MustAttr(attrDims, dims),
		}, s.Attrs...)
		for _, a := range attrs {
			if err := v.SetAttr(a); err != nil {
				return fmt.Errorf("SDS %q: %w", name, err)
			}
		}
		data := encodeChunkTable(cs)
		t, err := tables.CreateDataset(name, chunkTableType, []uint64{uint64(len(cs))}, data)
		if err != nil {
			return err
		}
		if err := tableAttrs(t, ChunkTableClass, data); err != nil {
			return err
		}
	}
	return nil
}

// Close finishes the set: every AHF (data, headers, superblock last,
// fsync), then the MHF, which is written only after every AHF is durable.
// Under CreateParallel it is collective: the ranks gather their chunk
// lists to rank 0 (only rank 0 receives them), which writes the MHF while
// the ranks finish their AHFs, vote with an all-reduce, and vote again
// after rank 0's commit, so every rank returns the same verdict (ErrVote
// when another rank failed).
func (w *Writer) Close() error {
	if w.closed {
		return ErrClosed
	}
	w.closed = true
	if w.c == nil {
		if err := w.closeLocal(true); err != nil {
			return err
		}
		return w.writeMHF(w.chunks)
	}
	return w.closeParallel()
}

func (w *Writer) closeParallel() error {
	c := w.c
	// Gather the chunk lists and host names to rank 0 first: it writes
	// the MHF body (not its superblock) while every rank finishes its
	// AHF. No other rank receives the lists.
	mine := encodeRecs(w.hosts[int32(c.Rank()+1)], w.declarations(), w.chunks)
	all, gerr := comm.GathervBytes(c, 0, mine)
	nrecs := 0
	var mhf *mhfFile
	var mhfErr error
	done := make(chan struct{})
	if c.Rank() == 0 && gerr == nil {
		var recs []chunkRec
		for r, b := range all {
			host, decl, rs, err := decodeRecs(b)
			if err != nil {
				mhfErr = err
				break
			}
			if decl != w.declarations() {
				mhfErr = fmt.Errorf("%w: rank %d declared other SDSs than rank 0", ErrInvalid, r)
				break
			}
			w.hosts[int32(r+1)] = host
			recs = append(recs, rs...)
		}
		nrecs = len(recs)
		go func() {
			defer close(done)
			if mhfErr == nil {
				mhf, mhfErr = w.prepareMHF(recs)
			}
			// Every AHF was created before the gather and the MHF just
			// now: one directory sync makes all the entries durable.
			if mhfErr == nil {
				mhfErr = w.syncDir()
			}
		}()
	} else {
		close(done)
	}
	local := errors.Join(gerr, w.closeLocal(false))
	<-done
	if local != nil {
		w.opts.Logger.Error("dhdf: AHF write failed", zap.Int("rank", c.Rank()), zap.Error(local))
	}
	ok := int64(1)
	if local != nil || mhfErr != nil {
		ok = 0
	}
	vote, err := c.AllreduceInt64(ok, comm.Min)
	if err == nil && vote == 1 && c.Rank() == 0 {
		// Every AHF is synced and every directory entry is durable: the
		// MHF gets its superblock.
		mhfErr = mhf.commit(w, nrecs)
		mhf = nil
	}
	if mhf != nil {
		mhf.abandon(w)
	}
	if err != nil {
		return errors.Join(local, mhfErr, fmt.Errorf("dhdf: vote: %w", err))
	}
	if vote == 0 {
		return errors.Join(ErrVote, local, mhfErr)
	}
	ok = 1
	if mhfErr != nil {
		ok = 0
	}
	vote, err = c.AllreduceInt64(ok, comm.Min)
	if err != nil {
		return errors.Join(mhfErr, fmt.Errorf("dhdf: final vote: %w", err))
	}
	if vote == 0 {
		return errors.Join(ErrVote, mhfErr)
	}
	return nil
}

// encodeRecs serialises a rank's host name and chunk records for the gather.
func encodeRecs(host, decl string, rs []chunkRec) []byte {
	putStr := func(b []byte, s string) []byte {
		b = binary.AppendUvarint(b, uint64(len(s)))
		return append(b, s...)
	}
	b := putStr(nil, host)
	b = putStr(b, decl)
	b = binary.AppendUvarint(b, uint64(len(rs)))
	for _, r := range rs {
		b = putStr(b, r.SDS)
		b = putStr(b, r.Name)
		b = binary.AppendUvarint(b, uint64(r.FileID))
		b = binary.AppendUvarint(b, uint64(len(r.Origin)))
		for k := range r.Origin {
			b = binary.AppendUvarint(b, r.Origin[k])
			b = binary.AppendUvarint(b, r.Dims[k])
		}
	}
	return b
}

func decodeRecs(b []byte) (string, string, []chunkRec, error) {
	bad := fmt.Errorf("%w: malformed chunk list from a rank", ErrInconsistent)
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	str := func() (string, bool) {
		n, ok := uv()
		if !ok || n > uint64(len(b)) {
			return "", false
		}
		s := string(b[:n])
		b = b[n:]
		return s, true
	}
	host, ok := str()
	decl, ok1 := str()
	n, ok2 := uv()
	if !ok || !ok1 || !ok2 || n > uint64(len(b)) {
		return "", "", nil, bad
	}
	rs := make([]chunkRec, 0, n)
	for i := uint64(0); i < n; i++ {
		var r chunkRec
		var ok3, ok4 bool
		r.SDS, ok = str()
		r.Name, ok2 = str()
		id, ok3 := uv()
		rank, ok4 := uv()
		if !ok || !ok2 || !ok3 || !ok4 || rank > maxRank {
			return "", "", nil, bad
		}
		r.FileID = int32(id)
		for k := uint64(0); k < rank; k++ {
			o, ok := uv()
			d, ok2 := uv()
			if !ok || !ok2 {
				return "", "", nil, bad
			}
			r.Origin = append(r.Origin, o)
			r.Dims = append(r.Dims, d)
		}
		rs = append(rs, r)
	}
	return host, decl, rs, nil
}

// declarations summarises the SDS declarations (names, types, dims, in
// order) so rank 0 can check that every rank declared the same.
func (w *Writer) declarations() string {
	var b strings.Builder
	for _, n := range w.order {
		s := w.sds[n]
		fmt.Fprintf(&b, "%s %s %v;", n, s.Type.Name(), s.Dims)
	}
	return b.String()
}
