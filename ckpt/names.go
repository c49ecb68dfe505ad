package ckpt

import (
	"fmt"
)

// checkName refuses a name that another protected variable already has.
func (r *Runtime) checkName(id int, name string) error {
	if name == "" {
		return nil
	}
	for oid, v := range r.vars {
		if oid != id && v.name == name {
			return fmt.Errorf("%w: %q is variable %d, cannot name variable %d", ErrNameTaken, name, oid, id)
		}
	}
	return nil
}

// IDByName returns the id under which the recovered checkpoint stores the
// variable named name (FTI_getIDFromString). The name comes from the run
// that wrote the checkpoint, whose ids may differ from this run's; on a
// redistributing restart, from the old rank this rank takes variables
// outside the datasets from (old rank 0 when the counts do not divide).
// Local.
func (r *Runtime) IDByName(name string) (int, error) {
	if err := r.usable("IDByName"); err != nil {
		return 0, err
	}
	if r.recovered == nil {
		return 0, ErrNoCheckpoint
	}
	if r.reshape != nil {
		return r.reshapeIDByName(name)
	}
	st, err := r.openStored()
	if err != nil {
		return 0, err
	}
	info, err := st.r.VarByName(name)
	if err != nil {
		return 0, fmt.Errorf("ckpt: checkpoint %d: %w", r.recovered.ID, err)
	}
	return int(info.ID), nil
}

// RecoverVarByName restores the protected variable named name from the
// variable stored under that name in the recovered checkpoint, whatever
// id each run gave it (FTI's recovery by name: FTI_getIDFromString, then
// FTI_RecoverVar). Every block is checked against its hash as it is read;
// a variable whose read fails is zeroed. It fails with [ErrNotProtected]
// when no protected variable has the name and with [ErrVarMismatch] when
// the checkpoint holds no variable of that name (or two) or its element
// type or size differs. Local; collective on a redistributing restart, as
// RecoverVar (a variable outside the datasets is then looked up by name in
// the old rank it comes from).
func (r *Runtime) RecoverVarByName(name string) error {
	if err := r.usable("RecoverVarByName"); err != nil {
		return err
	}
	var v *variable
	for _, x := range r.vars {
		if x.name == name && name != "" {
			v = x
			break
		}
	}
	if r.reshape != nil {
		if v == nil {
			return r.recoverReshapedMissing(fmt.Errorf("%w: no variable named %q", ErrNotProtected, name))
		}
		return r.recoverReshaped([]int{v.id}, true)
	}
	if v == nil {
		return fmt.Errorf("%w: no variable named %q", ErrNotProtected, name)
	}
	st, err := r.openStored()
	if err != nil {
		return err
	}
	info, err := st.r.VarByName(name)
	if err != nil {
		return fmt.Errorf("%w: checkpoint %d: %w", ErrVarMismatch, r.recovered.ID, err)
	}
	if info.Type != v.typ || int(info.ElemSize) != v.elemSize {
		return fmt.Errorf("%w: variable %q (id %d) is protected as %s (%v, %d bytes) but stored (id %d) as %v with %d-byte elements",
			ErrVarMismatch, name, v.id, v.goType, v.typ, v.elemSize, info.ID, info.Type, info.ElemSize)
	}
	buf, err := v.target(info.Size)
	if err != nil {
		return fmt.Errorf("ckpt: recover variable %q: %w", name, err)
	}
	if _, err := r.readStored(st, info.ID, buf); err != nil {
		return fmt.Errorf("ckpt: recover variable %q: %w", name, err)
	}
	if v.loaded != nil {
		if err := v.loaded(buf); err != nil {
			return fmt.Errorf("ckpt: recover variable %q: %w", name, err)
		}
	}
	return nil
}
