package h5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Limits of the reader, so hostile input cannot make it allocate or
// recurse without bound.
const (
	maxObjects = 1 << 16
	maxDepth   = 64
)

// Kind says whether an object is a group or a dataset.
type Kind uint8

// Object kinds.
const (
	KindGroup Kind = iota + 1
	KindDataset
)

// Object is one decoded object header.
type Object struct {
	Addr  uint64
	Kind  Kind
	Links []Link      // groups: members sorted by name
	Attrs []Attribute // sorted by name
	// Datasets:
	Type     Datatype
	Dims     []uint64 // nil for a scalar
	DataAddr uint64   // contiguous raw data, undef when empty
	DataSize uint64
	Virtual  []Mapping // virtual datasets: the mappings, in stored order
	Fill     []byte    // virtual datasets: the fill value
}

// IsVirtual reports whether o is a virtual dataset.
func (o *Object) IsVirtual() bool { return o.Kind == KindDataset && o.Virtual != nil }

// Attr returns the named attribute.
func (o *Object) Attr(name string) (Attribute, bool) {
	for _, a := range o.Attrs {
		if a.Name == name {
			return a, true
		}
	}
	return Attribute{}, false
}

// Link is a group member: a hard link to an object in this file or an
// external link to a path in another file.
type Link struct {
	Name     string
	External bool
	File     string // external links
	Path     string // external links
	Object   *Object
}

// File is an opened HDF5 file of the ftigo profile. All metadata is decoded
// and checked by Open; raw data is read on demand. Safe for concurrent reads.
type File struct {
	r     io.ReaderAt
	path  string
	eof   uint64
	Root  *Object
	objs  map[uint64]*Object
	heaps map[uint64]map[uint32][]byte
	meta  uint64 // bytes of metadata structures read so far (readMeta)
}

// MaxMetadataBlock is the largest object header or global heap collection
// the reader accepts and the writer produces (256 MiB: a group of about
// three million links, a global heap of the mappings of some million
// chunks).
const MaxMetadataBlock = 256 << 20

// Open decodes the file held by r (size bytes; path is used in errors).
// Anything outside ftigo's profile is rejected with ErrUnsupported; bad
// bytes give a *CorruptionError.
func Open(r io.ReaderAt, size int64, path string) (*File, error) {
	f := &File{r: r, path: path, objs: map[uint64]*Object{}, heaps: map[uint64]map[uint32][]byte{}}
	if size < 0 {
		size = 0
	}
	f.eof = uint64(size)
	sb := make([]byte, superblockSize)
	if size < int64(len(signature)) {
		return nil, f.corrupt(0, "superblock", ErrNotHDF5)
	}
	n, err := r.ReadAt(sb[:min(int64(superblockSize), size)], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("h5: read %s: %w", path, err)
	}
	if string(sb[:len(signature)]) != signature {
		return nil, f.corrupt(0, "superblock", ErrNotHDF5)
	}
	if sb[8] != 2 {
		return nil, f.corrupt(0, "superblock", fmt.Errorf("%w: superblock version %d", ErrUnsupported, sb[8]))
	}
	if n < superblockSize {
		return nil, f.corrupt(0, "superblock", ErrTruncated)
	}
	if got, want := Lookup3(sb[:44], 0), binary.LittleEndian.Uint32(sb[44:]); got != want {
		return nil, f.corrupt(0, "superblock", ErrChecksum)
	}
	if sb[9] != 8 || sb[10] != 8 || sb[11] != 0 || binary.LittleEndian.Uint64(sb[12:]) != 0 || binary.LittleEndian.Uint64(sb[20:]) != undef {
		return nil, f.corrupt(0, "superblock", fmt.Errorf("%w: superblock sizes, flags, base or extension", ErrUnsupported))
	}
	eof := binary.LittleEndian.Uint64(sb[28:])
	if eof > uint64(size) {
		return nil, f.corrupt(0, "superblock", fmt.Errorf("%w: end of file %d, file has %d bytes", ErrTruncated, eof, size))
	}
	if eof < superblockSize {
		return nil, f.corrupt(0, "superblock", fmt.Errorf("%w: end of file %d", ErrCorrupt, eof))
	}
	f.eof = eof
	root, err := f.object(binary.LittleEndian.Uint64(sb[36:]), 0)
	if err != nil {
		return nil, err
	}
	if root.Kind != KindGroup {
		return nil, f.corrupt(root.Addr, "root group", fmt.Errorf("%w: root is not a group", ErrCorrupt))
	}
	f.Root = root
	return f, nil
}

// Path is the name the file was opened with.
func (f *File) Path() string { return f.path }

func (f *File) corrupt(off uint64, what string, err error) error {
	return &CorruptionError{Path: f.path, Offset: int64(off), What: what, Err: err}
}

// read returns n bytes at off, which must lie inside the superblock's EOF.
func (f *File) read(off, n uint64, what string) ([]byte, error) {
	if off > f.eof || n > f.eof-off {
		return nil, f.corrupt(off, what, fmt.Errorf("%w: %d bytes at %d beyond end of file %d", ErrCorrupt, n, off, f.eof))
	}
	p := make([]byte, n)
	if err := f.readInto(p, off, what); err != nil {
		return nil, err
	}
	return p, nil
}

// readMeta is read for one whole metadata structure (an object header, a
// global heap collection): besides lying inside the file, it must be at
// most MaxMetadataBlock bytes, and all structures read from the file
// together at most the file's size (in a file of the profile they do not
// overlap), so a damaged or hostile size field is refused before anything
// is allocated for it.
func (f *File) readMeta(off, n uint64, what string) ([]byte, error) {
	if n > MaxMetadataBlock {
		return nil, f.corrupt(off, what, fmt.Errorf("%w: %d bytes, more than the %d bytes a metadata block may have", ErrCorrupt, n, MaxMetadataBlock))
	}
	if n > f.eof-min(f.eof, f.meta) {
		return nil, f.corrupt(off, what, fmt.Errorf("%w: %d more bytes of metadata after %d, more than the file's %d bytes", ErrCorrupt, n, f.meta, f.eof))
	}
	p, err := f.read(off, n, what)
	if err == nil {
		f.meta += n
	}
	return p, err
}

// readInto fills p from off; a read cut short by the end of the file is a
// CorruptionError wrapping ErrTruncated.
func (f *File) readInto(p []byte, off uint64, what string) error {
	if k, err := f.r.ReadAt(p, int64(off)); k < len(p) {
		if err == nil || errors.Is(err, io.EOF) {
			return f.corrupt(off, what, ErrTruncated)
		}
		return fmt.Errorf("h5: read %s at %d: %w", f.path, off, err)
	}
	return nil
}

func (f *File) object(addr uint64, depth int) (*Object, error) {
	if o, ok := f.objs[addr]; ok {
		return o, nil
	}
	if depth > maxDepth || len(f.objs) >= maxObjects {
		return nil, f.corrupt(addr, "object header", fmt.Errorf("%w: too many or too deeply nested objects", ErrCorrupt))
	}
	pre, err := f.read(addr, 7, "object header")
	if err != nil {
		return nil, err
	}
	if string(pre[:4]) != "OHDR" || pre[4] != 2 {
		return nil, f.corrupt(addr, "object header", fmt.Errorf("%w: no version-2 object header", ErrUnsupported))
	}
	flags := pre[5]
	if flags&^3 != 0 {
		return nil, f.corrupt(addr, "object header", fmt.Errorf("%w: object header flags %#x", ErrUnsupported, flags))
	}
	w := uint64(1) << (flags & 3)
	hdr, err := f.read(addr, 6+w, "object header")
	if err != nil {
		return nil, err
	}
	var size uint64
	for i := uint64(0); i < w; i++ {
		size |= uint64(hdr[6+i]) << (8 * i)
	}
	if size > f.eof {
		return nil, f.corrupt(addr, "object header", fmt.Errorf("%w: chunk size %d", ErrCorrupt, size))
	}
	all, err := f.readMeta(addr, 6+w+size+4, "object header")
	if err != nil {
		return nil, err
	}
	body := all[:len(all)-4]
	if Lookup3(body, 0) != binary.LittleEndian.Uint32(all[len(all)-4:]) {
		return nil, f.corrupt(addr, "object header", ErrChecksum)
	}
	o := &Object{Addr: addr, DataAddr: undef}
	f.objs[addr] = o
	if err := f.messages(o, body[6+w:], depth); err != nil {
		delete(f.objs, addr)
		return nil, err
	}
	return o, nil
}

func (f *File) messages(o *Object, p []byte, depth int) error {
	addr := o.Addr
	h, err := f.decodeMessages(o, p)
	if err != nil {
		return err
	}
	switch {
	case h.layout && h.space && h.typ && !h.linkInfo && len(o.Links) == 0:
		o.Kind = KindDataset
	case h.linkInfo && !h.layout && !h.space && !h.typ:
		o.Kind = KindGroup
	default:
		return f.badHeader(addr, "neither a group nor a dataset")
	}
	sort.Slice(o.Attrs, func(i, j int) bool { return o.Attrs[i].Name < o.Attrs[j].Name })
	for i := 1; i < len(o.Attrs); i++ {
		if o.Attrs[i].Name == o.Attrs[i-1].Name {
			return f.badHeader(addr, "duplicate attribute %q", o.Attrs[i].Name)
		}
	}
	if o.Kind == KindDataset {
		return f.checkDataset(o, h)
	}
	return f.groupLinks(o, depth)
}

// badHeader is a corruption error in the object header at addr.
func (f *File) badHeader(addr uint64, format string, args ...any) error {
	return f.corrupt(addr, "object header", fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...))
}

// headerSeen is what an object header's messages held.
type headerSeen struct {
	space, typ, layout, linkInfo bool
	gheap                        uint64 // a virtual layout's global heap collection
	gindex                       uint32 // and its object index
}

// decodeMessages decodes the messages p of o's header into o.
func (f *File) decodeMessages(o *Object, p []byte) (headerSeen, error) {
	addr := o.Addr
	var h headerSeen
	for len(p) >= 4 {
		typ, n, _ := p[0], int(binary.LittleEndian.Uint16(p[1:])), p[3]
		if 4+n > len(p) {
			return h, f.badHeader(addr, "message of %d bytes overruns the header", n)
		}
		m := p[4 : 4+n]
		p = p[4+n:]
		switch typ {
		case msgNil:
		case msgDataspace:
			dims, err := decodeDataspace(m)
			if err != nil {
				return h, f.corrupt(addr, "dataspace message", err)
			}
			o.Dims, h.space = dims, true
		case msgDatatype:
			t, k, err := decodeDatatype(m, 0)
			if err != nil {
				return h, f.corrupt(addr, "datatype message", err)
			}
			if k > len(m) {
				return h, f.badHeader(addr, "datatype overruns its message")
			}
			o.Type, h.typ = t, true
		case msgFill:
			if len(m) < 2 || m[0] != 3 {
				return h, f.corrupt(addr, "fill value message", fmt.Errorf("%w: fill value version", ErrUnsupported))
			}
			if m[1]&0x20 != 0 {
				if len(m) < 6 || uint64(len(m)-6) < uint64(binary.LittleEndian.Uint32(m[2:])) {
					return h, f.badHeader(addr, "short fill value")
				}
				o.Fill = append([]byte(nil), m[6:6+binary.LittleEndian.Uint32(m[2:])]...)
			}
		case msgLayout:
			if len(m) < 2 {
				return h, f.badHeader(addr, "short layout")
			}
			switch {
			case m[0] == 3 && m[1] == layoutContiguous && len(m) >= 18:
				o.DataAddr = binary.LittleEndian.Uint64(m[2:])
				o.DataSize = binary.LittleEndian.Uint64(m[10:])
			case m[0] == 4 && m[1] == layoutVirtual && len(m) >= 14:
				h.gheap = binary.LittleEndian.Uint64(m[2:])
				h.gindex = binary.LittleEndian.Uint32(m[10:])
				o.Virtual = []Mapping{}
			default:
				return h, f.corrupt(addr, "layout message", fmt.Errorf("%w: layout version %d class %d", ErrUnsupported, m[0], m[1]))
			}
			h.layout = true
		case msgLinkInfo:
			if len(m) != 18 || m[0] != 0 || m[1] != 0 || binary.LittleEndian.Uint64(m[2:]) != undef {
				return h, f.corrupt(addr, "link info message", fmt.Errorf("%w: dense link storage or creation order", ErrUnsupported))
			}
			h.linkInfo = true
		case msgGroupInfo:
			if len(m) < 2 || m[0] != 0 {
				return h, f.corrupt(addr, "group info message", fmt.Errorf("%w: group info version", ErrUnsupported))
			}
		case msgLink:
			l, err := decodeLink(m)
			if err != nil {
				return h, f.corrupt(addr, "link message", err)
			}
			o.Links = append(o.Links, l)
		case msgAttribute:
			a, err := decodeAttribute(m)
			if err != nil {
				return h, f.corrupt(addr, "attribute message", err)
			}
			o.Attrs = append(o.Attrs, a)
		default:
			return h, f.corrupt(addr, "object header", fmt.Errorf("%w: message type %#x", ErrUnsupported, typ))
		}
	}
	return h, nil
}

// checkDataset checks a dataset's size against the file and reads its
// virtual mappings.
func (f *File) checkDataset(o *Object, h headerSeen) error {
	addr := o.Addr
	n, ok := NumElements(o.Dims)
	if !ok || n > (1<<62)/uint64(o.Type.Size) {
		return f.badHeader(addr, "dataset too large")
	}
	if o.Virtual != nil {
		ms, err := f.vdsMappings(h.gheap, h.gindex)
		if err != nil {
			return err
		}
		for i, mp := range ms {
			if len(mp.Start) != len(o.Dims) {
				return f.badHeader(addr, "virtual mapping %d has rank %d, dataset %d", i, len(mp.Start), len(o.Dims))
			}
			for k := range o.Dims {
				if mp.Count[k] == 0 || mp.Start[k]+mp.Count[k] > o.Dims[k] {
					return f.badHeader(addr, "virtual mapping %d outside the dataset", i)
				}
			}
		}
		o.Virtual = ms
		if o.Fill != nil && len(o.Fill) != int(o.Type.Size) {
			return f.badHeader(addr, "fill value size")
		}
		return nil
	}
	if n*uint64(o.Type.Size) != o.DataSize {
		return f.badHeader(addr, "contiguous size %d for %d elements", o.DataSize, n)
	}
	if o.DataSize > 0 && (o.DataAddr > f.eof || o.DataSize > f.eof-o.DataAddr) {
		return f.badHeader(addr, "raw data beyond end of file")
	}
	return nil
}

// groupLinks sorts a group's links, refuses duplicates and reads the
// objects they point to.
func (f *File) groupLinks(o *Object, depth int) error {
	addr := o.Addr
	sort.Slice(o.Links, func(i, j int) bool { return o.Links[i].Name < o.Links[j].Name })
	for i := range o.Links {
		if i > 0 && o.Links[i].Name == o.Links[i-1].Name {
			return f.badHeader(addr, "duplicate link %q", o.Links[i].Name)
		}
		l := &o.Links[i]
		if !l.External {
			child, err := f.object(l.Object.Addr, depth+1)
			if err != nil {
				return err
			}
			l.Object = child
		}
	}
	return nil
}

func decodeDataspace(m []byte) ([]uint64, error) {
	if len(m) < 4 || m[0] != 2 {
		return nil, fmt.Errorf("%w: dataspace version", ErrUnsupported)
	}
	rank, flags, typ := int(m[1]), m[2], m[3]
	if flags != 0 || typ > 1 || (typ == 0) != (rank == 0) || rank > 32 {
		return nil, fmt.Errorf("%w: dataspace flags %#x type %d rank %d", ErrUnsupported, flags, typ, rank)
	}
	if len(m) < 4+8*rank {
		return nil, fmt.Errorf("%w: short dataspace", ErrCorrupt)
	}
	if rank == 0 {
		return nil, nil
	}
	dims := make([]uint64, rank)
	for i := range dims {
		dims[i] = binary.LittleEndian.Uint64(m[4+8*i:])
	}
	return dims, nil
}

func cstring(p []byte) (string, []byte, bool) {
	i := 0
	for i < len(p) && p[i] != 0 {
		i++
	}
	if i == len(p) {
		return "", nil, false
	}
	return string(p[:i]), p[i+1:], true
}

func decodeLink(m []byte) (Link, error) {
	var l Link
	if len(m) < 2 || m[0] != 1 {
		return l, fmt.Errorf("%w: link version", ErrUnsupported)
	}
	flags := m[1]
	p := m[2:]
	typ := byte(linkTypeHard)
	need := func(n int) error {
		if len(p) < n {
			return fmt.Errorf("%w: short link message", ErrCorrupt)
		}
		return nil
	}
	if flags&0x08 != 0 {
		if err := need(1); err != nil {
			return l, err
		}
		typ, p = p[0], p[1:]
	}
	if flags&0x04 != 0 {
		if err := need(8); err != nil {
			return l, err
		}
		p = p[8:]
	}
	if flags&0x10 != 0 {
		if err := need(1); err != nil {
			return l, err
		}
		p = p[1:]
	}
	w := 1 << (flags & 3)
	if err := need(w); err != nil {
		return l, err
	}
	var n uint64
	for i := 0; i < w; i++ {
		n |= uint64(p[i]) << (8 * i)
	}
	p = p[w:]
	if n == 0 || n > uint64(len(p)) {
		return l, fmt.Errorf("%w: link name length %d", ErrCorrupt, n)
	}
	l.Name, p = string(p[:n]), p[n:]
	if !validName(l.Name) {
		return l, fmt.Errorf("%w: link name %q", ErrCorrupt, l.Name)
	}
	switch typ {
	case linkTypeHard:
		if err := need(8); err != nil {
			return l, err
		}
		l.Object = &Object{Addr: binary.LittleEndian.Uint64(p)}
	case linkTypeExternal:
		if err := need(2); err != nil {
			return l, err
		}
		k := int(binary.LittleEndian.Uint16(p))
		p = p[2:]
		if err := need(k); err != nil {
			return l, err
		}
		info := p[:k]
		if len(info) < 1 || info[0] != 0 {
			return l, fmt.Errorf("%w: external link flags", ErrUnsupported)
		}
		var ok1, ok2 bool
		l.File, info, ok1 = cstring(info[1:])
		if ok1 {
			l.Path, _, ok2 = cstring(info)
		}
		if !ok1 || !ok2 || l.File == "" || l.Path == "" {
			return l, fmt.Errorf("%w: external link %q", ErrCorrupt, l.Name)
		}
		l.External = true
	default:
		return l, fmt.Errorf("%w: link type %d", ErrUnsupported, typ)
	}
	return l, nil
}

func decodeAttribute(m []byte) (Attribute, error) {
	var a Attribute
	if len(m) < 9 || m[0] != 3 || m[1] != 0 || m[8] != 0 {
		return a, fmt.Errorf("%w: attribute version or flags", ErrUnsupported)
	}
	nn, dn, sn := int(binary.LittleEndian.Uint16(m[2:])), int(binary.LittleEndian.Uint16(m[4:])), int(binary.LittleEndian.Uint16(m[6:]))
	p := m[9:]
	if nn < 2 || nn+dn+sn > len(p) || p[nn-1] != 0 {
		return a, fmt.Errorf("%w: attribute field sizes", ErrCorrupt)
	}
	a.Name = string(p[:nn-1])
	if strings.IndexByte(a.Name, 0) >= 0 {
		return a, fmt.Errorf("%w: attribute name", ErrCorrupt)
	}
	t, k, err := decodeDatatype(p[nn:nn+dn], 0)
	if err != nil {
		return a, err
	}
	if k != dn {
		return a, fmt.Errorf("%w: attribute datatype size", ErrCorrupt)
	}
	dims, err := decodeDataspace(p[nn+dn : nn+dn+sn])
	if err != nil {
		return a, err
	}
	a.Type, a.Dims = t, dims
	n, ok := NumElements(dims)
	data := p[nn+dn+sn:]
	if !ok || n > uint64(len(data)) || n*uint64(t.Size) != uint64(len(data)) {
		return a, fmt.Errorf("%w: attribute %q data size %d", ErrCorrupt, a.Name, len(data))
	}
	a.Data = append([]byte(nil), data...)
	return a, nil
}

func (f *File) vdsMappings(addr uint64, index uint32) ([]Mapping, error) {
	objs, err := f.globalHeap(addr)
	if err != nil {
		return nil, err
	}
	blk, ok := objs[index]
	if !ok {
		return nil, f.corrupt(addr, "global heap", fmt.Errorf("%w: object %d not found", ErrCorrupt, index))
	}
	ms, err := decodeVDSBlock(blk)
	if err != nil {
		return nil, f.corrupt(addr, "virtual dataset mapping", err)
	}
	return ms, nil
}

// globalHeap reads and checks the global heap collection at addr (once per
// file) and returns its objects by index. Every byte of it must be as the
// profile lays it out, since libhdf5 reads the collection whole: the
// reserved bytes zero, objects 1..n in order with reference count 0, zero
// reserved bytes and zero padding to 8 bytes, then the free-space object
// (index 0) covering exactly the rest of the collection, which is zero.
func (f *File) globalHeap(addr uint64) (map[uint32][]byte, error) {
	if objs, ok := f.heaps[addr]; ok {
		return objs, nil
	}
	bad := func(format string, args ...any) error {
		return f.corrupt(addr, "global heap", fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...))
	}
	hdr, err := f.read(addr, gheapHdrSize, "global heap")
	if err != nil {
		return nil, err
	}
	if string(hdr[:4]) != "GCOL" || hdr[4] != 1 {
		return nil, bad("no global heap collection")
	}
	if hdr[5] != 0 || hdr[6] != 0 || hdr[7] != 0 {
		return nil, bad("reserved bytes of the collection header are not zero")
	}
	size := binary.LittleEndian.Uint64(hdr[8:])
	if size < gheapHdrSize+gheapObjHdr {
		return nil, bad("collection size %d", size)
	}
	heap, err := f.readMeta(addr, size, "global heap")
	if err != nil {
		return nil, err
	}
	objs := map[uint32][]byte{}
	p := uint64(gheapHdrSize)
	for next := uint32(1); ; next++ {
		if size-p < gheapObjHdr {
			return nil, bad("no free-space object at the end of the collection")
		}
		o := heap[p:]
		idx := uint32(binary.LittleEndian.Uint16(o))
		ref := binary.LittleEndian.Uint16(o[2:])
		res := binary.LittleEndian.Uint32(o[4:])
		n := binary.LittleEndian.Uint64(o[8:])
		if ref != 0 || res != 0 {
			return nil, bad("object %d: reference count %d, reserved %#x (not 0)", idx, ref, res)
		}
		if idx == 0 {
			if n != size-p {
				return nil, bad("free-space object of %d bytes, %d left in the collection", n, size-p)
			}
			if !allZero(o[gheapObjHdr:]) {
				return nil, bad("free space at %d is not zero", addr+p+gheapObjHdr)
			}
			break
		}
		if idx != next {
			return nil, bad("object %d where object %d belongs", idx, next)
		}
		if n > size-p-gheapObjHdr || uint64(align8(int(n))) > size-p-gheapObjHdr {
			return nil, bad("object %d of %d bytes overruns the collection", idx, n)
		}
		data := o[gheapObjHdr : gheapObjHdr+n]
		if !allZero(o[gheapObjHdr+n : gheapObjHdr+uint64(align8(int(n)))]) {
			return nil, bad("padding of object %d is not zero", idx)
		}
		objs[idx] = data
		p += gheapObjHdr + uint64(align8(int(n)))
	}
	f.heaps[addr] = objs
	return objs, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func decodeVDSBlock(b []byte) ([]Mapping, error) {
	if len(b) < 13 || b[0] != 0 {
		return nil, fmt.Errorf("%w: virtual mapping block version", ErrUnsupported)
	}
	if Lookup3(b[:len(b)-4], 0) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, ErrChecksum
	}
	count := binary.LittleEndian.Uint64(b[1:])
	p := b[9 : len(b)-4]
	if count > uint64(len(p))/4 {
		return nil, fmt.Errorf("%w: %d mappings", ErrCorrupt, count)
	}
	ms := make([]Mapping, 0, count)
	for i := uint64(0); i < count; i++ {
		var m Mapping
		var ok bool
		if m.File, p, ok = cstring(p); !ok {
			return nil, fmt.Errorf("%w: mapping source file", ErrCorrupt)
		}
		if m.Dataset, p, ok = cstring(p); !ok {
			return nil, fmt.Errorf("%w: mapping source dataset", ErrCorrupt)
		}
		if m.File, ok = unescapeVDSName(m.File); !ok {
			return nil, fmt.Errorf("%w: source file name %q uses %%b substitution", ErrUnsupported, m.File)
		}
		if m.Dataset, ok = unescapeVDSName(m.Dataset); !ok {
			return nil, fmt.Errorf("%w: source dataset name %q uses %%b substitution", ErrUnsupported, m.Dataset)
		}
		if len(p) < 16 || binary.LittleEndian.Uint32(p) != selAll || binary.LittleEndian.Uint32(p[4:]) != 1 || binary.LittleEndian.Uint64(p[8:]) != 0 {
			return nil, fmt.Errorf("%w: source selection is not ALL", ErrUnsupported)
		}
		p = p[16:]
		if len(p) < 24 || binary.LittleEndian.Uint32(p) != selHyperslab || binary.LittleEndian.Uint32(p[4:]) != 1 {
			return nil, fmt.Errorf("%w: virtual selection is not a version-1 hyperslab", ErrUnsupported)
		}
		rank := binary.LittleEndian.Uint32(p[16:])
		nblk := binary.LittleEndian.Uint32(p[20:])
		if rank == 0 || rank > 32 || nblk != 1 || binary.LittleEndian.Uint32(p[12:]) != 8+8*rank {
			return nil, fmt.Errorf("%w: hyperslab of rank %d with %d blocks", ErrUnsupported, rank, nblk)
		}
		p = p[24:]
		if uint64(len(p)) < 8*uint64(rank) {
			return nil, fmt.Errorf("%w: short hyperslab", ErrCorrupt)
		}
		m.Start = make([]uint64, rank)
		m.Count = make([]uint64, rank)
		for k := uint32(0); k < rank; k++ {
			s := binary.LittleEndian.Uint32(p[4*k:])
			e := binary.LittleEndian.Uint32(p[4*(rank+k):])
			if e < s {
				return nil, fmt.Errorf("%w: hyperslab end before start", ErrCorrupt)
			}
			m.Start[k], m.Count[k] = uint64(s), uint64(e)-uint64(s)+1
		}
		p = p[8*rank:]
		ms = append(ms, m)
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d stray bytes after the mappings", ErrCorrupt, len(p))
	}
	return ms, nil
}

// Lookup returns the object at an absolute or root-relative path,
// following hard links. An external link on the way is ErrNotFound.
func (f *File) Lookup(path string) (*Object, error) {
	o := f.Root
	for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
		if part == "" {
			continue
		}
		l, ok := o.Link(part)
		if !ok || l.External {
			return nil, fmt.Errorf("%w: %s in %s", ErrNotFound, path, f.path)
		}
		o = l.Object
	}
	return o, nil
}

// Link returns the named member of a group.
func (o *Object) Link(name string) (Link, bool) {
	i := sort.Search(len(o.Links), func(i int) bool { return o.Links[i].Name >= name })
	if i < len(o.Links) && o.Links[i].Name == name {
		return o.Links[i], true
	}
	return Link{}, false
}

// Walk calls fn for every link reachable from the root, depth first in
// name order, with the member's path ("/grp/x"). Objects reached twice
// through hard links are visited once.
func (f *File) Walk(fn func(path string, l Link) error) error {
	seen := map[*Object]bool{f.Root: true}
	var walk func(prefix string, o *Object) error
	walk = func(prefix string, o *Object) error {
		for _, l := range o.Links {
			p := prefix + "/" + l.Name
			if err := fn(p, l); err != nil {
				return err
			}
			if !l.External && l.Object.Kind == KindGroup && !seen[l.Object] {
				seen[l.Object] = true
				if err := walk(p, l.Object); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk("", f.Root)
}

// ReadData returns the raw bytes of a contiguous dataset.
func (f *File) ReadData(o *Object) ([]byte, error) {
	if o.Kind != KindDataset || o.Virtual != nil {
		return nil, fmt.Errorf("%w: %s: not a contiguous dataset", ErrInvalid, f.path)
	}
	if o.DataSize == 0 {
		return []byte{}, nil
	}
	return f.read(o.DataAddr, o.DataSize, "raw data")
}

// ReadDataAt reads len(p) bytes of a contiguous dataset's raw data from
// byte off of it, for reading a large dataset in pieces.
func (f *File) ReadDataAt(o *Object, p []byte, off uint64) error {
	if o.Kind != KindDataset || o.Virtual != nil || off > o.DataSize || uint64(len(p)) > o.DataSize-off {
		return fmt.Errorf("%w: %s: %d bytes at %d of a contiguous dataset of %d bytes", ErrInvalid, f.path, len(p), off, o.DataSize)
	}
	if len(p) == 0 {
		return nil
	}
	return f.readInto(p, o.DataAddr+off, "raw data")
}

// ReadDataInto reads a contiguous dataset's bytes into p, which must be
// exactly DataSize long.
func (f *File) ReadDataInto(o *Object, p []byte) error {
	if o.Kind != KindDataset || o.Virtual != nil || uint64(len(p)) != o.DataSize {
		return fmt.Errorf("%w: %s: not a contiguous dataset of %d bytes", ErrInvalid, f.path, len(p))
	}
	if len(p) == 0 {
		return nil
	}
	return f.readInto(p, o.DataAddr, "raw data")
}

// ObjectAttrs returns the attributes of the linked object (nil for external links).
func (l Link) ObjectAttrs() []Attribute {
	if l.External || l.Object == nil {
		return nil
	}
	return l.Object.Attrs
}

// unescapeVDSName turns "%%" back into '%'; any other '%' sequence (the
// "%b" block substitution) is outside the profile.
func unescapeVDSName(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		return "", false
	}
	return b.String(), true
}
