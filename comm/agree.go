package comm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Agree turns each rank's error into one outcome every rank returns.
// It returns nil when every rank passed nil. Otherwise every rank gets
// an *[AgreedError] with the same message, on one line. The message
// names what failed, the failing ranks (the first few and how many) and
// the lowest one's error. On a failing
// rank the error also wraps local, for errors.Is. Collective.
//
// Success costs one fixed-size reduction. Only after a failure do the
// messages move: the failing ranks' go to rank 0, which broadcasts the
// list of failing ranks and the lowest one's message. So no rank
// receives every rank's message. If the communicator itself fails,
// Agree returns that error joined to local.
func Agree(c Comm, local error, what string) error {
	ok := int64(1)
	if local != nil {
		ok = 0
	}
	all, err := c.AllreduceInt64(ok, Min)
	if err != nil {
		return errors.Join(local, fmt.Errorf("vote after %s: %w", what, err))
	}
	if all == 1 {
		return nil
	}
	// Only now do the failing ranks' messages move: to rank 0, which
	// broadcasts the list of failing ranks and the lowest one's message.
	var msg []byte
	if local != nil {
		msg = []byte(local.Error())
	}
	ranks, first, err := failures(c, local != nil, msg)
	if err != nil {
		return errors.Join(local, fmt.Errorf("vote after %s: %w", what, err))
	}
	e := &AgreedError{Local: local, Ranks: ranks}
	first = oneLine(first)
	if len(ranks) == 1 {
		e.Msg = fmt.Sprintf("%s failed on rank %d: %s", what, ranks[0], first)
	} else {
		e.Msg = fmt.Sprintf("%s failed on %s; rank %d: %s", what, rankList(ranks), ranks[0], first)
	}
	return e
}

// failures gathers to rank 0 which ranks failed and the message of the
// lowest one, and broadcasts both. The failing ranks travel as runs
// (first rank, length), so a failure of every rank costs every rank a
// few bytes. Collective; called once some rank has failed.
func failures(c Comm, failed bool, msg []byte) (ranks []int, first string, err error) {
	// A leading byte marks a failure, so an empty message still counts.
	var mine []byte
	if failed {
		mine = append([]byte{1}, msg...)
	}
	all, err := GathervBytes(c, 0, mine)
	if err != nil {
		return nil, "", err
	}
	var sum []byte
	if c.Rank() == 0 {
		var runs []int // pairs of (first rank, length)
		for r, m := range all {
			if len(m) == 0 {
				continue
			}
			if k := len(runs); k > 0 && runs[k-2]+runs[k-1] == r {
				runs[k-1]++
				continue
			}
			if runs == nil {
				first = string(m[1:])
			}
			runs = append(runs, r, 1)
		}
		sum = binary.AppendUvarint(nil, uint64(len(runs)/2))
		for _, v := range runs {
			sum = binary.AppendUvarint(sum, uint64(v))
		}
		sum = append(sum, first...)
	}
	if sum, err = BcastBytes(c, 0, sum); err != nil {
		return nil, "", err
	}
	return decodeFailures(sum, c.Size())
}

// decodeFailures reads what failures broadcast in a communicator of
// size ranks: runs that ascend, apart, inside [0, size).
func decodeFailures(b []byte, size int) (ranks []int, first string, err error) {
	bad := fmt.Errorf("%w: malformed list of failing ranks", ErrBadArgument)
	next := func() (int, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > uint64(size) {
			return 0, false
		}
		b = b[n:]
		return int(v), true
	}
	runs, ok := next()
	if !ok || runs == 0 {
		return nil, "", bad
	}
	end := -1 // one past the previous run
	for range runs {
		lo, ok1 := next()
		n, ok2 := next()
		if !ok1 || !ok2 || n == 0 || lo <= end || lo+n > size {
			return nil, "", bad
		}
		for r := lo; r < lo+n; r++ {
			ranks = append(ranks, r)
		}
		end = lo + n
	}
	return ranks, string(b), nil
}

// ranksShown is how many ranks a message lists before it counts the rest.
const ranksShown = 8

// rankList says "N ranks (a, b, ...)", listing at most ranksShown of
// them, so that a failure on every rank of a large job stays one short
// line.
func rankList(ranks []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d ranks (", len(ranks))
	for i, r := range ranks[:min(len(ranks), ranksShown)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, r)
	}
	if n := len(ranks) - ranksShown; n > 0 {
		fmt.Fprintf(&b, " and %d more", n)
	}
	b.WriteString(")")
	return b.String()
}

// oneLine joins the lines of msg (errors.Join's) with "; ".
func oneLine(msg string) string {
	return strings.ReplaceAll(strings.TrimRight(msg, "\n"), "\n", "; ")
}

// AgreedError is an error the ranks share after a collective step.
// Msg is the same on every rank. On a rank that failed, Local is its own
// error and Unwrap returns it; elsewhere Local is nil.
type AgreedError struct {
	// Msg is the shared message.
	Msg string
	// Ranks lists the failing ranks in order (nil when not known).
	Ranks []int
	// Local is this rank's own error, nil on a rank that succeeded.
	Local error
}

// Error returns the shared message.
func (e *AgreedError) Error() string { return e.Msg }

// Unwrap returns this rank's own error (nil on a rank that succeeded).
func (e *AgreedError) Unwrap() error { return e.Local }
