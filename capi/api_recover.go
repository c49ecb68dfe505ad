//lint:file-ignore U1000 the C entry points in capi.go (build tag mpi) are the only callers of some methods; staticcheck -tags mpi checks them

package main

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/fileformat"
)

// recover is FTI_Recover (fn names the caller in messages). The number of
// protected variables must equal the checkpoint's, and each one its
// stored size, as in FTI. Local, as FTI_Recover and ckpt's Recover are.
func (l *library) recover(fn string) int {
	if !l.ready(fn) {
		return codeNoRecovery
	}
	if l.rt.Reshaped() {
		return l.recoverReshaped(fn)
	}
	stored, err := l.rt.StoredVars()
	if errors.Is(err, ckpt.ErrNoCheckpoint) { // the same on every rank
		l.logger().Warn(fn + ": nothing to recover: this run is not a restart, or a checkpoint taken since superseded the restart data")
		return codeNoRecovery
	}
	why := ""
	if err == nil {
		// A damaged file (err != nil) is left to the runtime, which falls
		// back to an older checkpoint. Otherwise everything is checked
		// before any memory is written, as FTI does.
		why = l.mismatch(stored)
	}
	// FTI_Recover is rank-local, as ckpt's Recover is: a rank whose
	// variables do not match refuses alone, and the others go on.
	if why != "" {
		l.logger().Warn(fn + ": " + why)
		return codeNoRecovery
	}
	if err := l.rt.Recover(); err != nil {
		return codeNoRecovery // the runtime logged it, with the error
	}
	l.status = 0 // the runtime logged what it recovered, and how fast
	return codeSuccess
}

// recoverReshaped is FTI_Recover on a restart from data another number
// of ranks (or placement, or a level-9 file) wrote: collective, every
// rank receives its subsets of the global datasets from whichever old
// ranks hold them, and the result is the same on every rank. Each
// variable must be protected with its subset's count (or resized with
// FTI_Realloc first).
func (l *library) recoverReshaped(fn string) int {
	if err := l.rt.Recover(); err != nil {
		return codeNoRecovery // the runtime logged it, with the error
	}
	l.status = 0 // the runtime logged what it recovered, from how many ranks
	return codeSuccess
}

// mismatch says why the protected variables cannot receive the stored
// ones ("" when they can): FTI requires the same number of variables and
// the stored size for each; ftigo also requires the stored element type.
func (l *library) mismatch(stored []fileformat.VarInfo) string {
	if len(stored) != len(l.vars) {
		return fmt.Sprintf("Checkpoint has %d protected variables, but FTI protects %d.", len(stored), len(l.vars))
	}
	byID := make(map[int]fileformat.VarInfo, len(stored))
	for _, s := range stored {
		byID[int(s.ID)] = s
	}
	ids := make([]int, 0, len(l.vars))
	for id := range l.vars {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		v := l.vars[id]
		s, ok := byID[id]
		switch {
		case !ok:
			return fmt.Sprintf("variable %d is protected but not in the checkpoint", id)
		case s.Size != v.bytes():
			return fmt.Sprintf("Cannot recover %d bytes to protected variable (ID %d) size: %d "+
				"(FTI_Realloc, or FTI_Protect with FTI_GetStoredSize bytes)", s.Size, id, v.bytes())
		case s.Type != v.typ.elem || int(s.ElemSize) != v.typ.size:
			return fmt.Sprintf("variable %d is stored as %v elements of %d bytes but protected as %s (%d bytes)",
				id, s.Type, s.ElemSize, v.typ.name, v.typ.size)
		}
	}
	return ""
}

// recoverVarInit is FTI_RecoverVarInit: a no-op on a fresh run, as in FTI.
func (l *library) recoverVarInit() int {
	const fn = "FTI_RecoverVarInit"
	if !l.ready(fn) {
		return codeFailure
	}
	if l.status == 0 || l.rt.Reshaped() {
		// A redistributing restart's metadata was read by FTI_Init.
		return codeSuccess
	}
	if _, err := l.rt.StoredVars(); err != nil {
		return l.fail(fn, "the restart checkpoint is not readable", zap.Error(err))
	}
	return codeSuccess
}

// recoverVar is FTI_RecoverVar: one variable, every block checked against
// its hash. Local.
func (l *library) recoverVar(id int) int {
	const fn = "FTI_RecoverVar"
	if !l.ready(fn) {
		return codeFailure
	}
	if _, ok := l.vars[id]; !ok && !l.rt.Reshaped() {
		// On a redistributing restart the call is collective and the
		// runtime fails it on every rank.
		return l.fail(fn, fmt.Sprintf("variable %d is not protected", id))
	}
	if err := l.rt.RecoverVar(id); err != nil {
		l.logger().Warn(fn+fmt.Sprintf(": variable %d not recovered", id), zap.Error(err))
		return codeNoRecovery
	}
	return codeSuccess
}

// recoverVarFinalize is FTI_RecoverVarFinalize.
func (l *library) recoverVarFinalize() int {
	if !l.ready("FTI_RecoverVarFinalize") {
		return codeFailure
	}
	return codeSuccess
}

// storedSize is FTI_GetStoredSize: the variable's size in the checkpoint
// being recovered, or in the newest checkpoint this run took; 0 when
// there is none (logged). Local.
func (l *library) storedSize(id int) int64 {
	const fn = "FTI_GetStoredSize"
	if !l.ready(fn) {
		return 0
	}
	n, err := l.rt.StoredSize(id)
	if err == nil {
		return n
	}
	if errors.Is(err, ckpt.ErrNoCheckpoint) {
		if n, ok := l.stored[id]; ok {
			return n
		}
		l.fail(fn, fmt.Sprintf("no checkpoint holds variable %d", id))
		return 0
	}
	l.fail(fn, fmt.Sprintf("variable %d", id), zap.Error(err))
	return 0
}

// reallocVar is FTI_Realloc: on a restart, reallocates ptr with C's
// realloc to variable id's stored size and re-protects the variable with
// the new pointer and count. On any failure it logs why and returns ptr
// unchanged, as FTI does. Local.
func (l *library) reallocVar(id int, ptr unsafe.Pointer) unsafe.Pointer {
	const fn = "FTI_Realloc"
	if !l.ready(fn) {
		return ptr
	}
	if l.status == 0 {
		l.fail(fn, "This is not a recovery. Couldn't reallocate memory.")
		return ptr
	}
	v, ok := l.vars[id]
	if !ok {
		l.fail(fn, fmt.Sprintf("variable %d is not protected: protect it before FTI_Realloc", id))
		return ptr
	}
	n, err := l.rt.StoredSize(id)
	if err != nil {
		l.fail(fn, fmt.Sprintf("variable %d", id), zap.Error(err))
		return ptr
	}
	if n == 0 {
		l.fail(fn, fmt.Sprintf("variable %d: stored size is 0; cannot allocate 0 bytes", id))
		return ptr
	}
	if n%int64(v.typ.size) != 0 {
		l.fail(fn, fmt.Sprintf("variable %d: stored size %d is not a whole number of %s (%d bytes)", id, n, v.typ.name, v.typ.size))
		return ptr
	}
	if ptr != v.ptr {
		// FTI reallocates the pointer it is given, whatever was protected.
		p := l.realloc(ptr, uintptr(n))
		if p == nil {
			l.fail(fn, fmt.Sprintf("variable %d: realloc of %d bytes failed", id, n))
			return ptr
		}
		nv := &cvar{id: id, ptr: p, count: n / int64(v.typ.size), typ: v.typ}
		if err := l.protectRaw(nv); err != nil {
			l.fail(fn, fmt.Sprintf("variable %d", id), zap.Error(err))
			return p
		}
		l.vars[id] = nv
		return p
	}
	l.reallocID, l.reallocPtr = id, ptr
	err = l.rt.Realloc(id)
	l.reallocID, l.reallocPtr = -1, nil
	if err != nil {
		l.fail(fn, fmt.Sprintf("variable %d", id), zap.Error(err))
		return l.vars[id].ptr // moved only if realloc succeeded
	}
	l.log.Debug(fmt.Sprintf("Dataset #%d reallocated to %d bytes", id, n))
	return l.vars[id].ptr
}

// lookupName finds the id of a named variable: protected, reserved by
// FTI_setIDFromString, or stored in the restart checkpoint.
func (l *library) lookupName(name string) (int, bool) {
	if id, ok := l.names[name]; ok {
		return id, true
	}
	if stored, err := l.rt.StoredVars(); err == nil {
		for _, v := range stored {
			if v.Name == name {
				return int(v.ID), true
			}
		}
		return 0, false
	}
	// A restart of another shape: the old rank this rank takes its
	// variables from answers.
	if id, err := l.rt.IDByName(name); err == nil {
		return id, true
	}
	return 0, false
}

// checkName validates a variable name from C.
func checkName(name string, isNull bool) error {
	switch {
	case isNull:
		return errors.New("name is NULL")
	case name == "":
		return errors.New("name is empty")
	case len(name) > maxNameLen:
		return fmt.Errorf("name of %d bytes is longer than %d (FTI_BUFS - 1)", len(name), maxNameLen)
	}
	return nil
}

// setIDFromString is FTI_setIDFromString: the id of a named variable,
// reserving a new one for a new name. The name is stored with the
// variable, so a restart finds the same id by name. A new name gets the
// smallest id that is neither protected, reserved nor stored (FTI takes
// the count of variables, which may collide with an id chosen by hand).
func (l *library) setIDFromString(name string, isNull bool) int {
	const fn = "FTI_setIDFromString"
	if !l.ready(fn) {
		return codeFailure
	}
	if err := checkName(name, isNull); err != nil {
		return l.fail(fn, err.Error())
	}
	id, ok := l.lookupName(name)
	if !ok {
		used := map[int]bool{}
		for i := range l.vars {
			used[i] = true
		}
		for i := range l.idNames {
			used[i] = true
		}
		if stored, err := l.rt.StoredIDs(); err == nil {
			for _, id := range stored {
				used[id] = true
			}
		}
		id = -1
		for i := 0; i <= l.cfg.MaxVarID; i++ {
			if !used[i] {
				id = i
				break
			}
		}
		if id < 0 {
			return l.fail(fn, fmt.Sprintf("no free id up to max_var_id %d for %q", l.cfg.MaxVarID, name))
		}
	}
	if old, ok := l.idNames[id]; ok && old != name {
		return l.fail(fn, fmt.Sprintf("id %d is named %q already", id, old))
	}
	l.names[name], l.idNames[id] = id, name
	if v, ok := l.vars[id]; ok {
		// Already protected: the name goes with the next checkpoint.
		if err := l.protectRaw(v); err != nil {
			return l.fail(fn, fmt.Sprintf("variable %d", id), zap.Error(err))
		}
	}
	return id
}

// getIDFromString is FTI_getIDFromString: -1 when the name is unknown.
func (l *library) getIDFromString(name string, isNull bool) int {
	const fn = "FTI_getIDFromString"
	if !l.ready(fn) {
		return codeFailure
	}
	if err := checkName(name, isNull); err != nil {
		return l.fail(fn, err.Error())
	}
	if id, ok := l.lookupName(name); ok {
		return id
	}
	return -1
}
