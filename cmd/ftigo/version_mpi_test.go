//go:build mpi

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMPILibrary: a binary built with -tags mpi names the MPI library it
// is linked with, of the flavour its tags select.
func TestMPILibrary(t *testing.T) {
	lib := mpiLibrary()
	assert.True(t, strings.HasPrefix(lib, mpiFlavour), "%q names %s", lib, mpiFlavour)
	assert.NotContains(t, lib, "unknown")
	assert.NotContains(t, lib, "\n")
	assert.NotContains(t, lib, "\x00")
	if mpiFlavour == "MPICH" {
		assert.Regexp(t, `^MPICH Version: \d+\.\d+`, lib)
	} else {
		assert.Regexp(t, `^Open MPI v\d+\.\d+`, lib)
	}
	code, out, _ := ftigo("version")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "mpi:      "+lib+"\n")
}
