package ckpt

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
)

// Dataset is a global array that ranks map their protected variables
// onto (FTI_DefineGlobalDataset): an id and a name unique in the job, a
// shape of 1 to 32 dimensions (row-major: the last varies fastest) and an
// element type. Sparse allows elements no subset covers.
type Dataset = fileformat.Dataset

// DefineDataset declares global dataset id, named name, of the given
// shape, with T's element type (FTI_DefineGlobalDataset; T as in
// [Protect]). name is a slash-separated path: the dataset's path in an
// HDF5 checkpoint ("temperature", "fields/u"). Every rank that maps a
// variable onto the dataset defines it, identically. Local; the
// definitions of all ranks are checked together at the next Checkpoint.
func DefineDataset[T any](r *Runtime, id int, name string, shape []int64) error {
	if r == nil {
		return r.usable("DefineDataset")
	}
	rt := reflect.TypeFor[T]()
	et, err := elemTypeOf(rt)
	if err != nil {
		return fmt.Errorf("dataset %d: %w", id, err)
	}
	es := uint32(0)
	if et == fileformat.Struct {
		es = uint32(rt.Size())
	}
	return r.DefineGlobalDataset(Dataset{ID: int32(id), Name: name, Shape: slices.Clone(shape), Type: et, ElemSize: es})
}

// DefineGlobalDataset declares d, with its element type given
// explicitly (fileformat.Float64, ...; ElemSize for Struct) and Sparse if
// some elements need not belong to any rank (FTI_DefineGlobalDataset).
// An id or a name this rank has already defined is an error wrapping
// [ErrDataset] and dataset.ErrDuplicate. Local.
func (r *Runtime) DefineGlobalDataset(d Dataset) error {
	if err := r.usable("DefineGlobalDataset"); err != nil {
		return err
	}
	d = d.Clone()
	if err := d.Check(); err != nil {
		return fmt.Errorf("%w: %w: %v", ErrDataset, dataset.ErrInvalid, err)
	}
	d.ElemSize = d.Elem()
	if old, ok := r.datasets[d.ID]; ok {
		return fmt.Errorf("%w: %w: dataset id %d is already defined as %v on this rank, cannot define it as %v",
			ErrDataset, dataset.ErrDuplicate, d.ID, old, d)
	}
	for _, o := range r.datasets {
		if o.Name == d.Name {
			return fmt.Errorf("%w: %w: dataset name %q is already dataset %d on this rank, cannot name dataset %d",
				ErrDataset, dataset.ErrDuplicate, d.Name, o.ID, d.ID)
		}
	}
	if r.datasets == nil {
		r.datasets = map[int32]Dataset{}
	}
	r.datasets[d.ID] = d
	r.dsVersion++
	return nil
}

// AddSubset maps protected variable varID onto the hyperslab of dataset
// datasetID that starts at offset and extends count elements in each
// dimension (FTI_AddSubset): the variable holds the hyperslab's elements
// in row-major order, so at each checkpoint its length must be the
// product of count. Mapping a variable again replaces its subset
// (FTI_UpdateSubset); Unprotect removes it. The variable must be
// protected, the dataset defined on this rank, the hyperslab inside the
// dataset, and the element size the dataset's (errors wrap [ErrDataset]
// and the dataset package's sentinel, or [ErrNotProtected]). Across ranks
// the subsets of a dataset must not overlap and, unless it is Sparse,
// must cover it: checked at the next Checkpoint and at a Recover that
// redistributes. Local.
func (r *Runtime) AddSubset(varID, datasetID int, offset, count []int64) error {
	if err := r.usable("AddSubset"); err != nil {
		return err
	}
	v, ok := r.vars[varID]
	if !ok {
		return fmt.Errorf("%w: AddSubset of variable %d: protect it first", ErrNotProtected, varID)
	}
	d, ok := r.datasets[int32(datasetID)]
	if !ok {
		return fmt.Errorf("%w: %w: variable %d: dataset %d is not defined on this rank (DefineDataset first)",
			ErrDataset, dataset.ErrUnknown, varID, datasetID)
	}
	s := fileformat.Subset{VarID: int32(varID), Dataset: int32(datasetID), Offset: slices.Clone(offset), Count: slices.Clone(count)}
	if err := s.CheckIn(d); err != nil {
		return fmt.Errorf("%w: %w: %v", ErrDataset, dataset.ErrInvalid, err)
	}
	if err := s.CheckVar(d, v.typ, uint32(v.elemSize), s.Elements()*int64(d.Elem())); err != nil {
		return fmt.Errorf("%w: %w: %v (protected as %s)", ErrDataset, dataset.ErrInvalid, err, v.goType)
	}
	if r.subsets == nil {
		r.subsets = map[int]fileformat.Subset{}
	}
	r.subsets[varID] = s
	r.dsVersion++
	return nil
}

// datasetView returns this rank's datasets (by id) and the subsets of
// its protected variables (by variable id).
func (r *Runtime) datasetView() dataset.View {
	var v dataset.View
	for _, d := range r.datasets {
		v.Datasets = append(v.Datasets, d.Clone())
	}
	slices.SortFunc(v.Datasets, func(a, b Dataset) int { return int(a.ID) - int(b.ID) })
	for id, s := range r.subsets {
		if _, ok := r.vars[id]; ok {
			v.Subsets = append(v.Subsets, s.Clone())
		}
	}
	slices.SortFunc(v.Subsets, func(a, b fileformat.Subset) int { return int(a.VarID) - int(b.VarID) })
	return v
}

// checkSubsetSizes refuses, before a checkpoint, a variable whose length
// is not its subset's, naming both.
func (r *Runtime) checkSubsetSizes(vars []fileformat.Var) error {
	for _, fv := range vars {
		s, ok := r.subsets[int(fv.ID)]
		if !ok {
			continue
		}
		d := r.datasets[s.Dataset]
		v := r.vars[int(fv.ID)]
		if err := s.CheckVar(d, v.typ, uint32(v.elemSize), int64(len(fv.Data))); err != nil {
			return fmt.Errorf("%w: %w: %v: resize it, or map it again with AddSubset", ErrDataset, dataset.ErrInvalid, err)
		}
	}
	return nil
}

// checkDecomposition checks the datasets and subsets of every rank
// together (no id defined differently, no name used twice, no element
// covered twice, no element of a dataset that is not Sparse left
// uncovered) whenever some rank changed its own since the last check,
// spread over the ranks (decomp.go). Collective; the error is the same
// on every rank.
func (r *Runtime) checkDecomposition() error {
	changed := int64(0)
	if r.dsVersion != r.dsChecked {
		changed = 1
	}
	any, err := r.c.AllreduceInt64(changed, comm.Max)
	if err != nil {
		return err
	}
	if any == 0 {
		return nil
	}
	if _, err := r.checkOwn(); err != nil {
		return err
	}
	r.dsChecked = r.dsVersion
	return nil
}

// checkOwn checks the decomposition of this run's declarations, spread
// over the ranks. Collective.
func (r *Runtime) checkOwn() (*spread, error) {
	sp, err := checkSpread(r.c, []rankView{{rank: r.c.Rank(), view: r.datasetView()}}, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDataset, err)
	}
	return sp, nil
}

// fileDatasets returns the option recording this rank's datasets and
// subsets in its FTI-FF file (nothing when it has none).
func (r *Runtime) fileDatasets() []fileformat.Option {
	v := r.datasetView()
	if len(v.Datasets) == 0 && len(v.Subsets) == 0 {
		return nil
	}
	return []fileformat.Option{fileformat.WithDatasets(v.Datasets, v.Subsets)}
}

// UpdateGlobalDataset changes the shape of dataset id, defined on this
// rank (FTI_UpdateGlobalDataset); its name and element type stay. The
// subsets mapped onto it are checked against the new shape at the next
// Checkpoint (FTI_UpdateSubset, that is AddSubset, moves them). Errors
// wrap [ErrDataset] and dataset.ErrUnknown or dataset.ErrInvalid. Local.
func (r *Runtime) UpdateGlobalDataset(id int, shape []int64) error {
	if err := r.usable("UpdateGlobalDataset"); err != nil {
		return err
	}
	d, ok := r.datasets[int32(id)]
	if !ok {
		return fmt.Errorf("%w: %w: dataset %d is not defined on this rank (DefineGlobalDataset first)", ErrDataset, dataset.ErrUnknown, id)
	}
	d = d.Clone()
	d.Shape = slices.Clone(shape)
	if err := d.Check(); err != nil {
		return fmt.Errorf("%w: %w: %v", ErrDataset, dataset.ErrInvalid, err)
	}
	r.datasets[d.ID] = d
	r.dsVersion++
	return nil
}

// GlobalDataset returns dataset id as this rank defined it.
func (r *Runtime) GlobalDataset(id int) (Dataset, bool) {
	if r == nil {
		return Dataset{}, false
	}
	d, ok := r.datasets[int32(id)]
	return d.Clone(), ok
}

// StoredDataset returns dataset id as the checkpoint Recover reads
// recorded it (FTI_RecoverDatasetDimension): its shape, element type and
// name then. It fails with [ErrNoCheckpoint] on a fresh run and wraps
// [ErrDataset] and dataset.ErrUnknown when the checkpoint holds no such
// dataset. Local.
func (r *Runtime) StoredDataset(id int) (Dataset, error) {
	if err := r.usable("StoredDataset"); err != nil {
		return Dataset{}, err
	}
	if r.recovered == nil {
		return Dataset{}, ErrNoCheckpoint
	}
	var all []Dataset
	if r.reshape != nil {
		all = r.reshape.old.defs
	} else {
		st, err := r.openStored()
		if err != nil {
			return Dataset{}, err
		}
		all = oldView(st.r).Datasets
	}
	for _, d := range all {
		if d.ID == int32(id) {
			return d.Clone(), nil
		}
	}
	return Dataset{}, fmt.Errorf("%w: %w: checkpoint %d records no dataset %d", ErrDataset, dataset.ErrUnknown, r.recovered.ID, id)
}

// StoredIDs returns the ids of the variables stored by the checkpoint
// Recover reads, sorted: this rank's, or on a redistributing restart
// those of every old rank (so that a new variable id chosen by the
// application does not collide with a stored one). It fails with
// [ErrNoCheckpoint] on a fresh run. Local.
func (r *Runtime) StoredIDs() ([]int, error) {
	if err := r.usable("StoredIDs"); err != nil {
		return nil, err
	}
	if r.recovered == nil {
		return nil, ErrNoCheckpoint
	}
	var ids []int
	if r.reshape != nil {
		ids = slices.Clone(r.reshape.storedIDs)
	} else {
		st, err := r.openStored()
		if err != nil {
			return nil, err
		}
		for _, v := range st.r.Vars() {
			ids = append(ids, int(v.ID))
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
