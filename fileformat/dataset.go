package fileformat

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ftigo/ftigo/vfd"
)

// VersionExt is the format version of a file that carries an extension
// area (global datasets and subsets): version 1 plus the extension area at
// the end of the metadata block. A file without extensions is written as
// [Version] 1, byte for byte as before, so readers that know only version
// 1 refuse a file with extensions with [ErrVersion] instead of restoring
// it without its mapping. Wire format: never change.
const VersionExt = 2

// MaxDatasetRank is the largest number of dimensions of a global dataset
// (HDF5's limit).
const MaxDatasetRank = 32

// Extension record kinds and flags. Wire format: never change.
const (
	extKindDataset = 1
	extKindSubset  = 2

	// extRequired marks a record a reader must understand: a reader that
	// does not know the record's kind or version refuses the file with
	// ErrVersion. Records without it are skipped by such a reader.
	extRequired = 1 << 0

	extTrailerSize   = 24
	extRecHeaderSize = 16
	extDatasetFixed  = 16
	extSubsetFixed   = 16

	// datasetSparse: elements no subset covers are allowed.
	datasetSparse = 1 << 0
)

// extMagic ends the extension area (and so the metadata block of a
// version-2 file). Wire format: never change.
var extMagic = [8]byte{'F', 'T', 'I', 'F', 'F', 'E', 'X', 'T'}

// Dataset is a global array (FTI_DefineGlobalDataset): a shape of 1 to
// [MaxDatasetRank] dimensions of one element type, onto which ranks map
// their protected variables with [Subset]s. ID and Name are unique among
// the datasets of a checkpoint; Name is a slash-separated path (the
// dataset's path in an HDF5 file: "temperature", "fields/u").
type Dataset struct {
	ID   int32
	Name string
	// Shape is the global extent of each dimension, row-major (the last
	// dimension varies fastest), every extent >= 1.
	Shape []int64
	// Type is the element type.
	Type ElemType
	// ElemSize is the element size in bytes: 0 (or the natural size) for
	// fixed types, required for Struct.
	ElemSize uint32
	// Sparse allows elements that no subset covers (they read as zero).
	// Without it the subsets of all ranks must cover the dataset exactly
	// once.
	Sparse bool
}

// Subset maps a protected variable onto the hyperslab of a dataset that
// starts at Offset and extends Count elements in each dimension
// (FTI_AddSubset). The variable holds the hyperslab's elements in
// row-major order, so its size is the product of Count times the
// element size. A variable maps onto at most one subset.
type Subset struct {
	VarID   int32
	Dataset int32
	Offset  []int64
	Count   []int64
}

// Clone returns a deep copy of d.
func (d Dataset) Clone() Dataset {
	d.Shape = slices.Clone(d.Shape)
	return d
}

// Clone returns a deep copy of s.
func (s Subset) Clone() Subset {
	s.Offset = slices.Clone(s.Offset)
	s.Count = slices.Clone(s.Count)
	return s
}

// Equal reports whether d and e define the same dataset.
func (d Dataset) Equal(e Dataset) bool {
	des, _ := elemSize(d.Type, d.ElemSize)
	ees, _ := elemSize(e.Type, e.ElemSize)
	return d.ID == e.ID && d.Name == e.Name && slices.Equal(d.Shape, e.Shape) && d.Type == e.Type &&
		des == ees && d.Sparse == e.Sparse
}

// String describes d: `3 "temperature" [512 512] float64`.
func (d Dataset) String() string {
	s := fmt.Sprintf("%d %q %v %v", d.ID, d.Name, d.Shape, d.Type)
	if d.Type == Struct {
		s += fmt.Sprintf("(%d)", d.ElemSize)
	}
	if d.Sparse {
		s += " sparse"
	}
	return s
}

// Elem returns the element size in bytes (0 for an invalid type).
func (d Dataset) Elem() uint32 {
	es, _ := elemSize(d.Type, d.ElemSize)
	return es
}

// Elements returns the number of elements of the dataset (the product of
// its shape); valid only for a dataset that passes [Dataset.Check].
func (d Dataset) Elements() int64 {
	n := int64(1)
	for _, x := range d.Shape {
		n *= x
	}
	return n
}

// Elements returns the number of elements of the subset's hyperslab.
func (s Subset) Elements() int64 {
	n := int64(1)
	for _, x := range s.Count {
		n *= x
	}
	return n
}

// Check reports what is wrong with the definition d alone: a negative id,
// a bad name, a rank outside 1..[MaxDatasetRank], an extent below 1, an
// unknown element type or a byte size that overflows int64.
func (d Dataset) Check() error {
	if d.ID < 0 {
		return fmt.Errorf("dataset id %d is negative", d.ID)
	}
	if err := checkDatasetName(d.Name); err != nil {
		return fmt.Errorf("dataset %d: %w", d.ID, err)
	}
	if len(d.Shape) < 1 || len(d.Shape) > MaxDatasetRank {
		return fmt.Errorf("dataset %d %q: rank %d (must be 1..%d)", d.ID, d.Name, len(d.Shape), MaxDatasetRank)
	}
	es, ok := elemSize(d.Type, d.ElemSize)
	if !ok {
		return fmt.Errorf("dataset %d %q: element type %v with element size %d", d.ID, d.Name, d.Type, d.ElemSize)
	}
	n := int64(es)
	for k, x := range d.Shape {
		if x < 1 {
			return fmt.Errorf("dataset %d %q: extent %d of dimension %d (must be >= 1)", d.ID, d.Name, x, k)
		}
		if n > math.MaxInt64/x {
			return fmt.Errorf("dataset %d %q: shape %v of %d-byte elements overflows 2^63 bytes", d.ID, d.Name, d.Shape, es)
		}
		n *= x
	}
	return nil
}

// checkDatasetName accepts slash-separated paths of non-empty components
// without NUL, "." or "..", at most 65535 bytes of valid UTF-8.
func checkDatasetName(name string) error {
	if name == "" || len(name) > 0xffff || !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("name %q: must be 1..65535 bytes of UTF-8 without NUL", name)
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("name %q: empty, \".\" or \"..\" path component", name)
		}
	}
	return nil
}

// CheckIn reports what is wrong with s as a subset of d, a dataset that
// passes Check: another dataset id, another rank, a negative offset or
// count, or a hyperslab that reaches past the shape.
func (s Subset) CheckIn(d Dataset) error {
	if s.Dataset != d.ID {
		return fmt.Errorf("variable %d: subset of dataset %d checked against dataset %d", s.VarID, s.Dataset, d.ID)
	}
	if len(s.Offset) != len(d.Shape) || len(s.Count) != len(d.Shape) {
		return fmt.Errorf("variable %d: subset of rank %d/%d in dataset %d %q of rank %d",
			s.VarID, len(s.Offset), len(s.Count), d.ID, d.Name, len(d.Shape))
	}
	for k := range d.Shape {
		o, c := s.Offset[k], s.Count[k]
		if o < 0 || c < 0 || o > d.Shape[k] || c > d.Shape[k]-o {
			return fmt.Errorf("variable %d: subset offset %v count %v lies outside dataset %d %q of shape %v (dimension %d)",
				s.VarID, s.Offset, s.Count, d.ID, d.Name, d.Shape, k)
		}
	}
	return nil
}

// CheckVar reports what is wrong with a variable of element type t,
// element size es and size bytes as the data of subset s of dataset d:
// an element size that differs from the dataset's, an element type that
// differs (opaque Bytes and Struct elements may stand for any type of the
// same size), or a byte size other than the hyperslab's.
func (s Subset) CheckVar(d Dataset, t ElemType, es uint32, size int64) error {
	des := d.Elem()
	if es != des {
		return fmt.Errorf("variable %d has %d-byte elements (%v) but dataset %d %q has %d-byte elements (%v)",
			s.VarID, es, t, d.ID, d.Name, des, d.Type)
	}
	opaque := func(t ElemType) bool { return t == Bytes || t == Struct }
	if t != d.Type && !opaque(t) && !opaque(d.Type) {
		return fmt.Errorf("variable %d is %v but dataset %d %q is %v", s.VarID, t, d.ID, d.Name, d.Type)
	}
	if want := s.Elements() * int64(des); size != want {
		return fmt.Errorf("variable %d has %d bytes but its subset %v of dataset %d %q holds %d elements (%d bytes)",
			s.VarID, size, s.Count, d.ID, d.Name, s.Elements(), want)
	}
	return nil
}

// WithDatasets records global datasets and the subsets of this file's
// variables with [Write] (and makes [Plan] count them). Every subset must
// name a variable being written and a dataset in ds; each variable maps
// onto at most one subset. A file with datasets or subsets is written as
// format version [VersionExt]; with none the option changes nothing.
func WithDatasets(ds []Dataset, subs []Subset) Option {
	return func(o *options) {
		o.datasets = ds
		o.subsets = subs
	}
}

// vi is what the extension needs of a variable: its type, element size and byte size.
type varShape struct {
	typ  ElemType
	es   uint32
	size int64
}

// checkExt validates datasets and subsets against the variables of the
// file; it returns the datasets sorted by id and the subsets by variable id.
func checkExt(ds []Dataset, subs []Subset, vars func(id int32) (varShape, bool)) ([]Dataset, []Subset, error) {
	byID := make(map[int32]int, len(ds))
	names := make(map[string]int32, len(ds))
	sd := make([]Dataset, len(ds))
	for i, d := range ds {
		if err := d.Check(); err != nil {
			return nil, nil, err
		}
		if _, dup := byID[d.ID]; dup {
			return nil, nil, fmt.Errorf("dataset id %d used twice", d.ID)
		}
		if other, dup := names[d.Name]; dup {
			return nil, nil, fmt.Errorf("datasets %d and %d are both named %q", other, d.ID, d.Name)
		}
		byID[d.ID] = i
		names[d.Name] = d.ID
		sd[i] = d.Clone()
		sd[i].ElemSize = d.Elem()
	}
	slices.SortFunc(sd, func(a, b Dataset) int { return int(a.ID) - int(b.ID) })
	seen := make(map[int32]bool, len(subs))
	ss := make([]Subset, len(subs))
	for i, s := range subs {
		di, ok := byID[s.Dataset]
		if !ok {
			return nil, nil, fmt.Errorf("variable %d: subset of dataset %d, which is not defined", s.VarID, s.Dataset)
		}
		d := ds[di]
		if err := s.CheckIn(d); err != nil {
			return nil, nil, err
		}
		v, ok := vars(s.VarID)
		if !ok {
			return nil, nil, fmt.Errorf("subset of dataset %d %q for variable %d, which is not in the file", d.ID, d.Name, s.VarID)
		}
		if seen[s.VarID] {
			return nil, nil, fmt.Errorf("variable %d mapped onto two subsets", s.VarID)
		}
		seen[s.VarID] = true
		if err := s.CheckVar(d, v.typ, v.es, v.size); err != nil {
			return nil, nil, err
		}
		ss[i] = s.Clone()
	}
	slices.SortFunc(ss, func(a, b Subset) int { return int(a.VarID) - int(b.VarID) })
	return sd, ss, nil
}

func pad8(n int64) int64 { return (n + 7) &^ 7 }

// encodeExt returns the extension area for the sorted, checked datasets
// and subsets (nil when there are none): the records, then the trailer
// (record count, the area's size, the magic), so that a reader finds the
// area from the end of the metadata block.
func encodeExt(ds []Dataset, ss []Subset) []byte {
	if len(ds) == 0 && len(ss) == 0 {
		return nil
	}
	n := int64(extTrailerSize)
	for _, d := range ds {
		n += extRecHeaderSize + pad8(extDatasetFixed+8*int64(len(d.Shape))+int64(len(d.Name)))
	}
	for _, s := range ss {
		n += extRecHeaderSize + pad8(extSubsetFixed+16*int64(len(s.Offset)))
	}
	b := make([]byte, n)
	p := int64(0)
	rec := func(kind uint16, length int64) []byte {
		le.PutUint16(b[p:], kind)
		le.PutUint16(b[p+2:], 1) // record version
		le.PutUint32(b[p+4:], 0) // optional: a reader may skip it
		le.PutUint64(b[p+8:], uint64(length))
		body := b[p+extRecHeaderSize : p+extRecHeaderSize+length]
		p += extRecHeaderSize + pad8(length)
		return body
	}
	for _, d := range ds {
		nd := len(d.Shape)
		body := rec(extKindDataset, extDatasetFixed+8*int64(nd)+int64(len(d.Name)))
		le.PutUint32(body[0:], uint32(d.ID))
		body[4] = uint8(d.Type)
		body[5] = uint8(nd)
		if d.Sparse {
			le.PutUint16(body[6:], datasetSparse)
		}
		le.PutUint32(body[8:], d.Elem())
		le.PutUint32(body[12:], uint32(len(d.Name)))
		for k, x := range d.Shape {
			le.PutUint64(body[16+8*k:], uint64(x))
		}
		copy(body[16+8*nd:], d.Name)
	}
	for _, s := range ss {
		nd := len(s.Offset)
		body := rec(extKindSubset, extSubsetFixed+16*int64(nd))
		le.PutUint32(body[0:], uint32(s.VarID))
		le.PutUint32(body[4:], uint32(s.Dataset))
		body[8] = uint8(nd)
		for k := range s.Offset {
			le.PutUint64(body[16+8*k:], uint64(s.Offset[k]))
			le.PutUint64(body[16+8*(nd+k):], uint64(s.Count[k]))
		}
	}
	le.PutUint32(b[p:], uint32(len(ds)+len(ss)))
	le.PutUint64(b[p+8:], uint64(n))
	copy(b[p+16:], extMagic[:])
	return b
}

// buildExt checks the option's datasets against vars and encodes them.
func buildExt(o *options, vars []Var, idx map[int32]int) ([]byte, error) {
	if len(o.datasets) == 0 && len(o.subsets) == 0 {
		return nil, nil
	}
	ds, ss, err := checkExt(o.datasets, o.subsets, func(id int32) (varShape, bool) {
		i, ok := idx[id]
		if !ok {
			return varShape{}, false
		}
		v := &vars[i]
		es, _ := elemSize(v.Type, v.ElemSize)
		return varShape{typ: v.Type, es: es, size: int64(len(v.Data))}, true
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return encodeExt(ds, ss), nil
}

// ExtLength returns the size of the extension area at the end of a
// version-2 metadata block, as its trailer states it: the last 24 bytes of
// the block, from which a reader learns, before parsing the rest, where
// the version-1 part of the metadata ends. ok is false when the trailer is
// missing or states an impossible size (not a multiple of 8, below 24 or
// beyond the block).
func ExtLength(trailer []byte, metaSize int64) (n int64, ok bool) {
	if len(trailer) < extTrailerSize {
		return 0, false
	}
	t := trailer[len(trailer)-extTrailerSize:]
	size := le.Uint64(t[8:])
	if !bytes.Equal(t[16:], extMagic[:]) || le.Uint32(t[4:]) != 0 || size < extTrailerSize ||
		size > uint64(max(metaSize, 0)) || size%8 != 0 {
		return 0, false
	}
	return int64(size), true
}

// readExtTrailer learns the size of a version-2 file's extension area
// from the trailer in the last bytes of its metadata block, before the
// counts are checked and anything else of the block is read (the metadata
// hash, checked later, vouches for it). A version-1 file has none.
func (r *Reader) readExtTrailer() error {
	r.extLen = 0
	if !r.hasExt() {
		return nil
	}
	fb := &r.fb
	if fb.metaSize < extTrailerSize {
		return r.fileErr(fb.metaOff, ErrCorrupt, "extension area: version-2 metadata block of %d bytes has no room for its trailer", fb.metaSize)
	}
	var t [extTrailerSize]byte
	off := fb.metaOff + fb.metaSize - extTrailerSize
	if err := r.readAt(vfd.MemOHdr, t[:], off); err != nil {
		return err
	}
	n, ok := ExtLength(t[:], fb.metaSize)
	if !ok {
		return r.fileErr(off, ErrCorrupt, "extension area: bad trailer (magic %x, size %d, reserved %d)", t[16:], le.Uint64(t[8:]), le.Uint32(t[4:]))
	}
	r.extLen = n
	return nil
}

// parseExt decodes and checks the extension area b (the rest of the
// metadata block after the block hashes), found at file offset off
// (version 2 files only; readExtTrailer read its size).
func (r *Reader) parseExt(b []byte, off int64) error {
	if !r.hasExt() {
		return nil
	}
	bad := func(p int64, format string, args ...any) error {
		return r.fileErr(off+p, ErrCorrupt, "extension area: "+format, args...)
	}
	n := int64(len(b)) - extTrailerSize
	if n < 0 {
		return bad(0, "no extension trailer")
	}
	nrec := int64(le.Uint32(b[n:]))
	if nrec*extRecHeaderSize > n {
		return bad(n, "%d records do not fit in %d bytes", nrec, n)
	}
	var ds []Dataset
	var ss []Subset
	p := int64(0)
	for i := int64(0); i < nrec; i++ {
		if p+extRecHeaderSize > n {
			return bad(p, "record %d past the end", i)
		}
		kind, ver, flags := le.Uint16(b[p:]), le.Uint16(b[p+2:]), le.Uint32(b[p+4:])
		length := le.Uint64(b[p+8:])
		if flags&^extRequired != 0 {
			return bad(p+4, "record %d: unknown flags %#x", i, flags)
		}
		if length > uint64(n-p-extRecHeaderSize) || pad8(int64(length)) > n-p-extRecHeaderSize {
			return bad(p+8, "record %d: %d bytes past the end", i, length)
		}
		body := b[p+extRecHeaderSize : p+extRecHeaderSize+int64(length)]
		if !allZero(b[p+extRecHeaderSize+int64(length) : p+extRecHeaderSize+pad8(int64(length))]) {
			return bad(p, "record %d: non-zero padding", i)
		}
		bodyOff := p + extRecHeaderSize
		p += extRecHeaderSize + pad8(int64(length))
		switch {
		case kind == extKindDataset && ver == 1:
			d, err := decodeDatasetRec(body)
			if err != nil {
				return bad(bodyOff, "record %d: %v", i, err)
			}
			ds = append(ds, d)
		case kind == extKindSubset && ver == 1:
			s, err := decodeSubsetRec(body)
			if err != nil {
				return bad(bodyOff, "record %d: %v", i, err)
			}
			ss = append(ss, s)
		case flags&extRequired != 0:
			return r.corrupt(-1, -1, off+bodyOff-extRecHeaderSize, fmt.Errorf("%w: extension record of kind %d version %d is required and unknown to this reader", ErrVersion, kind, ver))
		default:
			// An optional record this reader does not know: skipped.
		}
	}
	if p != n {
		return bad(p, "%d stray bytes after the records", n-p)
	}
	sd, sss, err := checkExt(ds, ss, func(id int32) (varShape, bool) {
		i, ok := r.byID[id]
		if !ok {
			return varShape{}, false
		}
		v := &r.vars[i]
		return varShape{typ: v.Type, es: v.ElemSize, size: v.Size}, true
	})
	if err != nil {
		return bad(0, "%v", err)
	}
	if !slices.IsSortedFunc(ds, func(a, b Dataset) int { return int(a.ID) - int(b.ID) }) ||
		!slices.IsSortedFunc(ss, func(a, b Subset) int { return int(a.VarID) - int(b.VarID) }) {
		return bad(0, "records not sorted by id")
	}
	r.datasets, r.subsets = sd, sss
	return nil
}

func decodeDatasetRec(b []byte) (Dataset, error) {
	if len(b) < extDatasetFixed {
		return Dataset{}, errors.New("short dataset record")
	}
	nd := int(b[5])
	flags := le.Uint16(b[6:])
	nl := int64(le.Uint32(b[12:]))
	if int64(len(b)) != extDatasetFixed+8*int64(nd)+nl {
		return Dataset{}, fmt.Errorf("dataset record of %d bytes for rank %d and a %d-byte name", len(b), nd, nl)
	}
	if flags&^datasetSparse != 0 {
		return Dataset{}, fmt.Errorf("unknown dataset flags %#x", flags)
	}
	d := Dataset{ID: int32(le.Uint32(b[0:])), Type: ElemType(b[4]), ElemSize: le.Uint32(b[8:]),
		Sparse: flags&datasetSparse != 0, Shape: make([]int64, nd)}
	for k := range d.Shape {
		d.Shape[k] = int64(le.Uint64(b[16+8*k:]))
	}
	d.Name = string(b[16+8*nd:])
	if err := d.Check(); err != nil {
		return Dataset{}, err
	}
	if es, _ := elemSize(d.Type, d.ElemSize); es != d.ElemSize {
		return Dataset{}, fmt.Errorf("dataset %d: element size %d for %v", d.ID, d.ElemSize, d.Type)
	}
	return d, nil
}

func decodeSubsetRec(b []byte) (Subset, error) {
	if len(b) < extSubsetFixed {
		return Subset{}, errors.New("short subset record")
	}
	nd := int(b[8])
	if int64(len(b)) != extSubsetFixed+16*int64(nd) || !allZero(b[9:16]) {
		return Subset{}, fmt.Errorf("subset record of %d bytes for rank %d, or non-zero reserved bytes", len(b), nd)
	}
	s := Subset{VarID: int32(le.Uint32(b[0:])), Dataset: int32(le.Uint32(b[4:])),
		Offset: make([]int64, nd), Count: make([]int64, nd)}
	for k := 0; k < nd; k++ {
		s.Offset[k] = int64(le.Uint64(b[16+8*k:]))
		s.Count[k] = int64(le.Uint64(b[16+8*(nd+k):]))
	}
	return s, nil
}

// Version returns the file's format version: [Version] or [VersionExt].
func (r *Reader) Version() int { return int(r.hdr.version) }

// Datasets returns the global datasets recorded in the file, sorted by id
// (none for a version-1 file).
func (r *Reader) Datasets() []Dataset {
	out := make([]Dataset, len(r.datasets))
	for i, d := range r.datasets {
		out[i] = d.Clone()
	}
	return out
}

// Subsets returns the subsets of the file's variables, sorted by variable id.
func (r *Reader) Subsets() []Subset {
	out := make([]Subset, len(r.subsets))
	for i, s := range r.subsets {
		out[i] = s.Clone()
	}
	return out
}

// SubsetOf returns the subset variable id maps onto, if any.
func (r *Reader) SubsetOf(id int32) (Subset, bool) {
	i, ok := slices.BinarySearchFunc(r.subsets, id, func(s Subset, id int32) int { return int(s.VarID) - int(id) })
	if !ok {
		return Subset{}, false
	}
	return r.subsets[i].Clone(), true
}

// VarByName returns the variable stored under name (FTI's
// FTI_getIDFromString), or an error wrapping [ErrNoVar] when no variable
// or more than one has that name.
func (r *Reader) VarByName(name string) (VarInfo, error) {
	found := -1
	for i, v := range r.vars {
		if v.Name == name {
			if found >= 0 {
				return VarInfo{}, fmt.Errorf("%s: variables %d and %d are both named %q: %w", r.path, r.vars[found].ID, v.ID, name, ErrNoVar)
			}
			found = i
		}
	}
	if found < 0 {
		return VarInfo{}, fmt.Errorf("%s: no variable named %q: %w", r.path, name, ErrNoVar)
	}
	return r.vars[found], nil
}
