package ckpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// topologyFile is the node table's name in meta_dir.
//
// wire format: never change.
const topologyFile = "topology"

// nodeIDOf returns the node id of c's rank: the WithNodeID function's,
// node%04d by rank and node_size when local_test is set, else the
// communicator's (the host under MPI), else node%04d.
func nodeIDOf(c comm.Comm, cfg Config, o options) string {
	if simulatedNodes(c, cfg, o) {
		return simulatedHost(c.Rank() / cfg.NodeSize)
	}
	if o.nodeID != nil {
		return o.nodeID(c.Rank())
	}
	return c.(comm.NodeIDer).NodeID()
}

// simulatedNodes reports whether the node ids are made up from the rank
// (local_test, or a communicator that names no node): rank r is then on
// node r/node_size, named simulatedHost.
func simulatedNodes(c comm.Comm, cfg Config, o options) bool {
	if o.nodeID != nil {
		return false
	}
	_, named := c.(comm.NodeIDer)
	return cfg.LocalTest || !named
}

// simulatedHost is the made-up name of node n.
func simulatedHost(n int) string { return fmt.Sprintf("node%04d", n) }

// Topology verdicts rank 0 broadcasts: the first byte, then the table
// (marshalled) and the nodes' slots when not simulated.
const (
	topoAsIs   = 0 // the topology every rank built stays
	topoTable  = 1 // the table follows
	topoRemap  = 2 // the table and the block slots follow
	topoSaved  = 3 // the saved table follows: every rank remaps (ranks not in blocks)
	topoTagMap = 0x544f
)

// buildTopology builds the topology and, on a restart, remaps it onto
// the node table saved in meta_dir so that a replacement node takes a
// vanished node's place; rank 0 saves the table. With ranks placed on
// nodes in blocks (local_test, or an MPI launch by blocks) no rank
// receives another rank's node id: the nodes are found by a split of
// the communicator, their names go to rank 0, and every rank gets the
// node table (nothing when the names are made up). Other placements
// gather every rank's node id. Collective.
func (r *Runtime) buildTopology(o options) (*partner.Topology, error) {
	c, cfg := r.c, r.cfg
	var topo *partner.Topology
	var hosts []string // the table in block order, on rank 0 (nil: simulated)
	var err error
	if simulatedNodes(c, cfg, o) {
		topo, err = partner.NewBlockTopology(c.Size(), cfg.NodeSize, cfg.GroupSize, nil, simulatedHost, nil)
		if err := comm.Agree(c, err, "build topology"); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	} else if topo, hosts, err = r.splitTopology(nodeIDOf(c, cfg, o)); err != nil {
		return nil, err
	}
	// The saved table, read and remapped by rank 0.
	meta := o.meta
	name := path.Join(cfg.MetaDir, topologyFile)
	var verdict []byte
	var saved []byte
	var rerr error
	if c.Rank() == 0 {
		rerr = meta.MkdirAll(cfg.MetaDir, 0o755)
		if rerr == nil {
			saved, rerr = vfd.ReadFileLimit(meta, name, maxTopologySize)
			if errors.Is(rerr, fs.ErrNotExist) {
				saved, rerr = nil, nil
			}
		}
		if rerr == nil {
			verdict = r.remapVerdict(topo, hosts, saved)
		}
	}
	if err := comm.Agree(c, rerr, "read node table"); err != nil {
		return nil, err
	}
	verdict, err = comm.BcastBytes(c, 0, verdict)
	if err != nil {
		return nil, err
	}
	topo, err = applyVerdict(topo, verdict)
	if err := comm.Agree(c, err, "apply the node table"); err != nil {
		return nil, err
	}
	var werr error
	if c.Rank() == 0 {
		b, err := topo.Table().Marshal()
		if err == nil && string(b) != string(saved) {
			err = vfd.WriteFileAtomic(meta, name, b)
		}
		werr = err
	}
	if err := comm.Agree(c, werr, "save node table"); err != nil {
		return nil, err
	}
	return topo, nil
}

// splitTopology finds the nodes by a split of the communicator. When
// every node holds node_size consecutive ranks it returns the block
// topology (the table simulated until rank 0's verdict names the hosts)
// and, on rank 0, the host names in node order. Otherwise it gathers
// every rank's node id and returns the topology they make. Collective.
func (r *Runtime) splitTopology(id string) (*partner.Topology, []string, error) {
	c, cfg := r.c, r.cfg
	node, index, count, err := comm.SplitNode(c, func() string { return id })
	if err != nil {
		return nil, nil, fmt.Errorf("ckpt: find the nodes: %w", err)
	}
	defer node.Close()
	notBlock := int64(0)
	if c.Rank() != index*node.Size()+node.Rank() || node.Size() != cfg.NodeSize {
		notBlock = 1
	}
	flags := []int64{notBlock}
	if err := comm.AllreduceInt64s(c, flags, comm.Max); err != nil {
		return nil, nil, err
	}
	if flags[0] != 0 {
		// Ranks placed otherwise, or nodes of uneven size: the table of
		// every rank's id (O(ranks) per rank, as FTI's).
		all, err := comm.AllgatherBytes(c, []byte(id))
		if err != nil {
			return nil, nil, err
		}
		ids := make([]string, len(all))
		for i, b := range all {
			ids[i] = string(b)
		}
		r.topoIDs = ids
		topo, err := partner.NewTopology(c.Size(), cfg.NodeSize, cfg.GroupSize, ids)
		if err := comm.Agree(c, err, "build topology"); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		return topo, topo.Table(), nil
	}
	// Each node's lowest rank tells rank 0 its name.
	var mine []byte
	if node.Rank() == 0 {
		mine = []byte(id)
	}
	names, err := comm.GathervBytes(c, 0, mine)
	if err != nil {
		return nil, nil, fmt.Errorf("ckpt: gather the node names: %w", err)
	}
	var hosts []string
	if c.Rank() == 0 {
		hosts = make([]string, 0, count)
		for _, b := range names {
			if len(b) > 0 {
				hosts = append(hosts, string(b))
			}
		}
	}
	topo, err := partner.NewBlockTopology(c.Size(), cfg.NodeSize, cfg.GroupSize, nil, simulatedHost, nil)
	if err := comm.Agree(c, err, "build topology"); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return topo, hosts, nil
}

// remapVerdict decides, on rank 0, the node table of this run: the
// current one (hosts in node order, nil when simulated), remapped onto
// the saved table when it fits, and encodes it for the other ranks.
func (r *Runtime) remapVerdict(topo *partner.Topology, hosts []string, saved []byte) []byte {
	if !topo.Blocks() {
		// Every rank holds every rank's id: each remaps alike.
		if len(saved) > 0 {
			if _, err := r.remapped(topo, saved); err != nil {
				r.logRemap(topo, saved, err)
			}
		}
		return append([]byte{topoSaved}, saved...)
	}
	cur := topo
	if hosts != nil && topo.Blocks() {
		t, err := partner.NewBlockTopology(topo.NumRanks(), topo.NodeSize(), topo.GroupSize(), partner.NodeTable(hosts), nil, nil)
		if err != nil {
			return errVerdict(err)
		}
		cur = t
	}
	final := cur
	if len(saved) > 0 {
		if re, err := r.remapped(cur, saved); err == nil {
			final = re
		} else {
			r.logRemap(cur, saved, err)
		}
	}
	slots := final.Slots()
	if hosts == nil && slots == nil && sameTable(final, topo) {
		return []byte{topoAsIs}
	}
	table, err := final.Table().Marshal()
	if err != nil {
		return errVerdict(err)
	}
	b := []byte{topoTable}
	if slots != nil {
		b[0] = topoRemap
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(table)))
	b = append(b, table...)
	for _, s := range slots {
		b = binary.LittleEndian.AppendUint32(b, uint32(s))
	}
	return b
}

// remapped returns topo remapped onto the saved table.
func (r *Runtime) remapped(topo *partner.Topology, saved []byte) (*partner.Topology, error) {
	table, err := partner.UnmarshalTable(saved)
	if err != nil {
		return nil, err
	}
	return topo.Remap(table)
}

// logRemap says why the saved table was not used: a different machine
// layout keeps the fresh placement, and the recovery ladder decides
// what is usable (a checkpoint of another shape is read where its files
// are). Rank 0.
func (r *Runtime) logRemap(topo *partner.Topology, saved []byte, err error) {
	if table, perr := partner.UnmarshalTable(saved); perr == nil && len(table) != topo.NumNodes() {
		r.log.Info(fmt.Sprintf("the previous run had %d nodes, this one has %d: nodes placed afresh", len(table), topo.NumNodes()))
		return
	}
	r.log.Warn("saved node table does not fit this run; using a fresh placement", zap.Error(err))
}

// sameTable reports whether two topologies name their nodes alike.
func sameTable(a, b *partner.Topology) bool {
	if a.NumNodes() != b.NumNodes() {
		return false
	}
	for n := range a.NumNodes() {
		if a.Host(n) != b.Host(n) {
			return false
		}
	}
	return true
}

// errVerdict encodes a failure on rank 0 for every rank to return.
func errVerdict(err error) []byte { return append([]byte{math.MaxUint8}, err.Error()...) }

// applyVerdict returns the topology rank 0's verdict v describes.
func applyVerdict(topo *partner.Topology, v []byte) (*partner.Topology, error) {
	if len(v) == 0 {
		return nil, fmt.Errorf("%w: an empty node table verdict", ErrConfig)
	}
	switch v[0] {
	case topoAsIs:
		return topo, nil
	case topoSaved:
		if len(v) == 1 {
			return topo, nil
		}
		table, err := partner.UnmarshalTable(v[1:])
		if err != nil {
			return topo, nil // rank 0 logged it: a fresh placement
		}
		if re, err := topo.Remap(table); err == nil {
			return re, nil
		}
		return topo, nil
	case math.MaxUint8:
		return nil, fmt.Errorf("%w: %s", ErrConfig, v[1:])
	case topoTable, topoRemap:
	default:
		return nil, fmt.Errorf("%w: node table verdict %d", ErrConfig, v[0])
	}
	if len(v) < 9 || uint64(len(v)-9) < binary.LittleEndian.Uint64(v[1:]) {
		return nil, fmt.Errorf("%w: a node table verdict of %d bytes", ErrConfig, len(v))
	}
	n := binary.LittleEndian.Uint64(v[1:])
	table, err := partner.UnmarshalTable(v[9 : 9+n])
	if err != nil {
		return nil, err
	}
	var slots []int
	if v[0] == topoRemap {
		rest := v[9+n:]
		if len(rest) != 4*len(table) {
			return nil, fmt.Errorf("%w: %d bytes of node slots for %d nodes", ErrConfig, len(rest), len(table))
		}
		slots = make([]int, len(table))
		for i := range slots {
			slots[i] = int(binary.LittleEndian.Uint32(rest[4*i:]))
		}
	}
	return partner.NewBlockTopology(topo.NumRanks(), topo.NodeSize(), topo.GroupSize(), table, nil, slots)
}
