package encode

import (
	"fmt"

	"github.com/klauspost/reedsolomon"
)

// Row computes one parity shard of a [Code] from data shards added one at
// a time: parity j = sum over i of C[j][i]·data_i in GF(2^8). It is what a
// group member owning parity j uses when the data blocks travel around
// the ring (FTI's L3 scheme): one multiply-add per received block, no
// partial sums to exchange. Safe for concurrent use.
type Row struct {
	k, j int
	enc  reedsolomon.Encoder
}

// matrix returns the m×k parity rows of c, read off by encoding unit
// vectors (1-byte shards), so it is exactly the library's matrix.
func (c *Code) matrix() ([][]byte, error) {
	rows := make([][]byte, c.m)
	for j := range rows {
		rows[j] = make([]byte, c.k)
	}
	data, parity := make([][]byte, c.k), make([][]byte, c.m)
	for i := range data {
		data[i] = []byte{0}
	}
	for j := range parity {
		parity[j] = []byte{0}
	}
	for i := range c.k {
		data[i][0] = 1
		if err := c.EncodeBlock(data, parity); err != nil {
			return nil, err
		}
		for j := range c.m {
			rows[j][i] = parity[j][0]
		}
		data[i][0] = 0
	}
	return rows, nil
}

// Row returns the encoder of parity shard j.
func (c *Code) Row(j int) (*Row, error) {
	if j < 0 || j >= c.m {
		return nil, fmt.Errorf("%w: parity row %d of %d", ErrBadShape, j, c.m)
	}
	rows, err := c.matrix()
	if err != nil {
		return nil, err
	}
	// One goroutine unless asked otherwise: a row is computed by each
	// group member at once, one per core already.
	opts := []reedsolomon.Option{reedsolomon.WithCustomMatrix([][]byte{rows[j]}), reedsolomon.WithMaxGoroutines(max(c.goroutines, 1))}
	enc, err := reedsolomon.New(c.k, 1, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadShape, err)
	}
	return &Row{k: c.k, j: j, enc: enc}, nil
}

// Add adds C[j][idx]·data to acc (len(acc) == len(data)). Start from a
// zeroed acc and add every data shard exactly once.
func (r *Row) Add(data []byte, idx int, acc []byte) error {
	if idx < 0 || idx >= r.k || len(acc) != len(data) {
		return fmt.Errorf("%w: Row.Add shard %d of %d, %d bytes into %d", ErrBadShape, idx, r.k, len(data), len(acc))
	}
	if len(data) == 0 {
		return nil
	}
	return r.enc.EncodeIdx(data, idx, [][]byte{acc})
}

// Combine sets acc to the parity of the data shards data[i], data[i] being
// shard idx[i] (every shard at most once, all of len(acc) bytes; shards
// not listed count as zero): acc = sum over i of C[j][idx[i]]·data[i].
// It computes what k calls of [Row.Add] into a zeroed acc do, in one
// pass over acc. When every shard is present it reads the k shards
// together and writes acc once. It uses the library's k-input kernels
// (GFNI where the CPU has it). That is several times faster per byte
// than k multiply-adds, each of which reads and writes acc again.
func (r *Row) Combine(data [][]byte, idx []int, acc []byte) error {
	if len(data) != len(idx) {
		return fmt.Errorf("%w: Row.Combine of %d shards with %d indexes", ErrBadShape, len(data), len(idx))
	}
	byIdx := make([][]byte, r.k)
	for i, d := range data {
		if idx[i] < 0 || idx[i] >= r.k || byIdx[idx[i]] != nil || len(d) != len(acc) {
			return fmt.Errorf("%w: Row.Combine shard %d of %d (%d bytes into %d), given twice or out of range", ErrBadShape, idx[i], r.k, len(d), len(acc))
		}
		byIdx[idx[i]] = d
	}
	if len(acc) == 0 {
		return nil
	}
	if len(data) == r.k {
		return r.enc.Encode(append(byIdx, acc))
	}
	clear(acc)
	for i, d := range data {
		if err := r.Add(d, idx[i], acc); err != nil {
			return err
		}
	}
	return nil
}
