package ckpt

import (
	"fmt"

	"github.com/ftigo/ftigo/internal/levels"
)

// Level is a checkpoint level: 1 to 4, or [LevelH5Single].
type Level int

// String returns "L1" to "L4", or "L9".
func (l Level) String() string { return fmt.Sprintf("L%d", int(l)) }

// CheckpointInfo describes a committed checkpoint.
type CheckpointInfo struct {
	// ID is the application's checkpoint id.
	ID int64
	// Level is the level the checkpoint was taken at.
	Level Level
	// Seq is the commit sequence number.
	// It names the checkpoint's manifest in meta_dir.
	// It is 0 for a level-9 HDF5 file.
	Seq uint64
	// Ranks is the number of application ranks that wrote it.
	Ranks int
}

// infoOf returns what m tells a user (nil for nil).
func infoOf(m *levels.Manifest) *CheckpointInfo {
	if m == nil {
		return nil
	}
	return &CheckpointInfo{ID: m.ID, Level: Level(m.Level), Seq: m.Seq, Ranks: m.Ranks}
}

// Recovered describes the checkpoint this run restarted from.
// It is nil on a fresh run and for a nil runtime.
// After a restart from a level-9 HDF5 file it describes that file.
func (r *Runtime) Recovered() *CheckpointInfo {
	if r == nil {
		return nil
	}
	return infoOf(r.from)
}

// Placement says where a rank sits in the run's topology.
// Its fields are the topology fields FTI_GetConfig reports.
type Placement struct {
	// Nodes is the number of nodes of the run.
	Nodes int
	// NodeSize is the number of application ranks per node.
	NodeSize int
	// GroupSize is the number of nodes in each group.
	GroupSize int
	// Node is the rank's node index.
	Node int
	// NodeRank is the rank's index among its node's ranks.
	NodeRank int
	// Group is the rank's group.
	Group int
	// Sector is the rank's sector: the nodes its group spans.
	Sector int
	// GroupRank is the rank's position in its group ring.
	GroupRank int
	// Left is the rank whose L2 copy this rank keeps.
	Left int
	// Right is the rank that keeps this rank's L2 copy.
	Right int
}

// Placement returns where this rank sits in the run's topology.
// With head = 1 it places the application rank among the application ranks.
// A nil runtime returns the zero Placement.
func (r *Runtime) Placement() Placement {
	if r == nil || r.topo == nil {
		return Placement{}
	}
	t, q := r.topo, r.c.Rank()
	return Placement{
		Nodes: t.NumNodes(), NodeSize: t.NodeSize(), GroupSize: t.GroupSize(),
		Node: t.NodeOf(q), NodeRank: t.LocalIndex(q),
		Group: t.GroupOf(q), Sector: t.SectorOf(q), GroupRank: t.GroupRank(q),
		Left: t.Left(q), Right: t.Right(q),
	}
}

// Levels returns the checkpoint levels [Init] registers by default, L1 to L4.
func Levels() []Level {
	ls := Config{}.levelList(nil, options{})
	out := make([]Level, len(ls))
	for i, l := range ls {
		out[i] = Level(l.ID())
	}
	return out
}
