package ckpt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/partner"
)

// Heads (head = 1, FTI's dedicated post-processing ranks).
//
// Init splits the communicator it is given: on each node the lowest rank
// is a head, the others are application ranks with their own
// communicator (Runtime.Comm, FTI_COMM_WORLD). A node communicator joins
// each head to its application ranks: the head is its rank 0. The heads
// share a communicator of their own, over which each head builds a
// virtual world (comm.Mux) hosting one goroutine per application rank of
// its node, numbered as that rank is in the application communicator.
//
// A checkpoint at an asynchronous level commits at L1 on the application
// ranks; each rank's poster goroutine then sends its head a request
// (level, L1 manifest, topology). Once every application rank of the node
// has asked (FTI: "the head waits for all app ranks of its node"), the
// head runs levels.Engine.RaiseFor for each of them in its goroutine of the
// virtual world: the partner copy, parity or L4 container is made from
// the node-local L1 files by the head, the vote and the manifest rewrite
// run between the heads. Each application rank gets back the raised
// manifest (or the agreed error) and adopts it, with retention, at its
// next collective call (Checkpoint, BeginICP, Finalize). Finalize (or
// Close) sends a stop request; when all application ranks of every node
// have stopped, the heads close the virtual world and Init returns
// ErrHead on them.

// Head request kinds.
const (
	headRaiseReq = 1
	headStop     = 2
	// headTag is the tag of requests and replies on the node communicator.
	headTag = 0x4845
	// headInitFailed is the announcement of an application rank whose
	// Init failed after the split.
	headInitFailed = ^uint64(0)
)

// headRequest is what an application rank sends its head.
type headRequest struct {
	Kind     int      `json:"kind"`
	Level    int      `json:"level,omitempty"`
	Manifest []byte   `json:"manifest,omitempty"`
	Ranks    int      `json:"ranks,omitempty"`
	NodeIDs  []string `json:"node_ids,omitempty"`
	Table    []byte   `json:"table,omitempty"`
	// Blocks: ranks placed on nodes in blocks, node Slots[b] holding
	// block b (nil: node b); NodeIDs is then empty.
	Blocks bool  `json:"blocks,omitempty"`
	Slots  []int `json:"slots,omitempty"`
}

// headReply is the head's answer to a raise request.
type headReply struct {
	Manifest []byte `json:"manifest,omitempty"`
	Err      string `json:"err,omitempty"`
}

// sendMsg sends b as a length header and a message on tag.
func sendMsg(c comm.Comm, dst int, b []byte) error {
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], uint64(len(b)))
	if err := c.Send(dst, headTag, h[:]); err != nil {
		return err
	}
	return comm.SendChunked(c, dst, headTag, b, 0)
}

// recvMsg receives a sendMsg message.
func recvMsg(c comm.Comm, src int) ([]byte, error) {
	var h [8]byte
	if _, err := c.Recv(src, headTag, h[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(h[:])
	if n > 1<<30 {
		return nil, fmt.Errorf("%w: %d-byte head message from rank %d", comm.ErrBadArgument, n, src)
	}
	b := make([]byte, n)
	_, err := comm.RecvChunked(c, src, headTag, b, 0)
	return b, err
}

// headSplit is the result of splitting Init's communicator for heads.
type headSplit struct {
	head  bool
	app   comm.Comm // application ranks (nil on a head)
	heads comm.Comm // the heads (nil on an application rank)
	node  comm.Comm // the node's head (rank 0) and application ranks
	// nodeID is this rank's node id as the split found it, asked of
	// WithNodeID's function with the rank in the communicator given to
	// Init (the application ranks' topology must use it too, not ask
	// the function again with their rank in the application
	// communicator).
	nodeID string
}

// splitHeads finds the nodes of c (as buildTopology names them) and
// splits it into heads, application ranks and per-node communicators.
// Collective over c.
func splitHeads(c comm.Comm, cfg Config, o options) (*headSplit, error) {
	id := nodeIDOf(c, cfg, o)
	node, mine, _, err := comm.SplitNode(c, func() string { return id })
	if err != nil {
		return nil, err
	}
	// Every node holds node_size ranks: the largest and the smallest.
	sizes := []int64{int64(node.Size()), -int64(node.Size())}
	if err := comm.AllreduceInt64s(c, sizes, comm.Max); err != nil {
		_ = node.Close()
		return nil, err
	}
	if sizes[0] != int64(cfg.NodeSize) || -sizes[1] != int64(cfg.NodeSize) {
		var berr error
		if node.Size() != cfg.NodeSize && node.Rank() == 0 {
			berr = fmt.Errorf("%w: head = 1: node %d (rank %d's) has %d ranks, node_size is %d", ErrConfig, mine, c.Rank(), node.Size(), cfg.NodeSize)
		}
		_ = node.Close()
		return nil, agreeFirst(c, int64(mine), berr)
	}
	s := &headSplit{head: node.Rank() == 0, nodeID: id, node: node}
	color := 0
	if s.head {
		color = 1
	}
	sub, err := c.Split(color, c.Rank())
	if err != nil {
		_ = node.Close()
		return nil, fmt.Errorf("ckpt: head = 1: split heads from application ranks: %w", err)
	}
	if s.head {
		s.heads = sub
	} else {
		s.app = sub
	}
	return s, nil
}

// Comm returns the communicator of the application ranks: with head = 1
// the communicator passed to Init without its head ranks (FTI's
// FTI_COMM_WORLD), which the application must use for its own messages;
// otherwise the communicator passed to Init. A nil runtime returns nil.
func (r *Runtime) Comm() comm.Comm {
	if r == nil {
		return nil
	}
	return r.c
}

// runHead is Init on a head rank: it serves its node's application ranks
// until they stop, then returns ErrHead (or what went wrong).
func runHead(cfg Config, o options, s *headSplit, log *zap.Logger) error {
	defer s.node.Close()
	defer s.heads.Close()
	v := s.node.Size() - 1
	// Each application rank says which rank it is in the application
	// communicator.
	appRank := make([]int, v)
	failed := int64(0)
	for i := range v {
		b, err := recvMsg(s.node, i+1)
		if err == nil && len(b) != 8 {
			err = fmt.Errorf("%w: %d-byte rank announcement", comm.ErrBadArgument, len(b))
		}
		if err != nil {
			return fmt.Errorf("ckpt: head: application rank %d of the node: %w", i+1, err)
		}
		if a := binary.LittleEndian.Uint64(b); a == headInitFailed {
			failed = 1
		} else {
			appRank[i] = int(a)
		}
	}
	// Every head ends if Init failed on some application rank (it fails
	// on all of them: its errors are agreed).
	if n, err := s.heads.AllreduceInt64(failed, comm.Max); err != nil || n != 0 {
		return errors.Join(ErrHeadAppFailed, err)
	}
	mux, err := comm.NewMux(s.heads, v)
	if err != nil {
		return fmt.Errorf("ckpt: head: virtual world: %w", err)
	}
	defer mux.Close()
	vcs := make([]comm.Comm, v)
	errs := make([]error, v)
	var wg sync.WaitGroup
	for i, vc := range mux.Comms() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vcs[i], errs[i] = vc.Split(0, appRank[i])
		}()
	}
	comm.WaitGroup(s.heads, &wg) // serving their calls below MPI_THREAD_MULTIPLE
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ckpt: head: virtual world: %w", err)
	}
	h := &headServer{cfg: cfg, o: o, log: log}
	for {
		reqs := make([]headRequest, v)
		stops := 0
		for i := range v {
			b, err := recvMsg(s.node, i+1)
			if err == nil {
				err = json.Unmarshal(b, &reqs[i])
			}
			if err != nil {
				return fmt.Errorf("ckpt: head: request of application rank %d: %w", appRank[i], err)
			}
			if reqs[i].Kind == headStop {
				stops++
			}
		}
		if stops == v {
			return ErrHead
		}
		if stops != 0 {
			return fmt.Errorf("ckpt: head: %d of the node's %d application ranks stopped while the others asked for post-processing", stops, v)
		}
		replies := make([]headReply, v)
		for i := range v {
			wg.Add(1)
			go func() {
				defer wg.Done()
				up, err := h.raise(vcs[i], appRank[i], reqs[i])
				if err != nil {
					replies[i].Err = err.Error()
				} else {
					replies[i].Manifest = up
				}
			}()
		}
		comm.WaitGroup(s.heads, &wg)
		for i := range v {
			b, err := json.Marshal(replies[i])
			if err == nil {
				err = sendMsg(s.node, i+1, b)
			}
			if err != nil {
				return fmt.Errorf("ckpt: head: reply to application rank %d: %w", appRank[i], err)
			}
		}
	}
}

// headServer raises checkpoints on behalf of application ranks.
type headServer struct {
	cfg Config
	o   options
	log *zap.Logger
}

// raise runs the post-processing of application rank rank in its virtual
// rank c. Collective over the virtual world.
func (h *headServer) raise(c comm.Comm, rank int, req headRequest) ([]byte, error) {
	// Every virtual rank must reach the collective calls: a bad request
	// fails the vote of RaiseFor, not before.
	m, perr := levels.ParseView("head request", req.Manifest)
	var topo *partner.Topology
	if perr == nil {
		var table partner.NodeTable
		if table, perr = partner.UnmarshalTable(req.Table); perr == nil {
			if req.Blocks {
				topo, perr = partner.NewBlockTopology(req.Ranks, h.cfg.NodeSize-1, h.cfg.GroupSize, table, nil, req.Slots)
			} else {
				topo, perr = partner.NewTopologyTable(req.Ranks, h.cfg.NodeSize-1, h.cfg.GroupSize, req.NodeIDs, table)
			}
		}
	}
	if perr != nil {
		// Take part in the votes with a failure: Agree over the virtual
		// world reports it on every rank.
		return nil, comm.Agree(c, perr, "read the post-processing request of rank "+fmt.Sprint(rank))
	}
	if err := comm.Agree(c, nil, "read the post-processing requests"); err != nil {
		return nil, err
	}
	env := &levels.Env{
		Comm: c, Topo: topo, Rank: rank,
		Local:        levels.Store{Driver: h.o.local, Dir: h.cfg.NodeDir(topo.NodeOf(rank), m.Run)},
		Global:       levels.Store{Driver: h.o.global, Dir: h.cfg.GlobalDir(m.Run)},
		Meta:         levels.Store{Driver: h.o.meta, Dir: h.cfg.MetaDir},
		Run:          m.Run, // the application's run, named by its manifest
		BlockSize:    h.cfg.BlockSize,
		TransferSize: h.cfg.TransferSize,
		Logger:       h.log.With(zap.Int("for-rank", rank)),
		Now:          h.o.now,
	}
	eng, err := levels.NewEngine(env, levels.Config{Levels: h.cfg.levelList(&partner.Buffers{}, h.o)})
	if err != nil {
		return nil, err
	}
	up, _, err := eng.RaiseFor(m, levels.ID(req.Level), nil)
	if err != nil {
		return nil, err
	}
	return up.MarshalView(rank)
}

// levelList is the levels an engine of this configuration implements.
func (c Config) levelList(b *partner.Buffers, o options) []levels.Level {
	var l4 levels.Level = levels.Global4{Inline: true}
	if c.CkptIO == 5 {
		l4 = levels.Global4H5{} // ckpt_io = 5: L4 as one HDF5 file
	}
	return append([]levels.Level{levels.Local1{}, levels.Partner2{Buffers: b}, levels.RS3{M: c.L3Parity, Buffers: b}, l4}, o.levels...)
}

// announceHead tells the node's head which application rank this is.
// Collective over the node communicator (with runHead).
func (r *Runtime) announceHead() error {
	return sendMsg(r.post.node, 0, binary.LittleEndian.AppendUint64(nil, uint64(r.c.Rank())))
}

// askHead sends the head the request to raise m to lvl. It runs on the
// rank's goroutine, so that the head starts at once even where only that
// goroutine's thread may call MPI.
func askHead(node comm.Comm, req headRequest) error {
	b, err := json.Marshal(req)
	if err == nil {
		err = sendMsg(node, 0, b)
	}
	if err != nil {
		return fmt.Errorf("request to the node's head: %w", err)
	}
	return nil
}

// headReplied waits for the head's reply to askHead. It runs in the
// poster goroutine, which alone uses the node communicator while a job is
// in flight.
func headReplied(node comm.Comm) (*levels.Manifest, error) {
	b, err := recvMsg(node, 0)
	if err != nil {
		return nil, fmt.Errorf("reply of the node's head: %w", err)
	}
	var rep headReply
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("reply of the node's head: %w", err)
	}
	if rep.Err != "" {
		return nil, fmt.Errorf("by the heads: %s", rep.Err)
	}
	return levels.ParseView("head reply", rep.Manifest)
}

// headRequestFor builds the raise request of m at lvl.
func (r *Runtime) headRequestFor(m *levels.Manifest, lvl levels.ID) (headRequest, error) {
	raw, err := m.MarshalView(r.c.Rank())
	if err != nil {
		return headRequest{}, err
	}
	table, err := r.topo.Table().Marshal()
	if err != nil {
		return headRequest{}, err
	}
	req := headRequest{Kind: headRaiseReq, Level: int(lvl), Manifest: raw, Ranks: r.c.Size(), Table: table}
	if r.topo.Blocks() {
		req.Blocks, req.Slots = true, r.topo.Slots()
	} else {
		req.NodeIDs = r.topoIDs
	}
	return req, nil
}

// stopHead tells the node's head this rank is done (Finalize, Close).
func (r *Runtime) stopHead() {
	if r.post.node == nil {
		return
	}
	b, _ := json.Marshal(headRequest{Kind: headStop})
	if err := sendMsg(r.post.node, 0, b); err != nil {
		r.log.Warn("telling the node's head to stop", zap.Error(err))
	}
	_ = r.post.node.Close()
	r.post.node = nil
}

// adoptPost records, on the application ranks, the checkpoint the heads
// raised, with retention. Collective: called where every rank has
// drained its poster (Checkpoint, BeginICP, Finalize).
func (r *Runtime) adoptPost() {
	up := r.post.adopt
	if up == nil {
		return
	}
	r.post.adopt = nil
	if err := r.eng.AdoptRaised(up, nil); err != nil && r.c.Rank() == 0 {
		r.log.Warn("adopting the checkpoint raised by the heads", zap.Error(err))
	}
}
