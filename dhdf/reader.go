package dhdf

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path"
	"slices"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/vfd"
)

// member is one opened file of a set.
type member struct {
	info FileInfo
	f    vfd.File
	h    *h5.File
}

// Set is an opened distributed HDF set. Its metadata is read and
// cross-checked by Open; data is read on demand. A Set is safe for
// concurrent reads; Close must not race with them.
type Set struct {
	opts   Options
	path   string
	setID  string
	files  []FileInfo
	mem    map[int32]*member
	sds    []SDSInfo
	closed bool
}

// Open opens the set whose MHF is mhf. It checks that every file listed
// in File_Info exists ([ErrMissingFile]) and carries the set's DHDF_SetId
// and its own DHDF_FileId ([ErrForeignFile]), that each SDS's chunk table,
// virtual dataset mappings and chunk datasets agree ([ErrInconsistent]),
// and the HDF5 metadata checksums of every file.
func Open(mhf string, opts Options) (*Set, error) {
	s := &Set{opts: opts.withDefaults(), path: mhf, mem: map[int32]*member{}}
	if err := s.open(); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

func (s *Set) corrupt(p string, format string, args ...any) error {
	return &CorruptionError{Path: p, Offset: -1, Err: fmt.Errorf(format, args...)}
}

func (s *Set) openFile(name string) (*member, error) {
	f, err := vfd.OpenRead(s.opts.Driver, name)
	if err != nil {
		return nil, err
	}
	size, err := f.Size()
	if err == nil {
		var h *h5.File
		h, err = h5.Open(f, size, name)
		if err == nil {
			return &member{f: f, h: h}, nil
		}
	}
	return nil, errors.Join(err, f.Close())
}

func stringAttr(o *h5.Object, name string) (string, bool) {
	a, ok := o.Attr(name)
	if !ok || !a.IsString() {
		return "", false
	}
	return a.String(), true
}

func intAttr(o *h5.Object, name string) (int64, bool) {
	a, ok := o.Attr(name)
	if !ok || a.Type.Class != h5.ClassFixed || a.Dims != nil {
		return 0, false
	}
	return a.Int64s()[0], true
}

// identity returns a file's set id and file id.
func (s *Set) identity(m *member, p string) (string, int64, error) {
	id, ok1 := stringAttr(m.h.Root, AttrSetID)
	fid, ok2 := intAttr(m.h.Root, AttrFileID)
	if !ok1 || !ok2 {
		return "", 0, s.corrupt(p, "%w: no %s/%s root attributes", ErrNotSet, AttrSetID, AttrFileID)
	}
	return id, fid, nil
}

func (s *Set) table(m *member, p, name string, t h5.Datatype) (*h5.Object, []byte, error) {
	o, err := m.h.Lookup(name)
	if err != nil {
		return nil, nil, s.corrupt(p, "%w: no %s table", ErrNotSet, name)
	}
	if o.Kind != h5.KindDataset || o.IsVirtual() || !o.Type.Equal(t) || len(o.Dims) != 1 {
		return nil, nil, s.corrupt(p, "%w: %s is not a table of %s", ErrNotSet, name, t.Name())
	}
	b, err := m.h.ReadData(o)
	if err != nil {
		return nil, nil, err
	}
	return o, b, nil
}

func (s *Set) open() error {
	mhf, err := s.openFile(s.path)
	if err != nil {
		return fmt.Errorf("dhdf: open %s: %w", s.path, err)
	}
	s.mem[0] = mhf
	setID, fid, err := s.identity(mhf, s.path)
	if err != nil {
		return err
	}
	if fid != 0 {
		return s.corrupt(s.path, "%w: %s is file %d, not the main file", ErrNotSet, s.path, fid)
	}
	s.setID = setID
	_, b, err := s.table(mhf, s.path, "/"+FileInfoName, fileInfoType)
	if err != nil {
		return err
	}
	s.files = decodeFileInfo(b)
	if len(s.files) == 0 || s.files[0].ID != 0 {
		return s.corrupt(s.path, "%w: File_Info does not start with the main file", ErrInconsistent)
	}
	mhf.info = s.files[0]
	dir := path.Dir(s.path)
	for i, fi := range s.files[1:] {
		if fi.ID != int32(i+1) || !validObjName(fi.Name) {
			return s.corrupt(s.path, "%w: File_Info row %d (id %d, %q)", ErrInconsistent, i+1, fi.ID, fi.Name)
		}
		p := path.Join(dir, fi.Name)
		m, err := s.openFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s (file id %d): %w", ErrMissingFile, p, fi.ID, err)
		}
		if err != nil {
			return fmt.Errorf("dhdf: open %s: %w", p, err)
		}
		m.info = fi
		s.mem[fi.ID] = m
		id, fid, err := s.identity(m, p)
		if err != nil {
			return err
		}
		if id != setID || fid != int64(fi.ID) {
			return s.corrupt(p, "%w: set %q file %d, want set %q file %d", ErrForeignFile, id, fid, setID, fi.ID)
		}
	}
	return s.readSDSs(mhf)
}

func (s *Set) readSDSs(mhf *member) error {
	for _, l := range mhf.h.Root.Links {
		if l.External || reserved(l.Name) || !l.Object.IsVirtual() {
			continue
		}
		o := l.Object
		info := SDSInfo{SDS: SDS{Name: l.Name, Type: o.Type, Dims: o.Dims, Fill: o.Fill}}
		for _, a := range o.Attrs {
			switch a.Name {
			case attrDatatype, attrRank, attrDims:
			default:
				info.Attrs = append(info.Attrs, a)
			}
		}
		if err := info.SDS.validate(); err != nil {
			return s.corrupt(s.path, "%w: SDS %q: %v", ErrInconsistent, l.Name, err)
		}
		_, b, err := s.table(mhf, s.path, "/"+ChunkTablesDir+"/"+l.Name, chunkTableType)
		if err != nil {
			return err
		}
		info.Chunks = decodeChunkTable(b, len(o.Dims))
		if len(info.Chunks) != len(o.Virtual) {
			return s.corrupt(s.path, "%w: SDS %q: %d chunks in the table, %d virtual mappings", ErrInconsistent, l.Name, len(info.Chunks), len(o.Virtual))
		}
		placed := newChunkSet(len(o.Dims))
		for i, c := range info.Chunks {
			m, ok := s.mem[c.FileID]
			mp := o.Virtual[i]
			if !ok || c.FileID == 0 || mp.File != m.info.Name || mp.Dataset != "/"+c.Name || !slices.Equal(mp.Start, c.Origin) || !slices.Equal(mp.Count, c.Dims) {
				return s.corrupt(s.path, "%w: SDS %q: chunk %d (%q in file %d) disagrees with its virtual mapping", ErrInconsistent, l.Name, i, c.Name, c.FileID)
			}
			if err := info.SDS.checkChunk(c); err != nil {
				return s.corrupt(s.path, "%w: %v", ErrInconsistent, err)
			}
			if j, ok := placed.first(c.Origin, c.Dims); ok {
				return s.corrupt(s.path, "%w: SDS %q: chunks %q and %q overlap", ErrInconsistent, l.Name, c.Name, info.Chunks[j].Name)
			}
			placed.add(c.Origin, c.Dims, i)
			co, err := m.h.Lookup("/" + c.Name)
			if err != nil || co.Kind != h5.KindDataset || co.IsVirtual() || !co.Type.Equal(o.Type) || !slices.Equal(co.Dims, c.Dims) {
				return s.corrupt(m.h.Path(), "%w: chunk %q of SDS %q missing or of another shape", ErrInconsistent, c.Name, l.Name)
			}
			if n, ok := stringAttr(co, attrSDSName); !ok || n != l.Name {
				return s.corrupt(m.h.Path(), "%w: chunk %q belongs to SDS %q, not %q", ErrInconsistent, c.Name, n, l.Name)
			}
		}
		s.sds = append(s.sds, info)
	}
	return nil
}

// SetID is the set's DHDF_SetId.
func (s *Set) SetID() string { return s.setID }

// Files returns File_Info: the MHF (id 0) and the AHFs.
func (s *Set) Files() []FileInfo { return append([]FileInfo(nil), s.files...) }

// SDSs returns every SDS in name order.
func (s *Set) SDSs() []SDSInfo { return append([]SDSInfo(nil), s.sds...) }

// SDS returns the named SDS.
func (s *Set) SDS(name string) (SDSInfo, bool) {
	for _, x := range s.sds {
		if x.Name == name {
			return x, true
		}
	}
	return SDSInfo{}, false
}

// ReadChunk returns one sub-array's bytes after checking its CRC32C.
func (s *Set) ReadChunk(sds, chunk string) ([]byte, error) {
	info, ok := s.SDS(sds)
	if !ok {
		return nil, fmt.Errorf("%w: SDS %q", ErrNotFound, sds)
	}
	for _, c := range info.Chunks {
		if c.Name == chunk {
			b := make([]byte, nbytes(info.Type, c.Dims))
			return b, s.readChunkInto(info, c, b)
		}
	}
	return nil, fmt.Errorf("%w: chunk %q of SDS %q", ErrNotFound, chunk, sds)
}

func (s *Set) readChunkInto(info SDSInfo, c Chunk, b []byte) error {
	if s.closed {
		return ErrClosed
	}
	m := s.mem[c.FileID]
	o, err := m.h.Lookup("/" + c.Name)
	if err != nil {
		return err
	}
	if err := m.h.ReadDataInto(o, b); err != nil {
		return err
	}
	a, ok := o.Attr(attrCRC)
	if !ok || a.Type.Class != h5.ClassFixed || a.Type.Size != 4 || a.Dims != nil {
		return s.corrupt(m.h.Path(), "%w: chunk %q has no %s attribute", ErrInconsistent, c.Name, attrCRC)
	}
	if got, want := crc32.Checksum(b, castagnoli), uint32(a.Int64s()[0]); got != want {
		return &CorruptionError{Path: m.h.Path(), Offset: int64(o.DataAddr), Err: fmt.Errorf("%w: chunk %q: crc32c %08x, stored %08x", ErrChecksum, c.Name, got, want)}
	}
	return nil
}

// ReadSDS returns the whole SDS stitched from its chunks, row-major;
// elements no chunk covers hold the fill value.
func (s *Set) ReadSDS(name string) ([]byte, error) {
	info, ok := s.SDS(name)
	if !ok {
		return nil, fmt.Errorf("%w: SDS %q", ErrNotFound, name)
	}
	total := nbytes(info.Type, info.Dims)
	if total > uint64(s.opts.MaxRead) {
		return nil, fmt.Errorf("%w: SDS %q is %d bytes, limit %d", ErrTooLarge, name, total, s.opts.MaxRead)
	}
	out := make([]byte, total)
	if info.Fill != nil && !allZero(info.Fill) {
		for i := 0; i < len(out); i += len(info.Fill) {
			copy(out[i:], info.Fill)
		}
	}
	var buf []byte
	for _, c := range info.Chunks {
		n := nbytes(info.Type, c.Dims)
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		b := buf[:n]
		if err := s.readChunkInto(info, c, b); err != nil {
			return nil, err
		}
		place(out, info.Dims, b, c.Origin, c.Dims, int(info.Type.Size))
		s.opts.Logger.Debug("dhdf chunk read", zap.String("sds", name), zap.String("chunk", c.Name))
	}
	return out, nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// place copies a row-major block of extent cdims into the row-major array
// of extent dims at origin; es is the element size.
func place(dst []byte, dims []uint64, src []byte, origin, cdims []uint64, es int) {
	rank := len(dims)
	row := int(cdims[rank-1]) * es
	idx := make([]uint64, rank-1) // odometer over all but the last dimension
	for off := 0; off < len(src); off += row {
		var lin uint64
		for k := 0; k < rank; k++ {
			var i uint64
			if k < rank-1 {
				i = idx[k]
			}
			lin = lin*dims[k] + origin[k] + i
		}
		copy(dst[int(lin)*es:], src[off:off+row])
		for k := rank - 2; k >= 0; k-- {
			idx[k]++
			if idx[k] < cdims[k] {
				break
			}
			idx[k] = 0
		}
	}
}

// Close closes every file of the set.
func (s *Set) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, m := range s.mem {
		errs = append(errs, m.f.Close())
	}
	return errors.Join(errs...)
}
