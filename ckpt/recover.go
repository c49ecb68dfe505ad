package ckpt

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

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
	f, err := s.Driver.Open(s.Path(r.src.Name), vfd.ReadOnly)
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
// recovered, resizing slices to their stored length. It fails with
// [ErrNoCheckpoint] on a fresh run and with [ErrVarMismatch] when a
// protected variable is missing from the checkpoint or its element type
// or size differs. Every block is checked against its hash while it is
// read, and a variable whose read fails is zeroed, so bad data is never
// left looking restored.
//
// When any rank finds data that does not match its hashes (changed since
// Init looked at the file, or never read by Init: see [Init]), every rank
// runs the recovery Init runs, verifying every file: it rebuilds what
// redundancy allows, or falls back to the newest older checkpoint every
// rank can read, and the variables are read again from that one
// ([Runtime.Recovered] and [Runtime.Status] then describe it). When no
// checkpoint is left, the error wraps [ErrUnrecoverable] (and, on the
// ranks whose files failed, the corruption: [levels.ErrDigestMismatch] or
// [levels.ErrMissingFile]). Collective: the error is the same on every
// rank.
func (r *Runtime) Recover() error {
	if r.finalized {
		return ErrFinalized
	}
	if r.recovered == nil {
		return ErrNoCheckpoint // same everywhere, no need to agree
	}
	bad, err := r.restoreAll()
	var badErr error
	if bad {
		badErr = err
	}
	if aerr := levels.Agree(r.c, badErr, "read recovered data"); aerr != nil {
		r.log.Warn("recovered data does not match the checkpoint; verifying every file", zap.Error(aerr))
		m, src, rerr := r.eng.Recover()
		if rerr != nil {
			r.closeStored()
			return fmt.Errorf("ckpt: restart: %w", rerr)
		}
		r.restartFrom(m, src)
		if r.c.Rank() == 0 {
			r.log.Info("restarting from a verified checkpoint", zap.Int64("ckpt-id", m.ID), zap.Stringer("level", m.Level),
				zap.String("dir", m.Dir()), zap.Stringer("status", r.status))
		}
		_, err = r.restoreAll()
	}
	if err == nil {
		r.restored = true
	}
	if aerr := levels.Agree(r.c, err, "recover"); aerr != nil {
		return fmt.Errorf("ckpt: %w", aerr)
	}
	return nil
}

// restoreAll restores every protected variable in protect order and
// stops at the first error; bad reports that the error is about the
// stored data (unreadable or not matching its hashes) rather than about
// the application's variables.
func (r *Runtime) restoreAll() (bad bool, err error) {
	for _, id := range r.order {
		if bad, err = r.restoreVar(id); err != nil {
			return bad, err
		}
	}
	return false, nil
}

// RecoverVar restores one protected variable (FTI_RecoverVar), every
// block checked against its hash as it is read. Local: unlike
// [Runtime.Recover] it cannot fall back to another checkpoint, so data
// that does not match its hashes is an error (wrapping the fileformat
// corruption) and the variable is zeroed.
func (r *Runtime) RecoverVar(id int) error {
	if r.finalized {
		return ErrFinalized
	}
	return r.recoverVar(id)
}

func (r *Runtime) recoverVar(id int) error {
	_, err := r.restoreVar(id)
	return err
}

// restoreVar reads variable id into its memory, every block checked
// against its hash; on a failed read the memory is zeroed. bad reports
// that the error is about the stored data.
func (r *Runtime) restoreVar(id int) (bad bool, err error) {
	v, info, st, err := r.storedVar(id)
	if err != nil {
		return !errors.Is(err, ErrVarMismatch) && !errors.Is(err, ErrNotProtected), err
	}
	buf, err := v.target(info.Size)
	if err != nil {
		return false, fmt.Errorf("ckpt: recover variable %d: %w", id, err)
	}
	if err := st.r.ReadVar(int32(id), buf); err != nil {
		return true, fmt.Errorf("ckpt: recover variable %d: %w", id, err)
	}
	if v.loaded != nil {
		if err := v.loaded(buf); err != nil {
			return false, fmt.Errorf("ckpt: recover variable %d: %w", id, err)
		}
	}
	return false, nil
}

// StoredSize returns the size in bytes of variable id in the recovered
// checkpoint (FTI_GetStoredSize); the slice given to Protect is resized to
// it by Recover. Local.
func (r *Runtime) StoredSize(id int) (int64, error) {
	if r.finalized {
		return 0, ErrFinalized
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
	if r.finalized {
		return ErrFinalized
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
