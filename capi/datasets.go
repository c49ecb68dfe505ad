package main

import (
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/fileformat"
)

// HDF5 groups, global datasets and variable datasets: FTI_InitGroup,
// FTI_RenameGroup, FTI_DefineGlobalDataset, FTI_AddSubset,
// FTI_UpdateGlobalDataset, FTI_UpdateSubset, FTI_GetDatasetRank,
// FTI_GetDatasetSpan, FTI_RecoverDatasetDimension, FTI_DefineDataset and
// FTI_SetAttribute, over ckpt's global datasets. All of them are local,
// as in FTI: the declarations of every rank are checked together by the
// next FTI_Checkpoint, and by FTI_Recover on a restart of another shape.

// rootGroup is the id of the root group ("/"), FTI's H5groups[0];
// noGroup is a NULL group argument from C (the root).
const (
	rootGroup = 0
	noGroup   = -1
)

// maxGroups is FTI's limit on groups (the size of FTIT_H5Group.childrenID).
const maxGroups = 256

// h5group is one HDF5 group of FTI_InitGroup.
type h5group struct {
	name     string
	parent   int // -1 for the root itself
	children []int
}

// groupTable holds a session's groups; group ids index it.
type groupTable struct {
	groups []h5group
}

func newGroupTable() *groupTable {
	return &groupTable{groups: []h5group{{name: "/", parent: -1}}}
}

// path returns group id's path below the root, without a leading slash
// ("" for the root, "a/b" for group b in group a).
func (g *groupTable) path(id int) string {
	var parts []string
	for id != rootGroup {
		parts = append(parts, g.groups[id].name)
		id = g.groups[id].parent
	}
	slices.Reverse(parts)
	return strings.Join(parts, "/")
}

// fullName returns FTI's FTIT_H5Group.fullName of group id: "/a/b" (""
// for the root, whose children are "/name").
func (g *groupTable) fullName(id int) string {
	if id == rootGroup {
		return ""
	}
	return "/" + g.path(id)
}

// valid reports whether id names a group.
func (g *groupTable) valid(id int) bool { return id >= 0 && id < len(g.groups) }

// below reports whether group id is group anc or inside it.
func (g *groupTable) below(id, anc int) bool {
	for ; id >= 0; id = g.groups[id].parent {
		if id == anc {
			return true
		}
	}
	return false
}

// checkGroupName refuses names that cannot be one component of an HDF5
// path.
func checkGroupName(name string, isNull bool) error {
	switch {
	case isNull:
		return fmt.Errorf("name is NULL")
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("name %q is not a group name", name)
	case strings.Contains(name, "/"):
		return fmt.Errorf("name %q contains '/' (nest groups with the parent argument)", name)
	case len(name) > maxNameLen:
		return fmt.Errorf("name of %d bytes is longer than %d (FTI_BUFS - 1)", len(name), maxNameLen)
	}
	return nil
}

// groupArg resolves a group argument from C: noGroup (NULL) is the root.
func (l *library) groupArg(id int) (int, error) {
	if id == noGroup {
		return rootGroup, nil
	}
	if !l.groups.valid(id) {
		return 0, fmt.Errorf("group id %d is not a group of this session (initialise it with FTI_InitGroup)", id)
	}
	return id, nil
}

// initGroup is FTI_InitGroup: a new group name in parent (noGroup: the root).
// It returns the group's id and full name, or FTI_NSCS.
func (l *library) initGroup(name string, isNull bool, parent int) (int, string) {
	const fn = "FTI_InitGroup"
	if !l.ready(fn) {
		return codeFailure, ""
	}
	if err := checkGroupName(name, isNull); err != nil {
		return l.fail(fn, err.Error()), ""
	}
	p, err := l.groupArg(parent)
	if err != nil {
		return l.fail(fn, err.Error()), ""
	}
	for _, c := range l.groups.groups[p].children {
		if l.groups.groups[c].name == name {
			return l.fail(fn, fmt.Sprintf("Group %s already has the %s child.", l.groups.groups[p].name, name)), ""
		}
	}
	if len(l.groups.groups) >= maxGroups {
		return l.fail(fn, fmt.Sprintf("at most %d groups (FTI_BUFS)", maxGroups)), ""
	}
	id := len(l.groups.groups)
	l.groups.groups = append(l.groups.groups, h5group{name: name, parent: p})
	l.groups.groups[p].children = append(l.groups.groups[p].children, id)
	return id, l.groups.fullName(id)
}

// renameGroup is FTI_RenameGroup. The path of a global dataset is fixed
// when it is defined, so a group that holds one already is not renamed.
// It returns the group's new full name, or FTI_NSCS.
func (l *library) renameGroup(id int, name string, isNull bool) (int, string) {
	const fn = "FTI_RenameGroup"
	if !l.ready(fn) {
		return codeFailure, ""
	}
	if err := checkGroupName(name, isNull); err != nil {
		return l.fail(fn, err.Error()), ""
	}
	if id == rootGroup || !l.groups.valid(id) {
		return l.fail(fn, fmt.Sprintf("group id %d is not a group of this session made by FTI_InitGroup", id)), ""
	}
	g := l.groups.groups[id]
	for _, c := range l.groups.groups[g.parent].children {
		if c != id && l.groups.groups[c].name == name {
			return l.fail(fn, fmt.Sprintf("Group %s already has the %s child.", l.groups.groups[g.parent].name, name)), ""
		}
	}
	for did, gid := range l.dsGroup {
		if l.groups.below(gid, id) {
			return l.fail(fn, fmt.Sprintf("group %q holds global dataset %d already, whose path is fixed when it is defined: "+
				"rename groups before FTI_DefineGlobalDataset", l.groups.fullName(id), did)), ""
		}
	}
	l.groups.groups[id].name = name
	return codeSuccess, l.groups.fullName(id)
}

// datasetName joins a group's path and a dataset name into the dataset's
// path in an HDF5 file.
func (l *library) datasetName(group int, name string) string {
	if p := l.groups.path(group); p != "" {
		return p + "/" + name
	}
	return name
}

// defineGlobalDataset is FTI_DefineGlobalDataset: dataset id, named name
// in group (-1: the root), of the given shape and element type tid.
func (l *library) defineGlobalDataset(id int, shape []int64, name string, nameNull bool, group, tid int) int {
	const fn = "FTI_DefineGlobalDataset"
	if !l.ready(fn) {
		return codeFailure
	}
	if nameNull {
		return l.fail(fn, fmt.Sprintf("dataset %d: name is NULL", id))
	}
	if int64(int32(id)) != int64(id) {
		return l.fail(fn, fmt.Sprintf("dataset id %d out of range", id))
	}
	g, err := l.groupArg(group)
	if err != nil {
		return l.fail(fn, fmt.Sprintf("dataset %d: %v", id, err))
	}
	ct, err := l.typeOf(tid)
	if err != nil {
		return l.fail(fn, fmt.Sprintf("dataset %d: Invalid data type handle: %v", id, err))
	}
	d := ckpt.Dataset{ID: int32(id), Name: l.datasetName(g, name), Shape: slices.Clone(shape), Type: ct.elem}
	if ct.elem == fileformat.Struct {
		d.ElemSize = uint32(ct.size)
	}
	if err := l.rt.DefineGlobalDataset(d); err != nil {
		return l.fail(fn, fmt.Sprintf("dataset %d %q", id, d.Name), zap.Error(err))
	}
	l.dsGroup[id] = g
	l.log.Debug(fmt.Sprintf("Global dataset %d %q defined: shape %v of %s", id, d.Name, shape, ct.name))
	return codeSuccess
}

// dataset returns global dataset did as this rank defined it, or logs
// why it cannot (fn names the caller).
func (l *library) dataset(fn string, did int) (ckpt.Dataset, bool) {
	d, ok := l.rt.GlobalDataset(did)
	if !ok {
		l.fail(fn, fmt.Sprintf("dataset %d is not defined on this rank (FTI_DefineGlobalDataset first)", did))
	}
	return d, ok
}

// addSubset is FTI_AddSubset (update false) and FTI_UpdateSubset: maps
// protected variable id onto the hyperslab offset/count of dataset did,
// whose rank (number of dimensions) must be rank. FTI_UpdateSubset only
// moves a variable that is a subset of did already.
func (l *library) addSubset(id, rank int, offset, count []int64, did int, update bool) int {
	fn := "FTI_AddSubset"
	if update {
		fn = "FTI_UpdateSubset"
	}
	if !l.ready(fn) {
		return codeFailure
	}
	if _, ok := l.vars[id]; !ok {
		return l.fail(fn, fmt.Sprintf("variable %d is not protected (FTI_Protect it first)", id))
	}
	d, ok := l.dataset(fn, did)
	if !ok {
		return codeFailure
	}
	if rank != len(d.Shape) {
		return l.fail(fn, fmt.Sprintf("rank mismatch: variable %d given rank %d, dataset %d %q has rank %d", id, rank, did, d.Name, len(d.Shape)))
	}
	if update {
		if cur, ok := l.subsetOf[id]; !ok || cur != did {
			return l.fail(fn, fmt.Sprintf("variable %d is not a subset of dataset %d (FTI_AddSubset first)", id, did))
		}
	}
	if err := l.rt.AddSubset(id, did, offset, count); err != nil {
		return l.fail(fn, fmt.Sprintf("variable %d in dataset %d", id, did), zap.Error(err))
	}
	l.subsetOf[id] = did
	return codeSuccess
}

// updateGlobalDataset is FTI_UpdateGlobalDataset: a new shape (and
// possibly rank) for dataset did.
func (l *library) updateGlobalDataset(did int, shape []int64) int {
	const fn = "FTI_UpdateGlobalDataset"
	if !l.ready(fn) {
		return codeFailure
	}
	if _, ok := l.dataset(fn, did); !ok {
		return codeFailure
	}
	if err := l.rt.UpdateGlobalDataset(did, shape); err != nil {
		return l.fail(fn, fmt.Sprintf("dataset %d", did), zap.Error(err))
	}
	return codeSuccess
}

// datasetRank is FTI_GetDatasetRank: the number of dimensions of did.
func (l *library) datasetRank(did int) int {
	const fn = "FTI_GetDatasetRank"
	if !l.ready(fn) {
		return codeFailure
	}
	d, ok := l.dataset(fn, did)
	if !ok {
		return codeFailure
	}
	return len(d.Shape)
}

// datasetSpan is FTI_GetDatasetSpan: the extents of did, which must have
// rank dimensions (nil and logged otherwise).
func (l *library) datasetSpan(did, rank int) []int64 {
	const fn = "FTI_GetDatasetSpan"
	if !l.ready(fn) {
		return nil
	}
	d, ok := l.dataset(fn, did)
	if !ok {
		return nil
	}
	if rank != len(d.Shape) {
		l.fail(fn, fmt.Sprintf("Dataset rank mismatch: asked for rank %d, dataset %d %q has rank %d", rank, did, d.Name, len(d.Shape)))
		return nil
	}
	return d.Shape
}

// recoverDatasetDimension is FTI_RecoverDatasetDimension: dataset did
// takes the shape the checkpoint being recovered recorded for it, so that
// a restart on another number of ranks can size its decomposition before
// FTI_AddSubset. FTI allows it only on a variate processor restart
// (status 3); ftigo on any restart not yet recovered (status 1, 2 or 3),
// since it redistributes from every level.
func (l *library) recoverDatasetDimension(did int) int {
	const fn = "FTI_RecoverDatasetDimension"
	if !l.ready(fn) {
		return codeFailure
	}
	d, ok := l.dataset(fn, did)
	if !ok {
		return codeFailure
	}
	if l.status == 0 {
		return l.fail(fn, fmt.Sprintf("this is no recovery (FTI_Status is 0): no restart checkpoint to read the dimensions of dataset %d from", did))
	}
	stored, err := l.rt.StoredDataset(did)
	if err != nil {
		return l.fail(fn, fmt.Sprintf("dataset %d", did), zap.Error(err))
	}
	if len(stored.Shape) != len(d.Shape) {
		return l.fail(fn, fmt.Sprintf("Rank mismatch: dataset %d %q has rank %d here, rank %d (shape %v) in checkpoint",
			did, d.Name, len(d.Shape), len(stored.Shape), stored.Shape))
	}
	if err := l.rt.UpdateGlobalDataset(did, stored.Shape); err != nil {
		return l.fail(fn, fmt.Sprintf("dataset %d", did), zap.Error(err))
	}
	return codeSuccess
}

// nameVar gives protected variable id the name FTI_DefineDataset or
// FTI_SetAttribute asked for: ftigo keeps one name per variable, stored
// with it and found by FTI_getIDFromString, so a name FTI_setIDFromString
// gave first stays (FTI keeps the two apart), with a warning.
func (l *library) nameVar(fn string, id int, name string) int {
	if err := checkName(name, false); err != nil {
		return l.fail(fn, fmt.Sprintf("variable %d: %v", id, err))
	}
	if old, ok := l.idNames[id]; ok {
		if old != name {
			l.log.Warn(fmt.Sprintf("%s: variable %d keeps its name %q (ftigo stores one name per variable); %q is not recorded", fn, id, old, name))
		}
		return codeSuccess
	}
	if other, ok := l.names[name]; ok && other != id {
		return l.fail(fn, fmt.Sprintf("name %q is variable %d's already, cannot name variable %d", name, other, id))
	}
	l.names[name], l.idNames[id] = id, name
	if err := l.protectRaw(l.vars[id]); err != nil {
		delete(l.names, name)
		delete(l.idNames, id)
		return l.fail(fn, fmt.Sprintf("variable %d", id), zap.Error(err))
	}
	return codeSuccess
}

// defineDataset is FTI_DefineDataset: the shape and name of protected
// variable id. As in FTI the shape's elements must be the variable's
// count; the shape describes the variable (ftigo stores variables outside
// global datasets as 1-D arrays and keeps the shape only for this check);
// the name is stored with the variable (see nameVar). dims is nil for
// rank 0 (name only).
func (l *library) defineDataset(id int, dims []int64, name string, nameNull bool, group int) int {
	const fn = "FTI_DefineDataset"
	if !l.ready(fn) {
		return codeFailure
	}
	v, ok := l.vars[id]
	if !ok {
		return l.fail(fn, fmt.Sprintf("The dataset #%d not initialized. Use FTI_Protect first.", id))
	}
	if _, err := l.groupArg(group); err != nil {
		return l.fail(fn, fmt.Sprintf("variable %d: %v", id, err))
	}
	if len(dims) > 0 {
		n := int64(1)
		for _, x := range dims {
			if x < 0 || (x > 0 && n > maxProtectBytes/x) {
				return l.fail(fn, fmt.Sprintf("variable %d: bad dimension lengths %v", id, dims))
			}
			n *= x
		}
		if n != v.count {
			return l.fail(fn, fmt.Sprintf("Trying to define datasize: number of elements %d, but the dataset count is %d.", n, v.count))
		}
	}
	if nameNull {
		return codeSuccess
	}
	return l.nameVar(fn, id, name)
}

// Attribute flags (FTIT_attributeFlag).
const (
	attrName = 1
	attrDim  = 2
)

// setAttribute is FTI_SetAttribute. The name attribute is the variable's
// name (see nameVar); dimension attributes are HDF5 metadata ftigo does
// not store, so a call that sets one fails without changing anything.
func (l *library) setAttribute(id int, name string, flag int) int {
	const fn = "FTI_SetAttribute"
	if !l.ready(fn) {
		return codeFailure
	}
	if _, ok := l.vars[id]; !ok {
		return l.fail(fn, fmt.Sprintf("variable %d is not protected (FTI_Protect it first)", id))
	}
	switch {
	case flag&^(attrName|attrDim) != 0:
		return l.fail(fn, fmt.Sprintf("unknown attribute flag %d (FTI_ATTRIBUTE_NAME, FTI_ATTRIBUTE_DIM)", flag))
	case flag&attrDim != 0:
		return l.unsupported(fn+" with FTI_ATTRIBUTE_DIM",
			"dimension attributes are HDF5 metadata ftigo does not store (FTI_DefineDataset checks a shape; global datasets carry theirs); nothing was set")
	case flag&attrName != 0:
		return l.nameVar(fn, id, name)
	}
	return codeSuccess
}
