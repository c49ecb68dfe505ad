package ckpt

import (
	"fmt"

	"github.com/ftigo/ftigo/fileformat"
)

// Raw describes memory the runtime does not own and Go does not manage
// (C memory behind the C API, an mmap'd region), for [ProtectRaw].
type Raw struct {
	// Type is the element type recorded in the checkpoint;
	// fileformat.Struct stores opaque elements of ElemSize bytes.
	Type fileformat.ElemType
	// ElemSize is the element size in bytes: Type's natural size for the
	// fixed types, any positive size for fileformat.Struct and 1 for
	// fileformat.Bytes.
	ElemSize int
	// Mem is the variable's memory. Every checkpoint reads it in place and
	// Recover writes it in place; its length must be a whole number of
	// elements. It must stay valid until the id is protected again,
	// unprotected, or the runtime is finalized.
	Mem []byte
	// Resize, when set, is called by Recover, RecoverVar and Realloc when
	// the stored size differs from len(Mem), with the stored size in bytes
	// (a whole number of elements). It returns the variable's new memory,
	// exactly n bytes, which may have moved (C's realloc); that memory
	// replaces Mem. When Resize is nil, a different stored size is an error
	// wrapping [ErrVarMismatch] and Mem is left untouched.
	Resize func(n int64) ([]byte, error)
	// Name is an optional label stored with the variable.
	Name string
}

// ProtectRaw registers m under id, as [Protect] does for a Go slice:
// every checkpoint stores m.Mem without copying it and Recover restores
// it in place, resizing through m.Resize when the stored size differs.
// Protecting an id again replaces the registration (new memory, new
// size). The element type must be valid and m.Mem a whole number of
// elements, otherwise the error wraps [ErrBadType]. Local.
func ProtectRaw(r *Runtime, id int, m Raw) error {
	es, err := rawElemSize(m.Type, m.ElemSize)
	if err != nil {
		return fmt.Errorf("id %d: %w", id, err)
	}
	if len(m.Mem)%es != 0 {
		return fmt.Errorf("%w: id %d: %d bytes is not a whole number of %d-byte elements", ErrBadType, id, len(m.Mem), es)
	}
	mem, resize := m.Mem, m.Resize
	v := &variable{
		id: id, name: m.Name, typ: m.Type, elemSize: es,
		goType: fmt.Sprintf("raw %v memory (%d-byte elements)", m.Type, es),
		view: func() ([]byte, error) {
			if len(mem) == 0 {
				return nil, nil
			}
			return mem, nil
		},
		target: func(n int64) ([]byte, error) {
			if n%int64(es) != 0 {
				return nil, fmt.Errorf("%w: %d bytes is not a whole number of %d-byte elements", ErrVarMismatch, n, es)
			}
			if n == int64(len(mem)) {
				return mem, nil
			}
			if resize == nil {
				return nil, fmt.Errorf("%w: variable %d is stored with %d bytes but protected with %d", ErrVarMismatch, id, n, len(mem))
			}
			b, err := resize(n)
			if err != nil {
				return nil, fmt.Errorf("variable %d: resize to %d bytes: %w", id, n, err)
			}
			if int64(len(b)) != n {
				return nil, fmt.Errorf("%w: variable %d: resize to %d bytes returned %d", ErrVarMismatch, id, n, len(b))
			}
			mem = b
			return mem, nil
		},
	}
	return r.protect(v)
}

// rawElemSize checks a raw variable's element type and size.
func rawElemSize(t fileformat.ElemType, es int) (int, error) {
	switch {
	case !t.Valid():
		return 0, fmt.Errorf("%w: unknown element type %d", ErrBadType, int(t))
	case es <= 0 || es > 1<<30:
		return 0, fmt.Errorf("%w: element size %d", ErrBadType, es)
	case t != fileformat.Struct && int(t.Size()) != es:
		return 0, fmt.Errorf("%w: %v elements have %d bytes, not %d", ErrBadType, t, t.Size(), es)
	}
	return es, nil
}

// StoredVars lists the variables of the checkpoint this run restarted
// from, in file order: id, name, element type and stored size (what FTI
// keeps as the stored metadata, e.g. for FTI_getIDFromString). It fails
// with [ErrNoCheckpoint] on a fresh run; after a Checkpoint it lists that
// checkpoint's variables, as Recover reads them. Local.
func (r *Runtime) StoredVars() ([]fileformat.VarInfo, error) {
	if err := r.usable("StoredVars"); err != nil {
		return nil, err
	}
	st, err := r.openStored()
	if err != nil {
		return nil, err
	}
	return st.r.Vars(), nil
}
