package ckpt

import (
	"encoding"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/ftigo/ftigo/fileformat"
)

// Serializer is implemented by values that are not flat memory (maps,
// trees, anything with pointers) and should be checkpointed: the runtime
// stores MarshalBinary's bytes and gives them back to UnmarshalBinary.
type Serializer interface {
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// variable is one protected variable as the runtime tracks it.
type variable struct {
	id       int
	name     string
	typ      fileformat.ElemType
	elemSize int
	goType   string // for error messages
	// view returns the variable's current bytes (zero-copy for slices).
	view func() ([]byte, error)
	// target resizes the variable to n bytes and returns the memory to
	// read them into.
	target func(n int64) ([]byte, error)
	// loaded, when set, is called with the bytes read into target's memory.
	loaded func(b []byte) error
	// marshals says view serializes (ProtectValue): its size is known
	// only then.
	marshals bool
}

// Protect registers the slice *p under id (and optionally a name) so that
// every checkpoint stores it and Recover restores it. A name identifies
// the variable across runs ([Runtime.RecoverVarByName]); two protected
// variables cannot share one ([ErrNameTaken]). T must be a
// fixed-size type without pointers (numbers, bools, arrays and structs of
// them); the bytes are read in place, without a copy. Protecting an id
// again replaces the registration (a new slice, a new length). Recover
// resizes *p to the stored length (FTI's Realloc) and fails with
// [ErrVarMismatch] when the stored element type or size differs.
//
// Protect is local to the rank; every rank should protect the same ids.
// The slice must not be modified while a Checkpoint runs.
func Protect[T any](r *Runtime, id int, p *[]T, name ...string) error {
	if r == nil {
		return r.usable("Protect")
	}
	if p == nil {
		return fmt.Errorf("%w: id %d: nil slice pointer", ErrBadType, id)
	}
	rt := reflect.TypeFor[T]()
	et, err := elemTypeOf(rt)
	if err != nil {
		return fmt.Errorf("id %d: %w", id, err)
	}
	size := int(rt.Size()) // > 0: elemTypeOf refuses zero-size types
	v := &variable{
		id: id, typ: et, elemSize: size, goType: rt.String(),
		view: func() ([]byte, error) {
			s := *p
			if len(s) == 0 {
				return nil, nil
			}
			return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*size), nil
		},
		target: func(nb int64) ([]byte, error) {
			if nb%int64(size) != 0 {
				return nil, fmt.Errorf("%w: %d bytes is not a whole number of %d-byte elements", ErrVarMismatch, nb, size)
			}
			n := int(nb / int64(size))
			s := *p
			if cap(s) < n {
				s = make([]T, n)
			}
			s = s[:n]
			*p = s
			if n == 0 {
				return nil, nil
			}
			return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), n*size), nil
		},
	}
	if len(name) > 0 {
		v.name = name[0]
	}
	if err := r.checkName(id, v.name); err != nil {
		return err
	}
	return r.protect(v)
}

// ProtectValue registers a [Serializer] under id: each checkpoint stores
// v.MarshalBinary(), Recover calls v.UnmarshalBinary.
func ProtectValue(r *Runtime, id int, v Serializer, name ...string) error {
	if r == nil {
		return r.usable("ProtectValue")
	}
	if v == nil {
		return fmt.Errorf("%w: id %d: nil value", ErrBadType, id)
	}
	vr := &variable{
		id: id, typ: fileformat.Bytes, elemSize: 1, goType: fmt.Sprintf("%T", v),
		view:     func() ([]byte, error) { return v.MarshalBinary() },
		target:   func(n int64) ([]byte, error) { return make([]byte, n), nil },
		loaded:   func(b []byte) error { return v.UnmarshalBinary(b) },
		marshals: true,
	}
	if len(name) > 0 {
		vr.name = name[0]
	}
	if err := r.checkName(id, vr.name); err != nil {
		return err
	}
	return r.protect(vr)
}

// elemTypeOf maps a Go element type to the file's element type, refusing
// types that contain pointers.
func elemTypeOf(t reflect.Type) (fileformat.ElemType, error) {
	if err := pointerFree(t); err != nil {
		return 0, err
	}
	switch t.Kind() {
	case reflect.Int8:
		return fileformat.Int8, nil
	case reflect.Int16:
		return fileformat.Int16, nil
	case reflect.Int32:
		return fileformat.Int32, nil
	case reflect.Int64:
		return fileformat.Int64, nil
	case reflect.Uint8:
		return fileformat.Uint8, nil
	case reflect.Uint16:
		return fileformat.Uint16, nil
	case reflect.Uint32:
		return fileformat.Uint32, nil
	case reflect.Uint64:
		return fileformat.Uint64, nil
	case reflect.Float32:
		return fileformat.Float32, nil
	case reflect.Float64:
		return fileformat.Float64, nil
	case reflect.Complex64:
		return fileformat.Complex64, nil
	case reflect.Complex128:
		return fileformat.Complex128, nil
	}
	// int, uint, uintptr, bool, arrays and structs: opaque elements of their size.
	if t.Size() == 0 {
		return 0, fmt.Errorf("%w: %s has size 0", ErrBadType, t)
	}
	return fileformat.Struct, nil
}

func pointerFree(t reflect.Type) error {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return nil
	case reflect.Array:
		return pointerFree(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if err := pointerFree(t.Field(i).Type); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: %s holds a %s; implement ckpt.Serializer", ErrBadType, t, t.Kind())
}
