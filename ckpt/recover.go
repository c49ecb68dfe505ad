package ckpt

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/h5ckpt"
	"github.com/ftigo/ftigo/internal/levels"
)

// varReader reads one rank's stored variables: an FTI-FF file
// (*fileformat.Reader) or the rank's part of an HDF5 checkpoint.
type varReader interface {
	Var(id int32) (fileformat.VarInfo, error)
	VarByName(name string) (fileformat.VarInfo, error)
	ReadVar(id int32, dst []byte) error
	ReadVarAt(id int32, dst []byte, off int64) error
	StoredSize(id int32) (int64, error)
	SubsetOf(id int32) (fileformat.Subset, bool)
	Vars() []fileformat.VarInfo
}

// storedFile is the recovered data file, open for reading.
type storedFile struct {
	c io.Closer
	r varReader
	// layout is the FTI-FF layout of the file (nil for an HDF5 one).
	layout *fileformat.Layout
}

func (r *Runtime) openStored() (*storedFile, error) {
	if r.recovered == nil {
		return nil, ErrNoCheckpoint
	}
	if r.stored != nil {
		return r.stored, nil
	}
	if r.reshape != nil {
		return nil, fmt.Errorf("%w: the run restarted from %s, which another shape wrote: its data is redistributed by the collective Recover, RecoverVar and RecoverVarByName", errReshaped, r.reshape.what)
	}
	s := r.src.Store
	if r.srcTask != nil && r.srcTask.Attrs[levels.AttrDigest] == levels.DigestH5 {
		// The data lives in the L4 HDF5 file. With the view rank 0 made
		// at Init, only this rank's variables are read (not every rank's
		// tables).
		var hf *h5ckpt.File
		var err error
		if r.src.H5View != nil {
			hf, err = h5ckpt.OpenView(s.Driver, s.Path(r.src.Name), r.c.Rank(), r.src.H5View, h5ckpt.WithLogger(r.log))
		} else {
			hf, err = h5ckpt.Open(s.Driver, s.Path(r.src.Name), h5ckpt.WithLogger(r.log))
		}
		if err != nil {
			return nil, fmt.Errorf("ckpt: open recovered file: %w", err)
		}
		r.stored = &storedFile{c: hf, r: &h5Rank{f: hf, rank: r.c.Rank()}}
		return r.stored, nil
	}
	// The data file, the rank's task of the L4 container, or the image of
	// a differential checkpoint's chain.
	f, err := levels.OpenSource(r.src)
	if err != nil {
		return nil, fmt.Errorf("ckpt: open recovered file: %w", err)
	}
	var opts []fileformat.Option
	if r.src.Image != nil && len(r.src.Chain) == 0 {
		// Every byte was verified by Init as it was read into memory, and
		// the image is Recover's alone: with page handover (the default
		// in-process, see WithPageHandover) its pages are handed over to
		// the variables rather than copied (each variable once; a second
		// read goes to storage, see recoverVar).
		opts = append(opts, fileformat.WithVerifiedData())
		if r.handover {
			opts = append(opts, fileformat.WithMoveOut())
		}
	}
	rd, err := fileformat.Open(f, opts...)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("ckpt: read recovered file: %w", err), f.Close())
	}
	r.stored = &storedFile{c: f, r: rd, layout: rd.Layout()}
	return r.stored, nil
}

func (r *Runtime) closeStored() {
	if r.stored != nil {
		r.stored.c.Close()
		r.stored = nil
	}
}

// dropImage lets go of the in-memory image of the recovered data
// ([WithRestartImage]); a later read of it goes to storage.
func (r *Runtime) dropImage() {
	if r.src.Image == nil {
		return
	}
	r.closeStored()
	r.src.Image, r.imageRead = nil, nil
}

// imageVarRead notes that variable id was restored from the in-memory
// image and drops the image once every variable it holds was.
func (r *Runtime) imageVarRead(id int, st *storedFile) {
	if r.src.Image == nil {
		return
	}
	if r.imageRead == nil {
		r.imageRead = map[int32]bool{}
	}
	r.imageRead[int32(id)] = true
	for _, v := range st.r.Vars() {
		if !r.imageRead[v.ID] {
			return
		}
	}
	r.dropImage()
}

// h5Rank is one rank's variables in an HDF5 checkpoint.
type h5Rank struct {
	f    *h5ckpt.File
	rank int
}

func (h *h5Rank) Vars() []fileformat.VarInfo { return h.f.Vars(h.rank) }

func (h *h5Rank) Var(id int32) (fileformat.VarInfo, error) {
	for _, v := range h.f.Vars(h.rank) {
		if v.ID == id {
			return v, nil
		}
	}
	return fileformat.VarInfo{}, fmt.Errorf("%w: rank %d variable %d", fileformat.ErrNoVar, h.rank, id)
}

func (h *h5Rank) VarByName(name string) (fileformat.VarInfo, error) {
	found := -1
	vs := h.f.Vars(h.rank)
	for i, v := range vs {
		if v.Name == name {
			if found >= 0 {
				return fileformat.VarInfo{}, fmt.Errorf("variables %d and %d of rank %d are both named %q: %w", vs[found].ID, v.ID, h.rank, name, fileformat.ErrNoVar)
			}
			found = i
		}
	}
	if found < 0 {
		return fileformat.VarInfo{}, fmt.Errorf("rank %d has no variable named %q: %w", h.rank, name, fileformat.ErrNoVar)
	}
	return vs[found], nil
}

func (h *h5Rank) ReadVar(id int32, dst []byte) error { return h.f.ReadVar(h.rank, id, dst) }

func (h *h5Rank) ReadVarAt(id int32, dst []byte, off int64) error {
	return h.f.ReadVarAt(h.rank, id, dst, off)
}

func (h *h5Rank) StoredSize(id int32) (int64, error) {
	v, err := h.Var(id)
	return v.Size, err
}

func (h *h5Rank) SubsetOf(id int32) (fileformat.Subset, bool) {
	return h.f.SubsetOf(h.rank, id)
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
// order — except on a redistributing restart ([Runtime.Reshaped]: data
// another rank count, placement or a level-9 file wrote), where it is
// collective: every rank calls it, declares the subsets of its global
// datasets first ([Runtime.AddSubset]), and receives its hyperslabs from
// whichever old ranks hold them (variables outside the datasets from old
// rank floor(rank·N/M) when N and M divide; see the package doc). Errors
// are then the same on every rank, and on failure every variable asked
// for is zeroed. Init has already verified every byte of the data (and
// rebuilt it from redundancy, or chosen an older checkpoint, when
// needed). When Init kept the verified bytes in memory
// ([WithRestartImage]; by default up to 1 GiB per rank), Recover copies
// them into the variables without touching storage, then lets go of
// them. Otherwise it reads the files again and checks every block against
// its hash as it reads it: a block that does not match was changed after
// Init, and Recover returns a local error wrapping the corruption
// (fileformat.ErrHashMismatch) with the variable zeroed, so bad data is
// never left looking restored. It stops at the first variable that fails.
func (r *Runtime) Recover() error {
	if err := r.usable("Recover"); err != nil {
		return err
	}
	if r.recovered == nil {
		return ErrNoCheckpoint
	}
	start, m, reshaped := r.now(), r.recovered, r.reshape != nil
	if err := r.recoverAll(); err != nil {
		r.log.Error(fmt.Sprintf("Recover from Ckpt. %d (%v) failed", m.ID, m.Level), zap.Error(err))
		return err
	}
	r.restored = true
	r.status = Fresh
	if r.c.Rank() == 0 {
		wall := r.now().Sub(start)
		from := ""
		if reshaped {
			from = fmt.Sprintf(" written by %d ranks, redistributed on %d,", r.OldRanks(), r.c.Size())
		}
		r.log.Info(fmt.Sprintf("Recovered %d variables from Ckpt. %d (%v)%s in %.3f sec.", len(r.order), m.ID, m.Level, from, wall.Seconds()),
			zap.Int64("ckpt-id", m.ID), zap.Stringer("ckpt-level", m.Level), zap.Int("variables", len(r.order)), zap.Duration("wall", wall))
	}
	return nil
}

// recoverAll restores every protected variable (Recover).
func (r *Runtime) recoverAll() error {
	if r.reshape != nil {
		var lossy []fileformat.VarInfo
		for _, id := range r.order {
			if info, err := r.StoredInfo(id); err == nil && !info.Exact() {
				lossy = append(lossy, info)
			}
		}
		if err := r.recoverReshaped(slices.Clone(r.order), false); err != nil {
			return err
		}
		r.reshape.dropImages()
		for _, info := range lossy {
			r.warnLossy(info)
		}
		return nil
	}
	for _, id := range r.order {
		if err := r.recoverVar(id); err != nil {
			return err
		}
	}
	r.dropImage()
	return nil
}

// RecoverVar restores one protected variable (FTI_RecoverVar), every
// block checked against its hash as it is read; data that does not match
// is an error (wrapping the fileformat corruption) and the variable is
// zeroed. Local; collective on a redistributing restart (every rank
// calls it, each with the variable it wants), as Recover.
func (r *Runtime) RecoverVar(id int) error {
	if err := r.usable("RecoverVar"); err != nil {
		return err
	}
	if r.reshape != nil {
		if _, ok := r.vars[id]; !ok {
			// Still collective: the other ranks wait for this one.
			return r.recoverReshapedMissing(fmt.Errorf("%w: id %d", ErrNotProtected, id))
		}
		return r.recoverReshaped([]int{id}, false)
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
	if st, err = r.readStored(st, int32(id), buf); err != nil {
		return fmt.Errorf("ckpt: recover variable %d: %w", id, err)
	}
	if v.loaded != nil {
		if err := v.loaded(buf); err != nil {
			return fmt.Errorf("ckpt: recover variable %d: %w", id, err)
		}
	}
	r.warnLossy(info)
	r.imageVarRead(id, st)
	return nil
}

// readStored reads variable id of st into buf. A variable restored from
// the in-memory image already had its pages handed over to its memory
// (fileformat.ErrMovedOut): the image is dropped and the variable read
// again from storage, checked as it is read. It returns the stored file
// then open.
func (r *Runtime) readStored(st *storedFile, id int32, buf []byte) (*storedFile, error) {
	err := st.r.ReadVar(id, buf)
	if errors.Is(err, fileformat.ErrMovedOut) {
		r.dropImage()
		if st, err = r.openStored(); err == nil {
			err = st.r.ReadVar(id, buf)
		}
	}
	return st, err
}

// StoredSize returns the size in bytes of variable id in the checkpoint
// Recover reads (FTI_GetStoredSize); the slice given to Protect is resized to
// it by Recover. On a redistributing restart it is the size of the
// variable's subset, or of the old rank's copy it will receive. Local.
func (r *Runtime) StoredSize(id int) (int64, error) {
	if err := r.usable("StoredSize"); err != nil {
		return 0, err
	}
	if r.reshape != nil {
		return r.reshapeStoredSize(id)
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
	if r.reshape != nil {
		n, err := r.reshapeStoredSize(id)
		if err != nil {
			return err
		}
		_, err = r.vars[id].target(n)
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
	if err := r.sameSubset(id, st); err != nil {
		return nil, fileformat.VarInfo{}, nil, err
	}
	return v, info, st, nil
}

// sameSubset refuses to restore variable id from a checkpoint of this
// run's shape when it maps onto another hyperslab of a global dataset
// now than when it was stored: the bytes of this rank's file are not the
// new hyperslab's, and a local Recover cannot fetch the others.
func (r *Runtime) sameSubset(id int, st *storedFile) error {
	now, ok := r.subsets[id]
	if !ok {
		return nil
	}
	was, ok := st.r.SubsetOf(int32(id))
	if !ok || (was.Dataset == now.Dataset && slices.Equal(was.Offset, now.Offset) && slices.Equal(was.Count, now.Count)) {
		return nil
	}
	return fmt.Errorf("%w: %w: variable %d maps onto dataset %d at offset %v count %v in this run, but checkpoint %d stored it as dataset %d at offset %v count %v: "+
		"Recover redistributes a decomposition only when the rank count or the placement changed; restart with the decomposition the checkpoint was written with",
		ErrVarMismatch, ErrDataset, id, now.Dataset, now.Offset, now.Count, r.recovered.ID, was.Dataset, was.Offset, was.Count)
}
