//go:build mpi

package mpi

/*
#include <limits.h>
#include <stdint.h>
#include <mpi.h>

// dtype: 1 int64 (MPI_INT64_T), 2 float64 (MPI_DOUBLE), as comm.Datatype.
// op: 0 min, 1 max, 2 sum, as comm.Op.
static MPI_Datatype ftigo_dtype(int t) { return t == 2 ? MPI_DOUBLE : MPI_INT64_T; }
static MPI_Op ftigo_op(int op) { return op == 0 ? MPI_MIN : op == 1 ? MPI_MAX : MPI_SUM; }

// A NULL send means in place (MPI_IN_PLACE, the data is in recv).
static int ftigo_allreduce_v(MPI_Fint c, void *send, void *recv, int n, int t, int op) {
	return MPI_Allreduce(send ? send : MPI_IN_PLACE, recv, n, ftigo_dtype(t), ftigo_op(op), MPI_Comm_f2c(c));
}

static int ftigo_gatherv(MPI_Fint c, void *send, int n, void *recv, int *counts, int *displs, int root) {
	return MPI_Gatherv(send, n, MPI_BYTE, recv, counts, displs, MPI_BYTE, root, MPI_Comm_f2c(c));
}

static int ftigo_allgatherv(MPI_Fint c, void *send, int n, void *recv, int *counts, int *displs) {
	return MPI_Allgatherv(send, n, MPI_BYTE, recv, counts, displs, MPI_BYTE, MPI_Comm_f2c(c));
}

static int ftigo_scatterv(MPI_Fint c, void *send, int *counts, int *displs, void *recv, int n, int root) {
	return MPI_Scatterv(send, counts, displs, MPI_BYTE, recv, n, MPI_BYTE, root, MPI_Comm_f2c(c));
}

// ftigo_gather_i64 gathers one int64 of every rank into root's recv.
static int ftigo_gather_i64(MPI_Fint c, int64_t v, int64_t *recv, int root) {
	return MPI_Gather(&v, 1, MPI_INT64_T, recv, 1, MPI_INT64_T, root, MPI_Comm_f2c(c));
}

// ftigo_bytes_type describes n bytes (n > block) as one datatype: q blocks
// of block bytes, then the remainder. A message of it matches a receive of
// plain bytes and the other way round, since both are sequences of
// MPI_BYTE; this is how one message carries more than INT_MAX bytes.
static int ftigo_bytes_type(long long n, int block, MPI_Datatype *out) {
	long long q = n / block, r = n % block;
	if (q > INT_MAX) return MPI_ERR_COUNT;
	MPI_Datatype blk, blocks;
	int rc = MPI_Type_contiguous(block, MPI_BYTE, &blk);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Type_contiguous((int)q, blk, &blocks);
	MPI_Type_free(&blk);
	if (rc != MPI_SUCCESS) return rc;
	if (r == 0) {
		*out = blocks;
	} else {
		int lens[2] = {1, (int)r};
		MPI_Aint displs[2] = {0, (MPI_Aint)(q * block)};
		MPI_Datatype types[2] = {blocks, MPI_BYTE};
		rc = MPI_Type_create_struct(2, lens, displs, types, out);
		MPI_Type_free(&blocks);
		if (rc != MPI_SUCCESS) return rc;
	}
	rc = MPI_Type_commit(out);
	if (rc != MPI_SUCCESS) MPI_Type_free(out);
	return rc;
}

// ftigo_ipost posts MPI_Isend (send != 0) or MPI_Irecv of n bytes; above
// block bytes it uses ftigo_bytes_type, freed at once (a pending operation
// keeps what it needs).
static int ftigo_ipost(int send, MPI_Fint c, void *buf, long long n, int block, int peer, int tag, MPI_Fint *req) {
	MPI_Comm cc = MPI_Comm_f2c(c);
	MPI_Request r;
	MPI_Datatype t = MPI_BYTE;
	int count = (int)n, rc;
	if (n > block) {
		rc = ftigo_bytes_type(n, block, &t);
		if (rc != MPI_SUCCESS) return rc;
		count = 1;
	}
	if (send) {
		rc = MPI_Isend(buf, count, t, peer, tag, cc, &r);
	} else {
		rc = MPI_Irecv(buf, count, t, peer, tag, cc, &r);
	}
	if (n > block) MPI_Type_free(&t);
	if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(r);
	return rc;
}

static int ftigo_count(MPI_Status *st, long long *count) {
	MPI_Count n = 0;
	int rc = MPI_Get_elements_x(st, MPI_BYTE, &n);
	*count = (long long)n;
	return rc;
}

static int ftigo_wait(MPI_Fint *req, long long *count) {
	MPI_Request r = MPI_Request_f2c(*req);
	MPI_Status st;
	int rc = MPI_Wait(&r, &st);
	*req = MPI_Request_c2f(r);
	if (rc == MPI_SUCCESS) rc = ftigo_count(&st, count);
	return rc;
}

static int ftigo_test(MPI_Fint *req, int *flag, long long *count) {
	MPI_Request r = MPI_Request_f2c(*req);
	MPI_Status st;
	int rc = MPI_Test(&r, flag, &st);
	*req = MPI_Request_c2f(r);
	if (rc == MPI_SUCCESS && *flag) rc = ftigo_count(&st, count);
	return rc;
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/ftigo/ftigo/comm"
)

var (
	_ comm.Reducer    = (*Comm)(nil)
	_ comm.Gatherer   = (*Comm)(nil)
	_ comm.NonBlocker = (*Comm)(nil)
)

// The first MPI_Allreduce of a reduction carries headSlots elements of
// length check, then the first smallElems elements of data: a vector of up
// to smallElems elements (every scalar convergence check) costs one call of
// 256 bytes, a longer one a second call for the rest.
const (
	headSlots  = 7
	smallElems = 32 - headSlots
)

// overlap reports whether a and b share memory and whether they are the
// same slice.
func overlap(a, b []byte) (shared, same bool) {
	if len(a) == 0 || len(b) == 0 {
		return false, false
	}
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	shared = pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
	return shared, pa == pb && len(a) == len(b)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// word and unword carry small integers in elements of type t, so that the
// length check can travel in the same MPI_Allreduce as the data.
func word(t comm.Datatype, v int64) uint64 {
	if t == comm.Float64 {
		return math.Float64bits(float64(v))
	}
	return uint64(v)
}

func unword(t comm.Datatype, w uint64) int64 {
	if t == comm.Float64 {
		return int64(math.Float64frombits(w))
	}
	return int64(w)
}

func (c *Comm) allreduceCall(send, recv unsafe.Pointer, n int, t comm.Datatype, op comm.Op) error {
	c.env.tally.Collective()
	var err error
	if f := c.env.fun; f != nil {
		err = f.allreduce(c.handle, send, recv, n, int(t), int(op))
	} else {
		err = mpiErr("MPI_Allreduce", C.ftigo_allreduce_v(c.handle, send, recv, C.int(n), C.int(t), C.int(op)))
	}
	if err == nil {
		c.env.tally.Send(1, 8*int64(n))
		c.env.tally.Recv(1, 8*int64(n))
	}
	return err
}

// firstCalls recycles the buffers of the first call of a reduction, which
// would otherwise escape to the heap on every call.
var firstCalls = sync.Pool{New: func() any { return new([2][headSlots + smallElems]uint64) }}

// lengthCheck fills the head of the first call so that, combined with op,
// it tells every rank alike whether all ranks passed n elements and whether
// any rank's own arguments are wrong (bad). Min and Max carry n and -n
// (their results are the least and greatest length) and the flag; Sum
// carries the length in three 16-bit pieces a with their squares, since
// by Cauchy-Schwarz size·Σa² = (Σa)² exactly when all a agree, and pieces
// this small keep every sum exact, even in float64, up to 2^21 ranks.
func lengthCheck(head []uint64, t comm.Datatype, op comm.Op, n int64, bad bool) {
	switch op {
	case comm.Sum:
		for k := range 3 {
			a := n >> (16 * k) & 0xffff
			head[2*k], head[2*k+1] = word(t, a), word(t, a*a)
		}
		head[6] = word(t, b2i(bad))
	case comm.Min:
		head[0], head[1], head[2] = word(t, n), word(t, -n), word(t, -b2i(bad))
	case comm.Max:
		head[0], head[1], head[2] = word(t, n), word(t, -n), word(t, b2i(bad))
	}
}

// lengthVerdict reads the combined head: whether some rank flagged bad
// arguments, and a description of the disagreement on the length, or "".
func lengthVerdict(head []uint64, t comm.Datatype, op comm.Op, size int) (bad bool, differ string) {
	if op != comm.Sum {
		lo, hi := unword(t, head[0]), -unword(t, head[1])
		if op == comm.Max {
			lo, hi = hi, lo
		}
		if lo != hi {
			differ = fmt.Sprintf("between %d and %d elements", lo, hi)
		}
		return unword(t, head[2]) != 0, differ
	}
	for k := range 3 {
		sum, sq := uint64(unword(t, head[2*k])), uint64(unword(t, head[2*k+1]))
		h1, l1 := bits.Mul64(uint64(size), sq)
		h2, l2 := bits.Mul64(sum, sum)
		if h1 != h2 || l1 != l2 {
			differ = "different lengths"
		}
	}
	return unword(t, head[6]) != 0, differ
}

// Allreduce implements [comm.Reducer] with MPI_Allreduce on MPI_INT64_T or
// MPI_DOUBLE. The first call carries a length check (see lengthCheck) and
// the first smallElems elements; a longer vector reduces the rest in calls
// of at most the count limit. So lengths that differ between ranks, or bad
// arguments on one rank, are an ErrBadArgument on every rank instead of
// MPI's undefined behaviour, and a short vector costs one call.
func (c *Comm) Allreduce(send, recv []byte, t comm.Datatype, op comm.Op) error {
	if err := c.check(); err != nil {
		return err
	}
	if t != comm.Int64 && t != comm.Float64 || op != comm.Min && op != comm.Max && op != comm.Sum {
		return fmt.Errorf("%w: Allreduce: %v with %v", comm.ErrBadArgument, t, op)
	}
	var local string
	shared, same := overlap(send, recv)
	switch {
	case len(send) != len(recv):
		local = fmt.Sprintf("send has %d bytes, recv %d", len(send), len(recv))
	case len(send)%8 != 0:
		local = fmt.Sprintf("%d bytes are not whole %v elements", len(send), t)
	case shared && !same:
		local = "send and recv overlap without being the same slice"
	}
	n := len(send) / 8
	scratch := firstCalls.Get().(*[2][headSlots + smallElems]uint64)
	defer firstCalls.Put(scratch)
	in, out := &scratch[0], &scratch[1]
	clear(in[headSlots:])
	lengthCheck(in[:headSlots], t, op, int64(n), local != "")
	head := min(n, smallElems)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&in[headSlots])), 8*smallElems), send[:8*head])
	if err := c.allreduceCall(unsafe.Pointer(&in[0]), unsafe.Pointer(&out[0]), len(in), t, op); err != nil {
		return err
	}
	bad, differ := lengthVerdict(out[:headSlots], t, op, c.size)
	switch {
	case local != "":
		return fmt.Errorf("%w: Allreduce: %s", comm.ErrBadArgument, local)
	case bad:
		return fmt.Errorf("%w: Allreduce: another rank passed bad arguments", comm.ErrBadArgument)
	case differ != "":
		return fmt.Errorf("%w: Allreduce: the ranks pass %s (%d here)", comm.ErrBadArgument, differ, n)
	}
	copy(recv[:8*head], unsafe.Slice((*byte)(unsafe.Pointer(&out[headSlots])), 8*head))
	chunk := max(1, c.env.maxCount/8)
	for off := smallElems; off < n; off += chunk {
		k := min(chunk, n-off)
		var sp unsafe.Pointer // nil: in place
		if !same {
			sp = unsafe.Pointer(&send[8*off])
		}
		if err := c.allreduceCall(sp, unsafe.Pointer(&recv[8*off]), k, t, op); err != nil {
			return err
		}
	}
	return nil
}

// vHeader is one rank's facts for an Allgatherv: its send and recv
// lengths and whether its own arguments are wrong.
type vHeader struct{ send, recv, bad int64 }

// agreeV exchanges every rank's vHeader (one MPI_Allgather of 24 bytes a
// rank) so that all ranks decide alike. Only Allgatherv uses it: its
// result holds every rank's data anyway.
func (c *Comm) agreeV(h vHeader) ([]vHeader, error) {
	var mine [24]byte
	for i, v := range []int64{h.send, h.recv, h.bad} {
		binary.LittleEndian.PutUint64(mine[8*i:], uint64(v))
	}
	all := make([]byte, 24*c.size)
	if err := c.Allgather(mine[:], all); err != nil {
		return nil, err
	}
	out := make([]vHeader, c.size)
	for r := range out {
		w := func(i int) int64 { return int64(binary.LittleEndian.Uint64(all[24*r+8*i:])) }
		out[r] = vHeader{w(0), w(1), w(2)}
	}
	return out, nil
}

// agreeRoot is the first step of a rooted v-collective: one fixed-size
// MPI_Allreduce tells every rank whether all passed the same root, in
// range, and whether any rank's own arguments are wrong (bad).
func (c *Comm) agreeRoot(name string, root int, bad bool) error {
	v := [3]int64{int64(root), -int64(root), b2i(bad)}
	if err := c.allreduceCall(nil, unsafe.Pointer(&v[0]), 3, comm.Int64, comm.Max); err != nil { // in place
		return err
	}
	switch hi, lo := v[0], -v[1]; {
	case hi != lo:
		return fmt.Errorf("%w: %s: the ranks pass roots between %d and %d (%d here)", comm.ErrBadArgument, name, lo, hi, root)
	case root < 0 || root >= c.size:
		return fmt.Errorf("%w: %s: root %d out of range [0,%d)", comm.ErrBadArgument, name, root, c.size)
	case bad:
		return fmt.Errorf("%w: %s: this rank's send overlaps its recv", comm.ErrBadArgument, name)
	case v[2] != 0:
		return fmt.Errorf("%w: %s: root's send overlaps its recv", comm.ErrBadArgument, name)
	}
	return nil
}

// Verdicts root broadcasts after checking the lengths of a rooted
// v-collective.
const (
	verdictOK = iota
	verdictBad
	verdictTooLarge
)

// rootPlan gathers every rank's distributed length n (its send for
// Gatherv, its recv for Scatterv) to root with one MPI_Gather of 8 bytes
// a rank. Root checks their total against its own buffer's length want
// and the count limit, then broadcasts its verdict (24 bytes). So no
// rank but root receives more than a fixed number of bytes. On root it
// returns the counts and displacements for MPI. A total above the count
// limit is errors.ErrUnsupported on every rank: comm's fallback moves
// the data in bounded rounds.
func (c *Comm) rootPlan(name string, root int, n, want int64) (counts, displs []C.int, err error) {
	var lens []int64
	if c.rank == root {
		lens = make([]int64, c.size)
	}
	var lp *C.int64_t
	if lens != nil {
		lp = (*C.int64_t)(unsafe.Pointer(&lens[0]))
	}
	c.env.tally.Collective()
	if f := c.env.fun; f != nil {
		err = f.gatherInt64(c.handle, n, lens, root)
	} else {
		err = mpiErr("MPI_Gather", C.ftigo_gather_i64(c.handle, C.int64_t(n), lp, C.int(root)))
	}
	if err != nil {
		return nil, nil, err
	}
	var v [24]byte // verdict, total, want
	if c.rank == root {
		c.env.tally.Recv(int64(c.size-1), 8*int64(c.size-1))
		var sum int64
		for _, l := range lens {
			sum += l
		}
		code := verdictOK
		switch {
		case sum != want:
			code = verdictBad
		case sum > int64(c.env.maxCount):
			code = verdictTooLarge
		}
		for i, x := range []int64{int64(code), sum, want} {
			binary.LittleEndian.PutUint64(v[8*i:], uint64(x))
		}
	} else {
		c.env.tally.Send(1, 8)
	}
	if err := c.Bcast(root, v[:]); err != nil {
		return nil, nil, err
	}
	switch binary.LittleEndian.Uint64(v[:]) {
	case verdictBad:
		return nil, nil, fmt.Errorf("%w: %s: root %d has a %d-byte buffer for a total of %d", comm.ErrBadArgument, name, root,
			int64(binary.LittleEndian.Uint64(v[16:])), int64(binary.LittleEndian.Uint64(v[8:])))
	case verdictTooLarge:
		return nil, nil, errors.ErrUnsupported
	}
	if c.rank != root {
		return nil, nil, nil
	}
	counts, displs = make([]C.int, c.size), make([]C.int, c.size)
	var off int64
	for r, l := range lens {
		counts[r], displs[r] = C.int(l), C.int(off)
		off += l
	}
	return counts, displs, nil
}

// Gatherv implements [comm.Gatherer] with MPI_Gatherv, after agreeing on
// the root (one fixed-size MPI_Allreduce) and on the lengths (rootPlan):
// a rank other than root receives a fixed number of bytes whatever the
// number of ranks.
func (c *Comm) Gatherv(root int, send, recv []byte) error {
	if err := c.check(); err != nil {
		return err
	}
	shared, _ := overlap(send, recv)
	if err := c.agreeRoot("Gather", root, shared && c.rank == root); err != nil {
		return err
	}
	counts, displs, err := c.rootPlan("Gather", root, int64(len(send)), int64(len(recv)))
	if err != nil {
		return err
	}
	var rp unsafe.Pointer
	var cp, dp *C.int
	if c.rank == root {
		rp, cp, dp = ptr(recv), &counts[0], &displs[0]
	}
	c.env.tally.Collective()
	if f := c.env.fun; f != nil {
		err = f.vcollective(0, c.handle, send, recv, nil, rp, cp, dp, root)
	} else {
		err = mpiErr("MPI_Gatherv", C.ftigo_gatherv(c.handle, ptr(send), C.int(len(send)), rp, cp, dp, C.int(root)))
	}
	if err == nil {
		if c.rank == root {
			c.env.tally.Recv(int64(c.size-1), int64(len(recv)-len(send)))
		} else {
			c.env.tally.Send(1, int64(len(send)))
		}
	}
	return err
}

// Allgatherv implements [comm.Gatherer] with MPI_Allgatherv after an
// MPI_Allgather of every rank's lengths.
func (c *Comm) Allgatherv(send, recv []byte) error {
	if err := c.check(); err != nil {
		return err
	}
	shared, _ := overlap(send, recv)
	hs, err := c.agreeV(vHeader{int64(len(send)), int64(len(recv)), b2i(shared)})
	if err != nil {
		return err
	}
	var sum int64
	for r, h := range hs {
		sum += h.send
		if h.bad != 0 {
			return fmt.Errorf("%w: Allgather: rank %d's send overlaps its recv", comm.ErrBadArgument, r)
		}
	}
	for r, h := range hs {
		if h.recv != sum {
			return fmt.Errorf("%w: Allgather: rank %d has a %d-byte buffer for a total of %d", comm.ErrBadArgument, r, h.recv, sum)
		}
	}
	if sum > int64(c.env.maxCount) {
		return errors.ErrUnsupported
	}
	counts, displs := make([]C.int, c.size), make([]C.int, c.size)
	var off int64
	for r, h := range hs {
		counts[r], displs[r] = C.int(h.send), C.int(off)
		off += h.send
	}
	c.env.tally.Collective()
	if f := c.env.fun; f != nil {
		err = f.vcollective(1, c.handle, send, recv, nil, nil, &counts[0], &displs[0], 0)
	} else {
		err = mpiErr("MPI_Allgatherv", C.ftigo_allgatherv(c.handle, ptr(send), C.int(len(send)), ptr(recv), &counts[0], &displs[0]))
	}
	if err == nil {
		c.env.tally.Send(1, int64(len(send)))
		c.env.tally.Recv(int64(c.size-1), sum-int64(len(send)))
	}
	return err
}

// Scatterv implements [comm.Gatherer] with MPI_Scatterv, after agreeing
// on the root and the lengths as Gatherv does.
func (c *Comm) Scatterv(root int, send, recv []byte) error {
	if err := c.check(); err != nil {
		return err
	}
	shared, _ := overlap(send, recv)
	if err := c.agreeRoot("Scatter", root, shared && c.rank == root); err != nil {
		return err
	}
	counts, displs, err := c.rootPlan("Scatter", root, int64(len(recv)), int64(len(send)))
	if err != nil {
		return err
	}
	var sp unsafe.Pointer
	var cp, dp *C.int
	if c.rank == root {
		sp, cp, dp = ptr(send), &counts[0], &displs[0]
	}
	c.env.tally.Collective()
	if f := c.env.fun; f != nil {
		err = f.vcollective(2, c.handle, send, recv, sp, nil, cp, dp, root)
	} else {
		err = mpiErr("MPI_Scatterv", C.ftigo_scatterv(c.handle, sp, cp, dp, ptr(recv), C.int(len(recv)), C.int(root)))
	}
	if err == nil {
		if c.rank == root {
			c.env.tally.Send(int64(c.size-1), int64(len(send)-len(recv)))
		} else {
			c.env.tally.Recv(1, int64(len(recv)))
		}
	}
	return err
}

// request is a pending MPI_Isend or MPI_Irecv. Its buffer stays pinned
// (runtime.Pinner, see env.pin) until the request completes, since MPI
// keeps the pointer after the posting call returns.
type request struct {
	c    *Comm
	h    C.MPI_Fint
	send bool
	size int
	done bool
	n    int
	err  error
}

// Isend implements [comm.NonBlocker] with MPI_Isend. A message above the
// count limit travels as one message of a derived datatype.
func (c *Comm) Isend(dst, tag int, buf []byte) (comm.Request, error) {
	return c.ipost(true, dst, tag, buf)
}

// Irecv implements [comm.NonBlocker] with MPI_Irecv.
func (c *Comm) Irecv(src, tag int, buf []byte) (comm.Request, error) {
	return c.ipost(false, src, tag, buf)
}

func (c *Comm) ipost(send bool, peer, tag int, buf []byte) (comm.Request, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	name, mpiName, what := "Irecv", "MPI_Irecv", "Irecv: source"
	if send {
		name, mpiName, what = "Isend", "MPI_Isend", "Isend: destination"
	}
	if err := c.checkRank(what, peer); err != nil {
		return nil, err
	}
	if err := checkTag(name, tag); err != nil {
		return nil, err
	}
	r := &request{c: c, send: send, size: len(buf)}
	c.env.pin(buf)
	var h C.MPI_Fint
	post := func() C.int {
		return C.ftigo_ipost(C.int(b2i(send)), c.handle, ptr(buf), C.longlong(len(buf)), C.int(c.env.maxCount), C.int(peer), C.int(tag), &h)
	}
	var rc C.int
	if f := c.env.fun; f != nil {
		op := &fop{name: mpiName, post: func() ([]C.MPI_Fint, C.int) { return nil, post() }}
		_ = f.exec(op)
		rc = op.rc
	} else {
		rc = post()
	}
	if err := mpiErr(mpiName, rc); err != nil {
		c.env.unpin()
		return nil, err
	}
	r.h = h
	return r, nil
}

func (r *request) finish(rc C.int, count C.longlong) {
	r.done = true
	r.c.env.unpin()
	if err := mpiErr("MPI_Wait", rc); err != nil {
		r.err = err
		return
	}
	r.n = int(count)
	if r.send {
		r.n = r.size
		r.c.env.tally.Send(1, int64(r.n))
	} else {
		r.c.env.tally.Recv(1, int64(r.n))
	}
}

// Wait completes the request with MPI_Wait.
func (r *request) Wait() (int, error) {
	if !r.done {
		h := r.h
		var count C.longlong
		var rc C.int
		if f := r.c.env.fun; f != nil {
			var n int64
			rc, n = f.wait(&h)
			count = C.longlong(n)
		} else {
			rc = C.ftigo_wait(&h, &count)
		}
		r.h = h
		r.finish(rc, count)
	}
	return r.n, r.err
}

// Test checks the request with MPI_Test, which also drives MPI's progress.
func (r *request) Test() (bool, int, error) {
	if !r.done {
		h := r.h
		var flag C.int
		var count C.longlong
		var rc C.int
		if f := r.c.env.fun; f != nil {
			done, frc, n := f.testOnce(&h)
			rc, count = frc, C.longlong(n)
			if done {
				flag = 1
			}
		} else {
			rc = C.ftigo_test(&h, &flag, &count)
		}
		r.h = h
		if rc == 0 && flag == 0 {
			return false, 0, nil
		}
		r.finish(rc, count)
	}
	return true, r.n, r.err
}
