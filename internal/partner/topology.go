package partner

import (
	"bufio"
	"bytes"
	"fmt"
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
type Topology struct {
	nranks, nodeSize, groupSize int
	nodes                       NodeTable // node index -> host name
	nodeRanks                   [][]int   // node index -> ranks, ascending
	rankNode                    []int
	rankLocal                   []int
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
func (t *Topology) NumNodes() int { return len(t.nodes) }

// NumSectors is the number of sectors.
func (t *Topology) NumSectors() int { return len(t.nodes) / t.groupSize }

// NumGroups is the number of groups, NumSectors()*NodeSize().
func (t *Topology) NumGroups() int { return t.NumSectors() * t.nodeSize }

// Table returns a copy of the node table (node index -> host name).
func (t *Topology) Table() NodeTable { return append(NodeTable(nil), t.nodes...) }

// Host is the host name of node.
func (t *Topology) Host(node int) string { return t.nodes[node] }

// NodeOf is the node index of rank.
func (t *Topology) NodeOf(rank int) int { return t.rankNode[rank] }

// NodeRanks returns the ranks of node in ascending order (a copy).
func (t *Topology) NodeRanks(node int) []int { return append([]int(nil), t.nodeRanks[node]...) }

// LocalIndex is rank's index among the ranks of its node.
func (t *Topology) LocalIndex(rank int) int { return t.rankLocal[rank] }

// SectorOf is the sector of rank.
func (t *Topology) SectorOf(rank int) int { return t.rankNode[rank] / t.groupSize }

// GroupOf is the global group id of rank.
func (t *Topology) GroupOf(rank int) int { return t.SectorOf(rank)*t.nodeSize + t.rankLocal[rank] }

// GroupRank is rank's position in its group ring.
func (t *Topology) GroupRank(rank int) int { return t.rankNode[rank] % t.groupSize }

// GroupMembers returns the ranks of group in ring order (group rank 0 first).
func (t *Topology) GroupMembers(group int) []int {
	sector, local := group/t.nodeSize, group%t.nodeSize
	m := make([]int, t.groupSize)
	for j := range m {
		m[j] = t.nodeRanks[sector*t.groupSize+j][local]
	}
	return m
}

// Member returns the rank at group rank j of rank's group.
func (t *Topology) Member(rank, j int) int {
	node := t.SectorOf(rank)*t.groupSize + ((j%t.groupSize)+t.groupSize)%t.groupSize
	return t.nodeRanks[node][t.rankLocal[rank]]
}

// Right is rank's right neighbour in its group ring (the partner that keeps
// rank's L2 copy).
func (t *Topology) Right(rank int) int { return t.Member(rank, t.GroupRank(rank)+1) }

// Left is rank's left neighbour in its group ring (whose L2 copy rank keeps).
func (t *Topology) Left(rank int) int { return t.Member(rank, t.GroupRank(rank)-1) }

// String describes the topology, one line per group.
func (t *Topology) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ranks=%d nodes=%d node_size=%d group_size=%d\n", t.nranks, len(t.nodes), t.nodeSize, t.groupSize)
	for g := 0; g < t.NumGroups(); g++ {
		fmt.Fprintf(&b, "group %d:", g)
		for _, r := range t.GroupMembers(g) {
			fmt.Fprintf(&b, " %d@%s", r, t.nodes[t.rankNode[r]])
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
	table, err := Remap(saved, t.nodes)
	if err != nil {
		return nil, err
	}
	ids := make([]string, t.nranks)
	for r := range ids {
		ids[r] = t.nodes[t.rankNode[r]]
	}
	return build(t.nranks, t.nodeSize, t.groupSize, ids, table)
}

// NodeDir is the name of node n's directory under ckpt_dir ("node0003").
//
// wire format: never change — node directories are found by this name.
func (t *Topology) NodeDir(n int) string { return fmt.Sprintf("node%04d", n) }
