package comm

import "sync"

// Server is the optional capability of a communicator whose calls, made
// by other goroutines, wait until a goroutine that may call the
// underlying library serves them: MPI below MPI_THREAD_MULTIPLE, where
// comm/mpi funnels every call to one thread. Serve serves them until done
// is closed, or once when it is closed already; a goroutine that may not
// serve only waits.
type Server interface {
	Serve(done <-chan struct{})
}

// Wait returns once done is closed. When c is a [Server] the caller serves
// c's queued calls meanwhile, so a goroutine waiting for background work
// that communicates lets that work progress.
func Wait(c Comm, done <-chan struct{}) {
	if s, ok := c.(Server); ok {
		s.Serve(done)
		return
	}
	<-done
}

// WaitGroup waits for wg as [Wait] waits for a channel.
func WaitGroup(c Comm, wg *sync.WaitGroup) {
	if _, ok := c.(Server); !ok {
		wg.Wait()
		return
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	Wait(c, done)
}
