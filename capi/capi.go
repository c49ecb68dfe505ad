//go:build mpi || serial

package main

/*
#cgo CFLAGS: -I${SRCDIR}/include
#cgo serial,!mpi CFLAGS: -DFTIGO_SERIAL
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include <string.h>
#include "fti.h"

static int ftigo_sizeof_short(void) { return (int)sizeof(short); }
static int ftigo_sizeof_int(void) { return (int)sizeof(int); }
static int ftigo_sizeof_long(void) { return (int)sizeof(long); }
static int ftigo_sizeof_ldbl(void) { return (int)sizeof(long double); }

static void ftigo_set_bool(bool *p, int v) { *p = v != 0; }
*/
import "C"

import (
	"fmt"
	"io"
	"os"
	"sync"
	"unsafe"
)

// The process's session. C calls are serialised: FTI is not thread-safe
// either, and the lock keeps a misbehaving caller from racing Go state.
var (
	mu  sync.Mutex
	lib = func() *library {
		out := &lockedWriter{w: os.Stdout}
		errOut := &lockedWriter{w: os.Stderr}
		l := newLibrary(out, errOut, cSizes{
			Short: int(C.ftigo_sizeof_short()), Int: int(C.ftigo_sizeof_int()),
			Long: int(C.ftigo_sizeof_long()), LongDouble: int(C.ftigo_sizeof_ldbl()),
		})
		l.realloc = func(p unsafe.Pointer, n uintptr) unsafe.Pointer { return C.realloc(p, C.size_t(n)) }
		setupComm(l)
		return l
	}()
)

func goString(s *C.char) (string, bool) {
	if s == nil {
		return "", true
	}
	return C.GoString(s), false
}

//export ftigo_capi_active
func ftigo_capi_active() C.int {
	mu.Lock()
	defer mu.Unlock()
	if lib.state == stateNone {
		return 0
	}
	return 1
}

//export ftigo_capi_fail
func ftigo_capi_fail(fn, msg *C.char) C.int {
	mu.Lock()
	defer mu.Unlock()
	f, _ := goString(fn)
	m, _ := goString(msg)
	return C.int(lib.fail(f, m))
}

//export ftigo_capi_unsupported
func ftigo_capi_unsupported(fn, why *C.char) C.int {
	mu.Lock()
	defer mu.Unlock()
	f, _ := goString(fn)
	w, _ := goString(why)
	return C.int(lib.unsupported(f, w))
}

//export ftigo_capi_ready
func ftigo_capi_ready(fn *C.char) C.int {
	mu.Lock()
	defer mu.Unlock()
	f, _ := goString(fn)
	if lib.ready(f) {
		return 1
	}
	return 0
}

//export ftigo_capi_finalize
func ftigo_capi_finalize() C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.finalize())
}

//export ftigo_capi_status
func ftigo_capi_status() C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.statusCode())
}

//export ftigo_capi_init_type
func ftigo_capi_init_type(size C.int64_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.initType(int64(size)))
}

//export ftigo_capi_init_composite
func ftigo_capi_init_composite(name *C.char, size C.int64_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	n, _ := goString(name)
	return C.int(lib.initCompositeType(n, int64(size)))
}

//export ftigo_capi_add_field
func ftigo_capi_add_field(fn *C.char, id C.int, name *C.char, fieldType C.int, offset C.int64_t, ndims C.int, dims *C.int64_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	f, _ := goString(fn)
	n, _ := goString(name)
	var d []int64
	if ndims >= 0 {
		if dims == nil {
			return C.int(lib.fail(f, "dimension sizes are NULL"))
		}
		if ndims > maxDims {
			return C.int(lib.fail(f, "more than 32 dimensions"))
		}
		d = make([]int64, ndims)
		for i, v := range unsafe.Slice(dims, int(ndims)) {
			d[i] = int64(v)
		}
	}
	return C.int(lib.addField(f, int(id), n, int(fieldType), int64(offset), d))
}

//export ftigo_capi_protect
func ftigo_capi_protect(id C.int, ptr unsafe.Pointer, count C.int64_t, tid C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.protect(int(id), ptr, int64(count), int(tid)))
}

//export ftigo_capi_checkpoint
func ftigo_capi_checkpoint(id, level C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.checkpoint(int(id), int(level)))
}

//export ftigo_capi_snapshot
func ftigo_capi_snapshot() C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.snapshot())
}

//export ftigo_capi_recover
func ftigo_capi_recover() C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.recover("FTI_Recover"))
}

//export ftigo_capi_recover_var_init
func ftigo_capi_recover_var_init() C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.recoverVarInit())
}

//export ftigo_capi_recover_var
func ftigo_capi_recover_var(id C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.recoverVar(int(id)))
}

//export ftigo_capi_recover_var_finalize
func ftigo_capi_recover_var_finalize() C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.recoverVarFinalize())
}

//export ftigo_capi_set_compression
func ftigo_capi_set_compression(id, mode, parameter, typ C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.setCompression(int(id), int(mode), int(parameter), int(typ)))
}

//export ftigo_capi_stored_size
func ftigo_capi_stored_size(id C.int) C.int64_t {
	mu.Lock()
	defer mu.Unlock()
	return C.int64_t(lib.storedSize(int(id)))
}

//export ftigo_capi_realloc
func ftigo_capi_realloc(id C.int, ptr unsafe.Pointer) unsafe.Pointer {
	mu.Lock()
	defer mu.Unlock()
	return lib.reallocVar(int(id), ptr)
}

//export ftigo_capi_set_id
func ftigo_capi_set_id(name *C.char) C.int {
	mu.Lock()
	defer mu.Unlock()
	n, null := goString(name)
	return C.int(lib.setIDFromString(n, null))
}

//export ftigo_capi_get_id
func ftigo_capi_get_id(name *C.char) C.int {
	mu.Lock()
	defer mu.Unlock()
	n, null := goString(name)
	return C.int(lib.getIDFromString(n, null))
}

//export ftigo_capi_init_icp
func ftigo_capi_init_icp(id, level, activate C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.initICP(int(id), int(level), activate != 0))
}

//export ftigo_capi_icp_step
func ftigo_capi_icp_step(fn *C.char, varID, end C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	f, _ := goString(fn)
	return C.int(lib.icpStep(f, int(varID), end != 0))
}

//export ftigo_capi_stage_dir
func ftigo_capi_stage_dir(buf *C.char, maxLen C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	dir, code := lib.stageDir()
	if code != codeSuccess {
		return C.int(code)
	}
	if buf == nil || int(maxLen) < len(dir)+1 {
		return C.int(lib.fail("FTI_GetStageDir", fmt.Sprintf("the buffer (%d bytes) cannot hold the staging directory %q and its NUL", int(maxLen), dir)))
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(maxLen))
	copy(out, dir)
	out[len(dir)] = 0
	return C.int(codeSuccess)
}

//export ftigo_capi_send_file
func ftigo_capi_send_file(local, remote *C.char) C.int {
	mu.Lock()
	defer mu.Unlock()
	l, lnull := goString(local)
	r, rnull := goString(remote)
	return C.int(lib.sendFile(l, r, lnull || rnull))
}

//export ftigo_capi_stage_status
func ftigo_capi_stage_status(id C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(lib.stageStatus(int(id)))
}

//export ftigo_capi_print
func ftigo_capi_print(msg *C.char, prio C.int) {
	mu.Lock()
	defer mu.Unlock()
	m, null := goString(msg)
	if null {
		return
	}
	printAt(lib.logger(), int(prio), m)
}

// setString copies s into a C char[FTI_BUFS], truncated and terminated.
func setString(dst *[C.FTI_BUFS]C.char, s string) {
	n := min(len(s), len(dst)-1)
	for i := 0; i < n; i++ {
		dst[i] = C.char(s[i])
	}
	dst[n] = 0
}

//export ftigo_capi_config
func ftigo_capi_config(out *C.FTIT_allConfiguration) {
	mu.Lock()
	defer mu.Unlock()
	C.memset(unsafe.Pointer(out), 0, C.sizeof_FTIT_allConfiguration)
	c := lib.getConfig()
	if !c.ok {
		return
	}
	b := func(v bool) C.int {
		if v {
			return 1
		}
		return 0
	}
	conf := &out.configuration
	setString(&conf.cfgFile, c.cfgFile)
	setString(&conf.localDir, c.localDir)
	setString(&conf.glbalDir, c.globalDir)
	setString(&conf.metadDir, c.metaDir)
	conf.saveLastCkpt = b(c.keepLast)
	C.ftigo_set_bool(&conf.keepL4Ckpt, b(c.keepL4))
	conf.verbosity, conf.blockSize, conf.transferSize = C.int(c.verbosity), C.int(c.blockSize), C.int(c.transferSize)
	conf.maxVarId, conf.test = C.int(c.maxVarID), b(c.localTest)
	t := &out.topology
	t.nbProc, t.nbNodes, t.myRank, t.splitRank = C.int(c.nbProc), C.int(c.nbNodes), C.int(c.myRank), C.int(c.myRank)
	t.nodeSize, t.nbApprocs, t.groupSize = C.int(c.nodeSize), C.int(c.nodeSize), C.int(c.groupSize)
	t.sectorID, t.nodeID, t.groupID = C.int(c.sectorID), C.int(c.nodeID), C.int(c.groupID)
	t.nodeRank, t.groupRank, t.right, t.left = C.int(c.nodeRank), C.int(c.groupRank), C.int(c.right), C.int(c.left)
	for lv := 1; lv <= 4; lv++ {
		out.checkpoint[lv].ckptIntv = C.int(c.intervalMinutes[lv])
	}
	setString(&out.execution.id, c.run)
	out.execution.reco, out.execution.ckptId, out.execution.ckptLvel = C.int(c.reco), C.int(c.ckptID), C.int(c.ckptLevel)
}

// lockedWriter serialises whole lines from every logger of the process.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
