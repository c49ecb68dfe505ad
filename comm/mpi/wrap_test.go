//go:build mpi

package mpi_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/commtest"
	"github.com/ftigo/ftigo/comm/mpi"
)

// TestFromHandle wraps a communicator known only by its Fortran handle,
// as ftigo's C API wraps the MPI_Comm an application passes to FTI_Init,
// runs the conformance suite on it and checks the ownership rules.
func TestFromHandle(t *testing.T) {
	sub, err := world.Split(0, world.Size()-world.Rank()) // reversed order: a different communicator from the world
	require.NoError(t, err)
	h := sub.(*mpi.Comm).Handle()
	w, err := mpi.FromHandle(h)
	require.NoError(t, err)
	assert.Equal(t, h, w.Handle())
	assert.Equal(t, world.Size(), w.Size())
	assert.Equal(t, world.Size()-1-world.Rank(), w.Rank())
	level, _ := w.ThreadLevel()
	wl, _ := world.ThreadLevel()
	assert.Equal(t, wl, level, "the thread level the application obtained")

	commtest.Run(t, w)

	assert.ErrorIs(t, w.Finalize(), mpi.ErrNotInitThread, "MPI belongs to the application")
	require.NoError(t, w.Close(), "Close is a no-op: the caller owns the handle")
	require.NoError(t, w.Barrier())
	require.NoError(t, sub.Close(), "the owner frees it")
	require.NoError(t, world.Barrier())
}

func TestFromHandleRange(t *testing.T) {
	for _, h := range []int{math.MaxInt32 + 1, math.MinInt32 - 1} {
		c, err := mpi.FromHandle(h)
		assert.ErrorIs(t, err, comm.ErrBadArgument, "handle %d", h)
		assert.Nil(t, c)
	}
}
