//go:build mpi

package main

/*
#include <stdlib.h>
#include <mpi.h>

// MPI_Get_library_version may be called before MPI_Init (MPI 3.0).
static int ftigo_library_version(char *buf, int *len) {
	return MPI_Get_library_version(buf, len);
}
static int ftigo_max_library_version(void) { return MPI_MAX_LIBRARY_VERSION_STRING; }
*/
import "C"

import (
	"strings"
	"unsafe"
)

// mpiLibrary names the MPI flavour this binary was built for and the
// first line of the linked library's version string.
func mpiLibrary() string {
	n := C.ftigo_max_library_version()
	buf := (*C.char)(C.malloc(C.size_t(n)))
	defer C.free(unsafe.Pointer(buf))
	var l C.int
	if C.ftigo_library_version(buf, &l) != C.MPI_SUCCESS || l <= 0 {
		return mpiFlavour + " (library version unknown)"
	}
	s := strings.TrimRight(C.GoStringN(buf, l), "\x00")
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	line = strings.Join(strings.Fields(line), " ")
	if strings.HasPrefix(line, mpiFlavour) {
		return line
	}
	return mpiFlavour + ": " + line
}
