package comm

import (
	"fmt"
	"slices"
)

// The rooted collectives below are what a protocol uses when only one
// rank needs every rank's part: a root that writes shared metadata
// gathers the parts, and hands each rank back only what concerns it.
// Unlike [AllgatherBytes], no rank but root receives more than its own
// part and a few fixed-size words, whatever the number of ranks. They
// run on the [Gatherer] and [Reducer] capabilities; without them, the
// fallbacks go through Allgather and cost every rank O(Size()).

// AllreduceInt64s combines vs element by element over all ranks with op
// and leaves the result in vs on every rank: one collective for several
// flags, counts or maxima. Every rank passes the same length. To mix
// minima and maxima in one call, reduce with Max and negate the minima.
func AllreduceInt64s(c Comm, vs []int64, op Op) error {
	return Allreduce(c, vs, vs, op)
}

// Reduce combines send element by element over all ranks with op and
// stores the result in recv on root; recv is ignored (may be nil)
// elsewhere. Every rank passes the same root and length. It costs two
// fixed-size reductions (the root check, then the data), like
// [Allreduce]. Errors are as for Allreduce, and ranks disagreeing on
// root, or a root out of range, match ErrBadArgument on every rank.
func Reduce[T Number](c Comm, root int, send, recv []T, op Op) error {
	chk := []int64{int64(root), -int64(root)}
	if err := Allreduce(c, chk, chk, Max); err != nil {
		return fmt.Errorf("comm: Reduce: agree on root: %w", err)
	}
	if err := checkRoot("Reduce", root, chk, c.Size()); err != nil {
		return err
	}
	if c.Rank() != root {
		recv = make([]T, len(send))
	}
	return Allreduce(c, send, recv, op)
}

// checkRoot reads the Max reduction of (root, -root) over all ranks.
func checkRoot(name string, root int, chk []int64, size int) error {
	if hi, lo := chk[0], -chk[1]; hi != lo {
		return fmt.Errorf("%w: %s: the ranks pass roots between %d and %d (%d here)", ErrBadArgument, name, lo, hi, root)
	}
	if root < 0 || root >= size {
		return fmt.Errorf("%w: %s: root %d out of range [0,%d)", ErrBadArgument, name, root, size)
	}
	return nil
}

// GathervBytes gathers a byte slice of any length from every rank to
// root. On root it returns them in rank order (root's own included); on
// the other ranks it returns nil. A rank other than root sends its bytes
// and receives a fixed number of bytes; root receives every part once.
// It costs two gathers: the lengths, then the data. Every rank passes
// the same root; otherwise, or for a root out of range, every rank gets
// an error matching ErrBadArgument.
func GathervBytes(c Comm, root int, mine []byte) ([][]byte, error) {
	n := c.Size()
	me := c.Rank() == root
	var lens []int64
	if me {
		lens = make([]int64, n)
	}
	if err := Gather(c, root, []int64{int64(len(mine))}, lens); err != nil {
		return nil, fmt.Errorf("comm: GathervBytes: gather lengths: %w", err)
	}
	var buf []byte
	if me {
		var total int64
		for _, l := range lens {
			total += l
		}
		buf = make([]byte, total)
	}
	if err := Gather(c, root, mine, buf); err != nil {
		return nil, fmt.Errorf("comm: GathervBytes: gather data: %w", err)
	}
	if !me {
		return nil, nil
	}
	out := make([][]byte, n)
	var off int64
	for r, l := range lens {
		out[r] = buf[off : off+l : off+l]
		off += l
	}
	return out, nil
}

// ScattervBytes hands out root's parts: rank r receives parts[r], of
// any length, and returns its own copy. On root len(parts) must be
// Size(); parts is ignored elsewhere (may be nil). A rank other than
// root receives its part and a fixed number of bytes. It costs two
// scatters: the lengths, then the data. Wrong parts on root, ranks
// disagreeing on root, or a root out of range are an error matching
// ErrBadArgument on every rank.
func ScattervBytes(c Comm, root int, parts [][]byte) ([]byte, error) {
	n := c.Size()
	me := c.Rank() == root
	var lens []int64
	if me {
		ok := len(parts) == n
		for _, p := range parts {
			ok = ok && len(p) <= MaxCount
		}
		lens = make([]int64, n)
		for r := range lens {
			lens[r] = -1 // tells every rank that root's parts are wrong
			if ok {
				lens[r] = int64(len(parts[r]))
			}
		}
	}
	mine := []int64{0}
	if err := Scatter(c, root, lens, mine); err != nil {
		return nil, fmt.Errorf("comm: ScattervBytes: scatter lengths: %w", err)
	}
	if mine[0] < 0 {
		if me {
			return nil, fmt.Errorf("%w: ScattervBytes: %d parts for %d ranks on root %d (or a part above %d bytes)",
				ErrBadArgument, len(parts), n, root, MaxCount)
		}
		return nil, fmt.Errorf("%w: ScattervBytes: root %d passed wrong parts", ErrBadArgument, root)
	}
	var send []byte
	if me {
		send = slices.Concat(parts...)
	}
	out := make([]byte, mine[0])
	if err := Scatter(c, root, send, out); err != nil {
		return nil, fmt.Errorf("comm: ScattervBytes: scatter data: %w", err)
	}
	return out, nil
}
