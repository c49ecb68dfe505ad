package comm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"unsafe"
)

// Datatype names the element type of a typed reduction (see [Reducer]).
type Datatype int

// Datatypes of the typed reductions. Under MPI they are MPI_INT64_T and
// MPI_DOUBLE.
const (
	Int64 Datatype = iota + 1
	Float64
)

// String returns "int64" or "float64".
func (t Datatype) String() string {
	switch t {
	case Int64:
		return "int64"
	case Float64:
		return "float64"
	}
	return fmt.Sprintf("datatype(%d)", int(t))
}

// Size returns the size of one element in bytes (0 for an unknown datatype).
func (t Datatype) Size() int {
	if t == Int64 || t == Float64 {
		return 8
	}
	return 0
}

// Number is the element types of the typed reductions ([Allreduce],
// [AllreduceValue]): int64, float64 and types defined on them.
type Number interface {
	~int64 | ~float64
}

// Elem is the element types the typed data movement ([Gather],
// [Allgather], [Scatter], [Isend], [Irecv]) carries: fixed-size numbers,
// moved as their bytes in the machine's order (no conversion between
// machines of different byte order).
type Elem interface {
	~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// Reducer is the optional capability of combining vectors element by
// element natively (MPI_Allreduce under MPI). [Allreduce] uses it when the
// Comm has it and falls back to Allgather otherwise.
type Reducer interface {
	// Allreduce combines send element by element over all ranks with op
	// and stores the result in recv on every rank. send and recv hold whole
	// elements of t in the machine's byte order and have the same length on
	// every rank; recv is either send itself (in place) or does not overlap
	// it. Lengths that differ between ranks, or between send and recv, are
	// an error matching ErrBadArgument on every rank.
	Allreduce(send, recv []byte, t Datatype, op Op) error
}

// Gatherer is the optional capability of the rooted and variable-length
// collectives natively (MPI_Gatherv, MPI_Allgatherv, MPI_Scatterv under
// MPI). [Gather], [Allgather] and [Scatter] use it when the Comm has it.
// Otherwise Allgather falls back to [Comm.Allgather] in bounded rounds,
// and Gather and Scatter to fixed-size reductions and point-to-point
// messages with root (tag [TagRooted]), so that a rank other than root
// still receives only its own part and a few fixed-size words.
//
// Ranks may contribute different lengths. A length that does not add up,
// ranks that disagree on root, a root out of range, or a send overlapping
// the recv of the same rank are an error matching ErrBadArgument on every
// rank.
//
// A capability method (of Gatherer or [Reducer]) may return an error
// matching errors.ErrUnsupported, on every rank alike (a collective
// decision, e.g. taken after the ranks exchanged their lengths), to hand
// the call to the package function's fallback: the MPI binding does so
// when a gather's total exceeds MPI's int count limit.
type Gatherer interface {
	// Gatherv concatenates every rank's send, in rank order, into root's
	// recv, whose length must be the total; recv is ignored on other ranks.
	Gatherv(root int, send, recv []byte) error
	// Allgatherv concatenates every rank's send, in rank order, into recv
	// on every rank; len(recv) must be the total everywhere.
	Allgatherv(send, recv []byte) error
	// Scatterv splits root's send in rank order: rank r receives the next
	// len(recv) bytes of it into its recv. On root, len(send) must be the
	// total of all ranks' recv lengths; send is ignored on other ranks.
	Scatterv(root int, send, recv []byte) error
}

// datatypeOf returns the Datatype of a Number type.
func datatypeOf[T Number]() Datatype {
	if reflect.TypeFor[T]().Kind() == reflect.Float64 {
		return Float64
	}
	return Int64
}

// asBytes views s's memory as bytes, without copying; the view aliases s.
func asBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// overlap reports whether a and b share memory, and whether they are the
// very same slice (same start and length).
func overlap(a, b []byte) (shared, same bool) {
	if len(a) == 0 || len(b) == 0 {
		return false, false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	shared = pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
	return shared, pa == pb && len(a) == len(b)
}

// validOp reports whether op is Min, Max or Sum.
func validOp(op Op) bool { return op == Min || op == Max || op == Sum }

// checkReduceArgs is the local check of a reduction's arguments: a
// non-empty description of what is wrong, or "".
func checkReduceArgs(send, recv []byte, t Datatype) string {
	switch anyOv, same := overlap(send, recv); {
	case len(send) != len(recv):
		return fmt.Sprintf("send has %d bytes, recv %d", len(send), len(recv))
	case len(send)%t.Size() != 0:
		return fmt.Sprintf("%d bytes are not whole %v elements", len(send), t)
	case anyOv && !same:
		return "send and recv overlap without being the same slice"
	}
	return ""
}

// Allreduce combines send element by element over all ranks of c with op
// (Min, Max or Sum) and stores the result in recv on every rank; recv may
// be send itself (in place), and every rank passes the same length. It is
// the typed Allreduce a solver needs for residuals, norms and convergence
// checks. Errors: lengths differing between ranks or between send and
// recv, or recv partly overlapping send, match ErrBadArgument on every
// rank; an unknown op is refused locally.
//
// Order of combination: the in-process world (and the fallback for a Comm
// without [Reducer]) combines in rank order, ((v0 op v1) op v2) op ..., on
// one rank and hands that result to all, so float sums are the same on
// every rank and from run to run for a given number of ranks. Under MPI
// the order is MPI's own (the same on every rank and from run to run for a
// given size in Open MPI and MPICH, but not rank order). Min and Max
// follow Go's min and max (a NaN wins, -0 is less than +0) in-process;
// MPI's treatment of NaN and signed zeros may differ.
func Allreduce[T Number](c Comm, send, recv []T, op Op) error {
	if !validOp(op) {
		return fmt.Errorf("%w: Allreduce: unknown %v", ErrBadArgument, op)
	}
	t := datatypeOf[T]()
	sb, rb := asBytes(send), asBytes(recv)
	if r, ok := c.(Reducer); ok {
		if err := r.Allreduce(sb, rb, t, op); !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	return allreduceFallback(c, sb, rb, t, op, roundBytes)
}

// AllreduceValue combines one value over all ranks of c with op and
// returns the result on every rank: the convergence check
// AllreduceValue(c, localDelta, Max) of an iterative solver. It is
// [Allreduce] of one element.
func AllreduceValue[T Number](c Comm, v T, op Op) (T, error) {
	buf := []T{v}
	if err := Allreduce(c, buf, buf, op); err != nil {
		var zero T
		return zero, err
	}
	return buf[0], nil
}

// Gather concatenates every rank's send, in rank order, into recv on root.
// Ranks may send different lengths (a band of rows each); on root,
// len(recv) must be their total, and recv is ignored (may be nil) on other
// ranks. Errors match ErrBadArgument on every rank when the lengths do not
// add up, the ranks disagree on root, root is out of range, or root's send
// overlaps its recv.
func Gather[T Elem](c Comm, root int, send, recv []T) error {
	sb, rb := asBytes(send), asBytes(recv)
	if g, ok := c.(Gatherer); ok {
		if err := g.Gatherv(root, sb, rb); !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	return gatherFallback(c, root, sb, rb, false, roundBytes)
}

// Allgather concatenates every rank's send, in rank order, into recv on
// every rank; ranks may send different lengths and len(recv) must be their
// total everywhere. It is the typed, variable-length form of
// [Comm.Allgather]; errors are as for [Gather].
func Allgather[T Elem](c Comm, send, recv []T) error {
	sb, rb := asBytes(send), asBytes(recv)
	if g, ok := c.(Gatherer); ok {
		if err := g.Allgatherv(sb, rb); !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	return gatherFallback(c, -1, sb, rb, true, roundBytes)
}

// Scatter hands out root's send in rank order: rank r receives the next
// len(recv) elements into its recv (ranks may receive different lengths).
// On root, len(send) must be the total of all ranks' recv lengths; send is
// ignored (may be nil) elsewhere. Errors are as for [Gather].
func Scatter[T Elem](c Comm, root int, send, recv []T) error {
	sb, rb := asBytes(send), asBytes(recv)
	if g, ok := c.(Gatherer); ok {
		if err := g.Scatterv(root, sb, rb); !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	return scatterFallback(c, root, sb, rb, roundBytes)
}

// ---- fallbacks on the byte operations ----

// roundBytes bounds the memory of one round of the fallbacks: every round
// moves at most about this many bytes over all ranks, so no single call
// comes near MaxCount and no rank holds more than one round in flight.
const roundBytes = 16 << 20

// perRank returns the block each rank contributes to one round: roundBytes
// shared over n ranks, a multiple of unit, at least unit.
func perRank(n, unit, round int) int {
	b := round / n / unit * unit
	return max(b, unit)
}

// header field indices of the fallbacks' agreement step.
const (
	hSend = iota // len(send)
	hRecv        // len(recv)
	hRoot        // root, or the op
	hType        // datatype
	hBad         // 1 when the rank's own arguments are wrong
	hFields
)

// agree exchanges every rank's header so that all ranks take the same
// decision (proceed or fail) from the same facts.
func agree(c Comm, h [hFields]int64) ([][hFields]int64, error) {
	var mine [8 * hFields]byte
	for i, v := range h {
		binary.LittleEndian.PutUint64(mine[8*i:], uint64(v))
	}
	all := make([]byte, len(mine)*c.Size())
	if err := c.Allgather(mine[:], all); err != nil {
		return nil, err
	}
	out := make([][hFields]int64, c.Size())
	for r := range out {
		for i := range hFields {
			out[r][i] = int64(binary.LittleEndian.Uint64(all[len(mine)*r+8*i:]))
		}
	}
	return out, nil
}

func bad(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// allreduceFallback reduces through Allgather: in rounds of at most round
// bytes, every rank gathers everybody's next block and combines it in rank
// order, so every rank computes the same result.
func allreduceFallback(c Comm, send, recv []byte, t Datatype, op Op, round int) error {
	if t.Size() == 0 || !validOp(op) {
		return fmt.Errorf("%w: Allreduce: %v with %v", ErrBadArgument, t, op)
	}
	local := checkReduceArgs(send, recv, t)
	hs, err := agree(c, [hFields]int64{hSend: int64(len(send)), hRecv: int64(len(recv)), hRoot: int64(op), hType: int64(t), hBad: bad(local != "")})
	if err != nil {
		return fmt.Errorf("comm: Allreduce: agree on lengths: %w", err)
	}
	if local != "" {
		return fmt.Errorf("%w: Allreduce: %s", ErrBadArgument, local)
	}
	for r, h := range hs {
		switch {
		case h[hBad] != 0:
			return fmt.Errorf("%w: Allreduce: rank %d passed bad arguments", ErrBadArgument, r)
		case h[hSend] != hs[0][hSend]:
			return fmt.Errorf("%w: Allreduce: rank %d has %d bytes, rank 0 has %d", ErrBadArgument, r, h[hSend], hs[0][hSend])
		case h[hRoot] != hs[0][hRoot] || h[hType] != hs[0][hType]:
			return fmt.Errorf("%w: Allreduce: rank %d uses %v of %v, rank 0 %v of %v", ErrBadArgument,
				r, Op(h[hRoot]), Datatype(h[hType]), Op(hs[0][hRoot]), Datatype(hs[0][hType]))
		}
	}
	n := c.Size()
	blk := perRank(n, t.Size(), round)
	tmp := make([]byte, n*min(blk, len(send)))
	acc := make([]byte, min(blk, len(send)))
	for off := 0; off < len(send); off += blk {
		end := min(off+blk, len(send))
		w := end - off
		all := tmp[:n*w]
		if err := c.Allgather(send[off:end], all); err != nil {
			return fmt.Errorf("comm: Allreduce: block at byte %d: %w", off, err)
		}
		reduceParts(acc[:w], n, func(r int) []byte { return all[r*w : (r+1)*w] }, t, op)
		copy(recv[off:end], acc[:w])
	}
	return nil
}

// reduceParts combines n parts element by element in rank order,
// ((p0 op p1) op p2) ..., into dst; part(i) returns part i. All have
// dst's length, a multiple of t's size.
func reduceParts(dst []byte, n int, part func(i int) []byte, t Datatype, op Op) {
	switch t {
	case Int64:
		reduceTyped[int64](dst, n, part, op)
	case Float64:
		reduceTyped[float64](dst, n, part, op)
	}
}

func reduceTyped[T int64 | float64](dst []byte, n int, part func(i int) []byte, op Op) {
	acc, spill := viewAs[T](dst)
	first, _ := viewAs[T](part(0))
	copy(acc, first)
	for i := 1; i < n; i++ {
		v, _ := viewAs[T](part(i))
		switch op {
		case Sum:
			for i := range acc {
				acc[i] += v[i]
			}
		case Min:
			for i := range acc {
				acc[i] = min(acc[i], v[i])
			}
		case Max:
			for i := range acc {
				acc[i] = max(acc[i], v[i])
			}
		}
	}
	if spill {
		copy(dst, asBytes(acc))
	}
}

// viewAs returns b's elements as a []T: a view of b's memory when it is
// aligned for T, else a copy (spill true: write the copy back to b if it
// was changed).
func viewAs[T int64 | float64](b []byte) (v []T, spill bool) {
	n := len(b) / 8
	if n == 0 {
		return nil, false
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%unsafe.Alignof(T(0)) == 0 {
		return unsafe.Slice((*T)(p), n), false
	}
	v = make([]T, n)
	copy(asBytes(v), b)
	return v, true
}

// gatherFallback is Gatherv (all false) and Allgatherv (all true) on
// the byte operations. A rooted gather is rootedGather. Allgatherv agrees
// on the lengths first, then every rank contributes its next block,
// padded to the round's width, in rounds of at most round bytes.
func gatherFallback(c Comm, root int, send, recv []byte, all bool, round int) error {
	if !all {
		return rootedGather(c, root, send, recv, round)
	}
	name := "Allgather"
	root = 0
	anyOv, _ := overlap(send, recv)
	hs, err := agree(c, [hFields]int64{hSend: int64(len(send)), hRecv: int64(len(recv)), hRoot: int64(root), hBad: bad(anyOv)})
	if err != nil {
		return fmt.Errorf("comm: %s: agree on lengths: %w", name, err)
	}
	n := c.Size()
	var total int64
	maxLen := 0
	for _, h := range hs {
		total += h[hSend]
		maxLen = max(maxLen, int(h[hSend]))
	}
	if err := checkGather(name, hs, root, total, all, c.Rank()); err != nil {
		return err
	}
	displ := make([]int, n+1)
	for r, h := range hs {
		displ[r+1] = displ[r] + int(h[hSend])
	}
	blk := perRank(n, 1, round)
	tmp := make([]byte, n*min(blk, maxLen))
	pad := make([]byte, min(blk, maxLen))
	for off := 0; off < maxLen; off += blk {
		w := min(blk, maxLen-off)
		mine := pad[:w]
		clear(mine)
		if off < len(send) {
			copy(mine, send[off:])
		}
		if err := c.Allgather(mine, tmp[:n*w]); err != nil {
			return fmt.Errorf("comm: %s: block at byte %d: %w", name, off, err)
		}
		for r := range n {
			ln := int(hs[r][hSend])
			if off >= ln {
				continue
			}
			k := min(w, ln-off)
			copy(recv[displ[r]+off:displ[r]+off+k], tmp[r*w:r*w+k])
		}
	}
	return nil
}

// checkGather validates the agreed headers of a gather the same way on
// every rank.
func checkGather(name string, hs [][hFields]int64, root int, total int64, all bool, me int) error {
	n := len(hs)
	for r, h := range hs {
		switch {
		case int(h[hRoot]) != root:
			return fmt.Errorf("%w: %s: rank %d has root %d, rank %d has %d", ErrBadArgument, name, r, h[hRoot], me, root)
		case h[hBad] != 0:
			return fmt.Errorf("%w: %s: rank %d's send overlaps its recv", ErrBadArgument, name, r)
		case all && h[hRecv] != total:
			return fmt.Errorf("%w: %s: rank %d has a %d-byte recv, the sends total %d", ErrBadArgument, name, r, h[hRecv], total)
		}
	}
	if root < 0 || root >= n {
		return fmt.Errorf("%w: %s: root %d out of range [0,%d)", ErrBadArgument, name, root, n)
	}
	if !all && hs[root][hRecv] != total {
		return fmt.Errorf("%w: %s: root %d has a %d-byte recv, the sends total %d", ErrBadArgument, name, root, hs[root][hRecv], total)
	}
	return nil
}

// TagRooted is the tag of the point-to-point messages the rooted
// fallbacks (Gather, Scatter and the functions on them, for a Comm
// without [Gatherer]) exchange. A protocol that leaves its own messages
// of this tag pending across such a call may see them taken.
const TagRooted = 0x7ffe

// agreeRooted is the first step of a rooted fallback: two fixed-size
// reductions tell every rank whether all passed the same root, in range,
// and whether any rank's own arguments are wrong. The second carries
// Max(-2·root + bad): with one root R it is -2R or -2R+1, with a smaller
// root anywhere it is larger.
func agreeRooted(c Comm, name string, root int, selfBad bool) error {
	r := int64(min(max(root, -1), c.Size()))
	hi, err := c.AllreduceInt64(r, Max)
	if err != nil {
		return fmt.Errorf("comm: %s: agree on root: %w", name, err)
	}
	x, err := c.AllreduceInt64(-2*r+bad(selfBad), Max)
	if err != nil {
		return fmt.Errorf("comm: %s: agree on root: %w", name, err)
	}
	switch {
	case x != -2*hi && x != -2*hi+1:
		return fmt.Errorf("%w: %s: the ranks pass different roots (%d here)", ErrBadArgument, name, root)
	case root < 0 || root >= c.Size():
		return fmt.Errorf("%w: %s: root %d out of range [0,%d)", ErrBadArgument, name, root, c.Size())
	case selfBad:
		return fmt.Errorf("%w: %s: this rank's send overlaps its recv", ErrBadArgument, name)
	case x == -2*hi+1:
		return fmt.Errorf("%w: %s: root's send overlaps its recv", ErrBadArgument, name)
	}
	return nil
}

// rootedLengths is the second step: every rank but root sends root its
// distributed length n (8 bytes, tag TagRooted); root checks their total
// against want and broadcasts its verdict (16 bytes). Root gets every
// rank's length; the others nil.
func rootedLengths(c Comm, name string, root int, n, want int64) ([]int64, error) {
	var lens []int64
	var v [16]byte // ok flag, total
	if c.Rank() != root {
		binary.LittleEndian.PutUint64(v[:], uint64(n))
		if err := c.Send(root, TagRooted, v[:8]); err != nil {
			return nil, fmt.Errorf("comm: %s: send length: %w", name, err)
		}
	} else {
		lens = make([]int64, c.Size())
		var total int64
		for r := range lens {
			lens[r] = n
			if r != root {
				if _, err := recvExact(c, r, TagRooted, v[:8]); err != nil {
					return nil, fmt.Errorf("comm: %s: length of rank %d: %w", name, r, err)
				}
				lens[r] = int64(binary.LittleEndian.Uint64(v[:8]))
			}
			total += lens[r]
		}
		binary.LittleEndian.PutUint64(v[:], uint64(bad(total == want)))
		binary.LittleEndian.PutUint64(v[8:], uint64(total))
	}
	if err := c.Bcast(root, v[:]); err != nil {
		return nil, fmt.Errorf("comm: %s: verdict: %w", name, err)
	}
	if binary.LittleEndian.Uint64(v[:]) != 1 {
		return nil, fmt.Errorf("%w: %s: root %d's buffer does not hold the total of %d bytes", ErrBadArgument, name, root,
			int64(binary.LittleEndian.Uint64(v[8:])))
	}
	return lens, nil
}

// rootedGather is Gatherv on point-to-point messages: after agreeRooted
// and rootedLengths, every rank sends root its bytes in blocks of round
// bytes, and root receives them in rank order. A rank other than root
// receives a fixed number of bytes.
func rootedGather(c Comm, root int, send, recv []byte, round int) error {
	const name = "Gather"
	anyOv, _ := overlap(send, recv)
	if err := agreeRooted(c, name, root, anyOv && c.Rank() == root); err != nil {
		return err
	}
	lens, err := rootedLengths(c, name, root, int64(len(send)), int64(len(recv)))
	if err != nil {
		return err
	}
	if c.Rank() != root {
		if err := SendChunked(c, root, TagRooted, send, round); err != nil {
			return fmt.Errorf("comm: %s: send data: %w", name, err)
		}
		return nil
	}
	var off int64
	for r, l := range lens {
		part := recv[off : off+l]
		off += l
		if r == root {
			copy(part, send)
			continue
		}
		got, err := RecvChunked(c, r, TagRooted, part, round)
		if err == nil && int64(got) != l {
			err = fmt.Errorf("%w: %d bytes, want %d", ErrBadArgument, got, l)
		}
		if err != nil {
			return fmt.Errorf("comm: %s: data of rank %d: %w", name, r, err)
		}
	}
	return nil
}

// scatterFallback is Scatterv on point-to-point messages, the mirror of
// rootedGather: root sends each rank its part in blocks of round bytes.
func scatterFallback(c Comm, root int, send, recv []byte, round int) error {
	const name = "Scatter"
	anyOv, _ := overlap(send, recv)
	if err := agreeRooted(c, name, root, anyOv && c.Rank() == root); err != nil {
		return err
	}
	lens, err := rootedLengths(c, name, root, int64(len(recv)), int64(len(send)))
	if err != nil {
		return err
	}
	if c.Rank() != root {
		got, err := RecvChunked(c, root, TagRooted, recv, round)
		if err == nil && got != len(recv) {
			err = fmt.Errorf("%w: %d bytes, want %d", ErrBadArgument, got, len(recv))
		}
		if err != nil {
			return fmt.Errorf("comm: %s: receive part: %w", name, err)
		}
		return nil
	}
	var off int64
	for r, l := range lens {
		part := send[off : off+l]
		off += l
		if r == root {
			copy(recv, part)
			continue
		}
		if err := SendChunked(c, r, TagRooted, part, round); err != nil {
			return fmt.Errorf("comm: %s: part of rank %d: %w", name, r, err)
		}
	}
	return nil
}
