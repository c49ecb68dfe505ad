//go:build !mpi

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBenchMPIWithoutMPI: --mpi in a binary built without MPI is a usage
// error saying how to build one.
func TestBenchMPIWithoutMPI(t *testing.T) {
	code, out, errs := ftigo("bench", "--mpi", "--dir", t.TempDir())
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Contains(t, errs, "--mpi: this ftigo was built without MPI (go build -tags mpi ./cmd/ftigo")
}
