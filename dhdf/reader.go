package dhdf

import (
	"bytes"
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

// tableReadSize is about how many bytes of a table are read at a time.
const tableReadSize = 1 << 20

// readTable checks that name in member m (file p) is a 1-D contiguous
// dataset of type t, with want rows unless want is negative, and reads it
// in pieces of about tableReadSize bytes, calling row with each row's
// bytes in order, so a table is never held whole in memory. When the
// table has a checksum_crc32c attribute (every writer since the attribute
// was added puts one) its data must match it; files without it are read
// without this check.
func (s *Set) readTable(m *member, p, name string, t h5.Datatype, want int, row func(i int, b []byte) error) error {
	o, err := m.h.Lookup(name)
	if err != nil {
		return s.corrupt(p, "%w: no %s table", ErrNotSet, name)
	}
	if o.Kind != h5.KindDataset || o.IsVirtual() || !o.Type.Equal(t) || len(o.Dims) != 1 {
		return s.corrupt(p, "%w: %s is not a table of %s", ErrNotSet, name, t.Name())
	}
	rows := o.Dims[0]
	if want >= 0 && rows != uint64(want) {
		return s.corrupt(p, "%w: %s has %d rows, want %d", ErrInconsistent, name, rows, want)
	}
	sz := uint64(t.Size)
	per := max(tableReadSize/sz, 1)
	buf := make([]byte, min(rows, per)*sz)
	crc := uint32(0)
	for r := uint64(0); r < rows; {
		k := min(rows-r, per)
		b := buf[:k*sz]
		if err := m.h.ReadDataAt(o, b, r*sz); err != nil {
			return err
		}
		crc = crc32.Update(crc, castagnoli, b)
		for j := uint64(0); j < k; j++ {
			if err := row(int(r+j), b[j*sz:(j+1)*sz]); err != nil {
				return err
			}
		}
		r += k
	}
	if a, ok := o.Attr(attrCRC); ok {
		if a.Type.Class != h5.ClassFixed || a.Type.Size != 4 || a.Dims != nil {
			return s.corrupt(p, "%w: %s: %s is not a uint32", ErrInconsistent, name, attrCRC)
		}
		if want := uint32(a.Int64s()[0]); crc != want {
			return &CorruptionError{Path: p, Offset: int64(o.DataAddr), Err: fmt.Errorf("%w: table %s: crc32c %08x, stored %08x", ErrChecksum, name, crc, want)}
		}
	}
	return nil
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
	dir := path.Dir(s.path)
	err = s.readTable(mhf, s.path, "/"+FileInfoName, fileInfoType, -1, func(i int, row []byte) error {
		fi := decodeFileInfoRow(row)
		if fi.ID != int32(i) || !validObjName(fi.Name) || !validHost(fi.Host) || !bytes.Equal(encodeFileInfo([]FileInfo{fi}), row) {
			return s.corrupt(s.path, "%w: File_Info row %d (id %d, %q, host %q) is not a valid row %d", ErrInconsistent, i, fi.ID, fi.Name, fi.Host, i)
		}
		s.files = append(s.files, fi)
		if i == 0 {
			return nil
		}
		return s.openAHF(dir, fi)
	})
	if err != nil {
		return err
	}
	if len(s.files) == 0 {
		return s.corrupt(s.path, "%w: File_Info does not start with the main file", ErrInconsistent)
	}
	mhf.info = s.files[0]
	for _, fi := range s.files[1:] {
		// Each AHF's File_Info holds the MHF's row and its own, as the
		// MHF's File_Info does (under the parallel writer the MHF row's
		// host is the one of the rank that wrote the AHF).
		m := s.mem[fi.ID]
		p := m.h.Path()
		err := s.readTable(m, p, "/"+FileInfoName, fileInfoType, 2, func(i int, row []byte) error {
			r := decodeFileInfoRow(row)
			want := fi
			if i == 0 {
				want = FileInfo{ID: 0, Name: s.files[0].Name, Host: r.Host}
			}
			if r != want || !validHost(r.Host) || !bytes.Equal(encodeFileInfo([]FileInfo{r}), row) {
				return s.corrupt(p, "%w: File_Info row %d (id %d, %q, host %q) differs from the main file's", ErrInconsistent, i, r.ID, r.Name, r.Host)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return s.readSDSs(mhf)
}

// openAHF opens the AHF of File_Info row fi and checks its identity.
func (s *Set) openAHF(dir string, fi FileInfo) error {
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
	if id != s.setID || fid != int64(fi.ID) {
		return s.corrupt(p, "%w: set %q file %d, want set %q file %d", ErrForeignFile, id, fid, s.setID, fi.ID)
	}
	return nil
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
		tname := "/" + ChunkTablesDir + "/" + l.Name
		err := s.readTable(mhf, s.path, tname, chunkTableType, len(o.Virtual), func(i int, row []byte) error {
			c := decodeChunkRow(row, len(o.Dims))
			if !bytes.Equal(encodeChunkTable([]Chunk{c}), row) {
				return s.corrupt(s.path, "%w: SDS %q: chunk table row %d (%q) has bytes past its name or rank", ErrInconsistent, l.Name, i, c.Name)
			}
			info.Chunks = append(info.Chunks, c)
			return nil
		})
		if err != nil {
			return err
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
			n := nbytes(info.Type, c.Dims)
			if n > uint64(s.opts.MaxRead) {
				return nil, fmt.Errorf("%w: chunk %q of SDS %q is %d bytes, limit %d", ErrTooLarge, chunk, sds, n, s.opts.MaxRead)
			}
			b := make([]byte, n)
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
	want, err := s.chunkCRC(m, o, c)
	if err != nil {
		return err
	}
	if err := m.h.ReadDataInto(o, b); err != nil {
		return err
	}
	if got := crc32.Checksum(b, castagnoli); got != want {
		return &CorruptionError{Path: m.h.Path(), Offset: int64(o.DataAddr), Err: fmt.Errorf("%w: chunk %q: crc32c %08x, stored %08x", ErrChecksum, c.Name, got, want)}
	}
	return nil
}

// chunkCRC returns the checksum_crc32c attribute of chunk c's dataset o.
func (s *Set) chunkCRC(m *member, o *h5.Object, c Chunk) (uint32, error) {
	a, ok := o.Attr(attrCRC)
	if !ok || a.Type.Class != h5.ClassFixed || a.Type.Size != 4 || a.Dims != nil {
		return 0, s.corrupt(m.h.Path(), "%w: chunk %q has no %s attribute", ErrInconsistent, c.Name, attrCRC)
	}
	return uint32(a.Int64s()[0]), nil
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
