package h5

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ftigo/ftigo/vfd"
)

// Writer builds one HDF5 file of the ftigo profile in a [vfd.File]. Raw
// data is written as datasets are created; object headers, the global heap
// and finally the superblock are written by Close, so a file cut before
// Close returns has no superblock and every HDF5 tool refuses it.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	f        vfd.File
	eoa      int64
	root     *Group
	closed   bool
	flushed  bool
	oneSync  bool
	rootAddr uint64
	err      error
}

// Group is a group being written; create members with its methods.
type Group struct {
	w     *Writer
	links map[string]*link
	attrs map[string]Attribute
}

// Dataset is a dataset being written; attributes can be added until the
// writer is closed.
type Dataset struct {
	w       *Writer
	typ     Datatype
	dims    []uint64
	addr    uint64 // raw data address, undef when empty
	size    uint64
	virtual []Mapping
	fill    []byte
	attrs   map[string]Attribute
}

// Mapping maps a whole source dataset (selection ALL) onto the block of
// the virtual dataset at Start with extent Count.
type Mapping struct {
	File    string // source file name, relative to the virtual dataset's file
	Dataset string // source dataset path in that file
	Start   []uint64
	Count   []uint64
}

type link struct {
	group   *Group
	ds      *Dataset
	extFile string
	extPath string
}

// NewWriter starts a file in f, which should be empty (opened with
// truncation). Close finishes the file but does not close f.
func NewWriter(f vfd.File) *Writer {
	w := &Writer{f: f, eoa: superblockSize}
	w.root = w.newGroup()
	return w
}

func (w *Writer) newGroup() *Group {
	return &Group{w: w, links: map[string]*link{}, attrs: map[string]Attribute{}}
}

// Root returns the root group.
func (w *Writer) Root() *Group { return w.root }

func validName(name string) bool {
	return name != "" && name != "." && !strings.ContainsAny(name, "/\x00") && len(name) <= 0xffff
}

func (g *Group) add(name string, l *link) error {
	if g.w.closed || g.w.flushed {
		return ErrClosed
	}
	if !validName(name) {
		return fmt.Errorf("%w: link name %q", ErrInvalid, name)
	}
	if _, dup := g.links[name]; dup {
		return fmt.Errorf("%w: link %q exists", ErrInvalid, name)
	}
	g.links[name] = l
	return nil
}

// CreateGroup adds a sub-group.
func (g *Group) CreateGroup(name string) (*Group, error) {
	c := g.w.newGroup()
	if err := g.add(name, &link{group: c}); err != nil {
		return nil, err
	}
	return c, nil
}

// CreateExternalLink adds an external link to path in file.
func (g *Group) CreateExternalLink(name, file, path string) error {
	if file == "" || path == "" || strings.IndexByte(file+path, 0) >= 0 {
		return fmt.Errorf("%w: external link %q -> %q:%q", ErrInvalid, name, file, path)
	}
	return g.add(name, &link{extFile: file, extPath: path})
}

// SetAttr sets (or replaces) an attribute of the group.
func (g *Group) SetAttr(a Attribute) error { return setAttr(g.w, g.attrs, a) }

// SetAttr sets (or replaces) an attribute of the dataset.
func (d *Dataset) SetAttr(a Attribute) error { return setAttr(d.w, d.attrs, a) }

func setAttr(w *Writer, m map[string]Attribute, a Attribute) error {
	if w.closed || w.flushed {
		return ErrClosed
	}
	if err := a.validate(); err != nil {
		return err
	}
	if _, err := a.encode(); err != nil {
		return err
	}
	a.Dims = append([]uint64(nil), a.Dims...)
	if len(a.Dims) == 0 {
		a.Dims = nil
	}
	a.Data = append([]byte(nil), a.Data...)
	m[a.Name] = a
	return nil
}

func checkShape(t Datatype, dims []uint64) (uint64, error) {
	if err := t.validate(0); err != nil {
		return 0, err
	}
	if len(dims) > 32 {
		return 0, fmt.Errorf("%w: rank %d over 32", ErrInvalid, len(dims))
	}
	n, ok := NumElements(dims)
	if !ok || n > (1<<62)/uint64(t.Size) {
		return 0, fmt.Errorf("%w: dataset too large", ErrInvalid)
	}
	return n * uint64(t.Size), nil
}

// CreateDataset adds a contiguous dataset and writes its raw data now
// (row-major, little-endian); len(data) must equal the element count times
// t.Size. nil dims makes a scalar.
func (g *Group) CreateDataset(name string, t Datatype, dims []uint64, data []byte) (*Dataset, error) {
	if g.w.err != nil {
		return nil, g.w.err
	}
	size, err := checkShape(t, dims)
	if err != nil {
		return nil, fmt.Errorf("dataset %q: %w", name, err)
	}
	if uint64(len(data)) != size {
		return nil, fmt.Errorf("%w: dataset %q: %d data bytes, want %d", ErrInvalid, name, len(data), size)
	}
	d := &Dataset{w: g.w, typ: t, dims: append([]uint64(nil), dims...), addr: undef, size: size, attrs: map[string]Attribute{}}
	if err := g.add(name, &link{ds: d}); err != nil {
		return nil, err
	}
	if size > 0 {
		d.addr = uint64(g.w.eoa)
		g.w.eoa += int64(size)
		if _, err := vfd.WriteAtType(g.w.f, vfd.MemDraw, data, int64(d.addr)); err != nil {
			g.w.err = fmt.Errorf("h5: write raw data of %q: %w", name, err)
			return nil, g.w.err
		}
	}
	return d, nil
}

// CreateVirtual adds a virtual dataset of type t and shape dims whose
// blocks come from other datasets; fill (t.Size bytes, nil for zeros) is
// what unmapped elements read as. Every block must lie inside dims and be
// below 2^32 in every coordinate.
func (g *Group) CreateVirtual(name string, t Datatype, dims []uint64, fill []byte, maps []Mapping) (*Dataset, error) {
	if _, err := checkShape(t, dims); err != nil {
		return nil, fmt.Errorf("virtual dataset %q: %w", name, err)
	}
	if len(dims) == 0 {
		return nil, fmt.Errorf("%w: virtual dataset %q must have rank >= 1", ErrInvalid, name)
	}
	if fill == nil {
		fill = make([]byte, t.Size)
	}
	if len(fill) != int(t.Size) {
		return nil, fmt.Errorf("%w: virtual dataset %q: fill value of %d bytes", ErrInvalid, name, len(fill))
	}
	ms := make([]Mapping, len(maps))
	for i, m := range maps {
		if len(m.Start) != len(dims) || len(m.Count) != len(dims) || m.File == "" || m.Dataset == "" || strings.IndexByte(m.File+m.Dataset, 0) >= 0 {
			return nil, fmt.Errorf("%w: virtual dataset %q: mapping %d", ErrInvalid, name, i)
		}
		for k := range dims {
			if m.Count[k] == 0 || m.Start[k]+m.Count[k] > dims[k] || m.Start[k]+m.Count[k] > 1<<32 {
				return nil, fmt.Errorf("%w: virtual dataset %q: mapping %d outside %v", ErrInvalid, name, i, dims)
			}
		}
		ms[i] = Mapping{File: m.File, Dataset: m.Dataset, Start: append([]uint64(nil), m.Start...), Count: append([]uint64(nil), m.Count...)}
	}
	d := &Dataset{w: g.w, typ: t, dims: append([]uint64(nil), dims...), addr: undef, virtual: ms, fill: append([]byte(nil), fill...), attrs: map[string]Attribute{}}
	if err := g.add(name, &link{ds: d}); err != nil {
		return nil, err
	}
	return d, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// encodeVDSBlock returns the global heap block of a virtual dataset.
func encodeVDSBlock(ms []Mapping) []byte {
	b := []byte{0}
	b = le64(b, uint64(len(ms)))
	for _, m := range ms {
		// libhdf5 expands printf-like "%b" in source names; "%%" is a
		// literal '%' (family-driver patterns contain one).
		b = append(b, strings.ReplaceAll(m.File, "%", "%%")...)
		b = append(b, 0)
		b = append(b, strings.ReplaceAll(m.Dataset, "%", "%%")...)
		b = append(b, 0)
		b = encodeSelection(b, nil, nil)
		b = encodeSelection(b, m.Start, m.Count)
	}
	return le32(b, Lookup3(b, 0))
}

// Flush writes the global heap and every object header (children before
// parents, names sorted) and syncs, leaving only the superblock to write:
// the file is complete but still refused by every HDF5 tool. Nothing can
// be added afterwards. Close calls it when it has not been called.
func (w *Writer) Flush() error {
	if w.flushed {
		return w.err
	}
	if w.closed {
		return ErrClosed
	}
	w.flushed = true
	if w.err != nil {
		return w.err
	}
	w.err = w.flush()
	return w.err
}

// OneSync makes Flush skip its sync, so Close syncs once, after the
// superblock. The write order (superblock last) is kept, so a process
// killed mid-write still leaves a file every tool refuses, but a power cut
// may make the superblock durable before the rest. Use it only when
// something else commits the file (dhdf's MHF does, for its AHFs). Call
// it before Flush or Close.
func (w *Writer) OneSync() { w.oneSync = true }

// Close flushes, then writes the superblock at offset 0 and syncs again.
// It does not close the underlying file.
func (w *Writer) Close() error {
	if w.closed {
		return ErrClosed
	}
	if err := w.Flush(); err != nil {
		w.closed = true
		return err
	}
	w.closed = true
	if _, err := vfd.WriteAtType(w.f, vfd.MemSuper, encodeSuperblock(uint64(w.eoa), w.rootAddr), 0); err != nil {
		return fmt.Errorf("h5: write superblock: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("h5: sync superblock: %w", err)
	}
	return nil
}

func (w *Writer) flush() error {
	// Collect virtual datasets in deterministic order and put their blocks
	// into one global heap collection.
	var vds []*Dataset
	var walk func(g *Group)
	walk = func(g *Group) {
		for _, k := range sortedKeys(g.links) {
			l := g.links[k]
			switch {
			case l.group != nil:
				walk(l.group)
			case l.ds != nil && l.ds.virtual != nil:
				vds = append(vds, l.ds)
			}
		}
	}
	walk(w.root)
	var gheapAddr uint64
	if len(vds) > 0 {
		if len(vds) > 0xffff {
			return fmt.Errorf("%w: %d virtual datasets, over 65535", ErrInvalid, len(vds))
		}
		var objs []byte
		for i, d := range vds {
			blk := encodeVDSBlock(d.virtual)
			objs = le16(objs, uint16(i+1))
			objs = le16(objs, 0)
			objs = le32(objs, 0)
			objs = le64(objs, uint64(len(blk)))
			objs = append(objs, blk...)
			objs = append(objs, make([]byte, align8(len(blk))-len(blk))...)
		}
		size := gheapHdrSize + len(objs) + gheapObjHdr
		if size < gheapMinSize {
			size = gheapMinSize
		}
		if size > MaxMetadataBlock {
			return fmt.Errorf("%w: the virtual datasets' mappings take %d bytes, over the %d-byte global heap limit", ErrInvalid, size, MaxMetadataBlock)
		}
		heap := make([]byte, 0, size)
		heap = append(heap, "GCOL"...)
		heap = append(heap, 1, 0, 0, 0)
		heap = le64(heap, uint64(size))
		heap = append(heap, objs...)
		free := size - len(heap)
		heap = le16(heap, 0)
		heap = le16(heap, 0)
		heap = le32(heap, 0)
		heap = le64(heap, uint64(free))
		heap = append(heap, make([]byte, size-len(heap))...)
		gheapAddr = uint64(w.eoa)
		w.eoa += int64(size)
		if _, err := vfd.WriteAtType(w.f, vfd.MemGHeap, heap, int64(gheapAddr)); err != nil {
			return fmt.Errorf("h5: write global heap: %w", err)
		}
	}
	vdsIndex := map[*Dataset]int{}
	for i, d := range vds {
		vdsIndex[d] = i + 1
	}
	// Object headers, bottom-up, into one buffer written at once.
	start := w.eoa
	var meta []byte
	var put func(g *Group) (uint64, error)
	put = func(g *Group) (uint64, error) {
		addrs := map[string]uint64{}
		for _, k := range sortedKeys(g.links) {
			l := g.links[k]
			var hdr []byte
			var err error
			switch {
			case l.group != nil:
				a, err := put(l.group)
				if err != nil {
					return 0, err
				}
				addrs[k] = a
				continue
			case l.ds != nil:
				hdr, err = l.ds.header(gheapAddr, vdsIndex[l.ds])
			default:
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("object %q: %w", k, err)
			}
			addrs[k] = uint64(start) + uint64(len(meta))
			meta = append(meta, hdr...)
		}
		hdr, err := g.header(addrs)
		if err != nil {
			return 0, err
		}
		a := uint64(start) + uint64(len(meta))
		meta = append(meta, hdr...)
		return a, nil
	}
	rootAddr, err := put(w.root)
	if err != nil {
		return err
	}
	w.eoa += int64(len(meta))
	if _, err := vfd.WriteAtType(w.f, vfd.MemOHdr, meta, start); err != nil {
		return fmt.Errorf("h5: write object headers: %w", err)
	}
	if sz, err := w.f.Size(); err != nil {
		return fmt.Errorf("h5: size: %w", err)
	} else if sz != w.eoa {
		if err := w.f.Truncate(w.eoa); err != nil {
			return fmt.Errorf("h5: truncate: %w", err)
		}
	}
	if !w.oneSync {
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("h5: sync before superblock: %w", err)
		}
	}
	w.rootAddr = rootAddr
	return nil
}

// Size is the number of bytes allocated so far (the final file size once closed).
func (w *Writer) Size() int64 { return w.eoa }

func attrMessages(m map[string]Attribute) ([]message, error) {
	var out []message
	for _, k := range sortedKeys(m) {
		b, err := m[k].encode()
		if err != nil {
			return nil, err
		}
		out = append(out, message{typ: msgAttribute, body: b})
	}
	return out, nil
}

func (g *Group) header(addrs map[string]uint64) ([]byte, error) {
	li := []byte{0, 0}
	li = le64(li, undef)
	li = le64(li, undef)
	msgs := []message{{typ: msgLinkInfo, body: li}, {typ: msgGroupInfo, flags: msgFlagConstant, body: []byte{0, 0}}}
	for _, k := range sortedKeys(g.links) {
		l := g.links[k]
		var flags byte
		if len(k) > 255 {
			flags = 1
		}
		b := []byte{1, flags}
		if l.extFile != "" {
			b[1] |= 0x08
			b = append(b, linkTypeExternal)
		}
		if flags == 1 {
			b = le16(b, uint16(len(k)))
		} else {
			b = append(b, byte(len(k)))
		}
		b = append(b, k...)
		if l.extFile != "" {
			info := []byte{0}
			info = append(info, l.extFile...)
			info = append(info, 0)
			info = append(info, l.extPath...)
			info = append(info, 0)
			if len(info) > 0xffff {
				return nil, fmt.Errorf("%w: external link %q too long", ErrInvalid, k)
			}
			b = le16(b, uint16(len(info)))
			b = append(b, info...)
		} else {
			b = le64(b, addrs[k])
		}
		if len(b) > maxMessageSize {
			return nil, fmt.Errorf("%w: link %q over the 64 KiB message limit", ErrInvalid, k)
		}
		msgs = append(msgs, message{typ: msgLink, body: b})
	}
	am, err := attrMessages(g.attrs)
	if err != nil {
		return nil, err
	}
	return headerWithin(append(msgs, am...))
}

// headerWithin encodes an object header, refusing one larger than
// MaxMetadataBlock (which the reader would refuse).
func headerWithin(msgs []message) ([]byte, error) {
	b := encodeObjectHeader(msgs)
	if len(b) > MaxMetadataBlock {
		return nil, fmt.Errorf("%w: object header of %d bytes, over the %d-byte limit (too many links or attributes)", ErrInvalid, len(b), MaxMetadataBlock)
	}
	return b, nil
}

func (d *Dataset) header(gheap uint64, index int) ([]byte, error) {
	msgs := []message{
		{typ: msgDataspace, body: encodeDataspace(d.dims)},
		{typ: msgDatatype, flags: msgFlagConstant, body: d.typ.encode(nil)},
	}
	if d.virtual != nil {
		fv := []byte{3, 0x2a}
		fv = le32(fv, uint32(len(d.fill)))
		fv = append(fv, d.fill...)
		lay := []byte{4, layoutVirtual}
		lay = le64(lay, gheap)
		lay = le32(lay, uint32(index))
		msgs = append(msgs, message{typ: msgFill, flags: msgFlagConstant, body: fv}, message{typ: msgLayout, body: lay})
	} else {
		lay := []byte{3, layoutContiguous}
		lay = le64(lay, d.addr)
		lay = le64(lay, d.size)
		msgs = append(msgs, message{typ: msgFill, flags: msgFlagConstant, body: []byte{3, 0x0a}}, message{typ: msgLayout, body: lay})
	}
	for _, m := range msgs {
		if len(m.body) > maxMessageSize {
			return nil, fmt.Errorf("%w: message over 64 KiB", ErrInvalid)
		}
	}
	am, err := attrMessages(d.attrs)
	if err != nil {
		return nil, err
	}
	return headerWithin(append(msgs, am...))
}
