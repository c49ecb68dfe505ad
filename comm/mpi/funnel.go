//go:build mpi

package mpi

/*
#include <sched.h>
#include <stdint.h>
#include <time.h>
#include <mpi.h>

// The non-blocking forms of the package's calls, for the funnel: each
// posts one operation and returns its request as a Fortran handle.

static MPI_Datatype fg_dtype(int t) { return t == 2 ? MPI_DOUBLE : MPI_INT64_T; }
static MPI_Op fg_op(int op) { return op == 0 ? MPI_MIN : op == 1 ? MPI_MAX : MPI_SUM; }

// FG_POST runs call, which posts a request into r, and returns its
// handle in *q.
#define FG_POST(call) do { \
	MPI_Request r; \
	int rc = (call); \
	if (rc == MPI_SUCCESS) *q = MPI_Request_c2f(r); \
	return rc; \
} while (0)

static int fg_ibarrier(MPI_Fint c, MPI_Fint *q) {
	FG_POST(MPI_Ibarrier(MPI_Comm_f2c(c), &r));
}

static int fg_ibcast(MPI_Fint c, void *buf, int n, int root, MPI_Fint *q) {
	FG_POST(MPI_Ibcast(buf, n, MPI_BYTE, root, MPI_Comm_f2c(c), &r));
}

static int fg_iallgather(MPI_Fint c, void *send, int n, void *recv, MPI_Fint *q) {
	FG_POST(MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, MPI_Comm_f2c(c), &r));
}

// A NULL send means in place.
static int fg_iallreduce(MPI_Fint c, void *send, void *recv, int n, int t, int op, MPI_Fint *q) {
	FG_POST(MPI_Iallreduce(send ? send : MPI_IN_PLACE, recv, n, fg_dtype(t), fg_op(op), MPI_Comm_f2c(c), &r));
}

// fg_igather_i64 gathers *v, one int64 a rank, into root's recv.
static int fg_igather_i64(MPI_Fint c, int64_t *v, int64_t *recv, int root, MPI_Fint *q) {
	FG_POST(MPI_Igather(v, 1, MPI_INT64_T, recv, 1, MPI_INT64_T, root, MPI_Comm_f2c(c), &r));
}

static int fg_isend(MPI_Fint c, void *buf, int n, int dst, int tag, MPI_Fint *q) {
	FG_POST(MPI_Isend(buf, n, MPI_BYTE, dst, tag, MPI_Comm_f2c(c), &r));
}

static int fg_irecv(MPI_Fint c, void *buf, int n, int src, int tag, MPI_Fint *q) {
	FG_POST(MPI_Irecv(buf, n, MPI_BYTE, src, tag, MPI_Comm_f2c(c), &r));
}

static int fg_igatherv(MPI_Fint c, void *send, int n, void *recv, int *counts, int *displs, int root, MPI_Fint *q) {
	FG_POST(MPI_Igatherv(send, n, MPI_BYTE, recv, counts, displs, MPI_BYTE, root, MPI_Comm_f2c(c), &r));
}

static int fg_iallgatherv(MPI_Fint c, void *send, int n, void *recv, int *counts, int *displs, MPI_Fint *q) {
	FG_POST(MPI_Iallgatherv(send, n, MPI_BYTE, recv, counts, displs, MPI_BYTE, MPI_Comm_f2c(c), &r));
}

static int fg_iscatterv(MPI_Fint c, void *send, int *counts, int *displs, void *recv, int n, int root, MPI_Fint *q) {
	FG_POST(MPI_Iscatterv(send, counts, displs, MPI_BYTE, recv, n, MPI_BYTE, root, MPI_Comm_f2c(c), &r));
}

// fg_probe_recv receives a message from src with tag once one is there
// (*flag set): MPI_Improbe, then MPI_Mrecv, which reports truncation as
// MPI_Recv does.
static int fg_probe_recv(MPI_Fint c, void *buf, int n, int src, int tag, int *flag, long long *count) {
	MPI_Message m;
	MPI_Status st;
	int rc = MPI_Improbe(src, tag, MPI_Comm_f2c(c), flag, &m, &st);
	if (rc != MPI_SUCCESS || !*flag) return rc;
	rc = MPI_Mrecv(buf, n, MPI_BYTE, &m, &st);
	if (rc == MPI_SUCCESS) {
		int k = 0;
		MPI_Get_count(&st, MPI_BYTE, &k);
		*count = k;
	}
	return rc;
}

static MPI_Fint fg_null(void) { return MPI_Request_c2f(MPI_REQUEST_NULL); }

// fg_wait waits until one of the n requests is complete or one of the
// m messages awaited by probe is there (probes holds communicator,
// source and tag of each), or another operation was queued (*queued no
// longer seen), or usec microseconds passed. Between tests it spins
// (nap 0), yields the core (nap < 0) or sleeps nap microseconds. It
// completes nothing: the funnel's round does. It returns 1 when it saw
// something ready or an error, 0 at the time limit. It runs in C, so the
// Go scheduler hands the goroutine's P to others meanwhile, as during a
// blocking MPI call.
static int fg_wait(MPI_Fint *reqs, int n, int *probes, int m, int *queued, int seen, int usec, int nap) {
	double end = MPI_Wtime() + usec * 1e-6;
	struct timespec ts = {0, (long)nap * 1000};
	for (;;) {
		for (int i = 0; i < n; i++) {
			int flag = 0;
			if (MPI_Request_get_status(MPI_Request_f2c(reqs[i]), &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag) return 1;
		}
		for (int i = 0; i < m; i++) {
			int flag = 0;
			if (MPI_Iprobe(probes[3*i+1], probes[3*i+2], MPI_Comm_f2c(probes[3*i]), &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag) return 1;
		}
		if (__atomic_load_n(queued, __ATOMIC_ACQUIRE) != seen) return 1;
		if (MPI_Wtime() >= end) return 0;
		if (nap < 0) sched_yield();
		else if (nap > 0) nanosleep(&ts, NULL);
	}
}

// fg_test tests one request; on completion it reports the bytes received.
// MPI_Request_get_status leaves a completed request for MPI_Wait, which
// reports its error as the blocking calls do (Open MPI's MPI_Test does not
// report a truncated receive).
static int fg_test(MPI_Fint *q, int *flag, long long *count) {
	MPI_Request r = MPI_Request_f2c(*q);
	MPI_Status st;
	int rc = MPI_Request_get_status(r, flag, MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS || !*flag) return rc;
	rc = MPI_Wait(&r, &st);
	*q = MPI_Request_c2f(r);
	if (rc == MPI_SUCCESS) {
		MPI_Count n = 0;
		rc = MPI_Get_elements_x(&st, MPI_BYTE, &n);
		*count = (long long)n;
	}
	return rc;
}
*/
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The funnel: MPI calls below MPI_THREAD_MULTIPLE.
//
// With MPI_THREAD_SINGLE or FUNNELED only the thread that initialised MPI
// may call it; with SERIALIZED any thread may, one at a time. ftigo's
// background goroutines (asynchronous post-processing, heads' virtual
// ranks) make calls too. So below MULTIPLE every call becomes an
// operation queued on the funnel. The goroutine holding the funnel's token
// posts the queued operations in their order, in their non-blocking form
// (MPI_Isend, MPI_Iallreduce, ...), and tests them until each completes.
// It serves everyone's operations while it waits for its own, so two
// goroutines waiting on each other's messages never deadlock. Below
// SERIALIZED only the thread that may call MPI takes the token: other
// goroutines' operations wait until it calls MPI or [Comm.Serve].

// fop is one operation queued on the funnel.
type fop struct {
	name string // MPI function, for errors
	// post runs on the serving goroutine: it posts the operation and
	// returns its requests (none when it completed at once, as the
	// blocking calls do) and MPI's code.
	post func() ([]C.MPI_Fint, C.int)
	// poll, when set, is tested before the requests until it reports
	// done (a receive by probe).
	poll func() (bool, C.int)
	// probe is the communicator, source and tag poll waits for, so
	// the funnel can wait for it in C (see fg_wait).
	probe  [3]C.int
	reqs   []C.MPI_Fint
	counts []int64 // bytes received, per request
	left   int
	rc     C.int
	pin    runtime.Pinner
	done   chan struct{}
}

// err is the operation's error, once done.
func (o *fop) err() error { return mpiErr(o.name, o.rc) }

// keep pins the buffers MPI holds until the operation completes.
func (o *fop) keep(bufs ...[]byte) {
	for _, b := range bufs {
		if len(b) > 0 {
			o.pin.Pin(&b[0])
		}
	}
}

// funnel serialises one initialisation's MPI calls (see the comment above).
type funnel struct {
	owner  int           // the only thread that may call MPI; 0: any (SERIALIZED)
	token  chan struct{} // held by the serving goroutine
	wake   chan struct{} // an operation was queued
	mu     sync.Mutex
	queue  []*fop
	active []*fop // posted, not complete: the token holder's
	stats  funnelStats
	// queued counts the operations ever queued: fg_wait returns when
	// it changes, so a queued operation is posted at once.
	queued atomic.Int32
	// reqs and probes are fg_wait's arguments, reused.
	reqs   []C.MPI_Fint
	probes []C.int
}

// funnelStats counts the funnel's work (see [Comm.FunnelStats]).
type funnelStats struct {
	ops, rounds, yields, sleeps atomic.Int64
	slept                       atomic.Int64 // nanoseconds
}

func newFunnel(owner int) *funnel {
	return &funnel{owner: owner, token: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
}

// mayServe reports whether the calling goroutine may call MPI.
func (f *funnel) mayServe() bool { return f.owner == 0 || unix.Gettid() == f.owner }

// exec queues op and returns once it completed: served by the caller when
// it may call MPI and no other goroutine is serving, else by the goroutine
// that is.
func (f *funnel) exec(op *fop) error {
	op.done = make(chan struct{})
	f.stats.ops.Add(1)
	f.mu.Lock()
	f.queue = append(f.queue, op)
	f.mu.Unlock()
	f.queued.Add(1)
	select {
	case f.wake <- struct{}{}:
	default:
	}
	if f.mayServe() {
		select {
		case <-op.done:
		case f.token <- struct{}{}:
			f.serve(op.done)
			<-f.token
		}
	}
	<-op.done
	return op.err()
}

// serveWhile serves the queued operations until done is closed, when the
// caller may call MPI; otherwise it only waits.
func (f *funnel) serveWhile(done <-chan struct{}) {
	if !f.mayServe() {
		<-done
		return
	}
	select {
	case <-done:
		// One round all the same: a caller polling for done (Comm.Serve
		// with a closed channel) moves the others' operations.
		select {
		case f.token <- struct{}{}:
			f.round()
			<-f.token
		default:
		}
	case f.token <- struct{}{}:
		f.serve(done)
		<-f.token
	}
}

// serve runs rounds until done is closed. The caller holds the token.
// Between rounds it waits in C for an operation to be ready (fg_wait),
// as MPI_Wait would, in slices of waitSlice: a wait for a channel closed
// by Go code (Comm.Serve) sees it within a slice. After spinFor without
// progress it sleeps between rounds instead, up to a millisecond, so a
// long wait (a head's) does not keep a core busy.
func (f *funnel) serve(done <-chan struct{}) {
	idle := time.Time{}
	pause := time.Duration(0)
	nap := 0 // microseconds
	for {
		seen := f.queued.Load()
		progressed := f.round()
		select {
		case <-done:
			return
		default:
		}
		switch {
		case progressed:
			idle, pause, nap = time.Time{}, 0, 0
		case len(f.active) == 0:
			// Nothing posted: sleep until something is queued.
			select {
			case <-done:
				return
			case <-f.wake:
			}
		case idle.IsZero():
			idle, nap = time.Now(), 0
			f.waitReady(seen, spinSlice, 0)
		case time.Since(idle) < spinFor:
			// Spin first, as MPI_Wait does; then yield the core to
			// the other ranks; then nap, longer and longer.
			switch t := time.Since(idle); {
			case t < spinSlice*time.Microsecond:
				f.waitReady(seen, spinSlice, 0)
			case t < yieldFor:
				f.waitReady(seen, waitSlice, -1)
			default:
				nap = min(max(2*nap, minNap), maxNap)
				f.waitReady(seen, waitSlice, nap)
			}
		default:
			pause = min(max(2*pause, 20*time.Microsecond), time.Millisecond)
			t := time.Now()
			time.Sleep(pause)
			f.stats.sleeps.Add(1)
			f.stats.slept.Add(int64(time.Since(t)))
		}
	}
}

// How a serving goroutine waits in C (fg_wait) for an operation to be
// ready: it spins for spinSlice microseconds, yields the core until
// yieldFor, then naps minNap to maxNap microseconds between tests, in
// slices of waitSlice microseconds; after spinFor without progress it
// sleeps in Go between rounds.

const (
	spinSlice = 50
	yieldFor  = 2 * time.Millisecond
	minNap    = 20
	maxNap    = 500
	waitSlice = 1000
	spinFor   = 200 * time.Millisecond
)

// waitReady waits in C until an active operation may be done, an operation
// was queued since seen, or usec microseconds passed, napping nap
// microseconds between tests (see fg_wait).
func (f *funnel) waitReady(seen int32, usec, nap int) {
	f.stats.yields.Add(1)
	null := nullRequest()
	f.reqs, f.probes = f.reqs[:0], f.probes[:0]
	for _, op := range f.active {
		if op.poll != nil {
			f.probes = append(f.probes, op.probe[:]...)
		}
		for _, q := range op.reqs {
			if q != null {
				f.reqs = append(f.reqs, q)
			}
		}
	}
	var rp *C.MPI_Fint
	var pp *C.int
	if len(f.reqs) > 0 {
		rp = &f.reqs[0]
	}
	if len(f.probes) > 0 {
		pp = &f.probes[0]
	}
	C.fg_wait(rp, C.int(len(f.reqs)), pp, C.int(len(f.probes)/3), (*C.int)(unsafe.Pointer(&f.queued)), C.int(seen), C.int(usec), C.int(nap))
}

// round posts the queued operations and tests the posted ones once. It
// reports whether any operation was posted or completed.
func (f *funnel) round() bool {
	f.stats.rounds.Add(1)
	f.mu.Lock()
	q := f.queue
	f.queue = nil
	f.mu.Unlock()
	progressed := len(q) > 0
	for _, op := range q {
		reqs, rc := op.post()
		op.rc, op.reqs = rc, reqs
		op.counts, op.left = make([]int64, len(reqs)), len(reqs)
		if rc != 0 || len(reqs) == 0 && op.poll == nil {
			f.finish(op)
			continue
		}
		f.active = append(f.active, op)
	}
	kept := f.active[:0]
	for _, op := range f.active {
		if f.test(op) {
			f.finish(op)
			progressed = true
			continue
		}
		kept = append(kept, op)
	}
	clear(f.active[len(kept):])
	f.active = kept
	return progressed
}

// nullRequest is MPI_REQUEST_NULL's Fortran handle: a completed request.
func nullRequest() C.MPI_Fint { return C.fg_null() }

// test tests op's pending requests once and reports whether all are done.
func (f *funnel) test(op *fop) bool {
	if op.poll != nil {
		done, rc := op.poll()
		if !done {
			return false
		}
		op.poll = nil
		if op.rc == 0 {
			op.rc = rc
		}
	}
	null := nullRequest()
	for i := range op.reqs {
		if op.reqs[i] == null {
			continue
		}
		var flag C.int
		var n C.longlong
		rc := C.fg_test(&op.reqs[i], &flag, &n)
		if rc != 0 {
			// The request is done, with an error; the first one counts.
			op.reqs[i] = null
			op.left--
			if op.rc == 0 {
				op.rc = rc
			}
			continue
		}
		if flag != 0 {
			op.reqs[i] = null
			op.counts[i] = int64(n)
			op.left--
		}
	}
	return op.left == 0
}

func (f *funnel) finish(op *fop) {
	op.pin.Unpin()
	close(op.done)
}

// The funnelled forms of the package's calls.

func (f *funnel) blocking(name string, call func() C.int) error {
	return f.exec(&fop{name: name, post: func() ([]C.MPI_Fint, C.int) { return nil, call() }})
}

func (f *funnel) one(name string, post func(q *C.MPI_Fint) C.int, bufs ...[]byte) (*fop, error) {
	op := &fop{name: name}
	op.keep(bufs...)
	op.post = func() ([]C.MPI_Fint, C.int) {
		var q C.MPI_Fint
		rc := post(&q)
		return []C.MPI_Fint{q}, rc
	}
	err := f.exec(op)
	return op, err
}

func (f *funnel) barrier(h C.MPI_Fint) error {
	_, err := f.one("MPI_Barrier", func(q *C.MPI_Fint) C.int { return C.fg_ibarrier(h, q) })
	return err
}

func (f *funnel) bcast(h C.MPI_Fint, buf []byte, root int) error {
	_, err := f.one("MPI_Bcast", func(q *C.MPI_Fint) C.int {
		return C.fg_ibcast(h, ptr(buf), C.int(len(buf)), C.int(root), q)
	}, buf)
	return err
}

func (f *funnel) allgather(h C.MPI_Fint, send, recv []byte) error {
	_, err := f.one("MPI_Allgather", func(q *C.MPI_Fint) C.int {
		return C.fg_iallgather(h, ptr(send), C.int(len(send)), ptr(recv), q)
	}, send, recv)
	return err
}

// allreduce reduces n elements of type t (1 int64, 2 float64); a nil send
// is in place.
func (f *funnel) allreduce(h C.MPI_Fint, send, recv unsafe.Pointer, n int, t, op int) error {
	o := &fop{name: "MPI_Allreduce"}
	if send != nil {
		o.pin.Pin(send)
	}
	o.pin.Pin(recv)
	o.post = func() ([]C.MPI_Fint, C.int) {
		var q C.MPI_Fint
		rc := C.fg_iallreduce(h, send, recv, C.int(n), C.int(t), C.int(op), &q)
		return []C.MPI_Fint{q}, rc
	}
	return f.exec(o)
}

// gatherInt64 gathers every rank's v into root's recv (nil elsewhere).
func (f *funnel) gatherInt64(h C.MPI_Fint, v int64, recv []int64, root int) error {
	o := &fop{name: "MPI_Gather"}
	mine := &v
	o.pin.Pin(mine)
	var rp *C.int64_t
	if len(recv) > 0 {
		o.pin.Pin(&recv[0])
		rp = (*C.int64_t)(unsafe.Pointer(&recv[0]))
	}
	o.post = func() ([]C.MPI_Fint, C.int) {
		var q C.MPI_Fint
		rc := C.fg_igather_i64(h, (*C.int64_t)(unsafe.Pointer(mine)), rp, C.int(root), &q)
		return []C.MPI_Fint{q}, rc
	}
	return f.exec(o)
}

func (f *funnel) send(h C.MPI_Fint, buf []byte, dst, tag int) error {
	_, err := f.one("MPI_Send", func(q *C.MPI_Fint) C.int {
		return C.fg_isend(h, ptr(buf), C.int(len(buf)), C.int(dst), C.int(tag), q)
	}, buf)
	return err
}

// probeRecv is a receive by probe into buf (see fg_probe_recv); n gets
// its length.
func probeRecv(h C.MPI_Fint, buf []byte, src, tag int, n *int) func() (bool, C.int) {
	return func() (bool, C.int) {
		var flag C.int
		var count C.longlong
		rc := C.fg_probe_recv(h, ptr(buf), C.int(len(buf)), C.int(src), C.int(tag), &flag, &count)
		*n = int(count)
		return flag != 0 || rc != 0, rc
	}
}

func (f *funnel) recv(h C.MPI_Fint, buf []byte, src, tag int) (int, error) {
	var n int
	op := &fop{name: "MPI_Recv", post: func() ([]C.MPI_Fint, C.int) { return nil, 0 }, poll: probeRecv(h, buf, src, tag, &n),
		probe: [3]C.int{C.int(h), C.int(src), C.int(tag)}}
	op.keep(buf)
	err := f.exec(op)
	return n, err
}

func (f *funnel) sendrecv(h C.MPI_Fint, send []byte, dst, stag int, recv []byte, src, rtag int) (int, error) {
	var n int
	op := &fop{name: "MPI_Sendrecv", poll: probeRecv(h, recv, src, rtag, &n), probe: [3]C.int{C.int(h), C.int(src), C.int(rtag)}}
	op.keep(send, recv)
	op.post = func() ([]C.MPI_Fint, C.int) {
		var q C.MPI_Fint
		rc := C.fg_isend(h, ptr(send), C.int(len(send)), C.int(dst), C.int(stag), &q)
		if rc != 0 {
			return nil, rc
		}
		return []C.MPI_Fint{q}, 0
	}
	err := f.exec(op)
	return n, err
}

// vcollective posts MPI_Igatherv (kind 0), MPI_Iallgatherv (1) or
// MPI_Iscatterv (2). The counts and displacements (nil on a rank other
// than root of a rooted one) stay pinned with the buffers.
func (f *funnel) vcollective(kind int, h C.MPI_Fint, send, recv []byte, sp, rp unsafe.Pointer, counts, displs *C.int, root int) error {
	names := [...]string{"MPI_Gatherv", "MPI_Allgatherv", "MPI_Scatterv"}
	op := &fop{name: names[kind]}
	op.keep(send, recv)
	if counts != nil {
		op.pin.Pin(counts)
		op.pin.Pin(displs)
	}
	op.post = func() ([]C.MPI_Fint, C.int) {
		var q C.MPI_Fint
		var rc C.int
		switch kind {
		case 0:
			rc = C.fg_igatherv(h, ptr(send), C.int(len(send)), rp, counts, displs, C.int(root), &q)
		case 1:
			rc = C.fg_iallgatherv(h, ptr(send), C.int(len(send)), ptr(recv), counts, displs, &q)
		default:
			rc = C.fg_iscatterv(h, sp, counts, displs, ptr(recv), C.int(len(recv)), C.int(root), &q)
		}
		return []C.MPI_Fint{q}, rc
	}
	return f.exec(op)
}

// wait completes a request posted through the funnel.
func (f *funnel) wait(h *C.MPI_Fint) (C.int, int64) {
	op := &fop{name: "MPI_Wait"}
	op.post = func() ([]C.MPI_Fint, C.int) {
		if *h == nullRequest() {
			return nil, 0
		}
		return []C.MPI_Fint{*h}, 0
	}
	_ = f.exec(op)
	*h = nullRequest()
	if len(op.counts) == 0 {
		return op.rc, 0
	}
	return op.rc, op.counts[0]
}

// testOnce tests a request posted through the funnel once.
func (f *funnel) testOnce(h *C.MPI_Fint) (done bool, rc C.int, count int64) {
	var flag C.int
	var n C.longlong
	op := &fop{name: "MPI_Test"}
	op.post = func() ([]C.MPI_Fint, C.int) {
		r := C.fg_test(h, &flag, &n)
		return nil, r
	}
	_ = f.exec(op)
	return flag != 0 || op.rc != 0, op.rc, int64(n)
}
