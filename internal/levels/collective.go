package levels

import (
	"errors"
	"fmt"

	"github.com/ftigo/ftigo/comm"
)

// vote combines ok over all ranks: true only if every rank passed true.
func vote(c comm.Comm, ok bool) (bool, error) {
	v := int64(0)
	if ok {
		v = 1
	}
	r, err := c.AllreduceInt64(v, comm.Min)
	if err != nil {
		return false, fmt.Errorf("vote: %w", err)
	}
	return r == 1, nil
}

// Agree turns a per-rank error into an error every rank returns: nil when
// every rank passed nil, otherwise the same message on every rank, naming
// what failed, the failing ranks and the first one's error. On a failing
// rank the result also wraps its local error for errors.Is. Collective.
func Agree(c comm.Comm, local error, what string) error {
	ok, err := vote(c, local == nil)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	msg := ""
	if local != nil {
		msg = local.Error()
	}
	all, err := comm.AllgatherBytes(c, []byte(msg))
	if err != nil {
		return err
	}
	var ranks []int
	first := ""
	for r, b := range all {
		if len(b) > 0 {
			if first == "" {
				first = fmt.Sprintf("rank %d: %s", r, b)
			}
			ranks = append(ranks, r)
		}
	}
	agreed := fmt.Errorf("%s failed on ranks %v; %s", what, ranks, first)
	if local != nil {
		return &agreedError{msg: agreed.Error(), local: local}
	}
	return errors.New(agreed.Error())
}

// agreedError carries the message every rank shares and, on the ranks
// that failed, the local error for errors.Is.
type agreedError struct {
	msg   string
	local error
}

func (a *agreedError) Error() string { return a.msg }
func (a *agreedError) Unwrap() error { return a.local }
