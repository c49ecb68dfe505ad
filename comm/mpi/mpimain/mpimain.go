//go:build mpi

// Package mpimain runs a test binary's tests on MPI, at the thread level
// the environment asks for. A TestMain of a package whose tests run under
// mpirun calls [Main].
package mpimain

import (
	"fmt"
	"os"
	"testing"

	"github.com/ftigo/ftigo/comm/mpi"
)

// Levels names the thread levels FTIGO_MPI_THREAD may ask for; unset
// means MPI_THREAD_MULTIPLE.
var Levels = map[string]int{"": mpi.ThreadMultiple, "multiple": mpi.ThreadMultiple,
	"serialized": mpi.ThreadSerialized, "funneled": mpi.ThreadFunneled, "single": mpi.ThreadSingle}

// Main initialises MPI at the level FTIGO_MPI_THREAD names and stores
// the world in *world. It runs the tests on another goroutine while this
// one, which initialised MPI, serves the funnel: below SERIALIZED only it
// may call MPI. Then it finalizes MPI, or calls MPI_Abort when a test
// failed, so that no rank waits for a failed one. It does not return.
func Main(m *testing.M, world **mpi.Comm) {
	name := os.Getenv("FTIGO_MPI_THREAD")
	level, ok := Levels[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "FTIGO_MPI_THREAD=%s: want single, funneled, serialized or multiple\n", name)
		os.Exit(2)
	}
	w, err := mpi.InitThread(level)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpi.InitThread:", err)
		os.Exit(2)
	}
	*world = w
	code := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		code = m.Run()
	}()
	w.Serve(done)
	if code != 0 {
		fmt.Fprintf(os.Stderr, "rank %d: tests failed, calling MPI_Abort(%d)\n", w.Rank(), code)
		_ = w.Abort(code)
		os.Exit(code)
	}
	if err := w.Finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: MPI_Finalize: %v\n", w.Rank(), err)
		os.Exit(1)
	}
	os.Exit(0)
}
