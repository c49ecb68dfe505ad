package main

import (
	"errors"
	"fmt"

	"github.com/ftigo/ftigo/fileformat"
)

// FTI's limits on data types (fti-intern.h): at most 64 types in all
// (the eleven predefined ones included), 128 fields per composite type,
// 32 dimensions per vector field.
const (
	maxTypes  = 64
	maxFields = 128
	maxDims   = 32
)

// The predefined type handles, in FTI's order: FTI_Init sets FTI_CHAR to
// 0, FTI_SHRT to 1, ... FTI_LDBE to 10.
const (
	typeChar = iota
	typeShort
	typeInt
	typeLong
	typeUChar
	typeUShort
	typeUInt
	typeULong
	typeFloat
	typeDouble
	typeLongDouble
	numBasicTypes
)

// basicNames are the predefined handles' C names, for messages.
var basicNames = [numBasicTypes]string{"FTI_CHAR", "FTI_SHRT", "FTI_INTG", "FTI_LONG", "FTI_UCHR", "FTI_USHT",
	"FTI_UINT", "FTI_ULNG", "FTI_SFLT", "FTI_DBLE", "FTI_LDBE"}

// cSizes are the sizes of C's types on the platform the library is built
// for (the cgo layer takes them from the C compiler).
type cSizes struct {
	Short, Int, Long, LongDouble int
}

// lp64 is x86-64 and AArch64 Linux: what the tests without cgo assume.
var lp64 = cSizes{Short: 2, Int: 4, Long: 8, LongDouble: 16}

// errType is returned for a bad type handle or definition.
var errType = errors.New("capi: bad data type")

// field is one field of a composite type.
type field struct {
	name   string
	typ    int
	offset int64
	dims   []int64 // nil for a scalar
}

// ctype is one registered data type.
type ctype struct {
	id   int
	name string
	size int
	// elem is what the checkpoint records: the element type of a
	// predefined handle with a Go equivalent, fileformat.Struct (opaque
	// elements of size bytes) for everything else.
	elem      fileformat.ElemType
	composite bool
	fields    []field
}

// typeTable holds the types of one FTI_Init..FTI_Finalize session.
type typeTable struct {
	types []*ctype
}

// newTypeTable registers the predefined types for a platform.
func newTypeTable(s cSizes) *typeTable {
	intType := func(size int, signed bool) fileformat.ElemType {
		switch {
		case size == 1 && signed:
			return fileformat.Int8
		case size == 1:
			return fileformat.Uint8
		case size == 2 && signed:
			return fileformat.Int16
		case size == 2:
			return fileformat.Uint16
		case size == 4 && signed:
			return fileformat.Int32
		case size == 4:
			return fileformat.Uint32
		case size == 8 && signed:
			return fileformat.Int64
		case size == 8:
			return fileformat.Uint64
		}
		return fileformat.Struct
	}
	basic := [numBasicTypes]struct {
		size int
		elem fileformat.ElemType
	}{
		// char's signedness differs between platforms; FTI_CHAR is
		// recorded as int8, the same bytes either way.
		typeChar:       {1, fileformat.Int8},
		typeShort:      {s.Short, intType(s.Short, true)},
		typeInt:        {s.Int, intType(s.Int, true)},
		typeLong:       {s.Long, intType(s.Long, true)},
		typeUChar:      {1, fileformat.Uint8},
		typeUShort:     {s.Short, intType(s.Short, false)},
		typeUInt:       {s.Int, intType(s.Int, false)},
		typeULong:      {s.Long, intType(s.Long, false)},
		typeFloat:      {4, fileformat.Float32},
		typeDouble:     {8, fileformat.Float64},
		typeLongDouble: {s.LongDouble, fileformat.Struct}, // no Go equivalent: opaque bytes
	}
	t := &typeTable{}
	for id, b := range basic {
		t.types = append(t.types, &ctype{id: id, name: basicNames[id], size: b.size, elem: b.elem})
	}
	return t
}

// get returns the type with handle id.
func (t *typeTable) get(id int) (*ctype, error) {
	if id < 0 || id >= len(t.types) {
		return nil, fmt.Errorf("%w: handle %d is not a type (FTI_Init sets the predefined handles, FTI_InitType and FTI_InitCompositeType return new ones; %d exist)",
			errType, id, len(t.types))
	}
	return t.types[id], nil
}

// add registers an opaque type of size bytes (FTI_InitType).
func (t *typeTable) add(name string, size int64, composite bool) (*ctype, error) {
	if size <= 0 || size > 1<<30 {
		return nil, fmt.Errorf("%w: size %d (types must have a positive size up to 1 GiB)", errType, size)
	}
	if len(t.types) >= maxTypes {
		return nil, fmt.Errorf("%w: at most %d data types, the %d predefined ones included", errType, maxTypes, numBasicTypes)
	}
	id := len(t.types)
	if name == "" {
		name = fmt.Sprintf("Type%d", id)
	}
	ct := &ctype{id: id, name: name, size: int(size), elem: fileformat.Struct, composite: composite}
	t.types = append(t.types, ct)
	return ct, nil
}

// addField adds a scalar field (dims nil) or an n-dimensional vector
// field to composite type id (FTI_AddScalarField, FTI_AddVectorField).
// ftigo records composite elements as opaque bytes, so the fields only
// describe the layout; they are checked to lie inside the type.
func (t *typeTable) addField(id int, name string, fieldType int, offset int64, dims []int64) error {
	ct, err := t.get(id)
	if err != nil {
		return err
	}
	if !ct.composite {
		return fmt.Errorf("%w: %s (handle %d) is not a composite type (create it with FTI_InitCompositeType)", errType, ct.name, id)
	}
	ft, err := t.get(fieldType)
	if err != nil {
		return fmt.Errorf("field %q: %w", name, err)
	}
	if len(ct.fields) >= maxFields {
		return fmt.Errorf("%w: %s has %d fields already (at most %d)", errType, ct.name, len(ct.fields), maxFields)
	}
	if dims != nil && (len(dims) < 1 || len(dims) > maxDims) {
		return fmt.Errorf("%w: field %q has %d dimensions (1..%d)", errType, name, len(dims), maxDims)
	}
	n := int64(1)
	for i, d := range dims {
		if d < 1 || d > 1<<30 {
			return fmt.Errorf("%w: field %q dimension %d has length %d (must be positive)", errType, name, i, d)
		}
		n *= d
		if n > 1<<30 {
			return fmt.Errorf("%w: field %q has more than 2^30 elements", errType, name)
		}
	}
	end := offset + n*int64(ft.size)
	if offset < 0 || end > int64(ct.size) {
		return fmt.Errorf("%w: field %q of %d bytes at offset %d does not fit %s's %d bytes",
			errType, name, n*int64(ft.size), offset, ct.name, ct.size)
	}
	if name == "" {
		name = fmt.Sprintf("T%d", len(ct.fields))
	}
	ct.fields = append(ct.fields, field{name: name, typ: fieldType, offset: offset, dims: dims})
	return nil
}
