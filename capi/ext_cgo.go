//go:build mpi || serial

package main

// The cgo exports behind ftigo.h's extensions (fti.c); the semantics are
// in ext.go.

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"unsafe"
)

//export ftigo_capi_elem_type
func ftigo_capi_elem_type(t C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.elemTypeHandle(int(t)))
}

//export ftigo_capi_should_exit
func ftigo_capi_should_exit() C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.shouldExit())
}

//export ftigo_capi_set_snapshot
func ftigo_capi_set_snapshot(on C.int, budget C.int64_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.setSnapshot(on != 0, int64(budget)))
}

//export ftigo_capi_last_error
func ftigo_capi_last_error(buf *C.char, n C.int) {
	mu.Lock()
	defer mu.Unlock()
	out := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	k := copy(out[:len(out)-1], lib.lastMsg)
	out[k] = 0
}

// offlineFail records why an offline call failed, for ftigo_last_error.
func offlineFail(fn string, err error) {
	lib.logger().Warn(fn + ": " + err.Error())
}

// offlineJSON marshals v into a malloc'd C string (nil on failure).
func offlineJSON(fn string, v any, err error) *C.char {
	if err == nil {
		var b []byte
		if b, err = json.Marshal(v); err == nil {
			return C.CString(string(b))
		}
	}
	offlineFail(fn, err)
	return nil
}

//export ftigo_capi_offline_list
func ftigo_capi_offline_list(run *C.char) *C.char {
	mu.Lock()
	defer mu.Unlock()
	path, _ := goString(run)
	o, err := openRun(path)
	if err != nil {
		return offlineJSON("ftigo_offline_list", nil, err)
	}
	return offlineJSON("ftigo_offline_list", o.list(), nil)
}

//export ftigo_capi_offline_vars
func ftigo_capi_offline_vars(run *C.char, seq C.int64_t, rank C.int) *C.char {
	mu.Lock()
	defer mu.Unlock()
	path, _ := goString(run)
	o, err := openRun(path)
	if err != nil {
		return offlineJSON("ftigo_offline_vars", nil, err)
	}
	vs, err := o.vars(uint64(seq), int(rank))
	return offlineJSON("ftigo_offline_vars", vs, err)
}

//export ftigo_capi_offline_read
func ftigo_capi_offline_read(run *C.char, seq C.int64_t, rank, id C.int, dst unsafe.Pointer, n C.int64_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	const fn = "ftigo_offline_read"
	path, _ := goString(run)
	if n < 0 {
		offlineFail(fn, fmt.Errorf("negative size %d", int64(n)))
		return codeFailure
	}
	o, err := openRun(path)
	if err == nil {
		err = o.read(uint64(seq), int(rank), int32(id), unsafe.Slice((*byte)(dst), int64(n)))
	}
	if err != nil {
		offlineFail(fn, err)
		return codeFailure
	}
	return codeSuccess
}
