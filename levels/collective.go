package levels

import (
	"encoding/binary"
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

// GatherBytes gives every rank every rank's b, in rank order; the
// slices may have different lengths. Collective.
func GatherBytes(c comm.Comm, b []byte) ([][]byte, error) {
	maxLen, err := c.AllreduceInt64(int64(len(b)), comm.Max)
	if err != nil {
		return nil, fmt.Errorf("gather sizes: %w", err)
	}
	stride := int(maxLen) + 8
	send := make([]byte, stride)
	binary.LittleEndian.PutUint64(send, uint64(len(b)))
	copy(send[8:], b)
	recv := make([]byte, stride*c.Size())
	if err := c.Allgather(send, recv); err != nil {
		return nil, fmt.Errorf("gather: %w", err)
	}
	out := make([][]byte, c.Size())
	for r := range out {
		piece := recv[r*stride : (r+1)*stride]
		n := binary.LittleEndian.Uint64(piece)
		if n > uint64(maxLen) {
			return nil, fmt.Errorf("gather: rank %d sent bad length %d", r, n)
		}
		out[r] = piece[8 : 8+n]
	}
	return out, nil
}

// BcastBytes sends root's b to every rank and returns it. Collective.
func BcastBytes(c comm.Comm, root int, b []byte) ([]byte, error) {
	n := int64(0)
	if c.Rank() == root {
		n = int64(len(b))
	}
	size, err := c.AllreduceInt64(n, comm.Max)
	if err != nil {
		return nil, fmt.Errorf("bcast size: %w", err)
	}
	buf := make([]byte, size)
	if c.Rank() == root {
		copy(buf, b)
	}
	if err := c.Bcast(root, buf); err != nil {
		return nil, fmt.Errorf("bcast: %w", err)
	}
	return buf, nil
}
