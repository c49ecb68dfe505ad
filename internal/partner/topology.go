package partner

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Topology maps ranks onto nodes, sectors and groups the way FTI does.
//
// Nodes are numbered 0..NumNodes()-1. Every node holds exactly nodeSize
// ranks, numbered on the node by their node-local index (ranks ordered by
// rank number). Consecutive runs of groupSize nodes form a sector. A group is
// the set of ranks that share a node-local index across the nodes of one
// sector: one member per node, nodeSize groups per sector. Groups are
// numbered globally: group = sector*nodeSize + localIndex. Within a group the
// members form a ring ordered by node: the member on the sector's j-th node
// has group rank j, its right neighbour is group rank j+1 and its left
// neighbour j-1 (mod groupSize).
//
// A Topology is immutable and safe for concurrent use.
//
// A topology of ranks placed on nodes in blocks ([NewBlockTopology])
// keeps no table per rank: rank r is on the node of block r/nodeSize.
// Its memory is the node table, or nothing when host names are made up.
type Topology struct {
	nranks, nodeSize, groupSize int
	numNodes                    int
	nodes                       NodeTable // node index -> host name (nil: host)
	host                        func(node int) string
	nodeRanks                   [][]int // node index -> ranks, ascending
	rankNode                    []int
	rankLocal                   []int
	// blocks: block b holds ranks b*nodeSize.. and is node slot[b];
	// block is the inverse. Both nil for the identity.
	blocks      bool
	slot, block []int
}

// NodeTable lists host names by node index; it is what a run stores in its
// meta directory so that a restart can place replacement nodes (see [Remap]).
type NodeTable []string

// NewTopology builds the topology of nranks ranks. nodeIDs[rank] is the host
// name of rank; nil simulates nodes, rank r living on node "node-%06d" of
// index r/nodeSize. Nodes are numbered in order of first appearance in
// nodeIDs.
func NewTopology(nranks, nodeSize, groupSize int, nodeIDs []string) (*Topology, error) {
	ids, err := hostNames(nranks, nodeSize, nodeIDs)
	if err != nil {
		return nil, err
	}
	var table NodeTable
	seen := make(map[string]bool)
	for _, h := range ids {
		if !seen[h] {
			seen[h] = true
			table = append(table, h)
		}
	}
	return build(nranks, nodeSize, groupSize, ids, table)
}

// NewTopologyTable is [NewTopology] with the node order given by table
// instead of first appearance. table must list every host name of nodeIDs
// exactly once; it usually comes from [Remap].
func NewTopologyTable(nranks, nodeSize, groupSize int, nodeIDs []string, table NodeTable) (*Topology, error) {
	ids, err := hostNames(nranks, nodeSize, nodeIDs)
	if err != nil {
		return nil, err
	}
	return build(nranks, nodeSize, groupSize, ids, table)
}

// NewBlockTopology builds the topology of nranks ranks placed on nodes
// in blocks of nodeSize: block b (ranks b*nodeSize to
// (b+1)*nodeSize-1) is node slots[b], or node b when slots is nil.
// host names node n; table, when not nil, is the node table instead.
// It keeps nothing per rank, so every rank of a large run can hold it.
func NewBlockTopology(nranks, nodeSize, groupSize int, table NodeTable, host func(node int) string, slots []int) (*Topology, error) {
	if nodeSize <= 0 {
		return nil, fmt.Errorf("%w: node_size %d must be positive", ErrBadNodeSize, nodeSize)
	}
	if nranks <= 0 || nranks%nodeSize != 0 {
		return nil, fmt.Errorf("%w: %d ranks, node_size %d; use a number of ranks divisible by node_size", ErrBadRanks, nranks, nodeSize)
	}
	n := nranks / nodeSize
	t := &Topology{nranks: nranks, nodeSize: nodeSize, groupSize: groupSize, numNodes: n, blocks: true, host: host}
	switch {
	case table != nil:
		if len(table) != n {
			return nil, fmt.Errorf("%w: %d nodes in the table, %d ranks of node_size %d make %d", ErrBadTable, len(table), nranks, nodeSize, n)
		}
		if err := table.check(); err != nil {
			return nil, err
		}
		t.nodes, t.host = append(NodeTable(nil), table...), nil
	case host == nil:
		return nil, fmt.Errorf("%w: neither a node table nor host names", ErrBadArgument)
	}
	if slots != nil {
		if len(slots) != n {
			return nil, fmt.Errorf("%w: %d node slots for %d nodes", ErrBadTable, len(slots), n)
		}
		t.slot, t.block = append([]int(nil), slots...), make([]int, n)
		for i := range t.block {
			t.block[i] = -1
		}
		for b, s := range slots {
			if s < 0 || s >= n || t.block[s] >= 0 {
				return nil, fmt.Errorf("%w: node slot %d of block %d is not a permutation of 0..%d", ErrBadTable, s, b, n-1)
			}
			t.block[s] = b
		}
		if slices.IsSorted(slots) { // the identity
			t.slot, t.block = nil, nil
		}
	}
	if groupSize <= 0 || n%groupSize != 0 {
		return nil, fmt.Errorf("%w: %d nodes, group_size %d; use a group_size that divides the number of nodes",
			ErrBadGroupSize, n, groupSize)
	}
	return t, nil
}

// Blocks reports whether ranks are placed on nodes in blocks of
// NodeSize in rank order, each block one node ([NewBlockTopology], or a
// table that happens to place them so).
func (t *Topology) Blocks() bool {
	if t.blocks {
		return true
	}
	for r := range t.nranks {
		if t.rankLocal[r] != r%t.nodeSize || t.nodeRanks[t.rankNode[r]][0] != r-r%t.nodeSize {
			return false
		}
	}
	return true
}

// Slots returns the node of each block of a block placement (nil for
// node b holding block b), or nil when ranks are not placed in blocks.
func (t *Topology) Slots() []int {
	if t.blocks {
		return append([]int(nil), t.slot...)
	}
	if !t.Blocks() {
		return nil
	}
	out := make([]int, t.numNodes)
	ident := true
	for b := range out {
		out[b] = t.rankNode[b*t.nodeSize]
		ident = ident && out[b] == b
	}
	if ident {
		return nil
	}
	return out
}

// SimulatedHost is the host name [NewTopology] gives node i when nodeIDs is nil.
func SimulatedHost(i int) string { return fmt.Sprintf("node-%06d", i) }

func hostNames(nranks, nodeSize int, nodeIDs []string) ([]string, error) {
	if nodeSize <= 0 {
		return nil, fmt.Errorf("%w: node_size %d must be positive", ErrBadNodeSize, nodeSize)
	}
	if nranks <= 0 || nranks%nodeSize != 0 {
		return nil, fmt.Errorf("%w: %d ranks, node_size %d; use a number of ranks divisible by node_size", ErrBadRanks, nranks, nodeSize)
	}
	if nodeIDs == nil {
		ids := make([]string, nranks)
		for r := range ids {
			ids[r] = SimulatedHost(r / nodeSize)
		}
		return ids, nil
	}
	if len(nodeIDs) != nranks {
		return nil, fmt.Errorf("%w: %d node ids for %d ranks", ErrBadArgument, len(nodeIDs), nranks)
	}
	for r, h := range nodeIDs {
		if h == "" {
			return nil, fmt.Errorf("%w: rank %d has an empty host name", ErrBadArgument, r)
		}
	}
	return nodeIDs, nil
}

func build(nranks, nodeSize, groupSize int, ids []string, table NodeTable) (*Topology, error) {
	if err := table.check(); err != nil {
		return nil, err
	}
	index := make(map[string]int, len(table))
	for i, h := range table {
		index[h] = i
	}
	t := &Topology{
		nranks:    nranks,
		nodeSize:  nodeSize,
		groupSize: groupSize,
		numNodes:  len(table),
		nodes:     append(NodeTable(nil), table...),
		nodeRanks: make([][]int, len(table)),
		rankNode:  make([]int, nranks),
		rankLocal: make([]int, nranks),
	}
	for r, h := range ids {
		n, ok := index[h]
		if !ok {
			return nil, fmt.Errorf("%w: host %q of rank %d is not in the node table", ErrBadTable, h, r)
		}
		t.rankNode[r] = n
		t.rankLocal[r] = len(t.nodeRanks[n])
		t.nodeRanks[n] = append(t.nodeRanks[n], r)
	}
	for n, rs := range t.nodeRanks {
		if len(rs) != nodeSize {
			return nil, fmt.Errorf("%w: node %d (%s) holds %d ranks, node_size is %d; launch %d ranks per node or set node_size to match",
				ErrBadNodeSize, n, table[n], len(rs), nodeSize, nodeSize)
		}
	}
	if groupSize <= 0 || len(table)%groupSize != 0 {
		return nil, fmt.Errorf("%w: %d nodes, group_size %d; use a group_size that divides the number of nodes",
			ErrBadGroupSize, len(table), groupSize)
	}
	return t, nil
}

// Validate checks that the topology supports the given checkpoint levels:
// L2 and L3 need groups of at least two nodes.
func (t *Topology) Validate(levels ...int) error {
	for _, l := range levels {
		if (l == 2 || l == 3) && t.groupSize < 2 {
			return fmt.Errorf("%w: L%d requested with group_size %d; set group_size to 2 or more (and have at least that many nodes)",
				ErrGroupTooSmall, l, t.groupSize)
		}
	}
	return nil
}

// NumRanks is the number of ranks.
func (t *Topology) NumRanks() int { return t.nranks }

// NodeSize is the number of ranks per node.
func (t *Topology) NodeSize() int { return t.nodeSize }

// GroupSize is the number of nodes per sector, which is the number of members of every group.
func (t *Topology) GroupSize() int { return t.groupSize }

// NumNodes is the number of nodes.
func (t *Topology) NumNodes() int { return t.numNodes }

// NumSectors is the number of sectors.
func (t *Topology) NumSectors() int { return t.numNodes / t.groupSize }

// NumGroups is the number of groups, NumSectors()*NodeSize().
func (t *Topology) NumGroups() int { return t.NumSectors() * t.nodeSize }

// Table returns a copy of the node table (node index -> host name).
func (t *Topology) Table() NodeTable {
	if t.nodes == nil {
		out := make(NodeTable, t.numNodes)
		for n := range out {
			out[n] = t.host(n)
		}
		return out
	}
	return append(NodeTable(nil), t.nodes...)
}

// InBlocks reports whether rank r is on node r/NodeSize() for every r,
// FTI's placement. It costs nothing for a topology built in blocks.
func (t *Topology) InBlocks() bool {
	if t.blocks {
		return t.slot == nil
	}
	for r := range t.nranks {
		if t.NodeOf(r) != r/t.nodeSize {
			return false
		}
	}
	return true
}

// Host is the host name of node.
func (t *Topology) Host(node int) string {
	if t.nodes == nil {
		return t.host(node)
	}
	return t.nodes[node]
}

// NodeOf is the node index of rank.
func (t *Topology) NodeOf(rank int) int {
	if t.blocks {
		b := rank / t.nodeSize
		if t.slot != nil {
			return t.slot[b]
		}
		return b
	}
	return t.rankNode[rank]
}

// rankAt returns the rank at local index local of node.
func (t *Topology) rankAt(node, local int) int {
	if t.blocks {
		b := node
		if t.block != nil {
			b = t.block[node]
		}
		return b*t.nodeSize + local
	}
	return t.nodeRanks[node][local]
}

// NodeRanks returns the ranks of node in ascending order (a copy).
func (t *Topology) NodeRanks(node int) []int {
	if t.blocks {
		out := make([]int, t.nodeSize)
		for i := range out {
			out[i] = t.rankAt(node, i)
		}
		return out
	}
	return append([]int(nil), t.nodeRanks[node]...)
}

// LocalIndex is rank's index among the ranks of its node.
func (t *Topology) LocalIndex(rank int) int {
	if t.blocks {
		return rank % t.nodeSize
	}
	return t.rankLocal[rank]
}

// SectorOf is the sector of rank.
func (t *Topology) SectorOf(rank int) int { return t.NodeOf(rank) / t.groupSize }

// GroupOf is the global group id of rank.
func (t *Topology) GroupOf(rank int) int { return t.SectorOf(rank)*t.nodeSize + t.LocalIndex(rank) }

// GroupRank is rank's position in its group ring.
func (t *Topology) GroupRank(rank int) int { return t.NodeOf(rank) % t.groupSize }

// GroupMembers returns the ranks of group in ring order (group rank 0 first).
func (t *Topology) GroupMembers(group int) []int {
	sector, local := group/t.nodeSize, group%t.nodeSize
	m := make([]int, t.groupSize)
	for j := range m {
		m[j] = t.rankAt(sector*t.groupSize+j, local)
	}
	return m
}

// Member returns the rank at group rank j of rank's group.
func (t *Topology) Member(rank, j int) int {
	node := t.SectorOf(rank)*t.groupSize + ((j%t.groupSize)+t.groupSize)%t.groupSize
	return t.rankAt(node, t.LocalIndex(rank))
}

// Right is rank's right neighbour in its group ring (the partner that keeps
// rank's L2 copy).
func (t *Topology) Right(rank int) int { return t.Member(rank, t.GroupRank(rank)+1) }

// Left is rank's left neighbour in its group ring (whose L2 copy rank keeps).
func (t *Topology) Left(rank int) int { return t.Member(rank, t.GroupRank(rank)-1) }

// String describes the topology, one line per group.
func (t *Topology) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ranks=%d nodes=%d node_size=%d group_size=%d\n", t.nranks, t.numNodes, t.nodeSize, t.groupSize)
	for g := 0; g < t.NumGroups(); g++ {
		fmt.Fprintf(&b, "group %d:", g)
		for _, r := range t.GroupMembers(g) {
			fmt.Fprintf(&b, " %d@%s", r, t.Host(t.NodeOf(r)))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (nt NodeTable) check() error {
	if len(nt) == 0 {
		return fmt.Errorf("%w: empty", ErrBadTable)
	}
	seen := make(map[string]int, len(nt))
	for i, h := range nt {
		if h == "" || strings.ContainsAny(h, "\n\r=") {
			return fmt.Errorf("%w: node %d has invalid host name %q", ErrBadTable, i, h)
		}
		if j, ok := seen[h]; ok {
			return fmt.Errorf("%w: host %q appears as node %d and node %d", ErrBadTable, h, j, i)
		}
		seen[h] = i
	}
	return nil
}

// tableSection is the section header of a marshalled node table.
// Wire format: never change.
const tableSection = "[topology]"

// Marshal encodes the table in FTI's Topology.fti shape:
//
//	[topology]
//	0 = hostA
//	1 = hostB
func (nt NodeTable) Marshal() ([]byte, error) {
	if err := nt.check(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(tableSection + "\n")
	for i, h := range nt {
		fmt.Fprintf(&b, "%d = %s\n", i, h)
	}
	return b.Bytes(), nil
}

// UnmarshalTable decodes a table written by [NodeTable.Marshal]. Blank lines
// and lines starting with ';' or '#' are ignored; every index 0..n-1 must be
// present exactly once.
func UnmarshalTable(data []byte) (NodeTable, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), 1<<20)
	m := make(map[int]string)
	section := false
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == ';' || s[0] == '#' {
			continue
		}
		if s[0] == '[' {
			if s != tableSection {
				return nil, fmt.Errorf("%w: line %d: unexpected section %q", ErrBadTable, line, s)
			}
			section = true
			continue
		}
		if !section {
			return nil, fmt.Errorf("%w: line %d: entry before %s", ErrBadTable, line, tableSection)
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("%w: line %d: expected index = host", ErrBadTable, line)
		}
		i, err := strconv.Atoi(strings.TrimSpace(k))
		if err != nil || i < 0 || i >= 1<<20 {
			return nil, fmt.Errorf("%w: line %d: bad node index %q", ErrBadTable, line, strings.TrimSpace(k))
		}
		if _, dup := m[i]; dup {
			return nil, fmt.Errorf("%w: line %d: node %d listed twice", ErrBadTable, line, i)
		}
		m[i] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadTable, err)
	}
	nt := make(NodeTable, len(m))
	for i, h := range m {
		if i >= len(nt) {
			return nil, fmt.Errorf("%w: node indices are not 0..%d", ErrBadTable, len(m)-1)
		}
		nt[i] = h
	}
	if err := nt.check(); err != nil {
		return nil, err
	}
	return nt, nil
}

// Remap places the nodes of a new run (current, in any order) into the
// slots of a saved table. A host present in both keeps its saved slot.
// Each unknown new host takes the slot of a vanished saved host, in
// order. So a replacement node inherits the lost node's role in its
// groups. Both tables must have the same number of nodes.
func Remap(saved, current NodeTable) (NodeTable, error) {
	if err := saved.check(); err != nil {
		return nil, fmt.Errorf("saved table: %w", err)
	}
	if err := current.check(); err != nil {
		return nil, fmt.Errorf("current table: %w", err)
	}
	if len(saved) != len(current) {
		return nil, fmt.Errorf("%w: saved table has %d nodes, this run has %d; restart on the same number of nodes",
			ErrBadTable, len(saved), len(current))
	}
	cur := make(map[string]bool, len(current))
	for _, h := range current {
		cur[h] = true
	}
	out := make(NodeTable, len(saved))
	used := make(map[string]bool, len(saved))
	var free []int
	for i, h := range saved {
		if cur[h] {
			out[i] = h
			used[h] = true
		} else {
			free = append(free, i)
		}
	}
	sort.Ints(free)
	for _, h := range current {
		if !used[h] {
			out[free[0]] = h
			free = free[1:]
		}
	}
	return out, nil
}

// Remap returns the topology of the same ranks with nodes placed by
// [Remap] against a saved table.
func (t *Topology) Remap(saved NodeTable) (*Topology, error) {
	cur := t.Table()
	table, err := Remap(saved, cur)
	if err != nil {
		return nil, err
	}
	if t.blocks {
		at := make(map[string]int, len(table))
		for i, h := range table {
			at[h] = i
		}
		slots := make([]int, t.numNodes)
		ident := true
		for b := range slots {
			slots[b] = at[cur[t.NodeOf(b*t.nodeSize)]]
			ident = ident && slots[b] == b
		}
		if ident {
			slots = nil
		}
		return NewBlockTopology(t.nranks, t.nodeSize, t.groupSize, table, nil, slots)
	}
	ids := make([]string, t.nranks)
	for r := range ids {
		ids[r] = cur[t.rankNode[r]]
	}
	return build(t.nranks, t.nodeSize, t.groupSize, ids, table)
}

// NodeDir is the name of node n's directory under ckpt_dir ("node0003").
//
// wire format: never change — node directories are found by this name.
func (t *Topology) NodeDir(n int) string { return fmt.Sprintf("node%04d", n) }
