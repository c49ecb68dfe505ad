package levels

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ftigo/ftigo/comm"
)

// The metadata's collective paths move data between a part's ranks and
// its leader, and between the leaders and rank 0, point to point: no
// rank receives more than its part's ranks' messages, and rank 0 one
// message per part. Agreement is a fixed-size reduction.

// Message tags of the metadata transfers, apart from partner's 0x66xx.
const (
	tagPartList    = 0x6700 // a rank's file list, to its leader
	tagPartRef     = 0x6701 // a leader's part reference, to rank 0
	tagPartOrder   = 0x6702 // what rank 0 tells a leader at start-up
	tagPartForward = 0x6703 // what a leader hands its ranks at start-up
	tagFacts       = 0x6704 // a rank's findings, to rank 0, after a failure
)

// maxMessage bounds a metadata message a rank accepts.
const maxMessage = MaxManifestSize

// sendBytes sends b to dst on tag: an 8-byte length, then the bytes
// (one message each).
func sendBytes(c comm.Comm, dst, tag int, b []byte) error {
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], uint64(len(b)))
	if err := c.Send(dst, tag, h[:]); err != nil {
		return err
	}
	if len(b) == 0 {
		return nil
	}
	if len(b) > maxMessage {
		return fmt.Errorf("%w: %d-byte metadata message to rank %d", comm.ErrBadArgument, len(b), dst)
	}
	return c.Send(dst, tag, b)
}

// recvBytes receives a [sendBytes] message from src.
func recvBytes(c comm.Comm, src, tag int) ([]byte, error) {
	var h [8]byte
	if _, err := c.Recv(src, tag, h[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(h[:])
	if n > maxMessage {
		return nil, fmt.Errorf("%w: %d-byte metadata message from rank %d", comm.ErrBadArgument, n, src)
	}
	if n == 0 {
		return nil, nil
	}
	b := make([]byte, n)
	got, err := c.Recv(src, tag, b)
	if err == nil && uint64(got) != n {
		err = fmt.Errorf("%w: %d of %d bytes from rank %d", comm.ErrBadArgument, got, n, src)
	}
	return b, err
}

// toLeader sends mine to the leader of this rank's part, which returns
// the messages of every rank of the part in rank order (its own first).
// Collective over the part.
func toLeader(c comm.Comm, lay layout, tag int, mine []byte) ([][]byte, error) {
	me := c.Rank()
	ld := lay.leader(me)
	if me != ld {
		return nil, sendBytes(c, ld, tag, mine)
	}
	out := make([][]byte, lay.count(lay.index(me)))
	out[0] = mine
	for j := 1; j < len(out); j++ {
		b, err := recvBytes(c, ld+j, tag)
		if err != nil {
			return nil, fmt.Errorf("receive from rank %d: %w", ld+j, err)
		}
		out[j] = b
	}
	return out, nil
}

// fromLeader hands each rank of the leader's part its message (parts,
// in rank order, on the leader) and returns this rank's. Collective
// over the part.
func fromLeader(c comm.Comm, lay layout, tag int, parts [][]byte) ([]byte, error) {
	me := c.Rank()
	ld := lay.leader(me)
	if me != ld {
		b, err := recvBytes(c, ld, tag)
		if err != nil {
			return nil, fmt.Errorf("receive from rank %d: %w", ld, err)
		}
		return b, nil
	}
	if len(parts) != lay.count(lay.index(me)) {
		return nil, errors.New("levels: fromLeader: one message per rank of the part")
	}
	for j := 1; j < len(parts); j++ {
		if err := sendBytes(c, ld+j, tag, parts[j]); err != nil {
			return nil, fmt.Errorf("send to rank %d: %w", ld+j, err)
		}
	}
	return parts[0], nil
}

// leadersToRoot sends each leader's mine to rank 0, which returns them
// by part index. Other ranks send nothing. Collective.
func leadersToRoot(c comm.Comm, lay layout, tag int, mine []byte) ([][]byte, error) {
	me := c.Rank()
	if me != 0 {
		if lay.isLeader(me) {
			return nil, sendBytes(c, 0, tag, mine)
		}
		return nil, nil
	}
	out := make([][]byte, lay.parts())
	out[0] = mine
	for i := 1; i < len(out); i++ {
		b, err := recvBytes(c, lay.first(i), tag)
		if err != nil {
			return nil, fmt.Errorf("receive from rank %d: %w", lay.first(i), err)
		}
		out[i] = b
	}
	return out, nil
}

// rootToLeaders sends part i's message (parts, on rank 0) to the leader
// of part i and returns this leader's; other ranks get nil. Collective.
func rootToLeaders(c comm.Comm, lay layout, tag int, parts [][]byte) ([]byte, error) {
	me := c.Rank()
	if me != 0 {
		if !lay.isLeader(me) {
			return nil, nil
		}
		b, err := recvBytes(c, 0, tag)
		if err != nil {
			return nil, fmt.Errorf("receive from rank 0: %w", err)
		}
		return b, nil
	}
	if len(parts) != lay.parts() {
		return nil, errors.New("levels: rootToLeaders: one message per part")
	}
	for i := 1; i < len(parts); i++ {
		if err := sendBytes(c, lay.first(i), tag, parts[i]); err != nil {
			return nil, fmt.Errorf("send to rank %d: %w", lay.first(i), err)
		}
	}
	return parts[0], nil
}

// packBytes concatenates bs, each behind its 8-byte length.
func packBytes(bs [][]byte) []byte {
	n := 8
	for _, b := range bs {
		n += 8 + len(b)
	}
	out := make([]byte, 0, n)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(bs)))
	for _, b := range bs {
		out = binary.LittleEndian.AppendUint64(out, uint64(len(b)))
		out = append(out, b...)
	}
	return out
}

// unpackBytes splits a [packBytes] message.
func unpackBytes(b []byte) ([][]byte, error) {
	if len(b) < 8 {
		return nil, errors.New("levels: short packed message")
	}
	n := binary.LittleEndian.Uint64(b)
	b = b[8:]
	if n > uint64(len(b))/8 {
		return nil, errors.New("levels: bad packed message")
	}
	out := make([][]byte, n)
	for i := range out {
		if len(b) < 8 {
			return nil, errors.New("levels: short packed message")
		}
		l := binary.LittleEndian.Uint64(b)
		b = b[8:]
		if l > uint64(len(b)) {
			return nil, errors.New("levels: short packed message")
		}
		out[i], b = b[:l:l], b[l:]
	}
	if len(b) != 0 {
		return nil, errors.New("levels: trailing bytes in a packed message")
	}
	return out, nil
}
