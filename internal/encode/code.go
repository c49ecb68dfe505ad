package encode

import (
	"fmt"

	"github.com/klauspost/reedsolomon"
)

// MaxShards is the largest k+m supported (GF(2^8) Cauchy code).
const MaxShards = 256

// Options tune a [Code].
type Options struct {
	// MaxGoroutines bounds the goroutines one Encode/Reconstruct call may
	// use; 0 lets the library decide, 1 measures a single core.
	MaxGoroutines int
}

// Code is a systematic Reed-Solomon code with k data and m parity shards
// over GF(2^8) with a Cauchy matrix: any k of the k+m shards rebuild all of
// them. A Code is safe for concurrent use.
type Code struct {
	k, m       int
	goroutines int
	enc        reedsolomon.Encoder
}

// New returns a code with k data shards and m parity shards; m = 0 means
// m = k (FTI's default: any k of the 2k shards may be lost).
func New(k, m int) (*Code, error) { return NewWith(k, m, Options{}) }

// NewWith is [New] with options.
func NewWith(k, m int, o Options) (*Code, error) {
	if m == 0 {
		m = k
	}
	if k < 1 || m < 1 || k+m > MaxShards {
		return nil, fmt.Errorf("%w: k=%d m=%d; need k>=1, m>=1, k+m<=%d", ErrBadShape, k, m, MaxShards)
	}
	opts := []reedsolomon.Option{reedsolomon.WithCauchyMatrix()}
	if o.MaxGoroutines > 0 {
		opts = append(opts, reedsolomon.WithMaxGoroutines(o.MaxGoroutines))
	}
	enc, err := reedsolomon.New(k, m, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadShape, err)
	}
	return &Code{k: k, m: m, goroutines: o.MaxGoroutines, enc: enc}, nil
}

// K is the number of data shards.
func (c *Code) K() int { return c.k }

// M is the number of parity shards.
func (c *Code) M() int { return c.m }

func sameLen(what string, shards [][]byte, n, want int) (int, error) {
	if len(shards) != want {
		return 0, fmt.Errorf("%w: %d %s shards, want %d", ErrBadShape, len(shards), what, want)
	}
	for i, s := range shards {
		if n < 0 {
			n = len(s)
		}
		if len(s) != n {
			return 0, fmt.Errorf("%w: %s shard %d has %d bytes, want %d", ErrBadShape, what, i, len(s), n)
		}
	}
	return n, nil
}

// EncodeBlock computes the m parity blocks of k equally long data blocks
// into parity (m buffers of the same length, overwritten).
func (c *Code) EncodeBlock(data, parity [][]byte) error {
	n, err := sameLen("data", data, -1, c.k)
	if err != nil {
		return err
	}
	if _, err := sameLen("parity", parity, n, c.m); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	shards := make([][]byte, 0, c.k+c.m)
	shards = append(append(shards, data...), parity...)
	return c.enc.Encode(shards)
}

// Reconstruct rebuilds the shards marked lost. shards holds k+m blocks
// (data first); lost[i] marks shard i as erased, and its buffer (which must
// have the block length, contents ignored) receives the rebuilt bytes. More
// than m lost shards return an *ErasureError wrapping [ErrTooManyErasures]
// and leave every buffer untouched.
func (c *Code) Reconstruct(shards [][]byte, lost []bool) error {
	return c.ReconstructSome(shards, lost, nil)
}

// ReconstructSome is [Code.Reconstruct] for the lost shards marked in
// want only (nil: every lost shard). Their buffers receive the rebuilt
// bytes; the other lost shards' buffers are left as they are. A lost
// parity shard is computed straight from the surviving shards. So a
// caller that needs two of four lost shards decodes two, not four. An
// L3 rebuild is such a caller: each member that lost its files rebuilds
// its own data and parity units. The erasure limit is that of all the
// lost shards, wanted or not.
func (c *Code) ReconstructSome(shards [][]byte, lost, want []bool) error {
	if len(lost) != c.k+c.m || (want != nil && len(want) != len(lost)) {
		return fmt.Errorf("%w: %d erasure flags (%d wanted), want %d", ErrBadShape, len(lost), len(want), c.k+c.m)
	}
	n, err := sameLen("", shards, -1, c.k+c.m)
	if err != nil {
		return err
	}
	var gone, out []int
	for i, l := range lost {
		if l {
			gone = append(gone, i)
			if want == nil || want[i] {
				out = append(out, i)
			}
		}
	}
	if len(gone) > c.m {
		return &ErasureError{K: c.k, M: c.m, Lost: gone}
	}
	if len(out) == 0 || n == 0 {
		return nil
	}
	work := make([][]byte, len(shards))
	for i, s := range shards {
		if !lost[i] {
			work[i] = s
		} else {
			work[i] = s[:0]
		}
	}
	if want == nil {
		err = c.enc.Reconstruct(work)
	} else {
		required := make([]bool, len(lost))
		for _, i := range out {
			required[i] = true
		}
		err = c.enc.ReconstructSome(work, required)
	}
	if err != nil {
		return fmt.Errorf("reconstruct: %w", err)
	}
	for _, i := range out {
		if &work[i][0] != &shards[i][0] {
			copy(shards[i], work[i])
		}
	}
	return nil
}

// Verify reports whether the parity blocks match the data blocks.
func (c *Code) Verify(data, parity [][]byte) (bool, error) {
	n, err := sameLen("data", data, -1, c.k)
	if err != nil {
		return false, err
	}
	if _, err := sameLen("parity", parity, n, c.m); err != nil {
		return false, err
	}
	if n == 0 {
		return true, nil
	}
	shards := make([][]byte, 0, c.k+c.m)
	return c.enc.Verify(append(append(shards, data...), parity...))
}
