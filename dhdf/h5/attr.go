package h5

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// Attribute is a named value attached to a group or dataset. Dims nil
// means a scalar; Data holds the little-endian elements.
type Attribute struct {
	Name string
	Type Datatype
	Dims []uint64
	Data []byte
}

// NewAttr builds an attribute from a Go value: a string (fixed-length
// NULLPAD string), a numeric scalar (int8..uint64, float32, float64) or a
// slice of one (a 1-D attribute).
func NewAttr(name string, v any) (Attribute, error) {
	if s, ok := v.(string); ok {
		return StringAttr(name, s), nil
	}
	t, ok := TypeOf(v)
	if !ok {
		return Attribute{}, fmt.Errorf("%w: attribute %q: unsupported Go type %T", ErrInvalid, name, v)
	}
	a := Attribute{Name: name, Type: t}
	data, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		return Attribute{}, fmt.Errorf("%w: attribute %q: %v", ErrInvalid, name, err)
	}
	a.Data = data
	if n := binary.Size(v); n >= 0 && isSlice(v) {
		a.Dims = []uint64{uint64(n) / uint64(t.Size)}
	}
	return a, nil
}

func isSlice(v any) bool {
	switch v.(type) {
	case []int8, []int16, []int32, []int64, []uint8, []uint16, []uint32, []uint64, []float32, []float64:
		return true
	}
	return false
}

// MustAttr is NewAttr for values known to be valid; it panics otherwise
// (use it with literals only).
func MustAttr(name string, v any) Attribute {
	a, err := NewAttr(name, v)
	if err != nil {
		panic(err)
	}
	return a
}

// StringAttr returns a scalar fixed-length NULLPAD string attribute; an
// empty string is stored as one NUL byte (HDF5 has no zero-size strings).
func StringAttr(name, s string) Attribute {
	d := []byte(s)
	if len(d) == 0 {
		d = []byte{0}
	}
	return Attribute{Name: name, Type: String(uint32(len(d))), Data: d}
}

// NumElements is the number of elements of a dataspace with these dims (1 for a scalar).
func NumElements(dims []uint64) (uint64, bool) {
	n := uint64(1)
	for _, d := range dims {
		if d != 0 && n > math.MaxUint64/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// IsString reports whether a is a string attribute.
func (a Attribute) IsString() bool { return a.Type.Class == ClassString }

// String returns a string attribute's value with trailing NULs removed,
// or a printed form of any other attribute.
func (a Attribute) String() string {
	if a.Type.Class == ClassString {
		return strings.TrimRight(string(a.Data), "\x00")
	}
	if a.Type.IsNumeric() {
		vs := a.Float64s()
		if a.Dims == nil && len(vs) == 1 {
			return fmt.Sprint(vs[0])
		}
		return fmt.Sprint(vs)
	}
	return fmt.Sprintf("<%s, %d bytes>", a.Type.Name(), len(a.Data))
}

// Int64s returns the elements of an integer or float attribute as int64.
func (a Attribute) Int64s() []int64 {
	if !a.Type.IsNumeric() {
		return nil
	}
	n := len(a.Data) / int(a.Type.Size)
	out := make([]int64, n)
	for i := range out {
		if a.Type.Class == ClassFloat {
			out[i] = int64(Number(a.Type, a.Data, i))
		} else {
			out[i] = Int(a.Type, a.Data[i*int(a.Type.Size):(i+1)*int(a.Type.Size)])
		}
	}
	return out
}

// Float64s returns the elements of a numeric attribute as float64.
func (a Attribute) Float64s() []float64 {
	if !a.Type.IsNumeric() {
		return nil
	}
	n := len(a.Data) / int(a.Type.Size)
	out := make([]float64, n)
	for i := range out {
		out[i] = Number(a.Type, a.Data, i)
	}
	return out
}

func (a Attribute) validate() error {
	if a.Name == "" || strings.IndexByte(a.Name, 0) >= 0 {
		return fmt.Errorf("%w: attribute name %q", ErrInvalid, a.Name)
	}
	if err := a.Type.validate(0); err != nil {
		return fmt.Errorf("attribute %q: %w", a.Name, err)
	}
	n, ok := NumElements(a.Dims)
	if !ok || n*uint64(a.Type.Size) != uint64(len(a.Data)) {
		return fmt.Errorf("%w: attribute %q: %d data bytes for %d elements of %d bytes", ErrInvalid, a.Name, len(a.Data), n, a.Type.Size)
	}
	return nil
}

// encode returns the attribute message v3 body.
func (a Attribute) encode() ([]byte, error) {
	dt := a.Type.encode(nil)
	ds := encodeDataspace(a.Dims)
	b := make([]byte, 0, 9+len(a.Name)+1+len(dt)+len(ds)+len(a.Data))
	b = append(b, 3, 0)
	b = le16(b, uint16(len(a.Name)+1))
	b = le16(b, uint16(len(dt)))
	b = le16(b, uint16(len(ds)))
	b = append(b, 0)
	b = append(b, a.Name...)
	b = append(b, 0)
	b = append(b, dt...)
	b = append(b, ds...)
	b = append(b, a.Data...)
	if len(b) > maxMessageSize || len(a.Name)+1 > 0xffff {
		return nil, fmt.Errorf("%w: attribute %q is %d bytes, over the 64 KiB message limit", ErrInvalid, a.Name, len(b))
	}
	return b, nil
}
