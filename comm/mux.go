package comm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
)

// Mux hosts several virtual ranks in each process of a real communicator:
// a "virtual world" whose ranks are goroutines spread over the processes.
// ckpt uses it for FTI's head ranks, where one head process runs the
// post-processing of each application rank of its node as a goroutine
// that talks to the others as that rank would.
//
// Virtual ranks are numbered in real-rank order: the ranks hosted by real
// rank 0 first, then those of real rank 1, and so on. Each virtual Comm
// (see [Mux.Comms]) is a complete [Comm] for one goroutine: point-to-point
// messages, collectives and Split work between virtual ranks wherever they
// live. Sends are eager (a message is copied and queued; Send returns at
// once), so paired Send and Recv cannot deadlock. Messages between two
// processes travel over a pair of two-rank communicators split from the
// real one, one per direction, each used by one goroutine at each end; the
// receiving goroutine files every message in its destination's mailbox, so
// a slow reader never blocks the traffic of the others. Collectives are
// gathers to virtual rank 0 followed by its replies: simple, linear in the
// number of virtual ranks, meant for the votes and small exchanges of
// post-processing, while bulk data moves point to point.
//
// A failure of the real communicator (an aborted world) wakes every
// blocked virtual call with an error matching [ErrAborted]. [Mux.Close]
// is collective over the real communicator and ends the goroutines.
type Mux struct {
	real  Comm
	base  []int // base[h]: first virtual rank hosted by real rank h; base[H] = size
	me    int   // real rank
	comms []Comm

	mu    sync.Mutex
	cond  *sync.Cond
	boxes map[muxKey][][]byte
	err   error // set once the mux has failed or closed
	// aborted is closed when the real communicator failed: the senders
	// stop.
	aborted   chan struct{}
	abortOnce sync.Once

	out  []chan muxFrame // per peer real rank (nil for self)
	pair []Comm          // per direction comm, closed by Close
	wg   sync.WaitGroup
}

type muxKey struct {
	ctx      uint64
	src, dst int
	tag      int
}

type muxFrame struct {
	key  muxKey
	data []byte
	stop bool
}

const (
	muxHeader   = 8 * 5
	muxTagHead  = 1
	muxTagData  = 2
	tagGather   = -1
	tagReply    = -2
	muxWorldCtx = 1
)

// NewMux builds a virtual world in which this process hosts n ≥ 0 virtual
// ranks (processes may host different numbers). Collective over c, which
// the Mux then uses from its own goroutines until Close: the caller must
// not use c meanwhile.
func NewMux(c Comm, n int) (*Mux, error) {
	if c == nil || n < 0 {
		return nil, fmt.Errorf("%w: NewMux(%v, %d)", ErrBadArgument, c, n)
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	counts := make([]byte, 8*c.Size())
	if err := c.Allgather(b[:], counts); err != nil {
		return nil, fmt.Errorf("virtual world: counts: %w", err)
	}
	m := &Mux{real: c, me: c.Rank(), boxes: map[muxKey][][]byte{}, aborted: make(chan struct{})}
	m.cond = sync.NewCond(&m.mu)
	m.base = make([]int, c.Size()+1)
	for h := range c.Size() {
		m.base[h+1] = m.base[h] + int(binary.LittleEndian.Uint64(counts[8*h:]))
	}
	if m.base[c.Size()] == 0 {
		return nil, fmt.Errorf("%w: virtual world without ranks", ErrBadArgument)
	}
	H := c.Size()
	m.out = make([]chan muxFrame, H)
	type dir struct {
		c        Comm
		from, to int
	}
	var dirs []dir
	for a := range H {
		for b := range H {
			if a == b {
				continue
			}
			color := -1
			if m.me == a || m.me == b {
				color = 0
			}
			// key 0 for the sender: it is rank 0 of the pair.
			key := 1
			if m.me == a {
				key = 0
			}
			pc, err := c.Split(color, key)
			if err != nil {
				for _, d := range dirs {
					_ = d.c.Close()
				}
				return nil, fmt.Errorf("virtual world: pair communicator %d->%d: %w", a, b, err)
			}
			if pc != nil {
				dirs = append(dirs, dir{pc, a, b})
			}
		}
	}
	for _, d := range dirs {
		m.pair = append(m.pair, d.c)
		if d.from == m.me {
			ch := make(chan muxFrame, 64)
			m.out[d.to] = ch
			m.wg.Add(1)
			go m.sender(d.c, ch, d.to)
		} else {
			m.wg.Add(1)
			go m.receiver(d.c)
		}
	}
	members := make([]int, m.base[H])
	for i := range members {
		members[i] = i
	}
	for v := m.base[m.me]; v < m.base[m.me+1]; v++ {
		m.comms = append(m.comms, &vcomm{m: m, ctx: muxWorldCtx, members: members, rank: v, world: true})
	}
	return m, nil
}

// Comms returns the virtual communicators of the ranks this process hosts,
// in virtual rank order; each must be used by one goroutine at a time.
func (m *Mux) Comms() []Comm { return slices.Clone(m.comms) }

// Size is the number of virtual ranks.
func (m *Mux) Size() int { return m.base[len(m.base)-1] }

// Host returns the real rank that hosts virtual rank v.
func (m *Mux) Host(v int) int {
	h, _ := slices.BinarySearch(m.base, v+1)
	return h - 1
}

// Close ends the virtual world: every virtual call blocked or made later
// fails with [ErrClosed]. Collective over the real communicator; the
// virtual ranks should have finished talking.
func (m *Mux) Close() error {
	m.fail(ErrClosed)
	for _, ch := range m.out {
		if ch != nil {
			select {
			case ch <- muxFrame{stop: true}:
			case <-m.aborted:
			}
		}
	}
	WaitGroup(m.real, &m.wg) // the senders and receivers call m.real
	var errs []error
	for _, p := range m.pair {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// abort records a failure of the real communicator: the senders stop.
func (m *Mux) abort(err error) {
	m.fail(err)
	m.abortOnce.Do(func() { close(m.aborted) })
}

// fail records err (the first one) and wakes every waiting receiver.
func (m *Mux) fail(err error) {
	m.mu.Lock()
	if m.err == nil {
		m.err = err
	}
	m.cond.Broadcast()
	m.mu.Unlock()
}

// sender forwards this process's frames to one peer over pc (rank 1 of pc).
func (m *Mux) sender(pc Comm, ch chan muxFrame, peer int) {
	defer m.wg.Done()
	var hdr [muxHeader]byte
	for {
		var f muxFrame
		select {
		case f = <-ch:
		case <-m.aborted:
			return
		}
		putFrameHeader(hdr[:], f)
		err := pc.Send(1, muxTagHead, hdr[:])
		if err == nil && !f.stop && len(f.data) > 0 {
			err = SendChunked(pc, 1, muxTagData, f.data, 0)
		}
		if err != nil {
			m.abort(fmt.Errorf("%w: virtual world: send to process %d: %w", ErrAborted, peer, err))
			return
		}
		if f.stop {
			return
		}
	}
}

// receiver files the frames of one peer (rank 0 of pc) into mailboxes.
func (m *Mux) receiver(pc Comm) {
	defer m.wg.Done()
	var hdr [muxHeader]byte
	for {
		n, err := pc.Recv(0, muxTagHead, hdr[:])
		if err == nil && n != muxHeader {
			err = fmt.Errorf("%w: %d-byte frame header", ErrBadArgument, n)
		}
		if err != nil {
			m.abort(fmt.Errorf("%w: virtual world: receive: %w", ErrAborted, err))
			return
		}
		f := getFrameHeader(hdr[:])
		if f.stop {
			return
		}
		if len(f.data) > 0 {
			if _, err := RecvChunked(pc, 0, muxTagData, f.data, 0); err != nil {
				m.abort(fmt.Errorf("%w: virtual world: receive: %w", ErrAborted, err))
				return
			}
		}
		m.mu.Lock()
		m.boxes[f.key] = append(m.boxes[f.key], f.data)
		m.cond.Broadcast()
		m.mu.Unlock()
	}
}

func putFrameHeader(b []byte, f muxFrame) {
	stop := uint64(0)
	if f.stop {
		stop = 1
	}
	binary.LittleEndian.PutUint64(b[0:], f.key.ctx)
	binary.LittleEndian.PutUint64(b[8:], uint64(int64(f.key.src)))
	binary.LittleEndian.PutUint64(b[16:], uint64(int64(f.key.dst)))
	binary.LittleEndian.PutUint64(b[24:], uint64(int64(f.key.tag)))
	binary.LittleEndian.PutUint64(b[32:], uint64(len(f.data))<<1|stop)
}

func getFrameHeader(b []byte) muxFrame {
	var f muxFrame
	f.key.ctx = binary.LittleEndian.Uint64(b[0:])
	f.key.src = int(int64(binary.LittleEndian.Uint64(b[8:])))
	f.key.dst = int(int64(binary.LittleEndian.Uint64(b[16:])))
	f.key.tag = int(int64(binary.LittleEndian.Uint64(b[24:])))
	l := binary.LittleEndian.Uint64(b[32:])
	f.stop = l&1 == 1
	if n := l >> 1; n > 0 && !f.stop {
		f.data = make([]byte, n)
	}
	return f
}

// deliver queues a copy of data for the virtual rank k.dst.
func (m *Mux) deliver(k muxKey, data []byte) error {
	m.mu.Lock()
	err := m.err
	m.mu.Unlock()
	if err != nil {
		return err
	}
	cp := slices.Clone(data)
	if cp == nil {
		cp = []byte{}
	}
	h := m.Host(k.dst)
	if h == m.me {
		m.mu.Lock()
		m.boxes[k] = append(m.boxes[k], cp)
		m.cond.Broadcast()
		m.mu.Unlock()
		return nil
	}
	select {
	case m.out[h] <- muxFrame{key: k, data: cp}:
		return nil
	case <-m.aborted:
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.err
	}
}

// take waits for the next message of k.
func (m *Mux) take(k muxKey) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		if q := m.boxes[k]; len(q) > 0 {
			d := q[0]
			if len(q) == 1 {
				delete(m.boxes, k)
			} else {
				m.boxes[k] = q[1:]
			}
			return d, nil
		}
		if m.err != nil {
			return nil, m.err
		}
		m.cond.Wait()
	}
}

// vcomm is one virtual rank's view of a communicator of the virtual world.
type vcomm struct {
	m       *Mux
	ctx     uint64
	members []int // virtual world ranks, by rank in this communicator
	rank    int
	world   bool
	splits  uint64
	closed  bool
}

func (c *vcomm) Rank() int { return c.rank }
func (c *vcomm) Size() int { return len(c.members) }

// NodeID is the node of the hosting process, when the real communicator
// names it (see [NodeIDer]).
func (c *vcomm) NodeID() string {
	if ni, ok := c.m.real.(NodeIDer); ok {
		return ni.NodeID()
	}
	return ""
}

func (c *vcomm) check(what string, peers ...int) error {
	if c.closed {
		return fmt.Errorf("%w: %s", ErrClosed, what)
	}
	for _, p := range peers {
		if p < 0 || p >= len(c.members) {
			return fmt.Errorf("%w: %s: rank %d of %d", ErrBadArgument, what, p, len(c.members))
		}
	}
	return nil
}

func (c *vcomm) key(src, dst, tag int) muxKey {
	return muxKey{ctx: c.ctx, src: c.members[src], dst: c.members[dst], tag: tag}
}

func (c *vcomm) send(dst, tag int, buf []byte) error {
	return c.m.deliver(c.key(c.rank, dst, tag), buf)
}

func (c *vcomm) recv(src, tag int, buf []byte) (int, error) {
	d, err := c.m.take(c.key(src, c.rank, tag))
	if err != nil {
		return 0, err
	}
	if len(d) > len(buf) {
		return copy(buf, d), fmt.Errorf("%w: %d-byte message from rank %d tag %d into a %d-byte buffer",
			ErrTruncated, len(d), src, tag, len(buf))
	}
	return copy(buf, d), nil
}

func (c *vcomm) Send(dst, tag int, buf []byte) error {
	if err := c.check("Send", dst); err != nil {
		return err
	}
	if tag < 0 {
		return fmt.Errorf("%w: Send: negative tag %d", ErrBadArgument, tag)
	}
	return c.send(dst, tag, buf)
}

func (c *vcomm) Recv(src, tag int, buf []byte) (int, error) {
	if err := c.check("Recv", src); err != nil {
		return 0, err
	}
	if tag < 0 {
		return 0, fmt.Errorf("%w: Recv: negative tag %d", ErrBadArgument, tag)
	}
	return c.recv(src, tag, buf)
}

func (c *vcomm) Sendrecv(send []byte, dst, sendTag int, recv []byte, src, recvTag int) (int, error) {
	if err := c.check("Sendrecv", dst, src); err != nil {
		return 0, err
	}
	if sendTag < 0 || recvTag < 0 {
		return 0, fmt.Errorf("%w: Sendrecv: negative tag", ErrBadArgument)
	}
	if err := c.send(dst, sendTag, send); err != nil {
		return 0, err
	}
	return c.recv(src, recvTag, recv)
}

// collect sends mine to rank 0, which calls combine on every rank's bytes
// and replies to each rank with its result or its error. Collective.
func (c *vcomm) collect(what string, mine []byte, combine func(all [][]byte) ([]byte, error)) ([]byte, error) {
	if c.closed {
		return nil, fmt.Errorf("%w: %s", ErrClosed, what)
	}
	if c.rank != 0 {
		if err := c.send(0, tagGather, mine); err != nil {
			return nil, err
		}
		d, err := c.m.take(c.key(0, c.rank, tagReply))
		if err != nil {
			return nil, err
		}
		return decodeReply(d)
	}
	all := make([][]byte, len(c.members))
	all[0] = mine
	for r := 1; r < len(all); r++ {
		d, err := c.m.take(c.key(r, 0, tagGather))
		if err != nil {
			return nil, err
		}
		all[r] = d
	}
	res, cerr := combine(all)
	reply := encodeReply(res, cerr)
	for r := 1; r < len(all); r++ {
		if err := c.send(r, tagReply, reply); err != nil {
			return nil, err
		}
	}
	return res, cerr
}

func encodeReply(res []byte, err error) []byte {
	if err != nil {
		return append([]byte{1}, err.Error()...)
	}
	return append([]byte{0}, res...)
}

func decodeReply(d []byte) ([]byte, error) {
	if len(d) > 0 && d[0] == 0 {
		return d[1:], nil
	}
	return nil, fmt.Errorf("%w: %s", ErrBadArgument, string(d[min(1, len(d)):]))
}

func (c *vcomm) Barrier() error {
	_, err := c.collect("Barrier", nil, func([][]byte) ([]byte, error) { return nil, nil })
	return err
}

func (c *vcomm) Bcast(root int, buf []byte) error {
	if err := c.check("Bcast", root); err != nil {
		return err
	}
	mine := binary.LittleEndian.AppendUint64(nil, uint64(len(buf)))
	if c.rank == root {
		mine = append(mine, buf...)
	}
	res, err := c.collect("Bcast", mine, func(all [][]byte) ([]byte, error) {
		for r, b := range all {
			if len(b) < 8 || binary.LittleEndian.Uint64(b) != uint64(len(buf)) {
				return nil, fmt.Errorf("Bcast: rank %d has a buffer of another length than rank 0 (%d bytes)", r, len(buf))
			}
		}
		return all[root][8:], nil
	})
	if err != nil {
		return err
	}
	copy(buf, res)
	return nil
}

func (c *vcomm) Allgather(send, recv []byte) error {
	if err := c.check("Allgather"); err != nil {
		return err
	}
	if len(recv) != len(send)*len(c.members) {
		return fmt.Errorf("%w: Allgather: %d-byte receive buffer for %d ranks of %d bytes", ErrBadArgument, len(recv), len(c.members), len(send))
	}
	res, err := c.collect("Allgather", send, func(all [][]byte) ([]byte, error) {
		out := make([]byte, 0, len(recv))
		for r, b := range all {
			if len(b) != len(send) {
				return nil, fmt.Errorf("Allgather: rank %d sends %d bytes, rank 0 %d", r, len(b), len(send))
			}
			out = append(out, b...)
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	copy(recv, res)
	return nil
}

func (c *vcomm) AllreduceInt64(v int64, op Op) (int64, error) {
	if err := c.check("AllreduceInt64"); err != nil {
		return 0, err
	}
	if op != Min && op != Max && op != Sum {
		return 0, fmt.Errorf("%w: AllreduceInt64: unknown op %v", ErrBadArgument, op)
	}
	res, err := c.collect("AllreduceInt64", binary.LittleEndian.AppendUint64(nil, uint64(v)), func(all [][]byte) ([]byte, error) {
		acc := int64(binary.LittleEndian.Uint64(all[0]))
		for _, b := range all[1:] {
			x := int64(binary.LittleEndian.Uint64(b))
			switch op {
			case Min:
				acc = min(acc, x)
			case Max:
				acc = max(acc, x)
			case Sum:
				acc += x
			}
		}
		return binary.LittleEndian.AppendUint64(nil, uint64(acc)), nil
	})
	if err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(res)), nil
}

func (c *vcomm) Split(color, key int) (Comm, error) {
	if err := c.check("Split"); err != nil {
		return nil, err
	}
	mine := binary.LittleEndian.AppendUint64(nil, uint64(int64(color)))
	mine = binary.LittleEndian.AppendUint64(mine, uint64(int64(key)))
	res, err := c.collect("Split", mine, func(all [][]byte) ([]byte, error) { return slices.Concat(all...), nil })
	seq := c.splits
	c.splits++
	if err != nil {
		return nil, err
	}
	if color < 0 {
		return nil, nil
	}
	type entry struct{ key, old int }
	var group []entry
	for r := range len(c.members) {
		col := int(int64(binary.LittleEndian.Uint64(res[16*r:])))
		if col == color {
			group = append(group, entry{int(int64(binary.LittleEndian.Uint64(res[16*r+8:]))), r})
		}
	}
	slices.SortStableFunc(group, func(a, b entry) int {
		if a.key != b.key {
			return a.key - b.key
		}
		return a.old - b.old
	})
	sub := &vcomm{m: c.m, members: make([]int, len(group))}
	for i, e := range group {
		sub.members[i] = c.members[e.old]
		if e.old == c.rank {
			sub.rank = i
		}
	}
	h := fnv.New64a()
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], c.ctx)
	binary.LittleEndian.PutUint64(b[8:], seq)
	binary.LittleEndian.PutUint64(b[16:], uint64(int64(color)))
	h.Write(b[:])
	sub.ctx = h.Sum64() | 2 // never the world's context
	return sub, nil
}

// Close frees a sub-communicator; on a virtual world it is a no-op (see
// [Mux.Close]).
func (c *vcomm) Close() error {
	if !c.world {
		c.closed = true
	}
	return nil
}
