package dhdf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/vfd"
)

// Names and layouts of the DHDF objects. Wire format: never change.
const (
	AttrSetID       = "DHDF_SetId"
	AttrFileID      = "DHDF_FileId"
	AttrVersion     = "DHDF_Version"
	FileInfoName    = "File_Info"
	FileInfoClass   = "DHDF_FileInfo"
	ChunkTablesDir  = "DHDF_ChunkTables"
	ChunkTableClass = "Distributed_SDS_Chunk_Table"
	ChunkLinksDir   = "chunks"

	attrClass    = "CLASS"
	attrDatatype = "datatype"
	attrRank     = "rank"
	attrDims     = "dimension_sizes"
	attrSDSName  = "SDSName"
	attrOrigin   = "origin"
	attrCRC      = "checksum_crc32c"

	formatVersion = 1
	nameLen       = 255 // FileName, HostName, ChunkName string sizes
	maxRank       = 32  // DimSizes[32], Origins[32]
)

// fileInfoType is the File_Info row: {DHDF_FileId int32, FileName S255, HostName S255}.
var fileInfoType = h5.Compound(
	h5.Member{Name: "DHDF_FileId", Type: h5.Int32},
	h5.Member{Name: "FileName", Type: h5.String(nameLen)},
	h5.Member{Name: "HostName", Type: h5.String(nameLen)},
)

// chunkTableType is the Distributed_SDS_Chunk_Table row:
// {DHDF_FileId int32, ChunkName S255, DimSizes int32[32], Origins int32[32]}.
var chunkTableType = h5.Compound(
	h5.Member{Name: "DHDF_FileId", Type: h5.Int32},
	h5.Member{Name: "ChunkName", Type: h5.String(nameLen)},
	h5.Member{Name: "DimSizes", Type: h5.Array(h5.Int32, maxRank)},
	h5.Member{Name: "Origins", Type: h5.Array(h5.Int32, maxRank)},
)

// Options configure writing and reading a set. The zero value writes with
// vfd.Sec2, no logging, the wall clock and host name "localhost".
type Options struct {
	Driver   vfd.Driver       // file access; nil means vfd.Sec2{}
	Logger   *zap.Logger      // nil means zap.NewNop()
	Now      func() time.Time // clock for the set id; nil means time.Now
	HostName string           // recorded in File_Info; "" means "localhost"
	// MaxRead caps the bytes ReadSDS and ReadChunk allocate; 0 means 4 GiB.
	MaxRead int64
	// OneSyncAHF syncs each AHF once, after its superblock, instead of
	// before and after it. The set stays all-or-nothing (the MHF gets its
	// superblock only after every AHF's sync returned), but an AHF of a
	// set whose MHF was never committed may, after a power cut, have a
	// superblock over torn data (its chunk CRCs still tell). It saves one
	// storage barrier per AHF on the critical path.
	OneSyncAHF bool
}

func (o Options) withDefaults() Options {
	if o.Driver == nil {
		o.Driver = vfd.Sec2{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HostName == "" {
		o.HostName = "localhost"
	}
	if o.MaxRead <= 0 {
		o.MaxRead = 4 << 30
	}
	return o
}

// FileInfo is one row of File_Info.
type FileInfo struct {
	ID   int32
	Name string // base name, relative to the MHF's directory
	Host string
}

// SDS declares a distributed array: its name, element type (one of the
// numeric h5 types), global dims and user attributes. Fill is what
// elements no chunk covers read as (nil: zeros).
type SDS struct {
	Name  string
	Type  h5.Datatype
	Dims  []uint64
	Attrs []h5.Attribute
	Fill  []byte
}

// Chunk is one sub-array of an SDS as recorded in its chunk table.
type Chunk struct {
	FileID int32
	Name   string // dataset name in the AHF
	Origin []uint64
	Dims   []uint64
}

// SDSInfo is an SDS as read back: its declaration and its chunks in table order.
type SDSInfo struct {
	SDS
	Chunks []Chunk
}

// MHFName is the main file name of the set with base path base
// ("dir/sim" → "dir/sim.h5").
func MHFName(base string) string { return base + ".h5" }

// AHFName is the name of associated file id of the set with base path
// base ("dir/sim", 3 → "dir/sim.3.h5").
func AHFName(base string, id int32) string { return fmt.Sprintf("%s.%d.h5", base, id) }

func reserved(name string) bool {
	return name == FileInfoName || name == ChunkTablesDir || name == ChunkLinksDir
}

func validObjName(s string) bool {
	return s != "" && s != "." && len(s) < nameLen && !strings.ContainsAny(s, "/\x00")
}

func (s SDS) validate() error {
	if !validObjName(s.Name) || reserved(s.Name) {
		return fmt.Errorf("%w: SDS name %q", ErrInvalid, s.Name)
	}
	if !s.Type.IsNumeric() {
		return fmt.Errorf("%w: SDS %q: type %s is not numeric", ErrInvalid, s.Name, s.Type.Name())
	}
	if len(s.Dims) == 0 || len(s.Dims) > maxRank {
		return fmt.Errorf("%w: SDS %q: rank %d not in 1..%d", ErrInvalid, s.Name, len(s.Dims), maxRank)
	}
	for _, d := range s.Dims {
		if d == 0 || d > 1<<31-1 {
			return fmt.Errorf("%w: SDS %q: dimension %d not in 1..2^31-1", ErrInvalid, s.Name, d)
		}
	}
	if s.Fill != nil && len(s.Fill) != int(s.Type.Size) {
		return fmt.Errorf("%w: SDS %q: fill value of %d bytes", ErrInvalid, s.Name, len(s.Fill))
	}
	seen := map[string]bool{}
	for _, a := range s.Attrs {
		switch a.Name {
		case attrDatatype, attrRank, attrDims, attrClass:
			return fmt.Errorf("%w: SDS %q: attribute name %q is reserved", ErrInvalid, s.Name, a.Name)
		}
		if seen[a.Name] {
			return fmt.Errorf("%w: SDS %q: duplicate attribute %q", ErrInvalid, s.Name, a.Name)
		}
		seen[a.Name] = true
	}
	return nil
}

// checkChunk validates a chunk against its SDS.
func (s SDS) checkChunk(c Chunk) error {
	if !validObjName(c.Name) || reserved(c.Name) {
		return fmt.Errorf("%w: chunk name %q", ErrInvalid, c.Name)
	}
	if len(c.Origin) != len(s.Dims) || len(c.Dims) != len(s.Dims) {
		return fmt.Errorf("%w: chunk %q of SDS %q: rank differs", ErrInvalid, c.Name, s.Name)
	}
	for k := range s.Dims {
		if c.Dims[k] == 0 || c.Origin[k] >= s.Dims[k] || c.Dims[k] > s.Dims[k]-c.Origin[k] {
			return fmt.Errorf("%w: chunk %q of SDS %q: block %v+%v outside %v", ErrInvalid, c.Name, s.Name, c.Origin, c.Dims, s.Dims)
		}
	}
	return nil
}

func nbytes(t h5.Datatype, dims []uint64) uint64 {
	n, _ := h5.NumElements(dims)
	return n * uint64(t.Size)
}

func fixedString(s string, n int) []byte {
	b := make([]byte, n)
	copy(b, s)
	return b
}

func encodeFileInfo(rows []FileInfo) []byte {
	var b []byte
	for _, r := range rows {
		b = binary.LittleEndian.AppendUint32(b, uint32(r.ID))
		b = append(b, fixedString(r.Name, nameLen)...)
		b = append(b, fixedString(r.Host, nameLen)...)
	}
	return b
}

// cstr returns the text of a fixed-length NULLPAD field: the bytes before
// the first NUL. (A row is then checked to re-encode to its own bytes, so
// anything after that NUL makes it invalid rather than silently ignored.)
func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// validHost reports whether a host name fits File_Info: shorter than the
// field, without NUL.
func validHost(s string) bool { return len(s) < nameLen && strings.IndexByte(s, 0) < 0 }

func decodeFileInfoRow(r []byte) FileInfo {
	return FileInfo{
		ID:   int32(binary.LittleEndian.Uint32(r)),
		Name: cstr(r[4 : 4+nameLen]),
		Host: cstr(r[4+nameLen : 4+2*nameLen]),
	}
}

func encodeChunkTable(cs []Chunk) []byte {
	var b []byte
	for _, c := range cs {
		b = binary.LittleEndian.AppendUint32(b, uint32(c.FileID))
		b = append(b, fixedString(c.Name, nameLen)...)
		for _, v := range [][]uint64{c.Dims, c.Origin} {
			for k := 0; k < maxRank; k++ {
				var x uint32
				if k < len(v) {
					x = uint32(v[k])
				}
				b = binary.LittleEndian.AppendUint32(b, x)
			}
		}
	}
	return b
}

func decodeChunkRow(r []byte, rank int) Chunk {
	c := Chunk{FileID: int32(binary.LittleEndian.Uint32(r)), Name: cstr(r[4 : 4+nameLen])}
	p := r[4+nameLen:]
	for k := 0; k < rank && k < maxRank; k++ {
		c.Dims = append(c.Dims, uint64(binary.LittleEndian.Uint32(p[4*k:])))
		c.Origin = append(c.Origin, uint64(binary.LittleEndian.Uint32(p[4*(maxRank+k):])))
	}
	return c
}

// baseName is path.Base for slash paths.
func baseName(p string) string { return path.Base(p) }
