package h5

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Class is an HDF5 datatype class. Values are wire format: never change.
type Class uint8

// The datatype classes of the profile.
const (
	ClassFixed    Class = 0  // integers
	ClassFloat    Class = 1  // IEEE floats
	ClassString   Class = 3  // fixed-length strings (NULLPAD)
	ClassCompound Class = 6  // records
	ClassArray    Class = 10 // fixed-size arrays (compound members)
)

// Datatype describes an element type. Integers and floats are little-endian.
type Datatype struct {
	Class   Class
	Size    uint32   // bytes per element
	Signed  bool     // ClassFixed
	Members []Member // ClassCompound, in offset order
	Base    *Datatype
	Dims    []uint32 // ClassArray
}

// Member is one field of a compound datatype.
type Member struct {
	Name   string
	Offset uint32
	Type   Datatype
}

// Predefined atomic datatypes.
var (
	Int8    = Datatype{Class: ClassFixed, Size: 1, Signed: true}
	Int16   = Datatype{Class: ClassFixed, Size: 2, Signed: true}
	Int32   = Datatype{Class: ClassFixed, Size: 4, Signed: true}
	Int64   = Datatype{Class: ClassFixed, Size: 8, Signed: true}
	Uint8   = Datatype{Class: ClassFixed, Size: 1}
	Uint16  = Datatype{Class: ClassFixed, Size: 2}
	Uint32  = Datatype{Class: ClassFixed, Size: 4}
	Uint64  = Datatype{Class: ClassFixed, Size: 8}
	Float32 = Datatype{Class: ClassFloat, Size: 4}
	Float64 = Datatype{Class: ClassFloat, Size: 8}
)

// String returns a fixed-length NULLPAD string type of n bytes.
func String(n uint32) Datatype { return Datatype{Class: ClassString, Size: n} }

// Array returns an array type of base with the given dimensions.
func Array(base Datatype, dims ...uint32) Datatype {
	n := uint64(base.Size)
	for _, d := range dims {
		n *= uint64(d)
	}
	b := base
	return Datatype{Class: ClassArray, Size: uint32(n), Base: &b, Dims: append([]uint32(nil), dims...)}
}

// Compound returns a packed compound type of the members in order; their
// offsets are computed.
func Compound(members ...Member) Datatype {
	var off uint32
	ms := make([]Member, len(members))
	for i, m := range members {
		ms[i] = Member{Name: m.Name, Offset: off, Type: m.Type}
		off += m.Type.Size
	}
	return Datatype{Class: ClassCompound, Size: off, Members: ms}
}

// Name is a short description, e.g. "int32", "float64", "string(255)".
func (t Datatype) Name() string {
	switch t.Class {
	case ClassFixed:
		if t.Signed {
			return fmt.Sprintf("int%d", t.Size*8)
		}
		return fmt.Sprintf("uint%d", t.Size*8)
	case ClassFloat:
		return fmt.Sprintf("float%d", t.Size*8)
	case ClassString:
		return fmt.Sprintf("string(%d)", t.Size)
	case ClassArray:
		if t.Base != nil {
			return fmt.Sprintf("%s%v", t.Base.Name(), t.Dims)
		}
	case ClassCompound:
		s := "compound{"
		for i, m := range t.Members {
			if i > 0 {
				s += ", "
			}
			s += m.Name + " " + m.Type.Name()
		}
		return s + "}"
	}
	return fmt.Sprintf("class%d(%d)", t.Class, t.Size)
}

// Equal reports whether t and u describe the same type.
func (t Datatype) Equal(u Datatype) bool {
	if t.Class != u.Class || t.Size != u.Size || t.Signed != u.Signed || len(t.Members) != len(u.Members) || len(t.Dims) != len(u.Dims) {
		return false
	}
	for i := range t.Members {
		if t.Members[i].Name != u.Members[i].Name || t.Members[i].Offset != u.Members[i].Offset || !t.Members[i].Type.Equal(u.Members[i].Type) {
			return false
		}
	}
	for i := range t.Dims {
		if t.Dims[i] != u.Dims[i] {
			return false
		}
	}
	if (t.Base == nil) != (u.Base == nil) {
		return false
	}
	return t.Base == nil || t.Base.Equal(*u.Base)
}

// IsNumeric reports whether t is one of the predefined integer or float types.
func (t Datatype) IsNumeric() bool {
	switch t.Class {
	case ClassFixed:
		return t.Size == 1 || t.Size == 2 || t.Size == 4 || t.Size == 8
	case ClassFloat:
		return t.Size == 4 || t.Size == 8
	}
	return false
}

// validate checks that t can be encoded.
func (t Datatype) validate(depth int) error {
	if depth > 8 {
		return fmt.Errorf("%w: datatype nested too deeply", ErrInvalid)
	}
	switch t.Class {
	case ClassFixed, ClassFloat:
		if !t.IsNumeric() {
			return fmt.Errorf("%w: %s has no HDF5 encoding", ErrInvalid, t.Name())
		}
	case ClassString:
		if t.Size == 0 {
			return fmt.Errorf("%w: zero-length string type", ErrInvalid)
		}
	case ClassArray:
		if t.Base == nil || len(t.Dims) == 0 || len(t.Dims) > 32 {
			return fmt.Errorf("%w: array type needs a base and 1..32 dims", ErrInvalid)
		}
		n := uint64(t.Base.Size)
		for _, d := range t.Dims {
			n *= uint64(d)
		}
		if n != uint64(t.Size) {
			return fmt.Errorf("%w: array size %d != %d", ErrInvalid, t.Size, n)
		}
		return t.Base.validate(depth + 1)
	case ClassCompound:
		if len(t.Members) == 0 || len(t.Members) > 0xffff {
			return fmt.Errorf("%w: compound type needs 1..65535 members", ErrInvalid)
		}
		for _, m := range t.Members {
			if m.Name == "" || !validName(m.Name) || uint64(m.Offset)+uint64(m.Type.Size) > uint64(t.Size) {
				return fmt.Errorf("%w: compound member %q", ErrInvalid, m.Name)
			}
			if err := m.Type.validate(depth + 1); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%w: datatype class %d", ErrInvalid, t.Class)
	}
	return nil
}

// encode appends the datatype message body.
func (t Datatype) encode(b []byte) []byte {
	switch t.Class {
	case ClassFixed:
		var bf byte
		if t.Signed {
			bf = 0x08
		}
		b = append(b, 0x10|byte(ClassFixed), bf, 0, 0)
		b = binary.LittleEndian.AppendUint32(b, t.Size)
		b = binary.LittleEndian.AppendUint16(b, 0)
		b = binary.LittleEndian.AppendUint16(b, uint16(t.Size*8))
	case ClassFloat:
		// bit field: byte order LE, no padding, mantissa normalization "implied" (2), sign bit position.
		b = append(b, 0x10|byte(ClassFloat), 0x20, byte(t.Size*8-1), 0)
		b = binary.LittleEndian.AppendUint32(b, t.Size)
		b = binary.LittleEndian.AppendUint16(b, 0)
		b = binary.LittleEndian.AppendUint16(b, uint16(t.Size*8))
		if t.Size == 4 {
			b = append(b, 23, 8, 0, 23)
			b = binary.LittleEndian.AppendUint32(b, 127)
		} else {
			b = append(b, 52, 11, 0, 52)
			b = binary.LittleEndian.AppendUint32(b, 1023)
		}
	case ClassString:
		b = append(b, 0x10|byte(ClassString), 0x01, 0, 0) // NULLPAD, ASCII
		b = binary.LittleEndian.AppendUint32(b, t.Size)
	case ClassArray:
		b = append(b, 0x30|byte(ClassArray), 0, 0, 0)
		b = binary.LittleEndian.AppendUint32(b, t.Size)
		b = append(b, byte(len(t.Dims)))
		for _, d := range t.Dims {
			b = binary.LittleEndian.AppendUint32(b, d)
		}
		b = t.Base.encode(b)
	case ClassCompound:
		n := len(t.Members)
		b = append(b, 0x30|byte(ClassCompound), byte(n), byte(n>>8), 0)
		b = binary.LittleEndian.AppendUint32(b, t.Size)
		w := offsetWidth(t.Size)
		for _, m := range t.Members {
			b = append(b, m.Name...)
			b = append(b, 0)
			for i := 0; i < w; i++ {
				b = append(b, byte(m.Offset>>(8*i)))
			}
			b = m.Type.encode(b)
		}
	}
	return b
}

// offsetWidth is the number of bytes a compound v3 member offset takes:
// the fewest that can hold the compound's size.
func offsetWidth(size uint32) int {
	switch {
	case size < 1<<8:
		return 1
	case size < 1<<16:
		return 2
	case size < 1<<24:
		return 3
	}
	return 4
}

// decodeDatatype decodes a datatype message body and returns it with the
// number of bytes used.
func decodeDatatype(p []byte, depth int) (Datatype, int, error) {
	var t Datatype
	if depth > 8 {
		return t, 0, fmt.Errorf("%w: datatype nested too deeply", ErrCorrupt)
	}
	if len(p) < 8 {
		return t, 0, fmt.Errorf("%w: short datatype", ErrCorrupt)
	}
	cls, ver := Class(p[0]&0x0f), p[0]>>4
	bf := uint32(p[1]) | uint32(p[2])<<8 | uint32(p[3])<<16
	t.Class = cls
	t.Size = binary.LittleEndian.Uint32(p[4:8])
	n := 8
	switch cls {
	case ClassFixed:
		if ver != 1 || bf&^0x08 != 0 || len(p) < 12 {
			return t, 0, fmt.Errorf("%w: fixed-point type version %d bits %#x", ErrUnsupported, ver, bf)
		}
		t.Signed = bf&0x08 != 0
		if binary.LittleEndian.Uint16(p[8:]) != 0 || uint32(binary.LittleEndian.Uint16(p[10:])) != t.Size*8 || !t.IsNumeric() {
			return t, 0, fmt.Errorf("%w: fixed-point type of size %d", ErrUnsupported, t.Size)
		}
		n += 4
	case ClassFloat:
		if ver != 1 || len(p) < 20 || !t.IsNumeric() || bf != 0x20|(t.Size*8-1)<<8 {
			return t, 0, fmt.Errorf("%w: floating-point type version %d bits %#x size %d", ErrUnsupported, ver, bf, t.Size)
		}
		want := Float64.encode(nil)
		if t.Size == 4 {
			want = Float32.encode(nil)
		}
		if string(p[:20]) != string(want) {
			return t, 0, fmt.Errorf("%w: non-IEEE floating-point layout", ErrUnsupported)
		}
		n += 12
	case ClassString:
		if ver != 1 || bf != 0x01 || t.Size == 0 {
			return t, 0, fmt.Errorf("%w: string type version %d bits %#x", ErrUnsupported, ver, bf)
		}
	case ClassArray:
		if ver != 3 || len(p) < 9 {
			return t, 0, fmt.Errorf("%w: array type version %d", ErrUnsupported, ver)
		}
		rank := int(p[8])
		n = 9
		if rank == 0 || rank > 32 || len(p) < n+4*rank {
			return t, 0, fmt.Errorf("%w: array rank %d", ErrCorrupt, rank)
		}
		for i := 0; i < rank; i++ {
			t.Dims = append(t.Dims, binary.LittleEndian.Uint32(p[n:]))
			n += 4
		}
		base, m, err := decodeDatatype(p[n:], depth+1)
		if err != nil {
			return t, 0, err
		}
		n += m
		t.Base = &base
		if err := t.validate(0); err != nil {
			return t, 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	case ClassCompound:
		if ver != 3 {
			return t, 0, fmt.Errorf("%w: compound type version %d", ErrUnsupported, ver)
		}
		nm := int(bf & 0xffff)
		w := offsetWidth(t.Size)
		for i := 0; i < nm; i++ {
			end := n
			for end < len(p) && p[end] != 0 {
				end++
			}
			if end >= len(p) || end+1+w > len(p) {
				return t, 0, fmt.Errorf("%w: short compound member", ErrCorrupt)
			}
			var m Member
			m.Name = string(p[n:end])
			n = end + 1
			for j := 0; j < w; j++ {
				m.Offset |= uint32(p[n+j]) << (8 * j)
			}
			n += w
			mt, k, err := decodeDatatype(p[n:], depth+1)
			if err != nil {
				return t, 0, err
			}
			n += k
			m.Type = mt
			t.Members = append(t.Members, m)
		}
		if err := t.validate(0); err != nil {
			return t, 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	default:
		return t, 0, fmt.Errorf("%w: datatype class %d", ErrUnsupported, cls)
	}
	return t, n, nil
}

// TypeOf returns the datatype of a Go numeric value or slice element
// (int8..int64, uint8..uint64, float32, float64).
func TypeOf(v any) (Datatype, bool) {
	switch v.(type) {
	case int8, []int8:
		return Int8, true
	case int16, []int16:
		return Int16, true
	case int32, []int32:
		return Int32, true
	case int64, []int64:
		return Int64, true
	case uint8, []uint8:
		return Uint8, true
	case uint16, []uint16:
		return Uint16, true
	case uint32, []uint32:
		return Uint32, true
	case uint64, []uint64:
		return Uint64, true
	case float32, []float32:
		return Float32, true
	case float64, []float64:
		return Float64, true
	}
	return Datatype{}, false
}

// Number decodes element i of raw data of numeric type t as float64 (exact
// for every integer up to 2^53).
func Number(t Datatype, p []byte, i int) float64 {
	o := i * int(t.Size)
	q := p[o : o+int(t.Size)]
	switch {
	case t.Class == ClassFloat && t.Size == 4:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(q)))
	case t.Class == ClassFloat:
		return math.Float64frombits(binary.LittleEndian.Uint64(q))
	}
	return float64(Int(t, q))
}

// Int decodes one integer element of type t from q (len(q) == t.Size).
func Int(t Datatype, q []byte) int64 {
	switch t.Size {
	case 1:
		if t.Signed {
			return int64(int8(q[0]))
		}
		return int64(q[0])
	case 2:
		v := binary.LittleEndian.Uint16(q)
		if t.Signed {
			return int64(int16(v))
		}
		return int64(v)
	case 4:
		v := binary.LittleEndian.Uint32(q)
		if t.Signed {
			return int64(int32(v))
		}
		return int64(v)
	}
	return int64(binary.LittleEndian.Uint64(q))
}
