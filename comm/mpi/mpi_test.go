//go:build mpi

package mpi_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/commtest"
	"github.com/ftigo/ftigo/comm/mpi"
	"github.com/ftigo/ftigo/comm/mpi/mpimain"
)

// world is this process's rank, set up by TestMain.
var world *mpi.Comm

// TestMain runs the tests under MPI at the thread level FTIGO_MPI_THREAD
// names (both MPI libraries grant MULTIPLE, so the levels below it run
// the funnel's paths); see mpimain.Main.
func TestMain(m *testing.M) { mpimain.Main(m, &world) }

func TestConformance(t *testing.T) {
	commtest.Run(t, world)
}

// TestConformanceBytesOnly runs the suite with the typed capabilities
// hidden: comm's fallbacks on the MPI byte operations.
func TestConformanceBytesOnly(t *testing.T) {
	commtest.Run(t, commtest.BytesOnly(world))
}

// TestConformanceSmallCount runs the suite with the typed operations'
// count limit lowered to 44 bytes, so that reductions go in chunks of 5
// elements after the first call, every non-blocking message above 44 bytes
// travels as a derived datatype (received into plain or derived buffers of
// other sizes), and every gather above 44 bytes takes comm's fallback.
func TestConformanceSmallCount(t *testing.T) {
	old := mpi.SetMaxCount(world, 44)
	defer mpi.SetMaxCount(world, old)
	commtest.Run(t, world)
}

func TestThreadLevel(t *testing.T) {
	level, serialised := world.ThreadLevel()
	t.Logf("rank %d of %d: thread level %d, serialised %v", world.Rank(), world.Size(), level, serialised)
	if want := mpimain.Levels[os.Getenv("FTIGO_MPI_THREAD")]; want != mpi.ThreadMultiple {
		assert.Equal(t, want, level)
		assert.True(t, serialised, "calls go through the funnel")
	} else {
		assert.Equal(t, mpi.ThreadMultiple, level, "both Open MPI and MPICH grant MULTIPLE")
		assert.False(t, serialised)
	}
}

func TestTruncationCarriesMPIText(t *testing.T) {
	// Every rank talks to itself, so this works at any size.
	n, err := world.Sendrecv(make([]byte, 16), world.Rank(), 1, make([]byte, 4), world.Rank(), 1)
	require.Error(t, err, "n=%d", n)
	assert.ErrorIs(t, err, comm.ErrTruncated)
	var me *mpi.MPIError
	require.True(t, errors.As(err, &me), "got %T %v", err, err)
	assert.Equal(t, "MPI_Sendrecv", me.Op)
	assert.NotZero(t, me.Code)
	assert.NotEmpty(t, me.Msg)
	assert.Contains(t, err.Error(), "mpi: MPI_Sendrecv: ")
	require.NoError(t, world.Barrier())
}

func TestFinalizeRules(t *testing.T) {
	sub, err := world.Split(0, 0)
	require.NoError(t, err)
	defer sub.Close()
	err = sub.(*mpi.Comm).Finalize()
	assert.ErrorIs(t, err, comm.ErrBadArgument)
	// This test runs on a goroutine other than TestMain's.
	assert.ErrorIs(t, world.Finalize(), mpi.ErrNotInitThread)
	require.NoError(t, world.Barrier())
}

func TestClosedSubCommunicator(t *testing.T) {
	sub, err := world.Split(world.Rank()%2, 0)
	require.NoError(t, err)
	require.NoError(t, sub.Close())
	require.NoError(t, sub.Close(), "second Close is a no-op")
	assert.ErrorIs(t, sub.Barrier(), comm.ErrClosed)
	_, err = sub.AllreduceInt64(1, comm.Sum)
	assert.ErrorIs(t, err, comm.ErrClosed)
}

// TestInjectedFailure fails on the rank named by FTIGO_MPI_FAIL_RANK while
// the others wait in a Barrier that rank never joins. It only runs when the
// variable is set, from the comm package's TestMPIFailingRankEndsJob, which
// checks that TestMain's MPI_Abort ends the whole job instead of hanging.
func TestInjectedFailure(t *testing.T) {
	v := os.Getenv("FTIGO_MPI_FAIL_RANK")
	if v == "" {
		t.Skip("FTIGO_MPI_FAIL_RANK is not set")
	}
	if fmt.Sprint(world.Rank()) == v {
		t.Errorf("rank %d: injected failure", world.Rank())
		return
	}
	_ = world.Barrier() // never completes: MPI_Abort from the failed rank kills us
	t.Errorf("rank %d: Barrier returned although rank %s never joined", world.Rank(), v)
}

func TestSplitArgumentRange(t *testing.T) {
	for _, tc := range []struct{ color, key int }{{1 << 40, 0}, {0, 1 << 40}, {0, -1 << 40}} {
		sub, err := world.Split(tc.color, tc.key)
		assert.ErrorIs(t, err, comm.ErrBadArgument, "color %d key %d", tc.color, tc.key)
		assert.Nil(t, sub)
	}
	require.NoError(t, world.Barrier())
}
