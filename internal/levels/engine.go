package levels

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/partner"
)

// The engine: its configuration, state and lifecycle.

// Config configures an [Engine].
type Config struct {
	// Levels are the implemented levels; a checkpoint or a manifest at a
	// level not listed fails with [ErrLevelUnavailable].
	Levels []Level
	// Policy decides which checkpoints a new one supersedes; nil is
	// FTIPolicy{} (FTI's rule).
	Policy Policy
	// NodeStore returns the local area of node n (ckpt_dir/node%04d) as
	// this rank sees it. With it, [Engine.Recover] recovers checkpoints of
	// another shape (reshape.go); without it they are refused with
	// [ErrTopologyMismatch].
	NodeStore func(node int) Store
	// PartRanks is the number of ranks a manifest part lists at least
	// (0: [DefaultPartRanks]); it is rounded up to a multiple of
	// node_size·group_size (docs/format/manifest.md).
	PartRanks int
}

// Work is the metadata work one rank did: what scale tests count.
type Work struct {
	// Decoded is the metadata this rank decoded: root, part and header
	// bytes (JSON), whoever sent or stored them.
	Decoded int64
}

// Stats times one checkpoint on one rank.
type Stats struct {
	Bytes   int64         // this rank's data file size
	Write   time.Duration // writing and syncing the data file
	Protect time.Duration // the level's post-processing
	Commit  time.Duration // votes, renames, directory syncs, manifest
	Clean   time.Duration // deleting superseded checkpoints
	Total   time.Duration
	// Data is this rank's variable data written and protected, and Total
	// the sums over every rank (as reported through [Differential] or
	// [WithDataStats]; zero otherwise).
	Data, TotalData DataStats
}

// Engine runs the commit protocol and the recovery ladder for one rank.
// Every method is collective over Env.Comm and must be called by every
// rank in the same order with the same arguments.
type Engine struct {
	env       *Env
	cfg       Config
	levels    map[ID]Level
	policy    Policy
	committed []*Manifest // oldest first, identical on every rank
	nextSeq   uint64
	bg        chan struct{} // closed when the background removal ends

	// unrecoverable holds the committed checkpoints Recover found
	// unrecoverable (identical on every rank), skipped why.
	unrecoverable map[uint64]bool
	skipped       []Skipped
	// alt holds, per committed checkpoint whose two manifest copies are
	// both valid but describe different checkpoints (one is another
	// run's), the copy not in committed; Recover tries it when the chosen
	// one does not recover, then makes both copies agree (identical on
	// every rank).
	alt map[uint64]*Manifest
	// dropped lists the checkpoints whose deletion markers wait until
	// every rank has removed their files; rmFailed those whose removal
	// failed on this rank (their markers stay for the next Open).
	dropped  []uint64
	rmFailed []uint64
	// dropNodes holds, on rank 0, the node count of each dropped
	// checkpoint (see [Engine.endDeletion]).
	dropNodes map[uint64]int
	// reshape is the checkpoint of another shape the last Recover chose.
	reshape *Reshape
	// intent is the checkpoint number whose intent marker rank 0 is
	// making durable ahead of the checkpoint (0: none; identical on every
	// rank), marking the result of that background write on rank 0 (see
	// [Engine.premark]).
	intent  uint64
	marking chan error
	markErr error
	// unconverted holds, on rank 0, the checkpoints dropped by a commit
	// whose superseded markers are not yet deletion markers.
	unconverted []*Manifest
	// decoded counts the metadata bytes this rank decoded ([Work]).
	decoded *atomic.Int64
	// shape caches facts about the topology (see [Engine.shapeOf]).
	shape *topoShape
}

// Skipped is a committed checkpoint that [Engine.Recover] found
// unrecoverable and passed over, with the reason (identical on every rank).
type Skipped struct {
	Manifest *Manifest
	Err      error
}

// NewEngine returns an engine for env. It does no I/O; call [Engine.Open].
func NewEngine(env *Env, cfg Config) (*Engine, error) {
	if env.Comm == nil || env.Topo == nil {
		return nil, errors.New("levels: engine needs a communicator and a topology")
	}
	if env.Logger == nil {
		env.Logger = zap.NewNop()
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.BlockSize <= 0 {
		env.BlockSize = 1 << 20
	}
	if env.TransferSize <= 0 {
		env.TransferSize = 16 << 20
	}
	e := &Engine{env: env, cfg: cfg, levels: map[ID]Level{}, policy: cfg.Policy, nextSeq: 1, decoded: &atomic.Int64{}}
	if e.policy == nil {
		e.policy = FTIPolicy{}
	}
	for _, l := range cfg.Levels {
		e.levels[l.ID()] = l
	}
	e.shape = e.shapeOf(env.Topo)
	return e, nil
}

// Work returns the metadata work this rank did so far.
func (e *Engine) Work() Work { return Work{Decoded: e.decoded.Load()} }

// layout returns how this run's ranks fall into manifest parts.
func (e *Engine) layout() layout {
	t := e.env.Topo
	return layout{ranks: e.env.Comm.Size(), per: partRanksFor(t.NodeSize(), t.GroupSize(), e.cfg.PartRanks)}
}

// topoShape is what the engine keeps about a topology: the hash of its
// node table, computed on first use. Only rank 0 (writing roots) and a
// restart checking another run's checkpoint need it: hashing the table
// is O(nodes), which no other rank pays at every Init.
type topoShape struct {
	topo  *partner.Topology
	once  sync.Once
	nodes Digest
}

// digest returns the hash of the node table, as a root records it.
func (s *topoShape) digest() Digest {
	s.once.Do(func() { s.nodes = tableSum(s.topo) })
	return s.nodes
}

// shapeOf returns the facts about t: the engine's topology's, kept, or
// another's.
func (e *Engine) shapeOf(t *partner.Topology) *topoShape {
	if e.shape != nil && e.shape.topo == t {
		return e.shape
	}
	return &topoShape{topo: t}
}

// Env returns the engine's environment.
func (e *Engine) Env() *Env { return e.env }

// Level returns the implementation of level id.
func (e *Engine) Level(id ID) (Level, error) {
	l, ok := e.levels[id]
	if !ok {
		return nil, fmt.Errorf("%w: %v", ErrLevelUnavailable, id)
	}
	return l, nil
}

// Committed returns the committed checkpoints, oldest first, including
// those [Engine.Recover] found unrecoverable.
func (e *Engine) Committed() []*Manifest { return slices.Clone(e.committed) }

// Recoverable returns the committed checkpoints, oldest first, except
// those [Engine.Recover] found unrecoverable: the ones retention and
// keep_last_ckpt may treat as the newest.
func (e *Engine) Recoverable() []*Manifest {
	return slices.DeleteFunc(e.Committed(), func(m *Manifest) bool { return e.unrecoverable[m.Seq] })
}

// Skipped returns the checkpoints the last [Engine.Recover] passed over
// as unrecoverable, newest first, with why.
func (e *Engine) Skipped() []Skipped { return slices.Clone(e.skipped) }

// nodeLeader reports whether this rank is the lowest rank on its node.
func (e *Engine) nodeLeader() bool { return nodeLeader(e.env) }

// nodeLeader reports whether env's rank is the lowest rank on its node:
// its node-local index is 0 (ranks are numbered on a node in rank order).
func nodeLeader(env *Env) bool { return env.Topo.LocalIndex(env.Rank) == 0 }

func (e *Engine) agree(local error, what string) error { return comm.Agree(e.env.Comm, local, what) }

// Wait blocks until the background work has finished: the removal of
// superseded checkpoint files, on rank 0 the intent marker of the next
// checkpoint written ahead, and a verification Open started ahead that
// Recover has not taken (its image is dropped). Every collective method
// calls it first (Recover only waits for the removal); call it before
// abandoning an Engine. Local.
func (e *Engine) Wait() {
	e.dropPreload()
	e.waitRemoval()
	e.waitMarking()
}

// waitRemoval blocks until the background removal has finished.
func (e *Engine) waitRemoval() {
	if e.bg != nil {
		<-e.bg
		e.bg = nil
	}
}

// Release waits for the background work ([Engine.Wait]) and removes the
// intent marker written ahead for the next checkpoint, if any (rank 0):
// for a run that ends without [Engine.Settle]. A marker left behind costs
// nothing: the next Open removes it. The engine stays usable; its next
// checkpoint writes the marker again. Local.
func (e *Engine) Release() {
	e.Wait()
	e.dropIntent()
}

// NextSeq returns the sequence number the next checkpoint will get.
func (e *Engine) NextSeq() uint64 { return e.nextSeq }
