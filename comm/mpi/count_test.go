//go:build mpi

package mpi

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ftigo/ftigo/comm"
)

func TestCheckCount(t *testing.T) {
	tests := []struct {
		n   int
		bad bool
	}{{0, false}, {1, false}, {MaxCount, false}, {MaxCount + 1, true}, {1 << 40, true}}
	for _, tc := range tests {
		err := checkCount("Send", tc.n)
		if tc.bad {
			assert.ErrorIs(t, err, comm.ErrBadArgument, "n=%d", tc.n)
			assert.Contains(t, err.Error(), "count limit")
		} else {
			assert.NoError(t, err, "n=%d", tc.n)
		}
	}
}

func TestMPIErrorUnwrap(t *testing.T) {
	e := &MPIError{Op: "MPI_Recv", Code: 15, Class: int(classTruncate()), Msg: "message truncated"}
	assert.ErrorIs(t, e, comm.ErrTruncated)
	assert.Equal(t, fmt.Sprintf("mpi: MPI_Recv: message truncated (code 15, class %d)", classTruncate()), e.Error())
	e = &MPIError{Op: "MPI_Send", Code: 6, Class: int(classRank()), Msg: "invalid rank"}
	assert.ErrorIs(t, e, comm.ErrBadArgument)
}
