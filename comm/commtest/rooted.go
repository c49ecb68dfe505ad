package commtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ftigo/ftigo/comm"
)

// This file checks the rooted collectives (comm.GathervBytes,
// comm.ScattervBytes, comm.Reduce, comm.AllreduceInt64s), comm.Agree and
// the traffic counters (comm.Counter).

// rootedLen is rank r's share in the rooted tests: different per rank,
// empty on rank 1.
func rootedLen(r int) int {
	if r == 1 {
		return 0
	}
	return 7*r + 3
}

func (s *suite) gathervBytes() {
	for root := range s.size {
		what := fmt.Sprintf("GathervBytes to root %d", root)
		got, err := comm.GathervBytes(s.c, root, pattern(s.rank, rootedLen(s.rank)))
		if !s.ok(what, err) {
			continue
		}
		if s.rank != root {
			if got != nil {
				s.errorf("%s: %d parts on a rank that is not root, want nil", what, len(got))
			}
			continue
		}
		if len(got) != s.size {
			s.errorf("%s: %d parts, want %d", what, len(got), s.size)
			continue
		}
		for r, b := range got {
			s.eqBytes(fmt.Sprintf("%s: part of rank %d", what, r), b, pattern(r, rootedLen(r)))
		}
	}
	// A part appended to must not overwrite the next one.
	got, err := comm.GathervBytes(s.c, 0, pattern(s.rank, 2))
	if s.ok("GathervBytes of 2 bytes each", err) && s.rank == 0 && len(got) > 1 {
		_ = append(got[0], 0xff)
		s.eqBytes("GathervBytes: part 1 after appending to part 0", got[1], pattern(1, 2))
	}
	_, err = comm.GathervBytes(s.c, s.size, []byte{1})
	s.is("GathervBytes to root size", err, comm.ErrBadArgument)
	if s.size > 1 {
		root := 0
		if s.rank == s.size-1 {
			root = 1
		}
		_, err = comm.GathervBytes(s.c, root, []byte{1})
		s.is("GathervBytes with ranks disagreeing on root", err, comm.ErrBadArgument)
	}
}

func (s *suite) scattervBytes() {
	for root := range s.size {
		var parts [][]byte
		if s.rank == root {
			for r := range s.size {
				parts = append(parts, pattern(r+root, rootedLen(r)))
			}
		}
		what := fmt.Sprintf("ScattervBytes from root %d", root)
		got, err := comm.ScattervBytes(s.c, root, parts)
		if s.ok(what, err) {
			s.eqBytes(what, got, pattern(s.rank+root, rootedLen(s.rank)))
		}
	}
	// Root passing one part too few fails everywhere.
	var parts [][]byte
	if s.rank == 0 {
		parts = make([][]byte, s.size-1)
	}
	_, err := comm.ScattervBytes(s.c, 0, parts)
	s.is("ScattervBytes of too few parts", err, comm.ErrBadArgument)
	_, err = comm.ScattervBytes(s.c, -1, nil)
	s.is("ScattervBytes from root -1", err, comm.ErrBadArgument)
	// Still works.
	if s.rank == 0 {
		parts = make([][]byte, s.size)
		parts[s.size-1] = []byte("last")
	}
	got, err := comm.ScattervBytes(s.c, 0, parts)
	if s.ok("ScattervBytes after errors", err) && s.rank == s.size-1 {
		s.eqBytes("ScattervBytes after errors", got, []byte("last"))
	}
}

func (s *suite) reduceVectors() {
	// Several flags and maxima in one call: Max of (value, -minimum).
	vs := []int64{int64(s.rank), -int64(s.rank), int64(b2i(s.rank == s.size-1))}
	if s.ok("AllreduceInt64s", comm.AllreduceInt64s(s.c, vs, comm.Max)) {
		eqSlice(s, "AllreduceInt64s", vs, []int64{int64(s.size - 1), 0, 1})
	}
	sum := []int64{1, int64(s.rank)}
	if s.ok("AllreduceInt64s sum", comm.AllreduceInt64s(s.c, sum, comm.Sum)) {
		eqSlice(s, "AllreduceInt64s sum", sum, []int64{int64(s.size), int64(s.size * (s.size - 1) / 2)})
	}
	for root := range s.size {
		send := []float64{float64(s.rank), 2}
		var recv []float64
		if s.rank == root {
			recv = make([]float64, 2)
		}
		what := fmt.Sprintf("Reduce to root %d", root)
		if s.ok(what, comm.Reduce(s.c, root, send, recv, comm.Sum)) && s.rank == root {
			eqSlice(s, what, recv, []float64{float64(s.size * (s.size - 1) / 2), float64(2 * s.size)})
		}
	}
	s.is("Reduce to root size", comm.Reduce(s.c, s.size, []int64{1}, make([]int64, 1), comm.Min), comm.ErrBadArgument)
	if s.size > 1 {
		root := 0
		if s.rank == 0 {
			root = 1
		}
		s.is("Reduce with ranks disagreeing on root", comm.Reduce(s.c, root, []int64{1}, make([]int64, 1), comm.Min), comm.ErrBadArgument)
	}
}

var errAgree = errors.New("commtest: local failure")

func (s *suite) agree() {
	s.ok("Agree when every rank passes", comm.Agree(s.c, nil, "step"))
	// The odd ranks fail (rank 0 alone when there is one rank).
	fails := func(r int) bool { return r%2 == 1 || s.size == 1 }
	var local error
	if fails(s.rank) {
		local = fmt.Errorf("rank %d trouble: %w", s.rank, errAgree)
	}
	err := comm.Agree(s.c, local, "step")
	var ae *comm.AgreedError
	if !errors.As(err, &ae) {
		s.errorf("Agree with failures: got %v, want an *AgreedError", err)
		return
	}
	var want []int
	for r := range s.size {
		if fails(r) {
			want = append(want, r)
		}
	}
	if !slices.Equal(ae.Ranks, want) {
		s.errorf("Agree: failing ranks %v, want %v", ae.Ranks, want)
	}
	// The message's exact text is comm's (its tests); here: what failed,
	// how many ranks, and the lowest one's error.
	cause := fmt.Sprintf("rank %d trouble: commtest: local failure", want[0])
	head := fmt.Sprintf("step failed on rank %d: ", want[0])
	if len(want) > 1 {
		head = fmt.Sprintf("step failed on %d ranks (", len(want))
		cause = fmt.Sprintf("; rank %d: %s", want[0], cause)
	}
	if !strings.HasPrefix(ae.Msg, head) || !strings.HasSuffix(ae.Msg, cause) {
		s.errorf("Agree: message %q, want %q...%q", ae.Msg, head, cause)
	}
	if got := errors.Is(err, errAgree); got != fails(s.rank) {
		s.errorf("Agree: errors.Is(local) = %v on a rank that failed: %v", got, fails(s.rank))
	}
}

// counts checks the traffic counters of a Comm with the comm.Counter
// capability: each call's own payload, counting into the world rank from
// a sub-communicator, and that a rooted gather costs a rank other than
// root a fixed number of bytes.
func (s *suite) counts() {
	if _, ok := s.c.(comm.Counter); !ok {
		return
	}
	n := int64(s.size)
	step := func(what string, fn func() error, want func(comm.Counts) comm.Counts) {
		before := comm.CountsOf(s.c)
		if !s.ok(what, fn()) {
			return
		}
		got := comm.CountsOf(s.c).Sub(before)
		if w := want(comm.Counts{}); got != w {
			s.errorf("%s: counted %+v, want %+v", what, got, w)
		}
	}
	step("Barrier", s.c.Barrier, func(c comm.Counts) comm.Counts { c.Collectives = 1; return c })
	step("Bcast of 40 bytes from root 0", func() error { return s.c.Bcast(0, make([]byte, 40)) }, func(c comm.Counts) comm.Counts {
		c.Collectives = 1
		if s.rank == 0 {
			c.Sent, c.BytesSent = 1, 40
		} else {
			c.Received, c.BytesReceived = 1, 40
		}
		return c
	})
	step("Allgather of 3 bytes", func() error { return s.c.Allgather(make([]byte, 3), make([]byte, 3*s.size)) }, func(c comm.Counts) comm.Counts {
		c.Collectives, c.Sent, c.BytesSent, c.Received, c.BytesReceived = 1, 1, 3, n-1, 3*(n-1)
		return c
	})
	step("AllreduceInt64", func() error { _, err := s.c.AllreduceInt64(1, comm.Sum); return err }, func(c comm.Counts) comm.Counts {
		c.Collectives, c.Sent, c.BytesSent, c.Received, c.BytesReceived = 1, 1, 8, 1, 8
		return c
	})
	dst, src := (s.rank+1)%s.size, (s.rank+s.size-1)%s.size
	step("Sendrecv ring of 5 bytes", func() error {
		_, err := s.c.Sendrecv(make([]byte, 5), dst, 3, make([]byte, 5), src, 3)
		return err
	}, func(c comm.Counts) comm.Counts {
		c.Sent, c.BytesSent, c.Received, c.BytesReceived = 1, 5, 1, 5
		return c
	})
	// A sub-communicator counts into its rank.
	sub, err := s.c.Split(0, -s.rank)
	if s.ok("Split for the counters", err) {
		step("Bcast of 9 bytes on a sub-communicator", func() error { return sub.Bcast(0, make([]byte, 9)) }, func(c comm.Counts) comm.Counts {
			c.Collectives = 1
			if s.rank == s.size-1 { // rank 0 of sub
				c.Sent, c.BytesSent = 1, 9
			} else {
				c.Received, c.BytesReceived = 1, 9
			}
			return c
		})
		if got, want := comm.CountsOf(sub), comm.CountsOf(s.c); got != want {
			s.errorf("a sub-communicator counts %+v, its world rank %+v", got, want)
		}
		s.ok("Close the sub-communicator", sub.Close())
	}
	// A rooted gather of 1000 bytes a rank: root receives them all, the
	// others a fixed number of bytes.
	before := comm.CountsOf(s.c)
	_, err = comm.GathervBytes(s.c, 0, make([]byte, 1000))
	got := comm.CountsOf(s.c).Sub(before)
	if s.ok("GathervBytes for the counters", err) {
		if s.rank == 0 && got.BytesReceived < 1000*(n-1) {
			s.errorf("GathervBytes: root received %d bytes, want at least %d", got.BytesReceived, 1000*(n-1))
		}
		if s.rank != 0 && got.BytesReceived > 256 {
			s.errorf("GathervBytes: rank %d received %d bytes, want a fixed amount (at most 256)", s.rank, got.BytesReceived)
		}
		if s.rank != 0 && got.BytesSent < 1000 {
			s.errorf("GathervBytes: rank %d sent %d bytes, want at least its 1000", s.rank, got.BytesSent)
		}
	}
}
