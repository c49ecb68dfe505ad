// Package commtest is the conformance suite for [comm.Comm]
// implementations, in the manner of testing/fstest.TestFS.
//
// Every rank of a communicator calls [Run] with its own Comm: the in-process
// world from one goroutine per rank, MPI once per process. The suite only
// reports with t.Errorf (never t.Fatal, which is not allowed off the test
// goroutine), and every rank makes the same sequence of calls whatever the
// outcome of earlier checks, so a failed check never desynchronises the
// ranks. It needs no particular size: 1 rank works, and so do odd sizes.
//
// # API stability
//
// commtest is public API for whoever implements a Comm: its entry points are
// kept stable, and the suite may gain tests that a conforming Comm then has
// to pass. Before 1.0 an incompatible change is still possible. Applications
// use ckpt, comm (and comm/mpi), vfd and the format packages (fileformat,
// sion, gsd, dhdf, dhdf/h5, h5ckpt); levels, partner, encode and dataset are
// ftigo's machinery.
package commtest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/ftigo/ftigo/comm"
)

// Run checks every method of c, the package helpers, the typed
// operations (comm.Allreduce, comm.Gather, comm.Allgather, comm.Scatter,
// comm.Isend, comm.Irecv, comm.WaitAll), the rooted collectives
// (comm.GathervBytes, comm.ScattervBytes, comm.Reduce,
// comm.AllreduceInt64s), comm.Agree and, when c has it, the
// comm.Counter capability, including the mistakes only some
// ranks make, which must fail on every rank rather than hang. Call it on
// every rank of the communicator at the same time. The typed operations run
// on c's native capabilities when it has them; Run(t, [BytesOnly](c))
// checks their fallbacks.
func Run(t testing.TB, c comm.Comm) {
	s := &suite{t: t, c: c, rank: c.Rank(), size: c.Size()}
	for _, step := range []struct {
		name string
		fn   func()
	}{
		{"RankSize", s.rankSize},
		{"Barrier", s.barrier},
		{"Bcast", s.bcast},
		{"Allgather", s.allgather},
		{"Allreduce", s.allreduce},
		{"BadArguments", s.badArguments},
		{"SendrecvRing", s.sendrecvRing},
		{"SendRecvPairs", s.sendRecvPairs},
		{"Tags", s.tags},
		{"Truncated", s.truncated},
		{"Split", s.split},
		{"SplitNegativeColor", s.splitNegative},
		{"SplitNested", s.splitNested},
		{"AllgatherBytes", s.allgatherBytes},
		{"BcastBytes", s.bcastBytes},
		{"SendrecvChunked", s.sendrecvChunked},
		{"SendRecvChunked", s.sendRecvChunked},
		{"NodeMap", s.nodeMap},
		{"SplitNode", s.splitNode},
		{"TypedAllreduce", s.typedAllreduce},
		{"TypedAllreduceErrors", s.typedAllreduceErrors},
		{"TypedGathers", s.typedGathers},
		{"TypedGatherErrors", s.typedGatherErrors},
		{"NonBlocking", s.nonBlocking},
		{"TestNotDone", s.testNotDone},
		{"TypedSub", s.typedSub},
		{"GathervBytes", s.gathervBytes},
		{"ScattervBytes", s.scattervBytes},
		{"ReduceVectors", s.reduceVectors},
		{"Agree", s.agree},
		{"Counts", s.counts},
	} {
		s.step = step.name
		step.fn()
		// Keep the steps apart so a failure in one does not bleed into the next.
		if err := c.Barrier(); err != nil {
			s.errorf("barrier after step: %v", err)
		}
	}
}

type suite struct {
	t          testing.TB
	c          comm.Comm
	rank, size int
	step       string
}

func (s *suite) errorf(format string, args ...any) {
	s.t.Helper()
	s.t.Errorf("commtest %s: rank %d of %d: %s", s.step, s.rank, s.size, fmt.Sprintf(format, args...))
}

// ok reports an unexpected error and returns whether err was nil.
func (s *suite) ok(what string, err error) bool {
	s.t.Helper()
	if err != nil {
		s.errorf("%s: unexpected error: %v", what, err)
		return false
	}
	return true
}

// is reports an error that does not match want.
func (s *suite) is(what string, err, want error) {
	s.t.Helper()
	if !errors.Is(err, want) {
		s.errorf("%s: got error %v, want one matching %v", what, err, want)
	}
}

func (s *suite) eqBytes(what string, got, want []byte) {
	s.t.Helper()
	if !bytes.Equal(got, want) {
		s.errorf("%s: got % x, want % x", what, trim(got), trim(want))
	}
}

func (s *suite) eqInt(what string, got, want int64) {
	s.t.Helper()
	if got != want {
		s.errorf("%s: got %d, want %d", what, got, want)
	}
}

func trim(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

// pattern returns n bytes that depend on seed and position.
func pattern(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed*131 + i*7 + i>>8)
	}
	return b
}

func (s *suite) rankSize() {
	if s.size < 1 || s.rank < 0 || s.rank >= s.size {
		s.errorf("rank %d, size %d", s.rank, s.size)
	}
	got, err := s.c.AllreduceInt64(1, comm.Sum)
	if s.ok("AllreduceInt64(1, Sum)", err) {
		s.eqInt("sum of ones", got, int64(s.size))
	}
	got, err = s.c.AllreduceInt64(int64(s.rank), comm.Max)
	if s.ok("AllreduceInt64(rank, Max)", err) {
		s.eqInt("max rank", got, int64(s.size-1))
	}
}

func (s *suite) barrier() {
	for i := range 3 {
		s.ok(fmt.Sprintf("Barrier #%d", i), s.c.Barrier())
	}
}

func (s *suite) bcast() {
	for root := range s.size {
		for _, n := range []int{0, 1, 5, 4099} {
			buf := make([]byte, n)
			if s.rank == root {
				copy(buf, pattern(root, n))
			}
			what := fmt.Sprintf("Bcast(root %d, %d bytes)", root, n)
			if s.ok(what, s.c.Bcast(root, buf)) {
				s.eqBytes(what, buf, pattern(root, n))
			}
		}
	}
}

func (s *suite) allgather() {
	for _, n := range []int{0, 1, 3, 1000} {
		recv := make([]byte, n*s.size)
		what := fmt.Sprintf("Allgather(%d bytes)", n)
		if s.ok(what, s.c.Allgather(pattern(s.rank, n), recv)) {
			for r := range s.size {
				s.eqBytes(fmt.Sprintf("%s from rank %d", what, r), recv[r*n:(r+1)*n], pattern(r, n))
			}
		}
	}
}

func (s *suite) allreduce() {
	value := func(r int) int64 {
		v := int64(r*r - 3*r - 7)
		if r%2 == 1 {
			v = -v * 1_000_000_007
		}
		return v
	}
	wantMin, wantMax, wantSum := value(0), value(0), int64(0)
	for r := range s.size {
		wantMin, wantMax = min(wantMin, value(r)), max(wantMax, value(r))
		wantSum += value(r)
	}
	for _, tc := range []struct {
		op   comm.Op
		want int64
	}{{comm.Min, wantMin}, {comm.Max, wantMax}, {comm.Sum, wantSum}} {
		got, err := s.c.AllreduceInt64(value(s.rank), tc.op)
		if s.ok("AllreduceInt64 "+tc.op.String(), err) {
			s.eqInt("AllreduceInt64 "+tc.op.String(), got, tc.want)
		}
	}
	// Extremes survive.
	got, err := s.c.AllreduceInt64(-1<<63, comm.Min)
	if s.ok("AllreduceInt64 min of MinInt64", err) {
		s.eqInt("AllreduceInt64 min of MinInt64", got, -1<<63)
	}
}

// badArguments makes calls that every rank gets wrong in the same way; an
// implementation may refuse them locally or collectively, but must not hang.
func (s *suite) badArguments() {
	buf := make([]byte, 4)
	for _, r := range []int{-1, s.size, s.size + 5} {
		s.is(fmt.Sprintf("Send to rank %d", r), s.c.Send(r, 0, buf), comm.ErrBadArgument)
		_, err := s.c.Recv(r, 0, buf)
		s.is(fmt.Sprintf("Recv from rank %d", r), err, comm.ErrBadArgument)
		_, err = s.c.Sendrecv(buf, r, 0, buf, s.rank, 0)
		s.is(fmt.Sprintf("Sendrecv to rank %d", r), err, comm.ErrBadArgument)
		_, err = s.c.Sendrecv(buf, s.rank, 0, buf, r, 0)
		s.is(fmt.Sprintf("Sendrecv from rank %d", r), err, comm.ErrBadArgument)
		s.is(fmt.Sprintf("Bcast from root %d", r), s.c.Bcast(r, buf), comm.ErrBadArgument)
	}
	s.is("Allgather with a short receive buffer", s.c.Allgather(buf, make([]byte, 4*s.size-1)), comm.ErrBadArgument)
	_, err := s.c.AllreduceInt64(1, comm.Op(99))
	s.is("AllreduceInt64 with an unknown op", err, comm.ErrBadArgument)
	// The communicator still works afterwards.
	s.ok("Barrier after bad arguments", s.c.Barrier())
}

func (s *suite) sendrecvRing() {
	dst, src := (s.rank+1)%s.size, (s.rank-1+s.size)%s.size
	for _, n := range []int{0, 1, 100, 1 << 20} {
		recv := make([]byte, n+3) // longer than needed: n is reported
		got, err := s.c.Sendrecv(pattern(s.rank, n), dst, 11, recv, src, 11)
		what := fmt.Sprintf("Sendrecv ring %d bytes", n)
		if s.ok(what, err) {
			s.eqInt(what+": length", int64(got), int64(n))
			s.eqBytes(what, recv[:n], pattern(src, n))
		}
	}
	// Reverse direction with different send and receive tags.
	recv := make([]byte, 8)
	got, err := s.c.Sendrecv(pattern(s.rank, 8), src, 21, recv, dst, 21)
	if s.ok("Sendrecv reverse ring", err) {
		s.eqInt("Sendrecv reverse ring: length", int64(got), 8)
		s.eqBytes("Sendrecv reverse ring", recv, pattern(dst, 8))
	}
}

// partner pairs ranks 0-1, 2-3, ...; the last of an odd size has none (-1).
func (s *suite) partner() int {
	p := s.rank ^ 1
	if p >= s.size {
		return -1
	}
	return p
}

func (s *suite) sendRecvPairs() {
	p := s.partner()
	if p < 0 {
		return
	}
	// The lower rank sends first; messages on one tag arrive in order.
	for _, n := range []int{0, 7, 70000} {
		what := fmt.Sprintf("Send/Recv %d bytes", n)
		if s.rank < p {
			for i := range 3 {
				s.ok(what, s.c.Send(p, 3, pattern(s.rank*10+i, n)))
			}
		} else {
			for i := range 3 {
				buf := make([]byte, n)
				got, err := s.c.Recv(p, 3, buf)
				if s.ok(what, err) {
					s.eqInt(what+": length", int64(got), int64(n))
					s.eqBytes(fmt.Sprintf("%s #%d in order", what, i), buf, pattern(p*10+i, n))
				}
			}
		}
	}
}

func (s *suite) tags() {
	p := s.partner()
	if p < 0 {
		return
	}
	// Each side sends on its own tag and receives on the other's.
	myTag, peerTag := 100+s.rank, 100+p
	recv := make([]byte, 16)
	got, err := s.c.Sendrecv(pattern(myTag, 16), p, myTag, recv, p, peerTag)
	if s.ok("Sendrecv with distinct tags", err) {
		s.eqInt("Sendrecv with distinct tags: length", int64(got), 16)
		s.eqBytes("Sendrecv with distinct tags", recv, pattern(peerTag, 16))
	}
	// Large tags are fine (MPI guarantees at least 32767).
	got, err = s.c.Sendrecv(pattern(1, 4), p, 32767, recv[:4], p, 32767)
	if s.ok("Sendrecv on tag 32767", err) {
		s.eqInt("Sendrecv on tag 32767: length", int64(got), 4)
		s.eqBytes("Sendrecv on tag 32767", recv[:4], pattern(1, 4))
	}
}

func (s *suite) truncated() {
	p := s.partner()
	if p < 0 {
		return
	}
	if s.rank < p {
		s.ok("Send of 10 bytes to a 4-byte buffer", s.c.Send(p, 5, pattern(1, 10)))
	} else {
		_, err := s.c.Recv(p, 5, make([]byte, 4))
		s.is("Recv of 10 bytes into a 4-byte buffer", err, comm.ErrTruncated)
	}
	// The pair still talks afterwards.
	recv := make([]byte, 3)
	got, err := s.c.Sendrecv(pattern(s.rank, 3), p, 6, recv, p, 6)
	if s.ok("Sendrecv after truncation", err) {
		s.eqInt("Sendrecv after truncation: length", int64(got), 3)
		s.eqBytes("Sendrecv after truncation", recv, pattern(p, 3))
	}
}

// checkSub checks that sub holds exactly the world ranks members, in order.
func (s *suite) checkSub(what string, sub comm.Comm, members []int) {
	s.t.Helper()
	if sub == nil {
		s.errorf("%s: nil communicator", what)
		return
	}
	myIndex := -1
	for i, m := range members {
		if m == s.rank {
			myIndex = i
		}
	}
	if sub.Size() != len(members) || sub.Rank() != myIndex {
		s.errorf("%s: rank %d of %d, want %d of %d", what, sub.Rank(), sub.Size(), myIndex, len(members))
		return
	}
	// Every member reports its world rank; the order must match.
	recv := make([]byte, 8*len(members))
	var me [8]byte
	putInt(me[:], int64(s.rank))
	if s.ok(what+": Allgather", sub.Allgather(me[:], recv)) {
		for i, m := range members {
			if got := getInt(recv[8*i:]); got != int64(m) {
				s.errorf("%s: sub rank %d is world rank %d, want %d", what, i, got, m)
			}
		}
	}
	sum, err := sub.AllreduceInt64(int64(s.rank), comm.Sum)
	var want int64
	for _, m := range members {
		want += int64(m)
	}
	if s.ok(what+": AllreduceInt64", err) {
		s.eqInt(what+": sum of world ranks", sum, want)
	}
	// Point to point inside the sub-communicator uses sub ranks.
	n := sub.Size()
	recv = make([]byte, 5)
	got, err := sub.Sendrecv(pattern(s.rank, 5), (sub.Rank()+1)%n, 1, recv, (sub.Rank()-1+n)%n, 1)
	if s.ok(what+": Sendrecv ring", err) {
		s.eqInt(what+": Sendrecv ring length", int64(got), 5)
		s.eqBytes(what+": Sendrecv ring", recv, pattern(members[(sub.Rank()-1+n)%n], 5))
	}
}

func putInt(b []byte, v int64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func getInt(b []byte) int64 {
	var v int64
	for i := range 8 {
		v |= int64(b[i]) << (8 * i)
	}
	return v
}

func (s *suite) split() {
	// By parity, reverse order through the key.
	sub, err := s.c.Split(s.rank%2, -s.rank)
	if s.ok("Split(parity, -rank)", err) {
		var members []int
		for r := s.size - 1; r >= 0; r-- {
			if r%2 == s.rank%2 {
				members = append(members, r)
			}
		}
		s.checkSub("Split(parity, -rank)", sub, members)
		if sub != nil {
			s.ok("Close", sub.Close())
			s.is("Barrier on a closed communicator", sub.Barrier(), comm.ErrClosed)
		}
	}
	// Equal keys keep the old order; one color gives a copy of the world.
	sub, err = s.c.Split(7, 0)
	if s.ok("Split(7, 0)", err) {
		members := make([]int, s.size)
		for i := range members {
			members[i] = i
		}
		s.checkSub("Split(7, 0)", sub, members)
		if sub != nil {
			s.ok("Close", sub.Close())
		}
	}
	// Each rank alone.
	sub, err = s.c.Split(s.rank, 0)
	if s.ok("Split(rank, 0)", err) {
		s.checkSub("Split(rank, 0)", sub, []int{s.rank})
		if sub != nil {
			s.ok("Close", sub.Close())
		}
	}
	// The world itself keeps working and its Close is a no-op.
	s.ok("Close on the world", s.c.Close())
	s.ok("Barrier on the world after its Close", s.c.Barrier())
}

func (s *suite) splitNegative() {
	color := 0
	if s.rank == 0 {
		color = -1
	}
	sub, err := s.c.Split(color, 0)
	if !s.ok("Split with rank 0 opting out", err) {
		return
	}
	if s.rank == 0 {
		if sub != nil {
			s.errorf("Split with a negative color: got a communicator of size %d, want nil", sub.Size())
		}
		return
	}
	members := make([]int, 0, s.size-1)
	for r := 1; r < s.size; r++ {
		members = append(members, r)
	}
	s.checkSub("Split without rank 0", sub, members)
	if sub != nil {
		s.ok("Close", sub.Close())
	}
}

func (s *suite) splitNested() {
	// Groups of 4 consecutive ranks, then within them pairs.
	outer, err := s.c.Split(s.rank/4, s.rank)
	if !s.ok("Split(rank/4)", err) || outer == nil {
		return
	}
	inner, err := outer.Split(outer.Rank()/2, outer.Rank())
	if s.ok("nested Split(rank/2)", err) {
		var members []int
		for r := range s.size {
			if r/4 == s.rank/4 && (r%4)/2 == (s.rank%4)/2 {
				members = append(members, r)
			}
		}
		s.checkSub("nested Split", inner, members)
		if inner != nil {
			s.ok("Close inner", inner.Close())
		}
	}
	// The outer communicator is unaffected by the inner one's Close.
	s.ok("Barrier on the outer communicator", outer.Barrier())
	s.ok("Close outer", outer.Close())
}

func (s *suite) allgatherBytes() {
	parts, err := comm.AllgatherBytes(s.c, pattern(s.rank, s.rank*3))
	if !s.ok("AllgatherBytes", err) {
		return
	}
	if len(parts) != s.size {
		s.errorf("AllgatherBytes: %d parts, want %d", len(parts), s.size)
		return
	}
	for r, b := range parts {
		s.eqBytes(fmt.Sprintf("AllgatherBytes from rank %d", r), b, pattern(r, r*3))
	}
}

func (s *suite) bcastBytes() {
	root := s.size - 1
	var in []byte
	if s.rank == root {
		in = pattern(root, 12345)
	} else {
		in = pattern(s.rank, s.rank) // ignored
	}
	out, err := comm.BcastBytes(s.c, root, in)
	if s.ok("BcastBytes", err) {
		s.eqBytes("BcastBytes", out, pattern(root, 12345))
	}
	out, err = comm.BcastBytes(s.c, 0, nil)
	if s.ok("BcastBytes empty", err) && len(out) != 0 {
		s.errorf("BcastBytes empty: got %d bytes", len(out))
	}
}

func (s *suite) sendrecvChunked() {
	dst, src := (s.rank+1)%s.size, (s.rank-1+s.size)%s.size
	// Sizes differ per rank and are not multiples of the block size.
	size := func(r int) int { return 1000*r + 37*(r%3) }
	recv := make([]byte, size(src)+100)
	got, err := comm.SendrecvChunked(s.c, pattern(s.rank, size(s.rank)), dst, recv, src, 9, 333)
	if s.ok("SendrecvChunked ring", err) {
		s.eqInt("SendrecvChunked ring: length", int64(got), int64(size(src)))
		s.eqBytes("SendrecvChunked ring", recv[:got], pattern(src, size(src)))
	}
}

func (s *suite) sendRecvChunked() {
	p := s.partner()
	if p < 0 {
		return
	}
	const n = 100_000
	if s.rank < p {
		s.ok("SendChunked", comm.SendChunked(s.c, p, 12, pattern(s.rank, n), 4096))
	} else {
		buf := make([]byte, n)
		got, err := comm.RecvChunked(s.c, p, 12, buf, 4096)
		if s.ok("RecvChunked", err) {
			s.eqInt("RecvChunked: length", int64(got), n)
			s.eqBytes("RecvChunked", buf, pattern(p, n))
		}
	}
}

func (s *suite) nodeMap() {
	// Simulated nodes of 3 ranks, named so that name order is not rank order.
	id := func() string { return fmt.Sprintf("host-%d", 100-s.rank/3) }
	nodes, mine, err := comm.NodeMap(s.c, id)
	if !s.ok("NodeMap", err) {
		return
	}
	want := make([][]int, (s.size+2)/3)
	for r := range s.size {
		want[r/3] = append(want[r/3], r)
	}
	if fmt.Sprint(nodes) != fmt.Sprint(want) || mine != s.rank/3 {
		s.errorf("NodeMap: got %v, my node %d; want %v, my node %d", nodes, mine, want, s.rank/3)
	}
	// The default (nil) must work too and put this rank on some node.
	nodes, mine, err = comm.NodeMap(s.c, nil)
	if s.ok("NodeMap(nil)", err) {
		found := false
		if mine >= 0 && mine < len(nodes) {
			for _, r := range nodes[mine] {
				found = found || r == s.rank
			}
		}
		if !found {
			s.errorf("NodeMap(nil): rank not on its own node %d in %v", mine, nodes)
		}
	}
}

func (s *suite) splitNode() {
	// Nodes of 3 ranks, named so that name order is not rank order.
	id := func() string { return fmt.Sprintf("host-%d", 100-s.rank/3) }
	node, index, count, err := comm.SplitNode(s.c, id)
	if !s.ok("SplitNode", err) {
		return
	}
	var want []int
	for r := s.rank / 3 * 3; r < min(s.size, s.rank/3*3+3); r++ {
		want = append(want, r)
	}
	s.checkSub("SplitNode", node, want)
	if index != s.rank/3 || count != (s.size+2)/3 {
		s.errorf("SplitNode: node %d of %d, want %d of %d", index, count, s.rank/3, (s.size+2)/3)
	}
	s.ok("SplitNode: close", node.Close())
	// Every rank on one node.
	node, index, count, err = comm.SplitNode(s.c, func() string { return "one" })
	if s.ok("SplitNode on one node", err) {
		if index != 0 || count != 1 || node.Size() != s.size || node.Rank() != s.rank {
			s.errorf("SplitNode on one node: node %d of %d, rank %d of %d", index, count, node.Rank(), node.Size())
		}
		s.ok("SplitNode on one node: close", node.Close())
	}
}
