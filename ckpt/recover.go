package ckpt

import (
	"errors"
	"fmt"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/levels"
	"github.com/ftigo/ftigo/vfd"
)

// storedFile is the recovered data file, open for reading.
type storedFile struct {
	f vfd.File
	r *fileformat.Reader
}

func (r *Runtime) openStored() (*storedFile, error) {
	if r.recovered == nil {
		return nil, ErrNoCheckpoint
	}
	if r.stored != nil {
		return r.stored, nil
	}
	s := r.src.Store
	var f vfd.File
	var err error
	if r.srcTask != nil {
		f, err = levels.OpenTask(s, *r.srcTask) // the data lives only in the L4 container
	} else {
		f, err = s.Driver.Open(s.Path(r.src.Name), vfd.ReadOnly)
	}
	if err != nil {
		return nil, fmt.Errorf("ckpt: open recovered file: %w", err)
	}
	rd, err := fileformat.Open(f)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("ckpt: read recovered file: %w", err), f.Close())
	}
	r.stored = &storedFile{f: f, r: rd}
	return r.stored, nil
}

func (r *Runtime) closeStored() {
	if r.stored != nil {
		r.stored.f.Close()
		r.stored = nil
	}
}

// Recover restores every protected variable from the checkpoint Init
// restarted from — or, once this run has committed a checkpoint, from the
// newest one it committed (as FTI's FTI_Recover does) — resizing slices to
// their stored length. It fails with [ErrNoCheckpoint] on a fresh run
// before its first checkpoint, and with [ErrVarMismatch] when a protected
// variable is missing from the checkpoint or its element type or size
// differs. After a success [Runtime.Status] reports Fresh, as FTI_Status
// does.
//
// Recover is local, as in FTI: any subset of ranks may call it, in any
// order. It reads files Init has already verified completely (and rebuilt
// from redundancy, or chosen an older checkpoint for, when needed), and
// it still checks every block against its hash as it reads it: a block
// that does not match was changed after Init, and Recover returns a
// local error wrapping the corruption (fileformat.ErrHashMismatch) with
// the variable zeroed, so bad data is never left looking restored. It
// stops at the first variable that fails.
func (r *Runtime) Recover() error {
	if err := r.usable("Recover"); err != nil {
		return err
	}
	if r.recovered == nil {
		return ErrNoCheckpoint
	}
	for _, id := range r.order {
		if err := r.recoverVar(id); err != nil {
			return err
		}
	}
	r.restored = true
	r.status = Fresh
	return nil
}

// RecoverVar restores one protected variable (FTI_RecoverVar), every
// block checked against its hash as it is read; data that does not match
// is an error (wrapping the fileformat corruption) and the variable is
// zeroed. Local.
func (r *Runtime) RecoverVar(id int) error {
	if err := r.usable("RecoverVar"); err != nil {
		return err
	}
	return r.recoverVar(id)
}

// recoverVar reads variable id into its memory, every block checked
// against its hash; on a failed read the memory is zeroed.
func (r *Runtime) recoverVar(id int) error {
	v, info, st, err := r.storedVar(id)
	if err != nil {
		return err
	}
	buf, err := v.target(info.Size)
	if err != nil {
		return fmt.Errorf("ckpt: recover variable %d: %w", id, err)
	}
	if err := st.r.ReadVar(int32(id), buf); err != nil {
		return fmt.Errorf("ckpt: recover variable %d: %w", id, err)
	}
	if v.loaded != nil {
		if err := v.loaded(buf); err != nil {
			return fmt.Errorf("ckpt: recover variable %d: %w", id, err)
		}
	}
	return nil
}

// StoredSize returns the size in bytes of variable id in the checkpoint
// Recover reads (FTI_GetStoredSize); the slice given to Protect is resized to
// it by Recover. Local.
func (r *Runtime) StoredSize(id int) (int64, error) {
	if err := r.usable("StoredSize"); err != nil {
		return 0, err
	}
	st, err := r.openStored()
	if err != nil {
		return 0, err
	}
	n, err := st.r.StoredSize(int32(id))
	if err != nil {
		return 0, fmt.Errorf("ckpt: stored size of %d: %w", id, err)
	}
	return n, nil
}

// Realloc resizes protected variable id to its stored length without
// reading it (FTI_Realloc), so the application can size dependent state
// before Recover. Local.
func (r *Runtime) Realloc(id int) error {
	if err := r.usable("Realloc"); err != nil {
		return err
	}
	v, info, _, err := r.storedVar(id)
	if err != nil {
		return err
	}
	_, err = v.target(info.Size)
	return err
}

// storedVar returns protected variable id, its description in the
// recovered file and the open file, after checking that the stored
// element type and size match the protected ones.
func (r *Runtime) storedVar(id int) (*variable, fileformat.VarInfo, *storedFile, error) {
	v, ok := r.vars[id]
	if !ok {
		return nil, fileformat.VarInfo{}, nil, fmt.Errorf("%w: id %d", ErrNotProtected, id)
	}
	st, err := r.openStored()
	if err != nil {
		return nil, fileformat.VarInfo{}, nil, err
	}
	info, err := st.r.Var(int32(id))
	if err != nil {
		return nil, fileformat.VarInfo{}, nil, fmt.Errorf("%w: variable %d is not in checkpoint %d: %w", ErrVarMismatch, id, r.recovered.ID, err)
	}
	if info.Type != v.typ || int(info.ElemSize) != v.elemSize {
		return nil, fileformat.VarInfo{}, nil, fmt.Errorf("%w: variable %d is protected as %s (%v, %d bytes) but stored as %v with %d-byte elements",
			ErrVarMismatch, id, v.goType, v.typ, v.elemSize, info.Type, info.ElemSize)
	}
	return v, info, st, nil
}
