package comm

import (
	"cmp"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Option configures an in-process world made by [Run] or [NewWorld].
type Option func(*options)

type options struct {
	timeout  time.Duration
	nodeSize int
	logger   *zap.Logger
}

// WithLogger sets the logger that records why a world aborted (once, at
// warn level). nil, the default, logs nothing.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithTimeout sets the deadlock watchdog: a call blocked longer than d
// returns an error matching [ErrTimeout] and aborts the world, so every other
// blocked rank wakes with [ErrAborted]. Zero (the default) waits forever.
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
}

// WithNodeSize sets how many consecutive world ranks share a simulated node:
// rank r sits on node r/k (see [NodeIDer] and [NodeMap]). The default is 1,
// one rank per node.
func WithNodeSize(k int) Option {
	return func(o *options) { o.nodeSize = k }
}

// NodeIDer is the optional capability of naming the node a rank runs on.
// In-process communicators implement it with simulated nodes of
// [WithNodeSize] ranks; [NodeMap] falls back to the host name otherwise.
type NodeIDer interface {
	NodeID() string
}

// Run starts an in-process world of n goroutine ranks, calls fn on each with
// its own Comm, and returns when every rank has returned (or exited through
// runtime.Goexit, which counts as a failure). The result is the
// first cause of failure: an error returned by a rank (wrapped with its rank),
// a *[PanicError] for a rank that panicked, the cause of an Abort, or the
// watchdog's [ErrTimeout]; nil when every rank returned nil. As soon as one
// rank fails, every rank blocked in a call (in any sub-communicator) wakes
// with an error matching [ErrAborted], and so does every later call.
func Run(n int, fn func(c Comm) error, opts ...Option) error {
	if n < 1 {
		return fmt.Errorf("%w: world size %d", ErrBadArgument, n)
	}
	comms := NewWorld(n, opts...)
	w := comms[0].(*proc).g.w
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			returned := false
			defer func() {
				if p := recover(); p != nil {
					w.abort(&PanicError{Rank: i, Value: p, Stack: debug.Stack()})
				} else if !returned {
					// runtime.Goexit, typically t.FailNow (require.*) called
					// on a rank goroutine.
					w.abort(fmt.Errorf("%w: rank %d exited through runtime.Goexit (t.FailNow or require off the test goroutine?)",
						ErrAborted, i))
				}
			}()
			err := fn(c)
			returned = true
			if err != nil {
				w.abort(fmt.Errorf("comm: rank %d: %w", i, err))
			}
		}()
	}
	wg.Wait()
	return w.err()
}

// NewWorld returns the n ranks of an in-process world for callers that run
// the rank goroutines themselves (nil for n < 1). Each Comm must be used by one goroutine at
// a time. Nothing fails the world automatically: call Abort on any rank (it
// implements [Aborter]) when one of them fails, or every other rank may wait
// forever (unless [WithTimeout] was given).
func NewWorld(n int, opts ...Option) []Comm {
	if n < 1 {
		return nil
	}
	o := options{nodeSize: 1}
	for _, opt := range opts {
		opt(&o)
	}
	if o.nodeSize < 1 {
		o.nodeSize = 1
	}
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	w := &world{opts: o, aborted: make(chan struct{}), tallies: make([]Tally, n),
		shards: make([]chan struct{}, (n+fanIn-1)/fanIn)}
	for i := range w.shards {
		w.shards[i] = make(chan struct{})
	}
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = i
	}
	return newGroup(w, ranks, true)
}

// world is the state shared by a world and all its sub-communicators: the
// abort signal and the options.
type world struct {
	opts    options
	once    sync.Once
	aborted chan struct{} // closed by abort, after cause is set
	// shards are closed by abort after aborted: world rank r waits on
	// shards[r/fanIn], so that no channel has more than fanIn waiters.
	shards  []chan struct{}
	cause   error
	tallies []Tally // per world rank, shared by its sub-communicators
	// scans counts the contributions the collectives visit (the last
	// rank's checks, and every copy loop over all ranks): the scale
	// tests read it to show that a collective visits each rank's part
	// a fixed number of times, not once per rank.
	scans atomic.Int64
}

func (w *world) abort(cause error) {
	w.once.Do(func() {
		w.cause = cause
		close(w.aborted)
		for _, s := range w.shards {
			close(s)
		}
		w.opts.logger.Warn("in-process world aborted", zap.Error(cause))
	})
}

// err returns the cause once aborted, else nil.
func (w *world) err() error {
	select {
	case <-w.aborted:
		return w.cause
	default:
		return nil
	}
}

// wait blocks world rank rank until ch is closed, the world is aborted or
// the watchdog fires.
func (w *world) wait(ch <-chan struct{}, rank int) error {
	select {
	case <-ch:
		return nil
	default:
	}
	var tc <-chan time.Time
	if w.opts.timeout > 0 {
		t := time.NewTimer(w.opts.timeout)
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-ch:
		return nil
	case <-w.shards[rank/fanIn]:
		return abortedError(w.cause)
	case <-tc:
		err := fmt.Errorf("%w: call blocked for %v", ErrTimeout, w.opts.timeout)
		w.abort(err)
		return err
	}
}

// group is one communicator's shared state: the member list, one mailbox per
// member and the collective rendezvous.
type group struct {
	w          *world
	worldRanks []int // group rank -> world rank
	boxes      []*mailbox
	tree       tree // the shape of every round's combining tree

	// cur is the round the members arrive at; the last to arrive
	// replaces it. mu guards the rounds' computed and cancelled flags.
	cur atomic.Pointer[round]
	mu  sync.Mutex
}

func newGroup(w *world, worldRanks []int, isWorld bool) []Comm {
	g := &group{w: w, worldRanks: worldRanks, boxes: make([]*mailbox, len(worldRanks)), tree: newTree(len(worldRanks))}
	for i := range g.boxes {
		g.boxes[i] = &mailbox{}
	}
	g.cur.Store(g.newRound())
	comms := make([]Comm, len(worldRanks))
	for i := range comms {
		comms[i] = &proc{g: g, rank: i, world: isWorld}
	}
	return comms
}

// proc is one rank's handle on a group; it implements Comm, Aborter,
// NodeIDer, InProcess and Counter.
type proc struct {
	g      *group
	rank   int
	world  bool
	closed atomic.Bool
}

var (
	_ Comm      = (*proc)(nil)
	_ Aborter   = (*proc)(nil)
	_ NodeIDer  = (*proc)(nil)
	_ InProcess = (*proc)(nil)
	_ Counter   = (*proc)(nil)
)

// Counts implements [Counter]: the traffic of this world rank in every
// communicator it belongs to.
func (p *proc) Counts() Counts { return p.tally().Counts() }

func (p *proc) tally() *Tally { return &p.g.w.tallies[p.g.worldRanks[p.rank]] }

// InProcess reports true: every rank is a goroutine of this process.
func (p *proc) InProcess() bool { return true }

func (p *proc) Rank() int { return p.rank }
func (p *proc) Size() int { return len(p.g.worldRanks) }

// NodeID returns "node<k>" with k = world rank / node size.
func (p *proc) NodeID() string {
	return fmt.Sprintf("node%d", p.g.worldRanks[p.rank]/p.g.w.opts.nodeSize)
}

// Abort fails the whole world (all communicators derived from it): every
// blocked and later call returns an error matching ErrAborted, and Run
// returns this cause unless another came first.
func (p *proc) Abort(code int) error {
	p.g.w.abort(&abortCall{rank: p.g.worldRanks[p.rank], code: code})
	return nil
}

// Close marks a sub-communicator closed; later calls on it return ErrClosed.
// Closing the world is a no-op.
func (p *proc) Close() error {
	if !p.world {
		p.closed.Store(true)
	}
	return nil
}

// check is called on entry of every communicating method.
func (p *proc) check() error {
	if p.closed.Load() {
		return ErrClosed
	}
	if cause := p.g.w.err(); cause != nil {
		return abortedError(cause)
	}
	return nil
}

func (p *proc) checkRank(what string, r int) error {
	if r < 0 || r >= p.Size() {
		return fmt.Errorf("%w: %s rank %d out of range [0,%d)", ErrBadArgument, what, r, p.Size())
	}
	return nil
}

// ---- point to point ----

// mailbox holds the unmatched sends addressed to one rank and the unmatched
// receives that rank has posted, each in posting order.
type mailbox struct {
	mu    sync.Mutex
	sends []*msg
	recvs []*msg
}

// msg is a posted send or receive. Once matched (under the mailbox lock) the
// party that matched it copies the bytes, sets n and err, and closes done.
type msg struct {
	peer    int // send: source rank; recv: requested source rank
	tag     int
	buf     []byte
	n       int
	err     error
	matched bool
	done    chan struct{}
}

func take(list *[]*msg, peer, tag int) *msg {
	for i, m := range *list {
		if m.peer == peer && m.tag == tag {
			*list = slices.Delete(*list, i, i+1)
			m.matched = true
			return m
		}
	}
	return nil
}

// deliver copies a send into a receive: the only copy a message costs.
func deliver(send, recv *msg, src, tag int) {
	n := copy(recv.buf, send.buf)
	recv.n = n
	if len(send.buf) > len(recv.buf) {
		recv.err = fmt.Errorf("%w: %d-byte message from rank %d tag %d into a %d-byte buffer",
			ErrTruncated, len(send.buf), src, tag, len(recv.buf))
	}
}

// post starts a send: it completes at once when dst has a matching receive
// posted, otherwise it is queued and the caller must finish it with
// finish(dst's mailbox, m, true).
func (p *proc) post(dst, tag int, buf []byte) (*msg, *mailbox) {
	box := p.g.boxes[dst]
	s := &msg{peer: p.rank, tag: tag, buf: buf, done: make(chan struct{})}
	box.mu.Lock()
	if r := take(&box.recvs, p.rank, tag); r != nil {
		box.mu.Unlock()
		deliver(s, r, p.rank, tag)
		close(r.done)
		s.matched = true
		close(s.done)
		return s, box
	}
	box.sends = append(box.sends, s)
	box.mu.Unlock()
	return s, box
}

// finish waits for a posted message. When the wait fails and the message is
// still unmatched it is withdrawn; when it was matched meanwhile the copy is
// in progress and finish waits for it (a copy never blocks) before returning
// the error, so the caller's buffer is free when finish returns.
func (p *proc) finish(box *mailbox, m *msg, isSend bool) error {
	err := p.g.w.wait(m.done, p.g.worldRanks[p.rank])
	if err == nil {
		return nil
	}
	box.mu.Lock()
	if !m.matched {
		list := &box.recvs
		if isSend {
			list = &box.sends
		}
		if i := slices.Index(*list, m); i >= 0 {
			*list = slices.Delete(*list, i, i+1)
		}
		box.mu.Unlock()
		return err
	}
	box.mu.Unlock()
	<-m.done
	return err
}

func (p *proc) Send(dst, tag int, buf []byte) error {
	if err := p.check(); err != nil {
		return err
	}
	if err := p.checkRank("Send: destination", dst); err != nil {
		return err
	}
	s, box := p.post(dst, tag, buf)
	if err := p.finish(box, s, true); err != nil {
		return err
	}
	p.tally().Send(1, int64(len(buf)))
	return nil
}

func (p *proc) Recv(src, tag int, buf []byte) (int, error) {
	if err := p.check(); err != nil {
		return 0, err
	}
	if err := p.checkRank("Recv: source", src); err != nil {
		return 0, err
	}
	n, err := p.recv(src, tag, buf)
	if err == nil {
		p.tally().Recv(1, int64(n))
	}
	return n, err
}

func (p *proc) recv(src, tag int, buf []byte) (int, error) {
	box := p.g.boxes[p.rank]
	r := &msg{peer: src, tag: tag, buf: buf, done: make(chan struct{})}
	box.mu.Lock()
	if s := take(&box.sends, src, tag); s != nil {
		box.mu.Unlock()
		deliver(s, r, src, tag)
		close(s.done)
		return r.n, r.err
	}
	box.recvs = append(box.recvs, r)
	box.mu.Unlock()
	if err := p.finish(box, r, false); err != nil {
		return 0, err
	}
	return r.n, r.err
}

func (p *proc) Sendrecv(send []byte, dst, sendTag int, recv []byte, src, recvTag int) (int, error) {
	if err := p.check(); err != nil {
		return 0, err
	}
	if err := p.checkRank("Sendrecv: destination", dst); err != nil {
		return 0, err
	}
	if err := p.checkRank("Sendrecv: source", src); err != nil {
		return 0, err
	}
	s, box := p.post(dst, sendTag, send)
	n, rerr := p.recv(src, recvTag, recv)
	serr := p.finish(box, s, true)
	if serr == nil {
		p.tally().Send(1, int64(len(send)))
	}
	if rerr != nil {
		return n, rerr
	}
	p.tally().Recv(1, int64(n))
	return n, serr
}

// ---- collectives ----

// round is one collective operation of a group: every member hands in a
// contribution, the last to arrive computes out and wakes the others. A
// member that gives up waiting (abort, watchdog) before out is computed
// cancels the round, so nobody can go on to read its buffers after it has
// returned.
//
// No lock or channel is shared by more than [fanIn] members. Arrivals
// meet in a combining tree of counters: the member whose arrival
// completes a node climbs to its parent, and the one completing the root
// is the last. Members wait in teams of fanIn on one channel each; the
// teams form a tree too, and the first member of a team, once awake,
// wakes its child teams. A round costs O(members) in all and O(log
// members) on any member.
type round struct {
	in      []contrib
	arrived []atomic.Int32  // per node of the group's tree
	wake    []chan struct{} // per team
	// computed and cancelled are guarded by the group's mu.
	computed  bool
	cancelled bool
	out       any
	// release counts the members still using the result (copying from
	// other members' buffers); see rendezvous.
	release sync.WaitGroup
}

type contrib struct {
	op string
	v  any
}

// fanIn is the arity of a round's trees: how many members meet on one
// counter, wait on one channel, or are woken by one member.
const fanIn = 16

// tree is the shape of a group's combining tree of n members: level 0
// counts the members of each team of fanIn, level l+1 the nodes of
// level l that are complete. Level l's nodes are arrived[off[l]:off[l+1]].
type tree struct {
	n    int
	off  []int
	want []int32 // per node: the arrivals that complete it
}

func newTree(n int) tree {
	t := tree{n: n, off: []int{0}}
	for width := n; ; {
		nodes := (width + fanIn - 1) / fanIn
		for i := range nodes {
			t.want = append(t.want, int32(min(fanIn, width-i*fanIn)))
		}
		t.off = append(t.off, t.off[len(t.off)-1]+nodes)
		if nodes == 1 {
			return t
		}
		width = nodes
	}
}

// teams is the number of teams of fanIn members (the nodes of level 0).
func (t tree) teams() int { return t.off[1] }

func (g *group) newRound() *round {
	n := g.tree.n
	r := &round{in: make([]contrib, n), arrived: make([]atomic.Int32, len(g.tree.want)),
		wake: make([]chan struct{}, g.tree.teams())}
	for i := range r.wake {
		r.wake[i] = make(chan struct{})
	}
	r.release.Add(n)
	return r
}

// count returns how many members have arrived (for tests; racy while
// members arrive).
func (r *round) count() int {
	n := 0
	for i := range r.wake {
		n += int(r.arrived[i].Load())
	}
	return n
}

// wakeTeams closes the channels of the teams member rank wakes: team 0's
// when rank is the last to arrive, and the child teams of its own team
// when it is its team's first member (team j's children are teams
// fanIn*j+1 to fanIn*j+fanIn).
func (r *round) wakeTeams(rank int, last bool) {
	if last {
		close(r.wake[0])
	}
	if rank%fanIn != 0 {
		return
	}
	j := rank / fanIn
	for c := fanIn*j + 1; c <= fanIn*j+fanIn && c < len(r.wake); c++ {
		close(r.wake[c])
	}
}

// rendezvous is the one collective primitive: it returns compute's result,
// computed once by the last rank to arrive, on every rank. compute sees the
// contributions in rank order; a mismatch of op names across ranks (ranks
// calling different collectives) is an ErrBadArgument on every rank. An
// error result is returned as the error.
//
// use, when not nil, runs on every rank with the result (to copy out of
// other ranks' buffers); no rank returns before every rank has finished its
// use, so buffers handed in stay valid exactly as long as they are read.
// That wait cannot block for long: every member has arrived and none of
// them blocks in use.
func (p *proc) rendezvous(op string, v any, compute func(in []contrib) any, use func(out any)) (any, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	p.tally().Collective()
	g := p.g
	r, last := g.arrive(p.rank, contrib{op: op, v: v}, compute)
	if !last {
		if err := g.w.wait(r.wake[p.rank/fanIn], g.worldRanks[p.rank]); err != nil {
			g.mu.Lock()
			if !r.computed {
				r.cancelled = true
				g.mu.Unlock()
				return nil, err
			}
			g.mu.Unlock()
			// Computed meanwhile: take part in the result like everyone else.
		}
	}
	r.wakeTeams(p.rank, last)
	if err, ok := r.out.(error); ok {
		return nil, err
	}
	if d, ok := r.out.(finisher); ok && d.finished() {
		return r.out, nil // compute did every rank's part
	}
	if use != nil {
		use(r.out)
		r.release.Done()
		r.release.Wait()
	}
	return r.out, nil
}

// finisher is a rendezvous result that may say that compute already did
// every rank's part of the work (small transfers: one goroutine doing all
// is cheaper than a second synchronisation), so use is skipped. compute may
// write into every member's buffers: until it is done, each member is
// either waiting for the round or has cancelled it, and a cancelled round
// is never computed.
type finisher interface{ finished() bool }

// arrive hands in one rank's contribution to the current round. The last
// rank to arrive computes the result (an ErrAborted error when the round
// was cancelled) and starts the next round; the caller then wakes the
// others ([round.wakeTeams]). Every atomic add on the way up publishes the
// contributions below it, so the last rank sees them all.
func (g *group) arrive(rank int, c contrib, compute func([]contrib) any) (r *round, last bool) {
	r = g.cur.Load()
	r.in[rank] = c
	t := &g.tree
	for l, i := 0, rank; l+1 < len(t.off); l, i = l+1, i/fanIn {
		k := t.off[l] + i/fanIn
		if r.arrived[k].Add(1) < t.want[k] {
			return r, false
		}
	}
	g.mu.Lock()
	if r.cancelled {
		r.out = abortedError(g.w.err())
	} else {
		r.out = g.computeChecked(r.in, compute)
	}
	g.cur.Store(g.newRound())
	r.computed = true
	g.mu.Unlock()
	return r, true
}

func (g *group) computeChecked(in []contrib, compute func([]contrib) any) any {
	g.w.scans.Add(int64(len(in)))
	for i, c := range in {
		if c.op != in[0].op {
			return fmt.Errorf("%w: collective mismatch: rank 0 called %s, rank %d called %s",
				ErrBadArgument, in[0].op, i, c.op)
		}
	}
	return compute(in)
}

func (p *proc) Barrier() error {
	_, err := p.rendezvous("Barrier", nil, func([]contrib) any { return nil }, nil)
	return err
}

type bcastArg struct {
	root int
	buf  []byte
}

// bcastSerial is the size up to which the last rank to arrive copies a
// broadcast into every rank's buffer: a copy that small costs less than
// the second synchronisation of copying in parallel.
const bcastSerial = 1 << 10

// bcastResult is a Bcast rendezvous' result: root's buffer, and whether
// compute already copied it to every rank.
type bcastResult struct {
	buf  []byte
	done bool
}

func (b bcastResult) finished() bool { return b.done }

func (p *proc) Bcast(root int, buf []byte) error {
	_, err := p.rendezvous("Bcast", bcastArg{root, buf}, func(in []contrib) any {
		a0 := in[0].v.(bcastArg)
		if a0.root < 0 || a0.root >= len(in) {
			return fmt.Errorf("%w: Bcast: root %d out of range [0,%d)", ErrBadArgument, a0.root, len(in))
		}
		for i, c := range in {
			a := c.v.(bcastArg)
			if a.root != a0.root {
				return fmt.Errorf("%w: Bcast: rank %d has root %d, rank 0 has %d", ErrBadArgument, i, a.root, a0.root)
			}
			if len(a.buf) != len(a0.buf) {
				return fmt.Errorf("%w: Bcast: rank %d has %d bytes, rank 0 has %d", ErrBadArgument, i, len(a.buf), len(a0.buf))
			}
		}
		src := in[a0.root].v.(bcastArg).buf
		if len(src) > bcastSerial {
			return bcastResult{buf: src}
		}
		p.g.w.scans.Add(int64(len(in)))
		for i, c := range in {
			if i != a0.root {
				copy(c.v.(bcastArg).buf, src)
			}
		}
		return bcastResult{buf: src, done: true}
	}, func(out any) {
		if p.rank != root {
			copy(buf, out.(bcastResult).buf)
		}
	})
	if err != nil {
		return err
	}
	if p.rank == root {
		p.tally().Send(1, int64(len(buf)))
	} else {
		p.tally().Recv(1, int64(len(buf)))
	}
	return nil
}

type gatherArg struct {
	send []byte
	nrec int
}

func (p *proc) Allgather(send, recv []byte) error {
	_, err := p.rendezvous("Allgather", gatherArg{send, len(recv)}, func(in []contrib) any {
		n0 := len(in[0].v.(gatherArg).send)
		sends := make([][]byte, len(in))
		for i, c := range in {
			a := c.v.(gatherArg)
			if len(a.send) != n0 {
				return fmt.Errorf("%w: Allgather: rank %d sends %d bytes, rank 0 sends %d", ErrBadArgument, i, len(a.send), n0)
			}
			if a.nrec != n0*len(in) {
				return fmt.Errorf("%w: Allgather: rank %d has a %d-byte receive buffer, want %d", ErrBadArgument, i, a.nrec, n0*len(in))
			}
			sends[i] = a.send
		}
		return sends
	}, func(out any) {
		sends := out.([][]byte)
		p.g.w.scans.Add(int64(len(sends)))
		for i, s := range sends {
			copy(recv[i*len(s):], s)
		}
	})
	if err != nil {
		return err
	}
	others := int64(p.Size() - 1)
	p.tally().Send(1, int64(len(send)))
	p.tally().Recv(others, others*int64(len(send)))
	return nil
}

type reduceArg struct {
	v  int64
	op Op
}

func (p *proc) AllreduceInt64(v int64, op Op) (int64, error) {
	out, err := p.rendezvous("AllreduceInt64", reduceArg{v, op}, func(in []contrib) any {
		a0 := in[0].v.(reduceArg)
		acc := a0.v
		for i, c := range in {
			a := c.v.(reduceArg)
			if a.op != a0.op {
				return fmt.Errorf("%w: AllreduceInt64: rank %d uses %v, rank 0 uses %v", ErrBadArgument, i, a.op, a0.op)
			}
			if i == 0 {
				continue
			}
			switch a.op {
			case Min:
				acc = min(acc, a.v)
			case Max:
				acc = max(acc, a.v)
			case Sum:
				acc += a.v
			default:
				return fmt.Errorf("%w: AllreduceInt64: unknown %v", ErrBadArgument, a.op)
			}
		}
		if a0.op != Min && a0.op != Max && a0.op != Sum {
			return fmt.Errorf("%w: AllreduceInt64: unknown %v", ErrBadArgument, a0.op)
		}
		return acc
	}, nil)
	if err != nil {
		return 0, err
	}
	p.tally().Send(1, 8)
	p.tally().Recv(1, 8)
	return out.(int64), nil
}

type splitArg struct{ color, key int }

func (p *proc) Split(color, key int) (Comm, error) {
	g := p.g
	out, err := p.rendezvous("Split", splitArg{color, key}, func(in []contrib) any {
		byColor := map[int][]int{}
		for i, c := range in {
			a := c.v.(splitArg)
			if a.color >= 0 {
				byColor[a.color] = append(byColor[a.color], i)
			}
		}
		result := make([]Comm, len(in))
		for _, members := range byColor {
			slices.SortStableFunc(members, func(a, b int) int {
				return cmp.Compare(in[a].v.(splitArg).key, in[b].v.(splitArg).key)
			})
			worldRanks := make([]int, len(members))
			for j, m := range members {
				worldRanks[j] = g.worldRanks[m]
			}
			sub := newGroup(g.w, worldRanks, false)
			for j, m := range members {
				result[m] = sub[j]
			}
		}
		return result
	}, nil)
	if err != nil {
		return nil, err
	}
	c := out.([]Comm)[p.rank]
	if c == nil {
		return nil, nil
	}
	return c, nil
}
