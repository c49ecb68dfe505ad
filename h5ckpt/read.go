package h5ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"

	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/vfd"
)

// File is an opened HDF5 checkpoint. Open has checked the HDF5 metadata
// (lookup3 checksums), the tables against their BLAKE3 hash, and the
// decomposition; variable data is checked block by block as it is read.
// Safe for concurrent reads.
type File struct {
	f      vfd.File
	h      *h5.File
	path   string
	o      options
	meta   Meta
	dec    *dataset.Decomposition
	vars   []storedVar // by (rank, id)
	hashes []byte
	bs     int64
	tables [32]byte // BLAKE3 of the tables, as the root attribute records it
}

type storedVar struct {
	varRec
	slab slab
}

// Open opens and checks the HDF5 checkpoint name. A file that is not one
// gives an error wrapping [ErrNotCheckpoint] (or the h5 package's error
// for a file libhdf5 would refuse too: no superblock yet, truncated,
// torn header); damaged tables give [ErrCorrupt] or [ErrHashMismatch].
func Open(d vfd.Driver, name string, opts ...Option) (*File, error) {
	f, err := d.Open(name, vfd.ReadOnly)
	if err != nil {
		return nil, fmt.Errorf("h5ckpt: open: %w", err)
	}
	size, err := f.Size()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("h5ckpt: size of %s: %w", name, err)
	}
	hf, err := h5.Open(f, size, name)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("h5ckpt: %w", err)
	}
	cf := &File{f: f, h: hf, path: name, o: buildOptions(opts)}
	if err := cf.parse(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return cf, nil
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Meta returns the checkpoint's identity.
func (f *File) Meta() Meta { return f.meta }

// Ranks returns the number of ranks that wrote the checkpoint.
func (f *File) Ranks() int { return f.meta.Ranks }

// Decomposition returns the datasets and every writing rank's subsets.
func (f *File) Decomposition() *dataset.Decomposition { return f.dec }

func (f *File) corrupt(rank int, id int32, off int64, err error, format string, args ...any) error {
	return &CorruptionError{Path: f.path, Rank: rank, VarID: id, Offset: off, Err: fmt.Errorf("%w: %s", err, fmt.Sprintf(format, args...))}
}

func (f *File) attr(o *h5.Object, name string) (h5.Attribute, error) {
	a, ok := o.Attr(name)
	if !ok {
		return a, f.corrupt(-1, -1, int64(o.Addr), ErrNotCheckpoint, "no attribute %s", name)
	}
	return a, nil
}

func (f *File) intAttr(o *h5.Object, name string) (int64, error) {
	a, err := f.attr(o, name)
	if err != nil {
		return 0, err
	}
	if a.Type.Class != h5.ClassFixed || a.Dims != nil || len(a.Data) != int(a.Type.Size) {
		return 0, f.corrupt(-1, -1, int64(o.Addr), ErrCorrupt, "attribute %s is not an integer scalar", name)
	}
	return h5.Int(a.Type, a.Data), nil
}

func (f *File) table(meta *h5.Object, name string, want func(h5.Datatype) bool) (*h5.Object, []byte, error) {
	l, ok := meta.Link(name)
	if !ok || l.External || l.Object.Kind != h5.KindDataset || l.Object.IsVirtual() || !want(l.Object.Type) {
		return nil, nil, f.corrupt(-1, -1, int64(meta.Addr), ErrCorrupt, "table /%s/%s missing or of the wrong type", MetaGroup, name)
	}
	b, err := f.h.ReadData(l.Object)
	if err != nil {
		return nil, nil, fmt.Errorf("h5ckpt: %w", err)
	}
	return l.Object, b, nil
}

func (f *File) parse() error {
	meta, ranks, err := f.parseRoot()
	if err != nil {
		return err
	}
	t, err := f.readTables(meta)
	if err != nil {
		return err
	}
	defs, err := f.parseDatasets(t)
	if err != nil {
		return err
	}
	dsByID := map[int32]dataset.Dataset{}
	for _, x := range defs {
		dsByID[x.ID] = x
	}
	views, err := f.parseVariables(t, ranks, defs, dsByID)
	if err != nil {
		return err
	}
	dec, err := dataset.NewDecomposition(views)
	if err != nil {
		return f.corrupt(-1, -1, -1, ErrCorrupt, "%v", err)
	}
	f.dec = dec
	return f.placeSubsets(defs, dsByID)
}

// parseRoot checks the root group's attributes (format, version, the
// checkpoint's metadata), sets f.meta and f.bs, and returns the metadata
// group and the rank count.
func (f *File) parseRoot() (*h5.Object, int64, error) {
	root := f.h.Root
	fa, ok := root.Attr(attrFormat)
	if !ok || string(bytes.TrimRight(fa.Data, "\x00")) != FormatName {
		return nil, 0, fmt.Errorf("%w: %s has no %s attribute %q", ErrNotCheckpoint, f.path, attrFormat, FormatName)
	}
	v, err := f.intAttr(root, attrVersion)
	if err != nil {
		return nil, 0, err
	}
	if v != FormatVersion {
		return nil, 0, f.corrupt(-1, -1, -1, ErrVersion, "layout version %d (this reader knows %d)", v, FormatVersion)
	}
	var id, level, ranks, ts, bs int64
	for _, a := range []struct {
		name string
		p    *int64
	}{{attrCkptID, &id}, {attrLevel, &level}, {attrRanks, &ranks}, {attrTimestamp, &ts}, {attrBlockSize, &bs}} {
		if *a.p, err = f.intAttr(root, a.name); err != nil {
			return nil, 0, err
		}
	}
	if ranks < 1 || ranks > 1<<24 || bs < fileformat.MinBlockSize || bs > fileformat.MaxBlockSize || id < 0 {
		return nil, 0, f.corrupt(-1, -1, -1, ErrCorrupt, "ranks %d, block size %d, checkpoint id %d", ranks, bs, id)
	}
	f.meta = Meta{CkptID: id, Level: int(level), Timestamp: ts, Ranks: int(ranks), BlockSize: int(bs)}
	if ra, ok := root.Attr(attrRun); ok {
		if ra.Type.Class != h5.ClassString || ra.Dims != nil {
			return nil, 0, f.corrupt(-1, -1, -1, ErrCorrupt, "attribute %s is not a string", attrRun)
		}
		f.meta.Run = string(bytes.TrimRight(ra.Data, "\x00"))
	}
	f.bs = bs
	ml, ok := root.Link(MetaGroup)
	if !ok || ml.External || ml.Object.Kind != h5.KindGroup {
		return nil, 0, f.corrupt(-1, -1, -1, ErrCorrupt, "no group /%s", MetaGroup)
	}
	return ml.Object, ranks, nil
}

// metaTables are the raw tables of the metadata group; r is their width
// (the largest dataset rank they can hold).
type metaTables struct {
	r                             int
	vars, datasets, names, hashes []byte
}

// name is the string at off, n bytes long, of the names table.
func (t *metaTables) name(off, n int64) (string, bool) {
	if off < 0 || n < 0 || off > int64(len(t.names)) || n > int64(len(t.names))-off {
		return "", false
	}
	return string(t.names[off : off+n]), true
}

// dims decodes nd little-endian int64s.
func dims(b []byte, nd int) []int64 {
	x := make([]int64, nd)
	for k := range x {
		x[k] = int64(le.Uint64(b[8*k:]))
	}
	return x
}

// readTables reads the four tables of the metadata group, checks their
// types and their hash against the root's, and keeps the block hashes.
func (f *File) readTables(meta *h5.Object) (*metaTables, error) {
	root := f.h.Root
	t := &metaTables{}
	// The table width R comes from the variables table's type.
	var err error
	_, t.vars, err = f.table(meta, tableVariables, func(ty h5.Datatype) bool {
		if ty.Class != h5.ClassCompound || len(ty.Members) != 11 || len(ty.Members[9].Type.Dims) != 1 {
			return false
		}
		t.r = int(ty.Members[9].Type.Dims[0])
		return t.r >= 1 && t.r <= dataset.MaxRank && ty.Equal(variablesRowType(t.r))
	})
	if err != nil {
		return nil, err
	}
	if _, t.datasets, err = f.table(meta, tableDatasets, func(ty h5.Datatype) bool { return ty.Equal(datasetsRowType(t.r)) }); err != nil {
		return nil, err
	}
	if _, t.names, err = f.table(meta, tableNames, func(ty h5.Datatype) bool { return ty.Equal(h5.Uint8) }); err != nil {
		return nil, err
	}
	ho, hashes, err := f.table(meta, tableHashes, func(ty h5.Datatype) bool { return ty.Equal(h5.Uint8) })
	if err != nil {
		return nil, err
	}
	if len(ho.Dims) != 2 || ho.Dims[1] != fileformat.HashSize {
		return nil, f.corrupt(-1, -1, int64(ho.Addr), ErrCorrupt, "block hash table of shape %v", ho.Dims)
	}
	t.hashes = hashes
	th := b3.New()
	for _, b := range [][]byte{t.datasets, t.vars, t.names, t.hashes} {
		_, _ = th.Write(b)
	}
	want, err := f.attr(root, attrTablesHash)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(th.Sum(nil), want.Data) {
		return nil, f.corrupt(-1, -1, -1, ErrHashMismatch, "tables do not match %s", attrTablesHash)
	}
	copy(f.tables[:], want.Data)
	f.hashes = hashes
	return t, nil
}

// parseDatasets decodes and checks the datasets table.
func (f *File) parseDatasets(t *metaTables) ([]dataset.Dataset, error) {
	r, dsRows := t.r, t.datasets
	dsSize := int(datasetsRowType(r).Size)
	var defs []dataset.Dataset
	for p := 0; p+dsSize <= len(dsRows); p += dsSize {
		b := dsRows[p:]
		nd := int(int32(le.Uint32(b[16:])))
		nm, ok := t.name(int64(le.Uint64(b[20:])), int64(le.Uint64(b[28:])))
		if nd < 1 || nd > r || !ok {
			return nil, f.corrupt(-1, -1, -1, ErrCorrupt, "dataset row %d: rank %d or name out of range", p/dsSize, nd)
		}
		x := dataset.Dataset{ID: int32(le.Uint32(b[0:])), Type: fileformat.ElemType(le.Uint32(b[4:])), ElemSize: le.Uint32(b[8:]),
			Sparse: le.Uint32(b[12:]) == 1, Name: nm, Shape: dims(b[36:], nd)}
		if err := x.Check(); err != nil || x.Elem() != x.ElemSize || le.Uint32(b[12:]) > 1 || le.Uint32(b[4:]) > 255 {
			return nil, f.corrupt(-1, -1, -1, ErrCorrupt, "dataset row %d: %v", p/dsSize, err)
		}
		defs = append(defs, x)
	}
	return defs, nil
}

// parseVariables decodes and checks the variables table into f.vars
// (a variable outside every dataset gets its slab now) and returns every
// old rank's view of the datasets.
func (f *File) parseVariables(t *metaTables, ranks int64, defs []dataset.Dataset, dsByID map[int32]dataset.Dataset) ([]dataset.View, error) {
	r, varRows, bs := t.r, t.vars, f.bs
	vSize := int(variablesRowType(r).Size)
	views := make([]dataset.View, ranks)
	for i := range views {
		views[i].Datasets = defs
	}
	var next int64
	nh := int64(len(t.hashes) / fileformat.HashSize)
	for p := 0; p+vSize <= len(varRows); p += vSize {
		b := varRows[p:]
		row := p / vSize
		v := varRec{rank: int(int32(le.Uint32(b[0:]))), id: int32(le.Uint32(b[4:])), dataset: int32(le.Uint32(b[8:])),
			typ: fileformat.ElemType(le.Uint32(b[12:])), es: le.Uint32(b[16:]), size: int64(le.Uint64(b[20:])),
			firstHash: int64(le.Uint64(b[44:]))}
		nm, ok := t.name(int64(le.Uint64(b[28:])), int64(le.Uint64(b[36:])))
		v.name = nm
		es := v.typ.Size()
		if v.typ == fileformat.Struct {
			es = v.es
		}
		switch {
		case !ok:
			return nil, f.corrupt(v.rank, v.id, -1, ErrCorrupt, "variable row %d: name out of range", row)
		case v.rank < 0 || v.rank >= int(ranks) || v.id < 0:
			return nil, f.corrupt(-1, -1, -1, ErrCorrupt, "variable row %d: rank %d id %d", row, v.rank, v.id)
		case le.Uint32(b[12:]) > 255 || !v.typ.Valid() || es == 0 || es != v.es || v.size < 0 || v.size%int64(es) != 0:
			return nil, f.corrupt(v.rank, v.id, -1, ErrCorrupt, "variable row %d: element type %d size %d, %d bytes", row, le.Uint32(b[12:]), v.es, v.size)
		case len(f.vars) > 0 && !less(f.vars[len(f.vars)-1].varRec, v):
			return nil, f.corrupt(v.rank, v.id, -1, ErrCorrupt, "variable row %d out of order", row)
		case v.firstHash != next || numBlocks(v.size, bs) > nh-next:
			return nil, f.corrupt(v.rank, v.id, -1, ErrCorrupt, "variable row %d: first block hash %d, want %d of %d", row, v.firstHash, next, nh)
		}
		next += numBlocks(v.size, bs)
		sv := storedVar{varRec: v}
		if v.dataset >= 0 {
			x, ok := dsByID[v.dataset]
			if !ok {
				return nil, f.corrupt(v.rank, v.id, -1, ErrCorrupt, "subset of dataset %d, which the table does not hold", v.dataset)
			}
			v.offset, v.count = dims(b[52:], len(x.Shape)), dims(b[52+8*r:], len(x.Shape))
			s := dataset.Subset{VarID: v.id, Dataset: v.dataset, Offset: v.offset, Count: v.count}
			if err := s.CheckIn(x); err != nil {
				return nil, f.corrupt(v.rank, v.id, -1, ErrCorrupt, "%v", err)
			}
			if err := s.CheckVar(x, v.typ, v.es, v.size); err != nil {
				return nil, f.corrupt(v.rank, v.id, -1, ErrCorrupt, "%v", err)
			}
			views[v.rank].Subsets = append(views[v.rank].Subsets, s)
			sv.varRec = v
		} else if v.dataset != -1 {
			return nil, f.corrupt(v.rank, v.id, -1, ErrCorrupt, "dataset id %d", v.dataset)
		} else {
			o, err := f.h.Lookup("/" + MetaGroup + "/" + rankGroup(v.rank) + "/" + strconv.Itoa(int(v.id)))
			if err != nil || o.Kind != h5.KindDataset || o.IsVirtual() || int64(o.DataSize) != v.size || (v.size > 0 && int64(o.Type.Size) != int64(v.es)) {
				return nil, f.corrupt(v.rank, v.id, -1, ErrCorrupt, "no dataset of %d bytes for the variable (%v)", v.size, err)
			}
			sv.slab = localSlab(int64(o.DataAddr), v.size)
		}
		f.vars = append(f.vars, sv)
	}
	dsSize := int(datasetsRowType(r).Size)
	if next != nh || len(varRows)%vSize != 0 || len(t.datasets)%dsSize != 0 {
		return nil, f.corrupt(-1, -1, -1, ErrCorrupt, "%d block hashes for %d, or table sizes %d/%d", nh, next, len(varRows), len(t.datasets))
	}
	return views, nil
}

// placeSubsets finds each global dataset's HDF5 dataset and gives every
// subset variable its slab of it.
func (f *File) placeSubsets(defs []dataset.Dataset, dsByID map[int32]dataset.Dataset) error {
	addr := map[int32]int64{}
	for _, x := range defs {
		o, err := f.h.Lookup("/" + x.Name)
		if err != nil || o.Kind != h5.KindDataset || o.IsVirtual() || len(o.Dims) != len(x.Shape) || o.Type.Size != x.ElemSize {
			return f.corrupt(-1, -1, -1, ErrCorrupt, "dataset %v: no matching HDF5 dataset (%v)", x, err)
		}
		for k := range o.Dims {
			if o.Dims[k] != uint64(x.Shape[k]) {
				return f.corrupt(-1, -1, int64(o.Addr), ErrCorrupt, "dataset %v has HDF5 dims %v", x, o.Dims)
			}
		}
		addr[x.ID] = int64(o.DataAddr)
	}
	for i := range f.vars {
		v := &f.vars[i]
		if v.dataset >= 0 {
			x := dsByID[v.dataset]
			v.slab = newSlab(addr[v.dataset], x.Shape, v.offset, v.count, int64(v.es))
		}
	}
	return nil
}

func less(a, b varRec) bool { return a.rank < b.rank || (a.rank == b.rank && a.id < b.id) }

func (f *File) find(rank int, id int32) (*storedVar, error) {
	i, ok := slices.BinarySearchFunc(f.vars, [2]int64{int64(rank), int64(id)}, func(v storedVar, k [2]int64) int {
		if int64(v.rank) != k[0] {
			return int(int64(v.rank) - k[0])
		}
		return int(int64(v.id) - k[1])
	})
	if !ok {
		return nil, fmt.Errorf("%w: %s: rank %d variable %d", ErrNoVar, f.path, rank, id)
	}
	return &f.vars[i], nil
}

// Vars lists the variables rank stored, by id.
func (f *File) Vars(rank int) []fileformat.VarInfo {
	var out []fileformat.VarInfo
	for _, v := range f.vars {
		if v.rank == rank {
			out = append(out, fileformat.VarInfo{ID: v.id, Name: v.name, Type: v.typ, ElemSize: v.es, Count: v.size / int64(v.es), Size: v.size, Chunks: 1})
		}
	}
	return out
}

// ReadVar reads variable id of old rank rank whole into dst (exactly its
// size), every block checked.
func (f *File) ReadVar(rank int, id int32, dst []byte) error {
	v, err := f.find(rank, id)
	if err != nil {
		return err
	}
	if int64(len(dst)) != v.size {
		return fmt.Errorf("%w: %s: rank %d variable %d has %d bytes, buffer %d", ErrInvalid, f.path, rank, id, v.size, len(dst))
	}
	return f.ReadVarAt(rank, id, dst, 0)
}

// ReadVarAt reads len(dst) bytes at byte off of variable id of old rank
// rank (its elements in row-major order of its hyperslab), reading the
// blocks the range touches and checking each against its hash: the
// [dataset.Source] a restart on any number of ranks reads from. On error
// dst is zeroed.
func (f *File) ReadVarAt(rank int, id int32, dst []byte, off int64) error {
	v, err := f.find(rank, id)
	if err != nil {
		return err
	}
	n := int64(len(dst))
	if off < 0 || off > v.size || n > v.size-off {
		return fmt.Errorf("%w: %s: rank %d variable %d: bytes [%d, %d) of %d", ErrInvalid, f.path, rank, id, off, off+n, v.size)
	}
	if err := f.blocks(v).ReadRange(dst, off); err != nil {
		clear(dst)
		return err
	}
	return nil
}

// readSegment is the read granularity of a variable's blocks: hashing
// a segment overlaps reading the next.
const readSegment = 8 << 20

// blocks returns the checked block reader of variable v. It reads the
// variable's bytes through its slab; errors name the rank, variable and
// file offset.
func (f *File) blocks(v *storedVar) *b3.Blocks {
	return &b3.Blocks{
		Len: v.size, BlockSize: f.bs, Segment: readSegment, Workers: f.o.workers,
		ReadAt: func(p []byte, v0 int64) error {
			return v.slab.runs(v0, v0+int64(len(p)), func(fileOff, varOff, n int64) error {
				k, err := vfd.ReadAtType(f.f, vfd.MemDraw, p[varOff-v0:varOff-v0+n], fileOff)
				if int64(k) == n {
					return nil
				}
				if err == nil || errors.Is(err, io.EOF) {
					return f.corrupt(v.rank, v.id, fileOff+int64(k), ErrCorrupt, "file ends inside the variable's data")
				}
				return fmt.Errorf("h5ckpt: read %s at %d: %w", f.path, fileOff, err)
			})
		},
		Want: func(j int64) [b3.Size]byte {
			h := (v.firstHash + j) * fileformat.HashSize
			return [b3.Size]byte(f.hashes[h : h+fileformat.HashSize])
		},
		Mismatch: func(j int64) error {
			var at int64 = -1
			_ = v.slab.runs(j*f.bs, j*f.bs+1, func(fileOff, _, _ int64) error { at = fileOff; return nil })
			return f.corrupt(v.rank, v.id, at, ErrHashMismatch, "block %d of the variable", j)
		},
	}
}

// TablesHash returns the BLAKE3 of the file's tables (the root attribute
// ftigo_tables_blake3, checked by Open). The tables hold every block
// hash, so this one value identifies every byte of the checkpoint: a
// manifest records it as the file's digest.
func (f *File) TablesHash() [32]byte { return f.tables }

// Verify reads every variable of every rank and checks every block.
func (f *File) Verify() error { return f.verify(-1) }

// VerifyRank reads every variable old rank rank stored and checks every
// block: the share of [File.Verify] one reader takes when several divide
// the work by rank.
func (f *File) VerifyRank(rank int) error {
	if rank < 0 || rank >= f.meta.Ranks {
		return fmt.Errorf("%w: %s: rank %d of %d", ErrInvalid, f.path, rank, f.meta.Ranks)
	}
	return f.verify(rank)
}

func (f *File) verify(rank int) error {
	var buf []byte
	for i := range f.vars {
		v := &f.vars[i]
		if rank >= 0 && v.rank != rank {
			continue
		}
		for off := int64(0); off < v.size; off += readSegment {
			n := min(readSegment, v.size-off)
			if int64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			if err := f.blocks(v).Read(off/f.bs, buf[:n]); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadSlab reads the hyperslab (offset, count) of dataset id into dst, in
// row-major order (len(dst) = product of count times the element size),
// from whichever ranks' variables hold it, every block checked; in a
// sparse dataset elements no rank stored read as zero.
func (f *File) ReadSlab(id int32, offset, count []int64, dst []byte) error {
	if f.dec == nil {
		return fmt.Errorf("%w: %s: opened as one rank's view, which holds no decomposition", ErrInvalid, f.path)
	}
	x, ok := f.dec.Dataset(id)
	if !ok {
		return fmt.Errorf("%w: %s: dataset %d", dataset.ErrUnknown, f.path, id)
	}
	req, err := dataset.Partial([]dataset.View{{Datasets: []dataset.Dataset{x}, Subsets: []dataset.Subset{{VarID: 0, Dataset: id, Offset: offset, Count: count}}}})
	if err != nil {
		return err
	}
	p, err := dataset.NewPlan(f.dec, req)
	if err != nil {
		return err
	}
	return p.Execute(0, f, map[int32][]byte{0: dst})
}

// List returns the ids of the committed checkpoints named by [Name] for
// prefix in dir, ascending (temporary files are not listed). A missing
// directory is no error.
func List(d vfd.Driver, dir, prefix string) ([]int64, error) {
	ents, err := d.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("h5ckpt: list %s: %w", dir, err)
	}
	var ids []int64
	for _, e := range ents {
		if id, ok := ParseName(e.Name(), prefix); ok && !e.IsDir() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}
