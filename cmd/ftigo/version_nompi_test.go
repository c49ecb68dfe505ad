//go:build !mpi

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMPILibrary: without the mpi tag, version says there is no MPI.
func TestMPILibrary(t *testing.T) {
	assert.Empty(t, mpiLibrary())
	code, out, _ := ftigo("version")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "mpi:      none (built without -tags mpi; ranks are goroutines)\n")
}
