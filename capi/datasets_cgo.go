//go:build mpi || serial

package main

// The cgo exports behind FTI's HDF5 group and dataset entry points
// (fti.c); the semantics are in datasets.go.

/*
#cgo CFLAGS: -I${SRCDIR}/include
#include <stdint.h>
#include "fti.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// int64s copies n int64s from C (nil when p is NULL).
func int64s(p *C.int64_t, n C.int) []int64 {
	if p == nil || n < 0 {
		return nil
	}
	out := make([]int64, int(n))
	for i, v := range unsafe.Slice(p, int(n)) {
		out[i] = int64(v)
	}
	return out
}

// dimsArg checks a rank and an array of rank extents (or offsets) from C.
func dimsArg(fn, what string, rank C.int, p *C.int64_t) ([]int64, bool) {
	switch {
	case rank < 1 || rank > maxDims:
		lib.fail(fn, fmt.Sprintf("rank %d: must be 1..%d", int(rank), maxDims))
		return nil, false
	case p == nil:
		lib.fail(fn, what+" is NULL")
		return nil, false
	}
	return int64s(p, rank), true
}

// setFullName copies a group's full name into a C char[FTI_BUFS].
func setFullName(dst *C.char, s string) {
	if dst != nil {
		setString((*[C.FTI_BUFS]C.char)(unsafe.Pointer(dst)), s)
	}
}

//export ftigo_capi_init_group
func ftigo_capi_init_group(name *C.char, parent C.int, fullName *C.char) C.int {
	mu.Lock()
	defer mu.Unlock()
	n, null := goString(name)
	id, full := lib.initGroup(n, null, int(parent))
	if id >= 0 {
		setFullName(fullName, full)
	}
	return C.int(id)
}

//export ftigo_capi_rename_group
func ftigo_capi_rename_group(id C.int, name *C.char, fullName *C.char) C.int {
	mu.Lock()
	defer mu.Unlock()
	n, null := goString(name)
	rc, full := lib.renameGroup(int(id), n, null)
	if rc == codeSuccess {
		setFullName(fullName, full)
	}
	return C.int(rc)
}

//export ftigo_capi_define_global
func ftigo_capi_define_global(id, rank C.int, dims *C.int64_t, name *C.char, group, tid C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	const fn = "FTI_DefineGlobalDataset"
	if !lib.ready(fn) {
		return codeFailure
	}
	shape, ok := dimsArg(fn, "dimLength", rank, dims)
	if !ok {
		return codeFailure
	}
	n, null := goString(name)
	return C.int(lib.defineGlobalDataset(int(id), shape, n, null, int(group), int(tid)))
}

//export ftigo_capi_add_subset
func ftigo_capi_add_subset(id, rank C.int, offset, count *C.int64_t, did, update C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	fn := "FTI_AddSubset"
	if update != 0 {
		fn = "FTI_UpdateSubset"
	}
	if !lib.ready(fn) {
		return codeFailure
	}
	off, ok := dimsArg(fn, "offset", rank, offset)
	if !ok {
		return codeFailure
	}
	cnt, ok := dimsArg(fn, "count", rank, count)
	if !ok {
		return codeFailure
	}
	return C.int(lib.addSubset(int(id), int(rank), off, cnt, int(did), update != 0))
}

//export ftigo_capi_update_global
func ftigo_capi_update_global(id, rank C.int, dims *C.int64_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	const fn = "FTI_UpdateGlobalDataset"
	if !lib.ready(fn) {
		return codeFailure
	}
	shape, ok := dimsArg(fn, "dimLength", rank, dims)
	if !ok {
		return codeFailure
	}
	return C.int(lib.updateGlobalDataset(int(id), shape))
}

//export ftigo_capi_dataset_rank
func ftigo_capi_dataset_rank(did C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.datasetRank(int(did)))
}

// ftigo_capi_dataset_span writes dataset did's extents to out (room for
// 32) and returns FTI_SCES, or FTI_NSCS.
//
//export ftigo_capi_dataset_span
func ftigo_capi_dataset_span(did, rank C.int, out *C.int64_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	span := lib.datasetSpan(int(did), int(rank))
	if span == nil {
		return codeFailure
	}
	for i, v := range span {
		unsafe.Slice(out, maxDims)[i] = C.int64_t(v)
	}
	return codeSuccess
}

//export ftigo_capi_recover_dim
func ftigo_capi_recover_dim(did C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.recoverDatasetDimension(int(did)))
}

//export ftigo_capi_define_dataset
func ftigo_capi_define_dataset(id, rank C.int, dims *C.int64_t, name *C.char, group C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	const fn = "FTI_DefineDataset"
	if !lib.ready(fn) {
		return codeFailure
	}
	var shape []int64
	if rank != 0 {
		var ok bool
		if shape, ok = dimsArg(fn, "dimLength", rank, dims); !ok {
			return codeFailure
		}
	}
	n, null := goString(name)
	return C.int(lib.defineDataset(int(id), shape, n, null, int(group)))
}

//export ftigo_capi_set_attribute
func ftigo_capi_set_attribute(id C.int, name *C.char, flag C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	n, _ := goString(name)
	return C.int(lib.setAttribute(int(id), n, int(flag)))
}
