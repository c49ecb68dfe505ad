package comm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"slices"
)

// DefaultChunk is the block size of the chunked transfers when the caller
// passes chunk <= 0: 1 MiB, FTI's default block size.
const DefaultChunk = 1 << 20

// MaxCount is the largest message a single call may carry under MPI (a C
// int count of bytes). The chunked helpers never exceed it.
const MaxCount = math.MaxInt32

func chunkSize(chunk int) int {
	if chunk <= 0 {
		return DefaultChunk
	}
	return min(chunk, MaxCount)
}

// AllgatherBytes gathers a byte slice of any length from every rank and
// returns them in rank order on every rank. It costs two Allgathers: the
// lengths, then the data padded to the longest.
func AllgatherBytes(c Comm, b []byte) ([][]byte, error) {
	n := c.Size()
	var lb [8]byte
	binary.LittleEndian.PutUint64(lb[:], uint64(len(b)))
	lens := make([]byte, 8*n)
	if err := c.Allgather(lb[:], lens); err != nil {
		if errors.Is(err, ErrAborted) {
			return nil, err // the cause says it all
		}
		return nil, fmt.Errorf("allgather lengths: %w", err)
	}
	maxLen := 0
	sizes := make([]int, n)
	for i := range sizes {
		v := binary.LittleEndian.Uint64(lens[8*i:])
		if v > MaxCount {
			return nil, fmt.Errorf("%w: AllgatherBytes: rank %d has %d bytes (limit %d)", ErrBadArgument, i, v, MaxCount)
		}
		sizes[i] = int(v)
		maxLen = max(maxLen, sizes[i])
	}
	send := make([]byte, maxLen)
	copy(send, b)
	recv := make([]byte, maxLen*n)
	if err := c.Allgather(send, recv); err != nil {
		return nil, fmt.Errorf("allgather data: %w", err)
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = recv[i*maxLen : i*maxLen+sizes[i] : i*maxLen+sizes[i]]
	}
	return out, nil
}

// BcastBytes broadcasts root's b, of any length, and returns it on every
// rank (on root, b itself). Other ranks' b is ignored.
func BcastBytes(c Comm, root int, b []byte) ([]byte, error) {
	var lb [8]byte
	if c.Rank() == root {
		binary.LittleEndian.PutUint64(lb[:], uint64(len(b)))
	}
	if err := c.Bcast(root, lb[:]); err != nil {
		return nil, fmt.Errorf("bcast length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lb[:])
	if c.Rank() == root {
		return b, bcastChunked(c, root, b)
	}
	if n > math.MaxInt {
		return nil, fmt.Errorf("%w: BcastBytes: length %d", ErrBadArgument, n)
	}
	buf := make([]byte, n)
	if err := bcastChunked(c, root, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

func bcastChunked(c Comm, root int, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	for off := 0; off < len(buf); off += MaxCount {
		end := min(off+MaxCount, len(buf))
		if err := c.Bcast(root, buf[off:end]); err != nil {
			return fmt.Errorf("bcast data: %w", err)
		}
	}
	return nil
}

// chunked transfers start with an 8-byte little-endian header carrying the
// total length, then the data in blocks of at most chunk bytes, all on the
// same tag.

// SendChunked sends buf to dst in blocks of chunk bytes (DefaultChunk when
// chunk <= 0) so that neither side needs more than one block in flight and
// no single call exceeds MaxCount. The receiver must call [RecvChunked]
// with the same chunk; a mismatch fails with ErrBadArgument or ErrTruncated.
func SendChunked(c Comm, dst, tag int, buf []byte, chunk int) error {
	chunk = chunkSize(chunk)
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], uint64(len(buf)))
	if err := c.Send(dst, tag, h[:]); err != nil {
		return fmt.Errorf("send length: %w", err)
	}
	for off := 0; off < len(buf); off += chunk {
		if err := c.Send(dst, tag, buf[off:min(off+chunk, len(buf))]); err != nil {
			return fmt.Errorf("send block at %d: %w", off, err)
		}
	}
	return nil
}

// RecvChunked receives a [SendChunked] transfer into buf and returns its
// length. A transfer longer than buf is refused with ErrTruncated before any
// data moves — and then the sender's blocks are still pending, so the
// caller must treat the error as fatal to the job.
func RecvChunked(c Comm, src, tag int, buf []byte, chunk int) (int, error) {
	chunk = chunkSize(chunk)
	var h [8]byte
	if _, err := c.Recv(src, tag, h[:]); err != nil {
		return 0, fmt.Errorf("recv length: %w", err)
	}
	total, err := headerLen(h, len(buf), src)
	if err != nil {
		return 0, err
	}
	for off := 0; off < total; off += chunk {
		if _, err := recvExact(c, src, tag, buf[off:min(off+chunk, total)]); err != nil {
			return off, fmt.Errorf("recv block at %d: %w", off, err)
		}
	}
	return total, nil
}

func headerLen(h [8]byte, capacity, src int) (int, error) {
	v := binary.LittleEndian.Uint64(h[:])
	if v > uint64(capacity) {
		return 0, fmt.Errorf("%w: %d-byte chunked transfer from rank %d into a %d-byte buffer",
			ErrTruncated, v, src, capacity)
	}
	return int(v), nil
}

func recvExact(c Comm, src, tag int, b []byte) (int, error) {
	n, err := c.Recv(src, tag, b)
	if err == nil {
		err = checkBlock(n, len(b), src)
	}
	return n, err
}

// checkBlock refuses a chunked-transfer block of n bytes from src when
// want were due: both sides must have used the same chunk size.
func checkBlock(n, want, src int) error {
	if n != want {
		return fmt.Errorf("%w: short block of %d bytes from rank %d, want %d", ErrBadArgument, n, src, want)
	}
	return nil
}

// SendrecvChunked sends send to dst and receives from src into recv, both in
// blocks of chunk bytes (DefaultChunk when chunk <= 0), and returns the
// received length. Every block moves with one Sendrecv (or a plain Send or
// Recv once one direction has no blocks left), so a ring or pair exchange
// of any size cannot deadlock and never needs more than one block in flight.
// A transfer longer than recv fails with ErrTruncated; the job must then be
// aborted, because the peer's blocks are still pending.
func SendrecvChunked(c Comm, send []byte, dst int, recv []byte, src, tag, chunk int) (int, error) {
	chunk = chunkSize(chunk)
	var hs, hr [8]byte
	binary.LittleEndian.PutUint64(hs[:], uint64(len(send)))
	if _, err := c.Sendrecv(hs[:], dst, tag, hr[:], src, tag); err != nil {
		return 0, fmt.Errorf("exchange lengths: %w", err)
	}
	total, err := headerLen(hr, len(recv), src)
	if err != nil {
		return 0, err
	}
	ns := (len(send) + chunk - 1) / chunk
	nr := (total + chunk - 1) / chunk
	for i := range max(ns, nr) {
		off := i * chunk
		switch {
		case i < ns && i < nr:
			sb := send[off:min(off+chunk, len(send))]
			rb := recv[off:min(off+chunk, total)]
			n, err := c.Sendrecv(sb, dst, tag, rb, src, tag)
			if err == nil {
				err = checkBlock(n, len(rb), src)
			}
			if err != nil {
				return off, fmt.Errorf("exchange block at %d: %w", off, err)
			}
		case i < ns:
			if err := c.Send(dst, tag, send[off:min(off+chunk, len(send))]); err != nil {
				return total, fmt.Errorf("send block at %d: %w", off, err)
			}
		default:
			if _, err := recvExact(c, src, tag, recv[off:min(off+chunk, total)]); err != nil {
				return off, fmt.Errorf("recv block at %d: %w", off, err)
			}
		}
	}
	return total, nil
}

// NodeMap tells which ranks of c share a node. nodeID names this rank's
// node; when it is nil, a [NodeIDer] communicator names it (the in-process
// world's simulated nodes), else the host name is used. Nodes are numbered
// in the order of their lowest rank; nodes[k] lists the ranks on node k in
// increasing order, and myNode is this rank's node. Every rank must call it.
//
// Every rank receives every rank's node name: O(Size()) per rank. At
// scale use [SplitNode], which hands each rank only its own node.
func NodeMap(c Comm, nodeID func() string) (nodes [][]int, myNode int, err error) {
	id, err := nodeName(c, nodeID)
	if err != nil {
		return nil, 0, fmt.Errorf("node map: %w", err)
	}
	ids, err := AllgatherBytes(c, []byte(id))
	if err != nil {
		return nil, 0, fmt.Errorf("node map: %w", err)
	}
	index := map[string]int{}
	for r, b := range ids {
		k, ok := index[string(b)]
		if !ok {
			k = len(nodes)
			index[string(b)] = k
			nodes = append(nodes, nil)
		}
		nodes[k] = append(nodes[k], r)
	}
	return nodes, index[id], nil
}

// nodeName names this rank's node: nodeID when it is not nil, else the
// [NodeIDer] capability, else the host name.
func nodeName(c Comm, nodeID func() string) (string, error) {
	if nodeID != nil {
		return nodeID(), nil
	}
	if ni, ok := c.(NodeIDer); ok {
		return ni.NodeID(), nil
	}
	id, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("host name: %w", err)
	}
	return id, nil
}

// SplitNode splits c into one communicator per node: node holds the
// ranks of this rank's node, in rank order. Nodes are numbered as
// [NodeMap] numbers them, in the order of their lowest rank: index is
// this node's number and count the number of nodes. nodeID names the
// node as for NodeMap. Every rank must call it; the caller closes node.
//
// No rank receives another node's names. The ranks split by a hash of
// the name, then compare names within their hash group (one node,
// unless two names collide), then the lowest rank of every node learns
// its index from a split of the nodes' lowest ranks. So it costs three
// Splits, an [AllgatherBytes] within the hash group and a 16-byte
// Bcast within the node.
func SplitNode(c Comm, nodeID func() string) (node Comm, index, count int, err error) {
	id, err := nodeName(c, nodeID)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("split by node: %w", err)
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	group, err := c.Split(int(h.Sum32()&0x3fffffff), c.Rank())
	if err != nil {
		return nil, 0, 0, fmt.Errorf("split by node: hash group: %w", err)
	}
	names, err := AllgatherBytes(group, []byte(id))
	if err == nil {
		// Names that collide in the hash part by their first rank.
		first := slices.IndexFunc(names, func(b []byte) bool { return string(b) == id })
		node, err = group.Split(first, group.Rank())
	}
	if cerr := group.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if node != nil {
			_ = node.Close()
		}
		return nil, 0, 0, fmt.Errorf("split by node: %w", err)
	}
	color := -1
	if node.Rank() == 0 {
		color = 0
	}
	leaders, err := c.Split(color, c.Rank())
	if err != nil {
		return nil, 0, 0, errors.Join(fmt.Errorf("split by node: the nodes' first ranks: %w", err), node.Close())
	}
	var b [16]byte
	if leaders != nil {
		binary.LittleEndian.PutUint64(b[:], uint64(leaders.Rank()))
		binary.LittleEndian.PutUint64(b[8:], uint64(leaders.Size()))
	}
	err = node.Bcast(0, b[:])
	if leaders != nil {
		err = errors.Join(err, leaders.Close())
	}
	if err != nil {
		return nil, 0, 0, errors.Join(fmt.Errorf("split by node: number the nodes: %w", err), node.Close())
	}
	return node, int(binary.LittleEndian.Uint64(b[:])), int(binary.LittleEndian.Uint64(b[8:])), nil
}
