package ckpt

import "github.com/ftigo/ftigo/comm"

// allreduceInts combines vals element by element over every rank with
// op: one vector reduction when the communicator has the Reducer
// capability, else one fixed-size reduction per value (comm.Allreduce's
// own fallback gathers every rank's vector).
func allreduceInts(c comm.Comm, vals []int64, op comm.Op) ([]int64, error) {
	out := make([]int64, len(vals))
	if _, ok := c.(comm.Reducer); ok {
		return out, comm.Allreduce(c, vals, out, op)
	}
	for i, v := range vals {
		x, err := c.AllreduceInt64(v, op)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}
