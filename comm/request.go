package comm

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"unsafe"
)

// Request is a posted non-blocking send or receive ([Isend], [Irecv]).
//
// The buffer of a request belongs to the communicator from the moment it is
// posted until Wait (or a Test that reports done, or [WaitAll]) returns:
// do not read or write it in between, not even a send's buffer. Every
// request must be completed that way; a request never completed keeps its
// buffer (pinned, under MPI) and its message pending.
type Request interface {
	// Wait blocks until the operation is complete and returns its count:
	// for a receive the number of elements received (bytes for a byte
	// request), for a send the number sent. A receive of a message longer
	// than the buffer fails with ErrTruncated. Calling Wait again returns
	// the same result.
	Wait() (int, error)
	// Test reports, without blocking, whether the operation is complete;
	// once it is, Test returns what Wait would. (A request of the fallback
	// for a Comm without [NonBlocker] runs, blocking, on its first Test.)
	Test() (done bool, n int, err error)
}

// NonBlocker is the optional capability of posting sends and receives
// that complete later (MPI_Isend, MPI_Irecv and MPI_Wait under MPI). The
// in-process world and the MPI binding implement it; [Isend] and [Irecv]
// fall back to running the operation at Wait for any other Comm.
//
// Message matching is as for Send and Recv: on (source, tag), in posting
// order. A send completes when the receiver has the bytes (in-process) or
// when MPI releases the buffer; a halo exchange that posts all its
// receives and sends and then waits for all of them cannot deadlock,
// whatever the order of posting.
type NonBlocker interface {
	// Isend posts a send of buf to dst with tag.
	Isend(dst, tag int, buf []byte) (Request, error)
	// Irecv posts a receive from src with tag into buf.
	Irecv(src, tag int, buf []byte) (Request, error)
}

// Isend posts a send of buf to rank dst with tag and returns at once; the
// [Request]'s Wait returns when it is complete. buf must not be touched
// until then. A rank out of range is refused at once with ErrBadArgument.
//
// For a Comm without [NonBlocker] the send is only recorded and runs
// (blocking) when the request is waited on; complete such requests with one
// [WaitAll], which runs them in an order that cannot deadlock.
func Isend[T Elem](c Comm, dst, tag int, buf []T) (Request, error) {
	return post(c, true, dst, tag, buf)
}

// Irecv posts a receive from rank src with tag into buf and returns at
// once; the [Request]'s Wait returns the number of elements received. buf
// must not be touched until then. See [Isend] for the fallback.
func Irecv[T Elem](c Comm, src, tag int, buf []T) (Request, error) {
	return post(c, false, src, tag, buf)
}

func post[T Elem](c Comm, send bool, peer, tag int, buf []T) (Request, error) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	b := asBytes(buf)
	var r Request
	var err error
	if nb, ok := c.(NonBlocker); ok {
		if send {
			r, err = nb.Isend(peer, tag, b)
		} else {
			r, err = nb.Irecv(peer, tag, b)
		}
	} else {
		r, err = newDeferred(c, send, peer, tag, b)
	}
	if err != nil {
		return nil, err
	}
	if size == 1 {
		return r, nil
	}
	return &elemRequest{r: r, size: size}, nil
}

// elemRequest converts a byte request's count into elements.
type elemRequest struct {
	r    Request
	size int
}

func (e *elemRequest) Wait() (int, error) {
	n, err := e.r.Wait()
	return e.count(n, err)
}

func (e *elemRequest) Test() (bool, int, error) {
	done, n, err := e.r.Test()
	if !done {
		return false, 0, nil
	}
	n, err = e.count(n, err)
	return true, n, err
}

func (e *elemRequest) count(n int, err error) (int, error) {
	if err == nil && n%e.size != 0 {
		err = fmt.Errorf("%w: a %d-byte message is not whole %d-byte elements", ErrBadArgument, n, e.size)
	}
	return n / e.size, err
}

// WaitAll waits for every request (nil entries are skipped) and returns
// the errors of those that failed, joined, each naming its index. It waits
// for all of them even after a failure, so every buffer is free when it
// returns; the counts are then available from each request's Wait. Requests
// of the fallback for a Comm without [NonBlocker] run here, grouped per
// peer in increasing rank order, and per peer in tag order, a send and a
// receive paired in one Sendrecv: a schedule in which any set of
// neighbour exchanges completes, in any posting order, as long as every
// message sent is received.
func WaitAll(reqs ...Request) error {
	var errs []error
	var deferred []*deferredRequest
	for _, r := range reqs {
		if e, ok := r.(*elemRequest); ok {
			r = e.r
		}
		if d, ok := r.(*deferredRequest); ok && !d.done {
			deferred = append(deferred, d)
		}
	}
	runDeferred(deferred)
	for i, r := range reqs {
		if r == nil {
			continue
		}
		if _, err := r.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("request %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// ---- the fallback: requests that run when waited on ----

// deferredRequest is a send or receive recorded for a Comm without
// NonBlocker; it runs when it is waited on.
type deferredRequest struct {
	c         Comm
	send      bool
	peer, tag int
	buf       []byte
	done      bool
	n         int
	err       error
}

func newDeferred(c Comm, send bool, peer, tag int, buf []byte) (*deferredRequest, error) {
	if peer < 0 || peer >= c.Size() {
		what := "Irecv: source"
		if send {
			what = "Isend: destination"
		}
		return nil, fmt.Errorf("%w: %s rank %d out of range [0,%d)", ErrBadArgument, what, peer, c.Size())
	}
	return &deferredRequest{c: c, send: send, peer: peer, tag: tag, buf: buf}, nil
}

func (d *deferredRequest) Wait() (int, error) {
	if !d.done {
		runDeferred([]*deferredRequest{d})
	}
	return d.n, d.err
}

func (d *deferredRequest) Test() (bool, int, error) {
	n, err := d.Wait()
	return true, n, err
}

func (d *deferredRequest) finish(n int, err error) {
	d.done, d.n, d.err = true, n, err
}

// runDeferred runs pending fallback requests: per communicator, per peer
// in increasing rank order, pairing the k-th send with the k-th receive of
// the peer (both in tag order) in one Sendrecv. Every rank handles its exchanges in increasing
// order of the pair (lower rank, higher rank), so the lowest unfinished
// exchange always has both sides ready: the schedule cannot deadlock.
func runDeferred(ds []*deferredRequest) {
	for len(ds) > 0 {
		c := ds[0].c
		var mine, rest []*deferredRequest
		for _, d := range ds {
			if sameComm(d.c, c) {
				mine = append(mine, d)
			} else {
				rest = append(rest, d)
			}
		}
		runPeers(c, mine)
		ds = rest
	}
}

func runPeers(c Comm, ds []*deferredRequest) {
	slices.SortStableFunc(ds, func(a, b *deferredRequest) int { return cmp.Compare(a.peer, b.peer) })
	for len(ds) > 0 {
		peer := ds[0].peer
		end := 1
		for end < len(ds) && ds[end].peer == peer {
			end++
		}
		var sends, recvs []*deferredRequest
		for _, d := range ds[:end] {
			if d.send {
				sends = append(sends, d)
			} else {
				recvs = append(recvs, d)
			}
		}
		// In tag order (posting order within a tag): the peer sorts its
		// receives from this rank like these sends, and its sends like
		// these receives, so step k is the same pair of messages on both
		// sides.
		byTag := func(a, b *deferredRequest) int { return cmp.Compare(a.tag, b.tag) }
		slices.SortStableFunc(sends, byTag)
		slices.SortStableFunc(recvs, byTag)
		for k := range max(len(sends), len(recvs)) {
			switch {
			case k < len(sends) && k < len(recvs):
				s, r := sends[k], recvs[k]
				n, err := c.Sendrecv(s.buf, peer, s.tag, r.buf, peer, r.tag)
				serr := err
				if errors.Is(err, ErrTruncated) {
					serr = nil // the receive was too short; the send went through
				}
				s.finish(len(s.buf), serr)
				r.finish(n, err)
			case k < len(sends):
				s := sends[k]
				s.finish(len(s.buf), c.Send(peer, s.tag, s.buf))
			default:
				r := recvs[k]
				r.finish(c.Recv(peer, r.tag, r.buf))
			}
		}
		ds = ds[end:]
	}
}

// sameComm compares two communicators without panicking on values that
// are not comparable.
func sameComm(a, b Comm) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}
