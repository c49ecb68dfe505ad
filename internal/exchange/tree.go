package exchange

import (
	"encoding/binary"
	"fmt"

	"github.com/ftigo/ftigo/comm"
)

// maxValue bounds a value [Merge] receives from a child.
const maxValue = 1 << 30

// Merge combines every rank's value and returns the result, the same
// on every rank. merge(lo, hi) combines the value of a block of ranks
// with that of the block just above it; it must not keep or change its
// arguments' bytes. The values go up a binomial tree to rank 0, and the
// result is broadcast. Collective: a rank receives at most ceil(log2 P)
// values and the result.
func Merge(c comm.Comm, tag int, mine []byte, merge func(lo, hi []byte) []byte) ([]byte, error) {
	p, me := c.Size(), c.Rank()
	acc := mine
	for mask := 1; mask < p; mask <<= 1 {
		if me&mask != 0 {
			if err := sendValue(c, me-mask, tag, acc); err != nil {
				return nil, fmt.Errorf("exchange: merge: to rank %d: %w", me-mask, err)
			}
			break
		}
		if me+mask < p {
			hi, err := recvValue(c, me+mask, tag)
			if err != nil {
				return nil, fmt.Errorf("exchange: merge: from rank %d: %w", me+mask, err)
			}
			acc = merge(acc, hi)
		}
	}
	out, err := comm.BcastBytes(c, 0, acc)
	if err != nil {
		return nil, fmt.Errorf("exchange: merge: broadcast: %w", err)
	}
	return out, nil
}

func sendValue(c comm.Comm, dst, tag int, b []byte) error {
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], uint64(len(b)))
	if err := c.Send(dst, tag, h[:]); err != nil {
		return err
	}
	return comm.SendChunked(c, dst, tag, b, 0)
}

func recvValue(c comm.Comm, src, tag int) ([]byte, error) {
	var h [8]byte
	if _, err := c.Recv(src, tag, h[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(h[:])
	if n > maxValue {
		return nil, fmt.Errorf("%w: %d-byte value from rank %d (at most %d)", ErrBadMessage, n, src, maxValue)
	}
	b := make([]byte, n)
	if _, err := comm.RecvChunked(c, src, tag, b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// ExScan returns the sum of v over the ranks below this one (0 on rank
// 0). Collective: ceil(log2 P) rounds of 8-byte transfers.
func ExScan(c comm.Comm, tag int, v int64) (int64, error) {
	p, me := c.Size(), c.Rank()
	incl := v // the sum over ranks (me-d, me]
	for d := 1; d < p; d <<= 1 {
		var sb, rb [8]byte
		binary.LittleEndian.PutUint64(sb[:], uint64(incl))
		var err error
		switch up, down := me+d < p, me-d >= 0; {
		case up && down:
			_, err = c.Sendrecv(sb[:], me+d, tag, rb[:], me-d, tag)
		case up:
			err = c.Send(me+d, tag, sb[:])
		case down:
			_, err = c.Recv(me-d, tag, rb[:])
		}
		if err != nil {
			return 0, fmt.Errorf("exchange: scan: round at distance %d: %w", d, err)
		}
		if me-d >= 0 {
			incl += int64(binary.LittleEndian.Uint64(rb[:]))
		}
	}
	return incl - v, nil
}

// Reply answers the ranks that asked this rank something: asked lists
// the ranks this rank asked (it waits for one answer from each, maybe
// empty), answers the answer for each rank that asked it. The answers go
// straight to the askers, not routed: a length, then the bytes.
// Collective over the askers and the asked.
func Reply(c comm.Comm, tag int, asked []int, answers map[int][]byte) (map[int][]byte, error) {
	lens := make([][8]byte, len(asked))
	var reqs []comm.Request
	for i, q := range asked {
		req, err := comm.Irecv(c, q, tag, lens[i][:])
		if err != nil {
			return nil, fmt.Errorf("exchange: reply: receive from rank %d: %w", q, err)
		}
		reqs = append(reqs, req)
	}
	heads := make(map[int][]byte, len(answers))
	for q, b := range answers {
		heads[q] = binary.LittleEndian.AppendUint64(nil, uint64(len(b)))
		req, err := comm.Isend(c, q, tag, heads[q])
		if err != nil {
			return nil, fmt.Errorf("exchange: reply: send to rank %d: %w", q, err)
		}
		reqs = append(reqs, req)
	}
	if err := comm.WaitAll(reqs...); err != nil {
		return nil, fmt.Errorf("exchange: reply: lengths: %w", err)
	}
	out := make(map[int][]byte, len(asked))
	reqs = reqs[:0]
	for i, q := range asked {
		n := binary.LittleEndian.Uint64(lens[i][:])
		if n > maxValue {
			return nil, fmt.Errorf("%w: a %d-byte answer from rank %d", ErrBadMessage, n, q)
		}
		out[q] = make([]byte, n)
		if n == 0 {
			continue
		}
		req, err := comm.Irecv(c, q, tag, out[q])
		if err != nil {
			return nil, fmt.Errorf("exchange: reply: receive from rank %d: %w", q, err)
		}
		reqs = append(reqs, req)
	}
	for q, b := range answers {
		if len(b) == 0 {
			continue
		}
		req, err := comm.Isend(c, q, tag, b)
		if err != nil {
			return nil, fmt.Errorf("exchange: reply: send to rank %d: %w", q, err)
		}
		reqs = append(reqs, req)
	}
	if err := comm.WaitAll(reqs...); err != nil {
		return nil, fmt.Errorf("exchange: reply: answers: %w", err)
	}
	return out, nil
}
