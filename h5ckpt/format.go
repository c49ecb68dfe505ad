package h5ckpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/fileformat"
)

// Identification and layout constants. Wire format: never change.
const (
	// FormatName is the root attribute ftigo_format of every file.
	FormatName = "ftigo-h5ckpt"
	// FormatVersion is the root attribute ftigo_version this package
	// writes and reads.
	FormatVersion = 1
	// MetaGroup is the group holding ftigo's tables and the variables that
	// belong to no dataset; no dataset name may start with it.
	MetaGroup = "ftigo"

	attrFormat     = "ftigo_format"
	attrVersion    = "ftigo_version"
	attrCkptID     = "ftigo_ckpt_id"
	attrLevel      = "ftigo_level"
	attrRanks      = "ftigo_ranks"
	attrTimestamp  = "ftigo_timestamp"
	attrBlockSize  = "ftigo_block_size"
	attrRun        = "ftigo_run"
	attrTablesHash = "ftigo_tables_blake3"
	attrDatasetID  = "ftigo_dataset_id"
	attrElemType   = "ftigo_element_type"
	attrSparse     = "ftigo_sparse"

	tableDatasets  = "datasets"
	tableVariables = "variables"
	tableNames     = "names"
	tableHashes    = "block_hashes"
)

// Meta identifies the checkpoint a file holds.
type Meta struct {
	// CkptID is the checkpoint id.
	CkptID int64
	// Level is the level the checkpoint was taken at (9 for FTI's
	// FTI_L4_H5_SINGLE, 4 for ckpt_io = 5); informational.
	Level int
	// Timestamp is the creation time in ns since the Unix epoch; Write
	// fills it from its clock when it is 0.
	Timestamp int64
	// Ranks is the number of ranks that wrote the file (set by Write).
	Ranks int
	// BlockSize is the size of the hashed blocks (set by Write).
	BlockSize int
	// Run is the id of the run that wrote the file (FTI's exec_id,
	// root attribute ftigo_run); empty when none was given. A run never
	// overwrites or restores a file another run wrote.
	Run string
}

// Name returns the file name of checkpoint id in dir, as FTI names its
// HDF5 single files: "<dir>/<prefix>-ID<id, 8 digits>.h5".
func Name(dir, prefix string, id int64) string {
	return path.Join(dir, fmt.Sprintf("%s-ID%08d.h5", prefix, id))
}

// ParseName returns the checkpoint id of a base name Name gives for
// prefix, and false for any other name (temporary files included).
func ParseName(base, prefix string) (int64, bool) {
	rest, ok := strings.CutPrefix(base, prefix+"-ID")
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, ".h5")
	if !ok || len(digits) < 8 || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return id, true
}

// h5Type maps a variable's element type onto the HDF5 type tools see:
// numbers as themselves, complex numbers as the {r, i} compound h5py reads
// as complex, opaque bytes as uint8 and structs as arrays of uint8.
func h5Type(t fileformat.ElemType, es uint32) h5.Datatype {
	switch t {
	case fileformat.Int8:
		return h5.Int8
	case fileformat.Int16:
		return h5.Int16
	case fileformat.Int32:
		return h5.Int32
	case fileformat.Int64:
		return h5.Int64
	case fileformat.Uint16:
		return h5.Uint16
	case fileformat.Uint32:
		return h5.Uint32
	case fileformat.Uint64:
		return h5.Uint64
	case fileformat.Float32:
		return h5.Float32
	case fileformat.Float64:
		return h5.Float64
	case fileformat.Complex64:
		return h5.Compound(h5.Member{Name: "r", Type: h5.Float32}, h5.Member{Name: "i", Type: h5.Float32})
	case fileformat.Complex128:
		return h5.Compound(h5.Member{Name: "r", Type: h5.Float64}, h5.Member{Name: "i", Type: h5.Float64})
	case fileformat.Struct:
		if es != 1 {
			return h5.Array(h5.Uint8, es)
		}
	}
	return h5.Uint8
}

// Table row types. R is the largest dataset rank (at least 1); offset,
// count and shape columns hold R entries, unused ones zero.
func datasetsRowType(r int) h5.Datatype {
	return h5.Compound(
		h5.Member{Name: "id", Type: h5.Int32},
		h5.Member{Name: "elem_type", Type: h5.Int32},
		h5.Member{Name: "elem_size", Type: h5.Int32},
		h5.Member{Name: "sparse", Type: h5.Int32},
		h5.Member{Name: "rank", Type: h5.Int32},
		h5.Member{Name: "name_off", Type: h5.Int64},
		h5.Member{Name: "name_len", Type: h5.Int64},
		h5.Member{Name: "shape", Type: h5.Array(h5.Int64, uint32(r))},
	)
}

func variablesRowType(r int) h5.Datatype {
	return h5.Compound(
		h5.Member{Name: "rank", Type: h5.Int32},
		h5.Member{Name: "var_id", Type: h5.Int32},
		h5.Member{Name: "dataset_id", Type: h5.Int32},
		h5.Member{Name: "elem_type", Type: h5.Int32},
		h5.Member{Name: "elem_size", Type: h5.Int32},
		h5.Member{Name: "size", Type: h5.Int64},
		h5.Member{Name: "name_off", Type: h5.Int64},
		h5.Member{Name: "name_len", Type: h5.Int64},
		h5.Member{Name: "first_hash", Type: h5.Int64},
		h5.Member{Name: "offset", Type: h5.Array(h5.Int64, uint32(r))},
		h5.Member{Name: "count", Type: h5.Array(h5.Int64, uint32(r))},
	)
}

// varRec is one variable of one rank as the tables record it.
type varRec struct {
	rank      int
	id        int32
	name      string
	typ       fileformat.ElemType
	es        uint32
	size      int64
	dataset   int32 // -1: none
	offset    []int64
	count     []int64
	firstHash int64
}

var le = binary.LittleEndian

// decl is one rank's declaration, exchanged before writing.
type decl struct {
	datasets []dataset.Dataset
	vars     []varRec
}

// encodeDecl serialises a rank's declaration (or its local error).
func encodeDecl(d decl, local error) []byte {
	if local != nil {
		return append([]byte{0}, local.Error()...)
	}
	b := []byte{1}
	b = le.AppendUint32(b, uint32(len(d.datasets)))
	for _, ds := range d.datasets {
		b = le.AppendUint32(b, uint32(ds.ID))
		b = append(b, uint8(ds.Type), uint8(len(ds.Shape)), boolByte(ds.Sparse), 0)
		b = le.AppendUint32(b, ds.Elem())
		b = le.AppendUint32(b, uint32(len(ds.Name)))
		for _, x := range ds.Shape {
			b = le.AppendUint64(b, uint64(x))
		}
		b = append(b, ds.Name...)
	}
	b = le.AppendUint32(b, uint32(len(d.vars)))
	for _, v := range d.vars {
		b = le.AppendUint32(b, uint32(v.id))
		b = append(b, uint8(v.typ), uint8(len(v.offset)), 0, 0)
		b = le.AppendUint32(b, v.es)
		b = le.AppendUint64(b, uint64(v.size))
		b = le.AppendUint32(b, uint32(len(v.name)))
		b = le.AppendUint32(b, uint32(v.dataset))
		for k := range v.offset {
			b = le.AppendUint64(b, uint64(v.offset[k]))
			b = le.AppendUint64(b, uint64(v.count[k]))
		}
		b = append(b, v.name...)
	}
	return b
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// cursor reads a declaration with bounds checks.
type cursor struct {
	b   []byte
	err error
}

func (c *cursor) take(n int) []byte {
	if c.err != nil || n < 0 || n > len(c.b) {
		c.err = errors.New("declaration cut short")
		return make([]byte, max(n, 0))
	}
	p := c.b[:n]
	c.b = c.b[n:]
	return p
}

func (c *cursor) u32() uint32 { return le.Uint32(c.take(4)) }
func (c *cursor) u64() uint64 { return le.Uint64(c.take(8)) }

// decodeDecl parses a declaration from rank r; a rank that reported a
// local error gives that error.
func decodeDecl(b []byte, r int) (decl, error) {
	if len(b) == 0 {
		return decl{}, fmt.Errorf("rank %d: empty declaration", r)
	}
	if b[0] == 0 {
		return decl{}, fmt.Errorf("rank %d: %s", r, b[1:])
	}
	c := &cursor{b: b[1:]}
	var d decl
	n := c.u32()
	for i := uint32(0); i < n && c.err == nil; i++ {
		ds := dataset.Dataset{ID: int32(c.u32())}
		h := c.take(4)
		ds.Type, ds.Sparse = fileformat.ElemType(h[0]), h[2] == 1
		ds.ElemSize = c.u32()
		nl := int(c.u32())
		ds.Shape = make([]int64, min(int(h[1]), len(c.b)/8+1))
		for k := range ds.Shape {
			ds.Shape[k] = int64(c.u64())
		}
		ds.Name = string(c.take(nl))
		d.datasets = append(d.datasets, ds)
	}
	n = c.u32()
	for i := uint32(0); i < n && c.err == nil; i++ {
		v := varRec{rank: r, id: int32(c.u32())}
		h := c.take(4)
		v.typ = fileformat.ElemType(h[0])
		v.es = c.u32()
		v.size = int64(c.u64())
		nl := int(c.u32())
		v.dataset = int32(c.u32())
		nd := min(int(h[1]), len(c.b)/16+1)
		if v.dataset >= 0 {
			v.offset, v.count = make([]int64, nd), make([]int64, nd)
		}
		for k := 0; k < nd; k++ {
			o, cnt := int64(c.u64()), int64(c.u64())
			if v.dataset >= 0 {
				v.offset[k], v.count[k] = o, cnt
			}
		}
		v.name = string(c.take(nl))
		d.vars = append(d.vars, v)
	}
	if c.err == nil && len(c.b) != 0 {
		c.err = errors.New("stray bytes after the declaration")
	}
	if c.err != nil {
		return decl{}, fmt.Errorf("rank %d: %v", r, c.err)
	}
	return d, nil
}

// slab maps the bytes of a stored variable onto the file: the variable's
// elements (row-major in its hyperslab) lie in units of unit contiguous
// bytes; unit u starts at base + sum(idx_k * stride_k) with idx the
// row-major position of u over the outer dimensions' counts.
type slab struct {
	size   int64
	unit   int64
	base   int64
	outer  []int64 // counts of the dimensions outside a unit
	stride []int64 // file byte strides of those dimensions
}

// localSlab is a variable stored contiguously at addr.
func localSlab(addr, size int64) slab { return slab{size: size, unit: size, base: addr} }

// newSlab maps the hyperslab (offset, count) of a dataset of the given
// shape and element size whose raw data starts at addr.
func newSlab(addr int64, shape, offset, count []int64, es int64) slab {
	d := len(shape)
	gs := make([]int64, d) // element strides of the dataset
	n := int64(1)
	for k := d - 1; k >= 0; k-- {
		gs[k] = n
		n *= shape[k]
	}
	size := es
	for _, c := range count {
		size *= c
	}
	if size == 0 {
		return slab{}
	}
	j := d - 1
	for j > 0 && count[j] == shape[j] {
		j--
	}
	s := slab{size: size, unit: count[j] * gs[j] * es, base: addr}
	for k := 0; k < d; k++ {
		s.base += offset[k] * gs[k] * es
	}
	s.outer = append([]int64(nil), count[:j]...)
	s.stride = make([]int64, j)
	for k := 0; k < j; k++ {
		s.stride[k] = gs[k] * es
	}
	return s
}

// runs calls fn for the file runs holding the variable's bytes [v0, v1),
// in order: fn(fileOff, varOff, n).
func (s slab) runs(v0, v1 int64, fn func(fileOff, varOff, n int64) error) error {
	if v0 >= v1 {
		return nil
	}
	u := v0 / s.unit
	idx := make([]int64, len(s.outer))
	for k, r := len(s.outer)-1, u; k >= 0; k-- {
		idx[k] = r % s.outer[k]
		r /= s.outer[k]
	}
	within := v0 - u*s.unit
	for v := v0; v < v1; {
		off := s.base
		for k := range idx {
			off += idx[k] * s.stride[k]
		}
		n := min(s.unit-within, v1-v)
		if err := fn(off+within, v, n); err != nil {
			return err
		}
		v += n
		within = 0
		for k := len(idx) - 1; k >= 0; k-- {
			idx[k]++
			if idx[k] < s.outer[k] {
				break
			}
			idx[k] = 0
		}
	}
	return nil
}
