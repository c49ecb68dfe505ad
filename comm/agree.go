package comm

import (
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
// Success costs one fixed-size reduction. Only after a failure are the
// failing ranks' messages gathered. If the communicator itself fails,
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
	// A leading byte marks a failure, so an empty message still counts.
	var msg []byte
	if local != nil {
		msg = append([]byte{1}, local.Error()...)
	}
	msgs, err := AllgatherBytes(c, msg)
	if err != nil {
		return errors.Join(local, fmt.Errorf("vote after %s: %w", what, err))
	}
	e := &AgreedError{Local: local}
	first := ""
	for r, m := range msgs {
		if len(m) == 0 {
			continue
		}
		if e.Ranks == nil {
			first = oneLine(string(m[1:]))
		}
		e.Ranks = append(e.Ranks, r)
	}
	if len(e.Ranks) == 1 {
		e.Msg = fmt.Sprintf("%s failed on rank %d: %s", what, e.Ranks[0], first)
	} else {
		e.Msg = fmt.Sprintf("%s failed on %s; rank %d: %s", what, rankList(e.Ranks), e.Ranks[0], first)
	}
	return e
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
