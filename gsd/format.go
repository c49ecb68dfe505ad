package gsd

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Wire format: never change. The magic number of GSD file format 1.0 / 2.x.
const magic uint64 = 0x65DF65DF65DF65DF // first 8 bytes, little-endian

// Wire format: never change. Sizes and limits of GSD file format 1.0 / 2.x.
const (
	headerSize     = 256    // bytes of the header block at offset 0
	entrySize      = 32     // bytes of one index entry
	nameBlockUnit  = 64     // namelist_allocated_entries counts this many bytes
	v1NameSize     = 64     // 1.0: fixed name slot size
	fieldStrSize   = 64     // application and schema fields
	maxNames       = 0xFFFF // id 0xFFFF is reserved for "not found"
	initIndexSlots = 128    // index slots of a fresh file (as the reference writer)
	initNameBlocks = 16     // 64-byte units of a fresh namelist (1024 bytes)
)

// Wire format: never change. Header field offsets.
const (
	offMagic      = 0
	offIndexLoc   = 8
	offIndexAlloc = 16
	offNameLoc    = 24
	offNameAlloc  = 32
	offSchemaVer  = 40
	offGSDVer     = 44
	offApp        = 48
	offSchema     = 112
)

// Version is a packed major.minor version, (major << 16) | minor, as GSD
// stores gsd_version and schema_version.
type Version uint32

// MakeVersion packs major.minor.
func MakeVersion(major, minor uint16) Version { return Version(uint32(major)<<16 | uint32(minor)) }

// Major returns the major part of v.
func (v Version) Major() uint16 { return uint16(v >> 16) }

// Minor returns the minor part of v.
func (v Version) Minor() uint16 { return uint16(v) }

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major(), v.Minor()) }

// File format versions. Wire format: never change.
const (
	Version1 Version = 0x00010000 // 1.0: 64-byte names, per-frame search
	Version2 Version = 0x00020000 // 2.0: what this package writes
	// versionLimit is the first version readers reject (3.0).
	versionLimit Version = 0x00030000
	// version03 is the pre-1.0 development version still accepted by readers.
	version03 Version = 0x00000003
)

// Type is a GSD chunk type id.
type Type uint8

// Chunk type ids. Wire format: never change.
const (
	TypeUint8   Type = 1
	TypeUint16  Type = 2
	TypeUint32  Type = 3
	TypeUint64  Type = 4
	TypeInt8    Type = 5
	TypeInt16   Type = 6
	TypeInt32   Type = 7
	TypeInt64   Type = 8
	TypeFloat32 Type = 9
	TypeFloat64 Type = 10
	// TypeCharacter (file version 2.1+) is read but never written: python3-gsd
	// 2.7 reports files holding it as corrupt.
	TypeCharacter Type = 11
)

var typeSizes = [...]int{0, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8, 1}
var typeNames = [...]string{"type(0)", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float32", "float64", "char"}

// Size returns the size of one element in bytes, or 0 for an unknown type.
func (t Type) Size() int {
	if int(t) < len(typeSizes) {
		return typeSizes[t]
	}
	return 0
}

// Valid reports whether t is a type this package reads (1..11).
func (t Type) Valid() bool { return t >= TypeUint8 && t <= TypeCharacter }

// writable reports whether t may be written (1..10).
func (t Type) writable() bool { return t >= TypeUint8 && t <= TypeFloat64 }

// String returns the numpy-style name of t ("float32").
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Entry is one decoded 32-byte index entry.
type Entry struct {
	Frame    uint64 // 0-based frame number
	N        uint64 // rows
	Location int64  // byte offset of the data; 0 marks an unused slot
	M        uint32 // columns
	ID       uint16 // name id (position in the namelist)
	Type     Type
	Flags    uint8 // must be 0
}

// DataSize returns N·M·size(Type) and whether it fits in an int64.
func (e Entry) DataSize() (int64, bool) { return dataSize(e.N, e.M, e.Type) }

func dataSize(n uint64, m uint32, t Type) (int64, bool) {
	s := uint64(t.Size())
	if n == 0 || m == 0 || s == 0 {
		return 0, true
	}
	const lim = uint64(1<<63 - 1)
	if n > lim/uint64(m) {
		return 0, false
	}
	nm := n * uint64(m)
	if nm > lim/s {
		return 0, false
	}
	return int64(nm * s), true
}

func decodeEntry(b []byte) Entry {
	return Entry{
		Frame:    binary.LittleEndian.Uint64(b[0:]),
		N:        binary.LittleEndian.Uint64(b[8:]),
		Location: int64(binary.LittleEndian.Uint64(b[16:])),
		M:        binary.LittleEndian.Uint32(b[24:]),
		ID:       binary.LittleEndian.Uint16(b[28:]),
		Type:     Type(b[30]),
		Flags:    b[31],
	}
}

func encodeEntry(b []byte, e Entry) {
	binary.LittleEndian.PutUint64(b[0:], e.Frame)
	binary.LittleEndian.PutUint64(b[8:], e.N)
	binary.LittleEndian.PutUint64(b[16:], uint64(e.Location))
	binary.LittleEndian.PutUint32(b[24:], e.M)
	binary.LittleEndian.PutUint16(b[28:], e.ID)
	b[30] = byte(e.Type)
	b[31] = e.Flags
}

// Header is the decoded 256-byte file header.
type Header struct {
	IndexLocation   int64
	IndexAllocated  uint64 // 32-byte slots
	NameLocation    int64
	NameAllocated   uint64 // 64-byte units
	SchemaVersion   Version
	GSDVersion      Version
	Application     string
	Schema          string
	reserved        [80]byte // kept as read, rewritten unchanged
	reservedPresent bool
}

func decodeHeader(b []byte) Header {
	h := Header{
		IndexLocation:  int64(binary.LittleEndian.Uint64(b[offIndexLoc:])),
		IndexAllocated: binary.LittleEndian.Uint64(b[offIndexAlloc:]),
		NameLocation:   int64(binary.LittleEndian.Uint64(b[offNameLoc:])),
		NameAllocated:  binary.LittleEndian.Uint64(b[offNameAlloc:]),
		SchemaVersion:  Version(binary.LittleEndian.Uint32(b[offSchemaVer:])),
		GSDVersion:     Version(binary.LittleEndian.Uint32(b[offGSDVer:])),
		Application:    cString(b[offApp : offApp+fieldStrSize]),
		Schema:         cString(b[offSchema : offSchema+fieldStrSize]),
	}
	copy(h.reserved[:], b[offSchema+fieldStrSize:headerSize])
	h.reservedPresent = true
	return h
}

func (h *Header) encode() []byte {
	b := make([]byte, headerSize)
	binary.LittleEndian.PutUint64(b[offMagic:], magic)
	binary.LittleEndian.PutUint64(b[offIndexLoc:], uint64(h.IndexLocation))
	binary.LittleEndian.PutUint64(b[offIndexAlloc:], h.IndexAllocated)
	binary.LittleEndian.PutUint64(b[offNameLoc:], uint64(h.NameLocation))
	binary.LittleEndian.PutUint64(b[offNameAlloc:], h.NameAllocated)
	binary.LittleEndian.PutUint32(b[offSchemaVer:], uint32(h.SchemaVersion))
	binary.LittleEndian.PutUint32(b[offGSDVer:], uint32(h.GSDVersion))
	putCString(b[offApp:offApp+fieldStrSize], h.Application)
	putCString(b[offSchema:offSchema+fieldStrSize], h.Schema)
	copy(b[offSchema+fieldStrSize:], h.reserved[:])
	return b
}

// cString returns the bytes of b up to the first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// putCString stores s NUL-terminated in b, truncated to at most len(b)-1
// bytes at a UTF-8 character boundary (python3-gsd decodes the field as
// UTF-8, so half a character would make the file unreadable to it).
func putCString(b []byte, s string) {
	if k := len(b) - 1; len(s) > k {
		for k > 0 && !utf8.RuneStart(s[k]) {
			k--
		}
		s = s[:k]
	}
	n := copy(b[:len(b)-1], s)
	clear(b[n:])
}

// checkHeaderString checks an application or schema name for the header:
// valid UTF-8 (python3-gsd decodes it) without NUL (which would end it).
func checkHeaderString(what, s string) error {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s %q: not valid UTF-8 or holds NUL: %w", what, s, ErrName)
	}
	return nil
}

// versionReadable reports whether readers accept file version v.
func versionReadable(v Version) bool {
	return v == version03 || (v >= Version1 && v < versionLimit)
}

func leU64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
