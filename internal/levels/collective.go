package levels

import (
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
