//go:build mpi

package mpi

/*
#include <stdlib.h>
#include <stdint.h>
#include <mpi.h>

// Every MPI handle crosses into Go as a Fortran handle (MPI_Fint, a plain
// int in every implementation); the conversions happen here, in C, so Go
// never names an implementation-specific handle type.

static int ftigo_init(int required, int *provided) {
	int flag = 0;
	int rc = MPI_Initialized(&flag);
	if (rc != MPI_SUCCESS) return rc;
	if (flag) {
		rc = MPI_Query_thread(provided);
	} else {
		rc = MPI_Init_thread(NULL, NULL, required, provided);
	}
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

static int ftigo_thread_multiple(void) { return MPI_THREAD_MULTIPLE; }
static int ftigo_thread_serialized(void) { return MPI_THREAD_SERIALIZED; }
static int ftigo_thread_funneled(void) { return MPI_THREAD_FUNNELED; }
static int ftigo_thread_single(void) { return MPI_THREAD_SINGLE; }
static int ftigo_finalize(void) { return MPI_Finalize(); }
static MPI_Fint ftigo_world(void) { return MPI_Comm_c2f(MPI_COMM_WORLD); }
static MPI_Fint ftigo_null(void) { return MPI_Comm_c2f(MPI_COMM_NULL); }

static int ftigo_rank(MPI_Fint c, int *r) { return MPI_Comm_rank(MPI_Comm_f2c(c), r); }
static int ftigo_size(MPI_Fint c, int *n) { return MPI_Comm_size(MPI_Comm_f2c(c), n); }
static int ftigo_barrier(MPI_Fint c) { return MPI_Barrier(MPI_Comm_f2c(c)); }

static int ftigo_bcast(MPI_Fint c, void *buf, int n, int root) {
	return MPI_Bcast(buf, n, MPI_BYTE, root, MPI_Comm_f2c(c));
}

static int ftigo_allgather(MPI_Fint c, void *send, int n, void *recv) {
	return MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, MPI_Comm_f2c(c));
}

// op: 0 min, 1 max, 2 sum (comm.Op).
static int ftigo_allreduce_int64(MPI_Fint c, int64_t v, int op, int64_t *out) {
	MPI_Op o = op == 0 ? MPI_MIN : op == 1 ? MPI_MAX : MPI_SUM;
	return MPI_Allreduce(&v, out, 1, MPI_INT64_T, o, MPI_Comm_f2c(c));
}

static int ftigo_send(MPI_Fint c, void *buf, int n, int dst, int tag) {
	return MPI_Send(buf, n, MPI_BYTE, dst, tag, MPI_Comm_f2c(c));
}

static int ftigo_recv(MPI_Fint c, void *buf, int n, int src, int tag, int *count) {
	MPI_Status st;
	int rc = MPI_Recv(buf, n, MPI_BYTE, src, tag, MPI_Comm_f2c(c), &st);
	if (rc == MPI_SUCCESS) MPI_Get_count(&st, MPI_BYTE, count);
	return rc;
}

// ftigo_sendrecv is MPI_Isend + MPI_Recv + MPI_Wait inside one C call (so
// no Go pointer outlives the call) rather than MPI_Sendrecv, because Open
// MPI 4.1's MPI_Sendrecv does not report a truncated receive.
static int ftigo_sendrecv(MPI_Fint c, void *send, int ns, int dst, int stag,
		void *recv, int nr, int src, int rtag, int *count) {
	MPI_Comm cc = MPI_Comm_f2c(c);
	MPI_Request req;
	MPI_Status st;
	int rc = MPI_Isend(send, ns, MPI_BYTE, dst, stag, cc, &req);
	if (rc != MPI_SUCCESS) return rc;
	int rrc = MPI_Recv(recv, nr, MPI_BYTE, src, rtag, cc, &st);
	if (rrc == MPI_SUCCESS) MPI_Get_count(&st, MPI_BYTE, count);
	int cls = MPI_SUCCESS;
	if (rrc != MPI_SUCCESS) MPI_Error_class(rrc, &cls);
	if (rrc != MPI_SUCCESS && cls != MPI_ERR_TRUNCATE) MPI_Cancel(&req);
	int wrc = MPI_Wait(&req, MPI_STATUS_IGNORE);
	return rrc != MPI_SUCCESS ? rrc : wrc;
}

static int ftigo_split(MPI_Fint c, int color, int key, MPI_Fint *out) {
	MPI_Comm nc;
	int rc = MPI_Comm_split(MPI_Comm_f2c(c), color < 0 ? MPI_UNDEFINED : color, key, &nc);
	if (rc != MPI_SUCCESS) return rc;
	*out = MPI_Comm_c2f(nc);
	return MPI_SUCCESS;
}

static int ftigo_free(MPI_Fint c) {
	MPI_Comm cc = MPI_Comm_f2c(c);
	return MPI_Comm_free(&cc);
}

static int ftigo_abort(MPI_Fint c, int code) { return MPI_Abort(MPI_Comm_f2c(c), code); }

static int ftigo_error_class(int code) {
	int cls = code;
	if (MPI_Error_class(code, &cls) != MPI_SUCCESS) return code;
	return cls;
}

static void ftigo_error_string(int code, char *buf, int cap) {
	char tmp[MPI_MAX_ERROR_STRING];
	int n = 0;
	buf[0] = 0;
	if (MPI_Error_string(code, tmp, &n) != MPI_SUCCESS) return;
	if (n >= cap) n = cap - 1;
	for (int i = 0; i < n; i++) buf[i] = tmp[i];
	buf[n] = 0;
}

static int ftigo_class_truncate(void) { return MPI_ERR_TRUNCATE; }
static int ftigo_class_rank(void) { return MPI_ERR_RANK; }
static int ftigo_class_count(void) { return MPI_ERR_COUNT; }
static int ftigo_class_root(void) { return MPI_ERR_ROOT; }
static int ftigo_class_tag(void) { return MPI_ERR_TAG; }
static int ftigo_class_arg(void) { return MPI_ERR_ARG; }
static int ftigo_class_buffer(void) { return MPI_ERR_BUFFER; }
static int ftigo_class_op(void) { return MPI_ERR_OP; }
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ftigo/ftigo/comm"
)

// MaxCount is the largest message one MPI call carries: counts are C ints
// ([comm.MaxCount], the limit the chunked helpers already honour). Larger
// transfers must be split, e.g. with [comm.SendChunked] or
// [comm.SendrecvChunked], which never exceed it.
const MaxCount = comm.MaxCount

// ErrNotInitThread is returned by Finalize when it is not called from the
// goroutine that called Init.
var ErrNotInitThread = errors.New("mpi: Finalize must be called from the goroutine that called Init")

// MPIError is an error returned by an MPI call: the call, its return code,
// the code's error class and MPI's own text for it. It matches
// [comm.ErrTruncated] for truncated receives and [comm.ErrBadArgument] for
// the argument classes (rank, count, root, tag, buffer, op, arg).
type MPIError struct {
	Op    string // MPI function, e.g. "MPI_Recv"
	Code  int    // return code
	Class int    // MPI_Error_class of Code
	Msg   string // MPI_Error_string of Code
}

func (e *MPIError) Error() string {
	return fmt.Sprintf("mpi: %s: %s (code %d, class %d)", e.Op, e.Msg, e.Code, e.Class)
}

// Unwrap maps the error class to ftigo's sentinels where one fits.
func (e *MPIError) Unwrap() error {
	switch C.int(e.Class) {
	case C.ftigo_class_truncate():
		return comm.ErrTruncated
	case C.ftigo_class_rank(), C.ftigo_class_count(), C.ftigo_class_root(), C.ftigo_class_tag(),
		C.ftigo_class_arg(), C.ftigo_class_buffer(), C.ftigo_class_op():
		return comm.ErrBadArgument
	}
	return nil
}

func mpiErr(op string, rc C.int) error {
	if rc == 0 { // MPI_SUCCESS is 0 in every implementation
		return nil
	}
	var buf [512]C.char
	C.ftigo_error_string(rc, &buf[0], C.int(len(buf)))
	return &MPIError{Op: op, Code: int(rc), Class: int(C.ftigo_error_class(rc)), Msg: C.GoString(&buf[0])}
}

// env is the state of one MPI initialisation, shared by the world and every
// communicator split from it.
type env struct {
	fun       *funnel // non-nil when MPI granted less than MULTIPLE
	level     int
	initTid   int
	finalized atomic.Bool
	// maxCount is the largest byte count the typed operations pass to one
	// MPI call (MaxCount; the tests lower it to exercise the paths that
	// split or describe larger transfers).
	maxCount int

	// The buffers of pending non-blocking requests are pinned in one
	// Pinner, unpinned together when the last pending request completes
	// (one Pinner per request would cost a finalizer each).
	pinMu   sync.Mutex
	pinner  runtime.Pinner
	pending int

	// tally counts this process's traffic, over the world and every
	// communicator split from it (see [Comm.Counts]).
	tally comm.Tally
}

// pin pins buf's memory for a request about to be posted.
func (e *env) pin(buf []byte) {
	e.pinMu.Lock()
	defer e.pinMu.Unlock()
	if len(buf) > 0 {
		e.pinner.Pin(&buf[0])
	}
	e.pending++
}

// unpin records that a request completed (or failed to post); the last
// one unpins every buffer.
func (e *env) unpin() {
	e.pinMu.Lock()
	defer e.pinMu.Unlock()
	e.pending--
	if e.pending == 0 {
		e.pinner.Unpin()
	}
}

// initEnv is the initialisation made by [InitThread], if any.
var initEnv atomic.Pointer[env]

// Comm is one MPI communicator. It implements [comm.Comm],
// [comm.Aborter], [comm.Reducer], [comm.Gatherer] and [comm.NonBlocker].
// One goroutine should use it at a time. Below MPI_THREAD_MULTIPLE the
// calls of every goroutine go through the funnel (see the package doc).
type Comm struct {
	env    *env
	handle C.MPI_Fint
	rank   int
	size   int
	world  bool
	closed atomic.Bool
}

var (
	_ comm.Comm    = (*Comm)(nil)
	_ comm.Aborter = (*Comm)(nil)
	_ comm.Counter = (*Comm)(nil)
)

// Counts implements [comm.Counter]: the calls this process made through
// the binding, on the communicator of its initialisation (or of
// [FromHandle]) and every one split from it, counted as comm.Counts
// says. What MPI sends inside a collective (its trees and rounds) is
// not seen.
func (c *Comm) Counts() comm.Counts { return c.env.tally.Counts() }

// Thread levels for [InitThread], in increasing order.
const (
	ThreadSingle = iota
	ThreadFunneled
	ThreadSerialized
	ThreadMultiple
)

// Init initialises MPI asking for MPI_THREAD_MULTIPLE; see [InitThread].
func Init() (*Comm, error) { return InitThread(ThreadMultiple) }

// InitThread initialises MPI asking for the given thread level
// (ThreadSingle .. ThreadMultiple), sets MPI_ERRORS_RETURN on the world
// and returns it. It locks the calling goroutine to its OS thread for good:
// call [Comm.Finalize] from the same goroutine. When MPI grants less than
// MULTIPLE every call goes through the funnel; at SINGLE and FUNNELED the
// Init goroutine alone calls MPI, and serves the other goroutines' calls
// while it makes its own or waits in [Comm.Serve]. If MPI is already
// initialised, InitThread only queries the thread level.
func InitThread(level int) (*Comm, error) {
	levels := [...]C.int{C.ftigo_thread_single(), C.ftigo_thread_funneled(), C.ftigo_thread_serialized(), C.ftigo_thread_multiple()}
	if level < ThreadSingle || level > ThreadMultiple {
		return nil, fmt.Errorf("%w: thread level %d", comm.ErrBadArgument, level)
	}
	runtime.LockOSThread()
	var provided C.int
	if err := mpiErr("MPI_Init_thread", C.ftigo_init(levels[level], &provided)); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	granted := ThreadSingle
	for i, l := range levels {
		if provided >= l {
			granted = i
		}
	}
	e := newEnv(granted, unix.Gettid())
	initEnv.Store(e)
	w := &Comm{env: e, handle: C.ftigo_world(), world: true}
	if err := w.query(); err != nil {
		return nil, err
	}
	return w, nil
}

// newEnv is the state of an initialisation at thread level granted,
// where tid is the thread that may call MPI below SERIALIZED.
func newEnv(granted, tid int) *env {
	e := &env{level: granted, initTid: tid, maxCount: MaxCount}
	switch {
	case granted <= ThreadFunneled:
		e.fun = newFunnel(tid)
	case granted < ThreadMultiple:
		e.fun = newFunnel(0)
	}
	return e
}

func (c *Comm) query() error {
	var r, n C.int
	if err := mpiErr("MPI_Comm_rank", C.ftigo_rank(c.handle, &r)); err != nil {
		return err
	}
	if err := mpiErr("MPI_Comm_size", C.ftigo_size(c.handle, &n)); err != nil {
		return err
	}
	c.rank, c.size = int(r), int(n)
	return nil
}

// ThreadLevel reports the thread level MPI granted (ThreadSingle ..
// ThreadMultiple) and whether calls go through the funnel because it is
// below MULTIPLE.
func (c *Comm) ThreadLevel() (level int, serialised bool) {
	return c.env.level, c.env.fun != nil
}

// MayCall reports whether the calling goroutine may call MPI: at
// MPI_THREAD_SERIALIZED and above any goroutine may; below, only the
// thread that initialised MPI. A call from another goroutine waits until
// that thread serves it.
func (c *Comm) MayCall() bool { return c.env.fun == nil || c.env.fun.mayServe() }

// Serve makes the calls other goroutines queued until done is closed, or
// at least once when it is closed already: below MPI_THREAD_MULTIPLE, when
// the caller is the thread that may call MPI. Otherwise it waits for done.
// A goroutine that may call MPI and waits for another goroutine that makes
// MPI calls waits in Serve; its own calls serve the others too.
func (c *Comm) Serve(done <-chan struct{}) {
	if c.env.fun == nil {
		<-done
		return
	}
	c.env.fun.serveWhile(done)
}

// FunnelStats counts the funnel's work since MPI's initialisation: the
// operations funnelled, the rounds that posted or tested them, and the
// yields and sleeps of a serving goroutine waiting for MPI (Slept their
// total time). It is zero at MPI_THREAD_MULTIPLE, where nothing is
// funnelled.
func (c *Comm) FunnelStats() FunnelStats {
	f := c.env.fun
	if f == nil {
		return FunnelStats{}
	}
	return FunnelStats{Ops: f.stats.ops.Load(), Rounds: f.stats.rounds.Load(), Yields: f.stats.yields.Load(),
		Sleeps: f.stats.sleeps.Load(), Slept: time.Duration(f.stats.slept.Load())}
}

// FunnelStats is what [Comm.FunnelStats] counts.
type FunnelStats struct {
	Ops, Rounds, Yields, Sleeps int64
	Slept                       time.Duration
}

// Finalize shuts MPI down. Call it on the world, from the goroutine that
// called Init, only when every rank is known to be done: a rank that
// finalizes while others wait in a collective hangs the job — on failure
// call Abort instead.
func (c *Comm) Finalize() error {
	if !c.world {
		return fmt.Errorf("%w: Finalize on a sub-communicator", comm.ErrBadArgument)
	}
	if unix.Gettid() != c.env.initTid {
		return ErrNotInitThread
	}
	if c.env.finalized.Swap(true) {
		return comm.ErrClosed
	}
	err := mpiErr("MPI_Finalize", C.ftigo_finalize())
	runtime.UnlockOSThread()
	return err
}

// Abort ends the whole job with MPI_Abort on the world; it does not return
// when MPI honours it.
func (c *Comm) Abort(code int) error {
	return mpiErr("MPI_Abort", C.ftigo_abort(C.ftigo_world(), C.int(code)))
}

func (c *Comm) Rank() int { return c.rank }
func (c *Comm) Size() int { return c.size }

// Close frees a sub-communicator (MPI_Comm_free); on the world it is a no-op.
func (c *Comm) Close() error {
	if c.world || c.closed.Swap(true) {
		return nil
	}
	if c.env.finalized.Load() {
		return nil
	}
	if f := c.env.fun; f != nil {
		return f.blocking("MPI_Comm_free", func() C.int { return C.ftigo_free(c.handle) })
	}
	return mpiErr("MPI_Comm_free", C.ftigo_free(c.handle))
}

func (c *Comm) check() error {
	if c.closed.Load() || c.env.finalized.Load() {
		return comm.ErrClosed
	}
	return nil
}

func (c *Comm) checkRank(what string, r int) error {
	if r < 0 || r >= c.size {
		return fmt.Errorf("%w: %s rank %d out of range [0,%d)", comm.ErrBadArgument, what, r, c.size)
	}
	return nil
}

func checkCount(op string, n int) error {
	if n > MaxCount {
		return fmt.Errorf("%w: %s of %d bytes exceeds MPI's count limit of %d bytes; split it (comm.SendChunked)",
			comm.ErrBadArgument, op, n, MaxCount)
	}
	return nil
}

func checkTag(op string, tag int) error {
	if tag < 0 || tag > math.MaxInt32 {
		return fmt.Errorf("%w: %s tag %d out of range", comm.ErrBadArgument, op, tag)
	}
	return nil
}

// ptr returns the address of b's first byte, or nil for an empty slice.
// Passing it to a blocking MPI call is legal under the cgo rules: the
// memory holds no Go pointers and C keeps nothing after the call.
func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

func (c *Comm) Barrier() error {
	if err := c.check(); err != nil {
		return err
	}
	c.env.tally.Collective()
	if f := c.env.fun; f != nil {
		return f.barrier(c.handle)
	}
	return mpiErr("MPI_Barrier", C.ftigo_barrier(c.handle))
}

func (c *Comm) Bcast(root int, buf []byte) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := c.checkRank("Bcast: root", root); err != nil {
		return err
	}
	if err := checkCount("Bcast", len(buf)); err != nil {
		return err
	}
	c.env.tally.Collective()
	var err error
	if f := c.env.fun; f != nil {
		err = f.bcast(c.handle, buf, root)
	} else {
		err = mpiErr("MPI_Bcast", C.ftigo_bcast(c.handle, ptr(buf), C.int(len(buf)), C.int(root)))
	}
	if err == nil && c.rank == root {
		c.env.tally.Send(1, int64(len(buf)))
	} else if err == nil {
		c.env.tally.Recv(1, int64(len(buf)))
	}
	return err
}

func (c *Comm) Allgather(send, recv []byte) error {
	if err := c.check(); err != nil {
		return err
	}
	if len(recv) != c.size*len(send) {
		return fmt.Errorf("%w: Allgather: %d-byte receive buffer, want %d", comm.ErrBadArgument, len(recv), c.size*len(send))
	}
	if err := checkCount("Allgather", len(send)); err != nil {
		return err
	}
	c.env.tally.Collective()
	var err error
	if f := c.env.fun; f != nil {
		err = f.allgather(c.handle, send, recv)
	} else {
		err = mpiErr("MPI_Allgather", C.ftigo_allgather(c.handle, ptr(send), C.int(len(send)), ptr(recv)))
	}
	if err == nil {
		c.env.tally.Send(1, int64(len(send)))
		c.env.tally.Recv(int64(c.size-1), int64(len(recv)-len(send)))
	}
	return err
}

func (c *Comm) AllreduceInt64(v int64, op comm.Op) (int64, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	if op != comm.Min && op != comm.Max && op != comm.Sum {
		return 0, fmt.Errorf("%w: AllreduceInt64: unknown %v", comm.ErrBadArgument, op)
	}
	c.env.tally.Collective()
	var out int64
	var err error
	if f := c.env.fun; f != nil {
		v := []int64{v, 0}
		err = f.allreduce(c.handle, unsafe.Pointer(&v[0]), unsafe.Pointer(&v[1]), 1, 1, int(op))
		out = v[1]
	} else {
		var o C.int64_t
		err = mpiErr("MPI_Allreduce", C.ftigo_allreduce_int64(c.handle, C.int64_t(v), C.int(op), &o))
		out = int64(o)
	}
	if err == nil {
		c.env.tally.Send(1, 8)
		c.env.tally.Recv(1, 8)
	}
	return out, err
}

func (c *Comm) Send(dst, tag int, buf []byte) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := errors.Join(c.checkRank("Send: destination", dst), checkTag("Send", tag), checkCount("Send", len(buf))); err != nil {
		return err
	}
	var err error
	if f := c.env.fun; f != nil {
		err = f.send(c.handle, buf, dst, tag)
	} else {
		err = mpiErr("MPI_Send", C.ftigo_send(c.handle, ptr(buf), C.int(len(buf)), C.int(dst), C.int(tag)))
	}
	if err == nil {
		c.env.tally.Send(1, int64(len(buf)))
	}
	return err
}

func (c *Comm) Recv(src, tag int, buf []byte) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	if err := errors.Join(c.checkRank("Recv: source", src), checkTag("Recv", tag), checkCount("Recv", len(buf))); err != nil {
		return 0, err
	}
	var n int
	var err error
	if f := c.env.fun; f != nil {
		n, err = f.recv(c.handle, buf, src, tag)
	} else {
		var cn C.int
		err = mpiErr("MPI_Recv", C.ftigo_recv(c.handle, ptr(buf), C.int(len(buf)), C.int(src), C.int(tag), &cn))
		n = int(cn)
	}
	if err == nil {
		c.env.tally.Recv(1, int64(n))
	}
	return n, err
}

func (c *Comm) Sendrecv(send []byte, dst, sendTag int, recv []byte, src, recvTag int) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	if err := errors.Join(
		c.checkRank("Sendrecv: destination", dst), c.checkRank("Sendrecv: source", src),
		checkTag("Sendrecv", sendTag), checkTag("Sendrecv", recvTag),
		checkCount("Sendrecv send", len(send)), checkCount("Sendrecv receive", len(recv)),
	); err != nil {
		return 0, err
	}
	var n int
	var err error
	if f := c.env.fun; f != nil {
		n, err = f.sendrecv(c.handle, send, dst, sendTag, recv, src, recvTag)
	} else {
		var cn C.int
		err = mpiErr("MPI_Sendrecv", C.ftigo_sendrecv(c.handle,
			ptr(send), C.int(len(send)), C.int(dst), C.int(sendTag),
			ptr(recv), C.int(len(recv)), C.int(src), C.int(recvTag), &cn))
		n = int(cn)
	}
	if err == nil {
		c.env.tally.Send(1, int64(len(send)))
		c.env.tally.Recv(1, int64(n))
	}
	return n, err
}

// Split returns a sub-communicator (MPI_Comm_split, MPI_UNDEFINED for a
// negative color, which returns a nil Comm). It inherits MPI_ERRORS_RETURN.
func (c *Comm) Split(color, key int) (comm.Comm, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if color > math.MaxInt32 || key < math.MinInt32 || key > math.MaxInt32 {
		return nil, fmt.Errorf("%w: Split: color %d or key %d does not fit a C int", comm.ErrBadArgument, color, key)
	}
	var h C.MPI_Fint
	split := func() C.int { return C.ftigo_split(c.handle, C.int(max(color, -1)), C.int(key), &h) }
	c.env.tally.Collective()
	var err error
	if f := c.env.fun; f != nil {
		err = f.blocking("MPI_Comm_split", split)
	} else {
		err = mpiErr("MPI_Comm_split", split())
	}
	if err != nil {
		return nil, err
	}
	if color < 0 || h == C.ftigo_null() {
		return nil, nil
	}
	sub := &Comm{env: c.env, handle: h}
	if f := c.env.fun; f != nil {
		// Local calls, but MPI calls all the same.
		err = f.blocking("MPI_Comm_size", func() C.int {
			if e := sub.query(); e != nil {
				return C.int(e.(*MPIError).Code)
			}
			return 0
		})
	} else {
		err = sub.query()
	}
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// classTruncate and classRank expose two error classes to the tests.
func classTruncate() C.int { return C.ftigo_class_truncate() }
func classRank() C.int     { return C.ftigo_class_rank() }
