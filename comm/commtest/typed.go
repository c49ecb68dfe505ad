package commtest

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ftigo/ftigo/comm"
)

// This file checks the typed operations: comm.Allreduce, comm.Gather,
// comm.Allgather, comm.Scatter and the non-blocking requests. They run on
// the Comm's native capabilities when it has them and on the fallbacks
// otherwise ([BytesOnly] forces the fallbacks).

// BytesOnly wraps c so that it offers only the comm.Comm methods: the
// typed package functions then take their fallbacks on the byte
// operations. Communicators split from it are wrapped too. Run(t,
// BytesOnly(c)) checks the fallbacks on any implementation.
func BytesOnly(c comm.Comm) comm.Comm { return bytesOnly{c} }

type bytesOnly struct{ comm.Comm }

func (b bytesOnly) Split(color, key int) (comm.Comm, error) {
	sub, err := b.Comm.Split(color, key)
	if sub == nil || err != nil {
		return sub, err
	}
	return bytesOnly{sub}, nil
}

// celsius checks that types defined on the element types work.
type celsius float64

// reduceLengths straddle the MPI binding's small-vector path (25 elements
// travel with the length check) and its chunked large path.
var reduceLengths = []int{0, 1, 2, 13, 24, 25, 26, 27, 100, 3001, 5003}

func (s *suite) typedAllreduce() {
	ival := func(r, i int) int64 { return int64((r+1)*(i%11+1)) - int64(7*i) + int64(r*r*1_000_003) }
	fval := func(r, i int) float64 { return float64(ival(r, i)) * 0.25 } // dyadic: every order sums exactly
	for _, n := range reduceLengths {
		for _, op := range []comm.Op{comm.Min, comm.Max, comm.Sum} {
			wantI := make([]int64, n)
			wantF := make([]float64, n)
			for i := range n {
				wantI[i], wantF[i] = ival(0, i), fval(0, i)
				for r := 1; r < s.size; r++ {
					wantI[i] = apply(op, wantI[i], ival(r, i))
					wantF[i] = apply(op, wantF[i], fval(r, i))
				}
			}
			si, sf := make([]int64, n), make([]float64, n)
			for i := range n {
				si[i], sf[i] = ival(s.rank, i), fval(s.rank, i)
			}
			what := fmt.Sprintf("Allreduce %v of %d", op, n)
			ri := make([]int64, n)
			if s.ok(what+" int64", comm.Allreduce(s.c, si, ri, op)) {
				eqSlice(s, what+" int64", ri, wantI)
				eqSlice(s, what+" int64 leaves send alone", si, func() []int64 {
					v := make([]int64, n)
					for i := range v {
						v[i] = ival(s.rank, i)
					}
					return v
				}())
			}
			// In place, on a defined type.
			cf := make([]celsius, n)
			for i := range cf {
				cf[i] = celsius(sf[i])
			}
			if s.ok(what+" float64 in place", comm.Allreduce(s.c, cf, cf, op)) {
				got := make([]float64, n)
				for i := range cf {
					got[i] = float64(cf[i])
				}
				eqSlice(s, what+" float64 in place", got, wantF)
			}
		}
	}
	// Extremes survive.
	ext := []int64{math.MinInt64, math.MaxInt64, 0}
	if s.rank%2 == 1 {
		ext = []int64{0, 0, math.MinInt64}
	}
	got := make([]int64, 3)
	if s.ok("Allreduce min of extremes", comm.Allreduce(s.c, ext, got, comm.Min)) {
		want := []int64{math.MinInt64, math.MaxInt64, 0}
		if s.size > 1 {
			want = []int64{math.MinInt64, 0, math.MinInt64}
		}
		eqSlice(s, "Allreduce min of extremes", got, want)
	}
	inf := []float64{math.Inf(1), math.Inf(-1), float64(s.rank)}
	fgot := make([]float64, 3)
	if s.ok("Allreduce max with infinities", comm.Allreduce(s.c, inf, fgot, comm.Max)) {
		eqSlice(s, "Allreduce max with infinities", fgot, []float64{math.Inf(1), math.Inf(-1), float64(s.size - 1)})
	}
	// Scalars: the convergence check of a solver.
	d, err := comm.AllreduceValue(s.c, 0.5+float64(s.rank), comm.Max)
	if s.ok("AllreduceValue max", err) && d != 0.5+float64(s.size-1) {
		s.errorf("AllreduceValue max: got %v, want %v", d, 0.5+float64(s.size-1))
	}
	k, err := comm.AllreduceValue(s.c, int64(s.rank+1), comm.Sum)
	if s.ok("AllreduceValue sum", err) {
		s.eqInt("AllreduceValue sum", k, int64(s.size*(s.size+1)/2))
	}
	// A float sum that depends on the order must still be the same on
	// every rank: ranks that disagree on a residual stop at different
	// iterations and deadlock.
	for _, n := range []int{1, 40, 3001} {
		v := make([]float64, n)
		for i := range v {
			v[i] = 0.1*float64(s.rank+1) + float64(i)/3 + 1e-9*float64(s.rank*i)
		}
		if s.ok(fmt.Sprintf("Allreduce sum of %d inexact", n), comm.Allreduce(s.c, v, v, comm.Sum)) {
			s.sameEverywhere(fmt.Sprintf("Allreduce sum of %d inexact", n), v)
		}
	}
}

func apply[T int64 | float64](op comm.Op, a, b T) T {
	switch op {
	case comm.Min:
		return min(a, b)
	case comm.Max:
		return max(a, b)
	}
	return a + b
}

// sameEverywhere checks that every rank holds the same bits in v.
func (s *suite) sameEverywhere(what string, v []float64) {
	s.t.Helper()
	all := make([]float64, len(v)*s.size)
	if !s.ok(what+": Allgather", comm.Allgather(s.c, v, all)) {
		return
	}
	for r := range s.size {
		for i := range v {
			if math.Float64bits(all[r*len(v)+i]) != math.Float64bits(v[i]) {
				s.errorf("%s: element %d is %v on rank %d, %v here", what, i, all[r*len(v)+i], r, v[i])
				return
			}
		}
	}
}

func eqSlice[T comparable](s *suite, what string, got, want []T) {
	s.t.Helper()
	if len(got) != len(want) {
		s.errorf("%s: %d elements, want %d", what, len(got), len(want))
		return
	}
	for i := range got {
		if got[i] != want[i] {
			s.errorf("%s: element %d is %v, want %v", what, i, got[i], want[i])
			return
		}
	}
}

// typedAllreduceErrors makes mistakes that only some ranks make: every rank
// must get ErrBadArgument, none may hang, and the communicator works after.
func (s *suite) typedAllreduceErrors() {
	for _, tc := range []struct {
		name       string
		send, recv func() []float64
	}{
		{"recv longer than send on rank 0", func() []float64 { return make([]float64, 3) }, func() []float64 { return make([]float64, 3+b2i(s.rank == 0)) }},
		{"rank 0 one element longer", func() []float64 { return make([]float64, 3+b2i(s.rank == 0)) }, nil},
		{"rank 0 longer than the small path", func() []float64 { return make([]float64, 3+40*b2i(s.rank == 0)) }, nil},
		{"rank 0 shorter than the small path", func() []float64 { return make([]float64, 30-20*b2i(s.rank == 0)) }, nil},
		{"lengths that differ by 65536", func() []float64 { return make([]float64, 30+65536*b2i(s.rank == 0)) }, nil},
		{"long vectors of different lengths", func() []float64 { return make([]float64, 40+b2i(s.rank == s.size-1)) }, nil},
	} {
		send := tc.send()
		recv := make([]float64, len(send))
		if tc.recv != nil {
			recv = tc.recv()
		}
		err := comm.Allreduce(s.c, send, recv, comm.Sum)
		if s.size > 1 || tc.recv != nil {
			s.is("Allreduce with "+tc.name, err, comm.ErrBadArgument)
		} else {
			s.ok("Allreduce with "+tc.name+" (one rank)", err)
		}
	}
	// recv overlapping send without being send, on rank 0 only.
	buf := make([]int64, 8)
	recv := make([]int64, 4)
	if s.rank == 0 {
		recv = buf[2:6]
	}
	s.is("Allreduce with recv partly overlapping send", comm.Allreduce(s.c, buf[:4], recv, comm.Max), comm.ErrBadArgument)
	// Every rank with an unknown op.
	s.is("Allreduce with an unknown op", comm.Allreduce(s.c, buf, buf, comm.Op(42)), comm.ErrBadArgument)
	// The communicator still works.
	v, err := comm.AllreduceValue(s.c, 1.0, comm.Sum)
	if s.ok("AllreduceValue after errors", err) && v != float64(s.size) {
		s.errorf("AllreduceValue after errors: got %v, want %d", v, s.size)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gatherLen is rank r's share in the gather tests: different per rank, and
// zero on rank 1.
func gatherLen(r int) int {
	if r == 1 {
		return 0
	}
	return 3*r + 2
}

func fill[T comm.Elem](seed, n int) []T {
	v := make([]T, n)
	for i := range v {
		v[i] = T(seed*37 + i*3 + 1)
	}
	return v
}

func concat[T comm.Elem](size int) []T {
	var all []T
	for r := range size {
		all = append(all, fill[T](r, gatherLen(r))...)
	}
	return all
}

func checkGathers[T comm.Elem](s *suite, name string) {
	total := len(concat[T](s.size))
	mine := fill[T](s.rank, gatherLen(s.rank))
	for root := range s.size {
		var recv []T
		if s.rank == root {
			recv = make([]T, total)
		}
		what := fmt.Sprintf("Gather[%s] to root %d", name, root)
		if s.ok(what, comm.Gather(s.c, root, mine, recv)) && s.rank == root {
			eqSlice(s, what, recv, concat[T](s.size))
		}
		part := make([]T, gatherLen(s.rank))
		var send []T
		if s.rank == root {
			send = concat[T](s.size)
		}
		what = fmt.Sprintf("Scatter[%s] from root %d", name, root)
		if s.ok(what, comm.Scatter(s.c, root, send, part)) {
			eqSlice(s, what, part, mine)
		}
	}
	all := make([]T, total)
	if s.ok("Allgather["+name+"]", comm.Allgather(s.c, mine, all)) {
		eqSlice(s, "Allgather["+name+"]", all, concat[T](s.size))
	}
	// Equal shares, the common case of one value per rank.
	one := make([]T, s.size)
	if s.ok("Allgather["+name+"] one each", comm.Allgather(s.c, []T{T(s.rank + 1)}, one)) {
		want := make([]T, s.size)
		for r := range want {
			want[r] = T(r + 1)
		}
		eqSlice(s, "Allgather["+name+"] one each", one, want)
	}
}

func (s *suite) typedGathers() {
	checkGathers[float64](s, "float64")
	checkGathers[int64](s, "int64")
	checkGathers[byte](s, "byte")
	checkGathers[int32](s, "int32")
	checkGathers[float32](s, "float32")
	checkGathers[uint64](s, "uint64")
	// Large bands (the in-process world shares the copying out above 32 KiB).
	big := func(r int) []float64 { return fill[float64](r, 4099+r) }
	var want []float64
	for r := range s.size {
		want = append(want, big(r)...)
	}
	all := make([]float64, len(want))
	if s.ok("Allgather of large bands", comm.Allgather(s.c, big(s.rank), all)) {
		eqSlice(s, "Allgather of large bands", all, want)
	}
	var recv []float64
	if s.rank == s.size-1 {
		recv = make([]float64, len(want))
	}
	if s.ok("Gather of large bands", comm.Gather(s.c, s.size-1, big(s.rank), recv)) && recv != nil {
		eqSlice(s, "Gather of large bands", recv, want)
	}
	part := make([]float64, 4099+s.rank)
	if s.ok("Scatter of large bands", comm.Scatter(s.c, 0, all, part)) {
		eqSlice(s, "Scatter of large bands", part, big(s.rank))
	}
	// Nothing at all.
	s.ok("Gather of nothing", comm.Gather[float64](s.c, 0, nil, nil))
	s.ok("Allgather of nothing", comm.Allgather[float64](s.c, nil, nil))
	s.ok("Scatter of nothing", comm.Scatter[float64](s.c, 0, nil, nil))
}

// typedGatherErrors: mistakes made by one rank fail on every rank.
func (s *suite) typedGatherErrors() {
	mine := fill[float64](s.rank, 2)
	total := 2 * s.size
	short := func(root int) []float64 {
		if s.rank == root {
			return make([]float64, total-1)
		}
		return nil
	}
	s.is("Gather into a short recv on root", comm.Gather(s.c, 0, mine, short(0)), comm.ErrBadArgument)
	s.is("Gather to root -1", comm.Gather(s.c, -1, mine, make([]float64, total)), comm.ErrBadArgument)
	s.is("Gather to root size", comm.Gather(s.c, s.size, mine, make([]float64, total)), comm.ErrBadArgument)
	if s.size > 1 {
		root := 0
		if s.rank == s.size-1 {
			root = 1
		}
		s.is("Gather with ranks disagreeing on root", comm.Gather(s.c, root, mine, make([]float64, total)), comm.ErrBadArgument)
		s.is("Scatter with ranks disagreeing on root", comm.Scatter(s.c, root, make([]float64, total), make([]float64, 2)), comm.ErrBadArgument)
	}
	recv := make([]float64, total+b2i(s.rank == s.size-1))
	s.is("Allgather with one long recv", comm.Allgather(s.c, mine, recv), comm.ErrBadArgument)
	var send []float64
	if s.rank == 0 {
		send = make([]float64, total+1)
	}
	s.is("Scatter of a long send", comm.Scatter(s.c, 0, send, make([]float64, 2)), comm.ErrBadArgument)
	s.is("Scatter from root size", comm.Scatter(s.c, s.size, make([]float64, total), make([]float64, 2)), comm.ErrBadArgument)
	// Root's send inside its recv.
	buf := make([]float64, total)
	send = mine
	if s.rank == 0 {
		send = buf[:2]
	}
	s.is("Gather with send inside recv on root", comm.Gather(s.c, 0, send, buf), comm.ErrBadArgument)
	s.is("Allgather with send inside recv on rank 0", comm.Allgather(s.c, send, buf), comm.ErrBadArgument)
	// Still works.
	all := make([]float64, total)
	if s.ok("Allgather after errors", comm.Allgather(s.c, mine, all)) {
		eqSlice(s, "Allgather after errors", all[2*s.rank:2*s.rank+2], mine)
	}
}

// haloOrders are the orders in which a rank posts its four halo requests:
// 0 recv from above, 1 recv from below, 2 send up, 3 send down.
var haloOrders = permutations([]int{0, 1, 2, 3})

func permutations(v []int) [][]int {
	if len(v) <= 1 {
		return [][]int{append([]int(nil), v...)}
	}
	var out [][]int
	for i := range v {
		rest := append(append([]int(nil), v[:i]...), v[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]int{v[i]}, p...))
		}
	}
	return out
}

// halo exchanges one row of width n with the neighbours of a chain
// (periodic: a ring), posting the four requests in the given order, and
// returns the rows received from above and below.
func (s *suite) halo(c comm.Comm, order []int, n int, periodic bool, waitAll bool) (fromUp, fromDown []float64, err error) {
	rank, size := c.Rank(), c.Size()
	up, down := rank-1, rank+1
	if periodic {
		up, down = (rank-1+size)%size, (rank+1)%size
	}
	fromUp, fromDown = make([]float64, n), make([]float64, n)
	first, last := fill[float64](rank*2, n), fill[float64](rank*2+1, n)
	reqs := make([]comm.Request, 4)
	for _, k := range order {
		var r comm.Request
		var perr error
		switch {
		case k == 0 && up >= 0:
			r, perr = comm.Irecv(c, up, 7, fromUp) // the row the rank above sent down
		case k == 1 && down < size:
			r, perr = comm.Irecv(c, down, 8, fromDown) // the row the rank below sent up
		case k == 2 && up >= 0:
			r, perr = comm.Isend(c, up, 8, first)
		case k == 3 && down < size:
			r, perr = comm.Isend(c, down, 7, last)
		}
		if perr != nil {
			return nil, nil, perr
		}
		reqs[k] = r
	}
	if waitAll {
		err = comm.WaitAll(reqs...)
	} else {
		// Individually, in the reverse of the posting order.
		for i := len(order) - 1; i >= 0; i-- {
			if r := reqs[order[i]]; r != nil {
				if _, werr := r.Wait(); werr != nil && err == nil {
					err = werr
				}
			}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	for k, r := range reqs {
		if r == nil {
			continue
		}
		got, err := r.Wait()
		if err != nil || got != n {
			return nil, nil, fmt.Errorf("request %d: second Wait gave %d, %v; want %d, nil", k, got, err, n)
		}
	}
	return fromUp, fromDown, nil
}

func (s *suite) checkHalo(what string, c comm.Comm, order []int, n int, periodic, waitAll bool) {
	rank, size := c.Rank(), c.Size()
	fromUp, fromDown, err := s.halo(c, order, n, periodic, waitAll)
	if !s.ok(what, err) {
		return
	}
	up, down := rank-1, rank+1
	if periodic {
		up, down = (rank-1+size)%size, (rank+1)%size
	}
	if up >= 0 {
		eqSlice(s, what+": row from above", fromUp, fill[float64](up*2+1, n))
	}
	if down < size {
		eqSlice(s, what+": row from below", fromDown, fill[float64](down*2, n))
	}
}

// nonBlocking checks the halo exchange in every posting order: each rank
// uses a different order in the same round, with WaitAll, and (natively)
// with single Waits in reverse order.
func (s *suite) nonBlocking() {
	_, native := s.c.(comm.NonBlocker)
	for i := range haloOrders {
		mine := haloOrders[(i+s.rank*5)%len(haloOrders)]
		s.checkHalo(fmt.Sprintf("halo chain, orders from #%d, WaitAll", i), s.c, mine, 5, false, true)
		if native {
			s.checkHalo(fmt.Sprintf("halo chain, orders from #%d, single Waits", i), s.c, mine, 5, false, false)
		}
	}
	s.checkHalo("halo ring", s.c, haloOrders[s.rank%len(haloOrders)], 3, true, true)
	s.checkHalo("halo ring of 1 MiB rows", s.c, haloOrders[(s.rank*7)%len(haloOrders)], 1<<17, true, true)
	s.checkHalo("halo chain of empty rows", s.c, haloOrders[s.rank%len(haloOrders)], 0, false, true)

	// A message to oneself.
	in := make([]int32, 4)
	rr, err1 := comm.Irecv(s.c, s.rank, 3, in)
	sr, err2 := comm.Isend(s.c, s.rank, 3, []int32{1, -2, 3, -4})
	if s.ok("Irecv from self", err1) && s.ok("Isend to self", err2) && s.ok("WaitAll to self", comm.WaitAll(rr, sr)) {
		eqSlice(s, "message to self", in, []int32{1, -2, 3, -4})
	}

	// Bad ranks are refused at posting time.
	for _, r := range []int{-1, s.size} {
		req, err := comm.Isend(s.c, r, 0, []float64{1})
		s.is(fmt.Sprintf("Isend to rank %d", r), err, comm.ErrBadArgument)
		if req != nil {
			s.errorf("Isend to rank %d returned a request", r)
		}
		_, err = comm.Irecv(s.c, r, 0, make([]byte, 1))
		s.is(fmt.Sprintf("Irecv from rank %d", r), err, comm.ErrBadArgument)
	}
	s.ok("WaitAll of nothing", comm.WaitAll())
	s.ok("WaitAll of nils", comm.WaitAll(nil, nil))

	p := s.partner()
	if p < 0 {
		return
	}
	// Counts are in elements; messages of one tag keep their order; a short
	// buffer is ErrTruncated for that request alone.
	if s.rank < p {
		r1, e1 := comm.Isend(s.c, p, 4, fill[float64](1, 7))
		r2, e2 := comm.Isend(s.c, p, 4, fill[float64](2, 3))
		r3, e3 := comm.Isend(s.c, p, 5, fill[float64](3, 9))
		if s.ok("Isend", errors.Join(e1, e2, e3)) {
			s.ok("WaitAll of sends", comm.WaitAll(r1, r2, r3))
		}
	} else {
		a, b, c := make([]float64, 10), make([]float64, 10), make([]float64, 4)
		r1, e1 := comm.Irecv(s.c, p, 4, a)
		r2, e2 := comm.Irecv(s.c, p, 4, b)
		r3, e3 := comm.Irecv(s.c, p, 5, c)
		if s.ok("Irecv", errors.Join(e1, e2, e3)) {
			err := comm.WaitAll(r1, r2, r3)
			s.is("WaitAll with a truncated receive", err, comm.ErrTruncated)
			if n, err := r1.Wait(); s.ok("first receive", err) {
				s.eqInt("first receive count", int64(n), 7)
				eqSlice(s, "first receive", a[:7], fill[float64](1, 7))
			}
			if n, err := r2.Wait(); s.ok("second receive", err) {
				s.eqInt("second receive count", int64(n), 3)
				eqSlice(s, "second receive", b[:3], fill[float64](2, 3))
			}
			_, err = r3.Wait()
			s.is("truncated receive", err, comm.ErrTruncated)
		}
	}
	s.testPolling(p)
}

// testPolling completes a pair exchange with Test alone.
func (s *suite) testPolling(p int) {
	deadline := time.Now().Add(20 * time.Second)
	poll := func(what string, r comm.Request) (int, bool) {
		for time.Now().Before(deadline) {
			done, n, err := r.Test()
			if done {
				return n, s.ok(what, err)
			}
			time.Sleep(50 * time.Microsecond)
		}
		s.errorf("%s: not done after 20 s of Test", what)
		return 0, false
	}
	if s.rank < p {
		r, err := comm.Isend(s.c, p, 6, fill[uint64](5, 100))
		if s.ok("Isend", err) {
			if n, ok := poll("Test on a send", r); ok {
				s.eqInt("Test on a send: count", int64(n), 100)
			}
		}
	} else {
		buf := make([]uint64, 100)
		r, err := comm.Irecv(s.c, p, 6, buf)
		if s.ok("Irecv", err) {
			if n, ok := poll("Test on a receive", r); ok {
				s.eqInt("Test on a receive: count", int64(n), 100)
				eqSlice(s, "Test on a receive", buf, fill[uint64](5, 100))
			}
		}
	}
}

// testNotDone checks, on a native NonBlocker, that Test reports a receive
// whose message has not been sent as not done, and that it completes later.
func (s *suite) testNotDone() {
	if _, native := s.c.(comm.NonBlocker); !native {
		return
	}
	p := s.partner()
	buf := make([]byte, 3)
	var r comm.Request
	if p >= 0 {
		var err error
		if r, err = comm.Irecv(s.c, p, 9, buf); !s.ok("Irecv", err) {
			r = nil
		} else if done, _, _ := r.Test(); done {
			s.errorf("Test reported a receive done before its message was sent")
		}
	}
	// Every rank, paired or not, takes part in the barrier.
	s.ok("Barrier", s.c.Barrier())
	if r == nil {
		return
	}
	s.ok("Send", s.c.Send(p, 9, []byte{byte(s.rank), 1, 2}))
	if n, err := r.Wait(); s.ok("Wait after Test", err) {
		s.eqInt("Wait after Test: count", int64(n), 3)
		s.eqBytes("Wait after Test", buf, []byte{byte(p), 1, 2})
	}
}

// typedSub runs a reduction and a halo ring inside a sub-communicator
// whose rank order is the reverse of the world's.
func (s *suite) typedSub() {
	sub, err := s.c.Split(0, -s.rank)
	if !s.ok("Split", err) || sub == nil {
		return
	}
	defer func() { s.ok("Close", sub.Close()) }()
	v := []int64{int64(sub.Rank()), int64(s.rank)}
	if s.ok("Allreduce in a sub-communicator", comm.Allreduce(sub, v, v, comm.Sum)) {
		want := int64(s.size * (s.size - 1) / 2)
		eqSlice(s, "Allreduce in a sub-communicator", v, []int64{want, want})
	}
	s.checkHalo("halo ring in a sub-communicator", sub, haloOrders[s.rank%len(haloOrders)], 4, true, true)
}
