package exchange

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/ftigo/ftigo/comm"
)

// ErrBadMessage is a message this package cannot route or decode: a
// destination out of range, or a transfer that does not parse.
var ErrBadMessage = errors.New("exchange: bad message")

// Msg is one message of [Sparse]. Peer is the destination when it is
// sent, the source when it is received.
type Msg struct {
	Peer int
	Data []byte
}

// ByPeer turns messages kept by destination into [Msg]s, in rank order.
func ByPeer(out map[int][]byte) []Msg {
	msgs := make([]Msg, 0, len(out))
	for dst, b := range out {
		msgs = append(msgs, Msg{Peer: dst, Data: b})
	}
	slices.SortFunc(msgs, func(a, b Msg) int { return a.Peer - b.Peer })
	return msgs
}

// item is a message in transit. A message travels the shorter way round
// the ring of ranks: up (back false) or down.
type item struct {
	src, dst int
	back     bool
	data     []byte
}

// left returns how far the item still travels from rank at, in its
// direction.
func (it item) left(at, p int) int {
	if it.back {
		return (at - it.dst + p) % p
	}
	return (it.dst - at + p) % p
}

// itemHeader is the size of an item's header on the wire: source and
// destination (4 bytes each) and the length (8 bytes).
const itemHeader = 16

// Sparse delivers every rank's messages and returns those sent to this
// rank, by source, each source's in the order it passed them.
// Collective; ceil(log2 P) rounds of pairwise transfers of what is in
// transit, at least an 8-byte length each way per round and direction.
// A message goes the shorter way round the ring of ranks, in at most
// log2(P) hops (one hop per bit of the distance).
func Sparse(c comm.Comm, tag int, out []Msg) ([]Msg, error) {
	p, me := c.Size(), c.Rank()
	hold := make([]item, 0, len(out))
	for _, m := range out {
		if m.Peer < 0 || m.Peer >= p {
			return nil, fmt.Errorf("%w: destination rank %d of %d", ErrBadMessage, m.Peer, p)
		}
		up := (m.Peer - me + p) % p
		hold = append(hold, item{src: me, dst: m.Peer, back: p-up < up, data: m.Data})
	}
	for d := 1; d < p; d <<= 1 {
		var keep, ups, downs []item
		for _, it := range hold {
			switch {
			case it.left(me, p)&d == 0:
				keep = append(keep, it)
			case it.back:
				downs = append(downs, it)
			default:
				ups = append(ups, it)
			}
		}
		for _, dir := range []struct {
			to, from int
			items    []item
			back     bool
		}{{(me + d) % p, (me - d + p) % p, ups, false}, {(me - d + p) % p, (me + d) % p, downs, true}} {
			got, err := swap(c, tag, dir.to, dir.from, encode(dir.items))
			if err != nil {
				return nil, fmt.Errorf("exchange: round %d with ranks %d and %d: %w", bits.TrailingZeros(uint(d)), dir.to, dir.from, err)
			}
			in, err := decode(got, p)
			if err != nil {
				return nil, fmt.Errorf("exchange: from rank %d: %w", dir.from, err)
			}
			for i := range in {
				in[i].back = dir.back
			}
			keep = append(keep, in...)
		}
		hold = keep
	}
	res := make([]Msg, 0, len(hold))
	for _, it := range hold {
		if it.dst != me {
			return nil, fmt.Errorf("%w: a message for rank %d ended on rank %d", ErrBadMessage, it.dst, me)
		}
		res = append(res, Msg{Peer: it.src, Data: it.data})
	}
	slices.SortStableFunc(res, func(a, b Msg) int { return a.Peer - b.Peer })
	return res, nil
}

// chunk is the largest piece of a transfer in one call.
const chunk = 1 << 20

// swap sends b to rank to and returns what rank from sent: the lengths
// first, then the bytes in pieces of at most chunk, each direction for
// as many pieces as it needs.
func swap(c comm.Comm, tag, to, from int, b []byte) ([]byte, error) {
	var hs, hr [8]byte
	binary.LittleEndian.PutUint64(hs[:], uint64(len(b)))
	if _, err := c.Sendrecv(hs[:], to, tag, hr[:], from, tag); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(hr[:])
	if n > 1<<40 {
		return nil, fmt.Errorf("%w: %d-byte transfer", ErrBadMessage, n)
	}
	recv := make([]byte, n)
	ns, nr := (len(b)+chunk-1)/chunk, (len(recv)+chunk-1)/chunk
	for i := range max(ns, nr) {
		off := i * chunk
		var err error
		var got int
		want := 0
		switch {
		case i < ns && i < nr:
			rb := recv[off:min(off+chunk, len(recv))]
			want = len(rb)
			got, err = c.Sendrecv(b[off:min(off+chunk, len(b))], to, tag, rb, from, tag)
		case i < ns:
			err = c.Send(to, tag, b[off:min(off+chunk, len(b))])
		default:
			rb := recv[off:min(off+chunk, len(recv))]
			want = len(rb)
			got, err = c.Recv(from, tag, rb)
		}
		if err == nil && got != want {
			err = fmt.Errorf("%w: %d-byte piece at %d, want %d", ErrBadMessage, got, off, want)
		}
		if err != nil {
			return nil, err
		}
	}
	return recv, nil
}

func encode(items []item) []byte {
	if len(items) == 0 {
		return nil
	}
	n := 0
	for _, it := range items {
		n += itemHeader + len(it.data)
	}
	b := make([]byte, 0, n)
	for _, it := range items {
		b = binary.LittleEndian.AppendUint32(b, uint32(it.src))
		b = binary.LittleEndian.AppendUint32(b, uint32(it.dst))
		b = binary.LittleEndian.AppendUint64(b, uint64(len(it.data)))
		b = append(b, it.data...)
	}
	return b
}

func decode(b []byte, p int) ([]item, error) {
	var out []item
	for off := 0; off < len(b); {
		if len(b)-off < itemHeader {
			return nil, fmt.Errorf("%w: %d bytes left at offset %d, an item header has %d", ErrBadMessage, len(b)-off, off, itemHeader)
		}
		src := int(binary.LittleEndian.Uint32(b[off:]))
		dst := int(binary.LittleEndian.Uint32(b[off+4:]))
		n := binary.LittleEndian.Uint64(b[off+8:])
		off += itemHeader
		if src >= p || dst >= p || n > uint64(len(b)-off) {
			return nil, fmt.Errorf("%w: item at offset %d: source %d, destination %d, %d bytes (%d left)", ErrBadMessage, off-itemHeader, src, dst, n, len(b)-off)
		}
		out = append(out, item{src: src, dst: dst, data: b[off : off+int(n) : off+int(n)]})
		off += int(n)
	}
	return out, nil
}
