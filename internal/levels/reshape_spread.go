package levels

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/exchange"
)

// The recovery of a checkpoint of another shape is spread over the
// ranks of this run, so that none holds what every old rank stored:
//
//   - Every old rank o has a home, the rank [HomeOf] names. The home
//     gathers o's candidate sources and decides which is used.
//   - Every old node directory k has a lister: the lowest rank of the
//     node of this run whose host wrote it (its host name in the old
//     node table), else of node k mod the number of nodes. A registry,
//     spread by a hash of the host names, pairs them.
//   - A lister reads the directory, finds the files the old manifest
//     lists there (a data file or partner copy of old rank o), hands
//     each to one rank of its node to verify, and tells o's home.
//   - The homes run the verification rounds: each sends the next
//     candidate of every old rank still without a source to its
//     verifier, which reports back.
//
// So a rank handles its share of the old node directories and old
// ranks, and the sparse exchanges route only those.

// Tags of the spread reshape protocol.
const (
	tagReshapeReg  = 0x5231 // "R1": host registrations
	tagReshapeList = 0x5232 // listing orders
	tagReshapeCand = 0x5233 // candidates to their homes
	tagReshapeJob  = 0x5234 // verification jobs
	tagReshapeRes  = 0x5235 // verification results
	tagReshapeMiss = 0x5236 // the old ranks left without a source
)

// HomeOf returns the rank of a run of newRanks ranks that is home for
// old rank o of oldRanks: o*newRanks/oldRanks. Consecutive old ranks
// share a home, and each home has at most ceil(oldRanks/newRanks).
func HomeOf(o, oldRanks, newRanks int) int {
	return int(int64(o) * int64(newRanks) / int64(max(oldRanks, 1)))
}

// oldEntries is what the spread recovery reads of the old manifest: the
// files a rank holds, and the name of a node.
type oldEntries interface {
	rankFiles(r int) ([]File, error)
	nodeName(k int) (string, error)
}

// partEntries reads the old entries part by part: a rank loads only
// the parts of the old ranks and nodes it asks for ([Manifest.Part]),
// each once (the view caches it). A whole manifest (versions 1 and 2,
// or one read offline) answers from its lists.
type partEntries struct{ m *Manifest }

func (w partEntries) rankFiles(r int) ([]File, error) {
	if r < 0 || r >= w.m.Ranks {
		return nil, fmt.Errorf("%w: manifest lists files of %d ranks, not rank %d", ErrTopologyMismatch, w.m.Ranks, r)
	}
	fs, err := w.m.RankFiles(r)
	if err != nil {
		return nil, fmt.Errorf("old rank %d's files: %w", r, err)
	}
	return fs, nil
}

func (w partEntries) nodeName(k int) (string, error) {
	m := w.m
	ns := max(m.NodeSize, 1)
	if k < 0 || k >= m.NumNodes() {
		return "", fmt.Errorf("%w: manifest names %d nodes, not node %d", ErrTopologyMismatch, m.NumNodes(), k)
	}
	if m.Nodes != nil { // a whole manifest
		if k >= len(m.Nodes) {
			return "", fmt.Errorf("%w: manifest names %d nodes, not node %d", ErrTopologyMismatch, len(m.Nodes), k)
		}
		return m.Nodes[k], nil
	}
	p, err := m.Part(m.PartOf(k * ns))
	if err != nil {
		return "", fmt.Errorf("old node %d's name: %w", k, err)
	}
	if j := k - p.First/ns; j >= 0 && j < len(p.Nodes) {
		return p.Nodes[j], nil
	}
	return "", fmt.Errorf("%w: part %d of %s (ranks from %d) names %d nodes, not node %d", ErrTopologyMismatch, p.Index, m.Dir(), p.First, len(p.Nodes), k)
}

// spreadRun is the state of one spread recovery of checkpoint m.
type spreadRun struct {
	e   *Engine
	m   *Manifest
	old oldEntries
	// cands holds, on a home, the candidate sources of its old ranks.
	cands map[int][]candMsg
}

// oldNodes returns the number of node directories of m's run.
func oldNodes(m *Manifest) int { return m.Ranks / max(m.NodeSize, 1) }

// oldRight returns the rank that held old rank r's partner copy: its
// right neighbour in its group ring, with ranks placed on nodes in
// blocks of NodeSize (as FTI places them).
func oldRight(m *Manifest, r int) int {
	ns, gs := max(m.NodeSize, 1), max(m.GroupSize, 1)
	node, local := r/ns, r%ns
	sector, gr := node/gs, node%gs
	return (sector*gs+(gr+1)%gs)*ns + local
}

// hostHome returns the rank of the registry that pairs host names.
func hostHome(host string, size int) int {
	h := fnv.New64a()
	h.Write([]byte(host))
	return int(h.Sum64() % uint64(size))
}

// regMsg is a registration with the host registry: a node of this run
// (Node >= 0, Leader its lowest rank) or an old node directory (Dir).
type regMsg struct {
	Host   string `json:"h"`
	Node   int    `json:"n"`
	Leader int    `json:"l"`
	Dir    int    `json:"d"`
}

// nodeLeaderOf returns the lowest rank of node n of this run.
func nodeLeaderOf(env *Env, n int) int { return env.Topo.NodeRanks(n)[0] }

// reshapeListers gives each old node directory its lister and returns
// the directories this rank lists. Collective.
func (s *spreadRun) listers() ([]int, error) {
	e, m, old := s.e, s.m, s.old
	env := e.env
	size, me := env.Comm.Size(), env.Rank
	out := map[int][]byte{}
	put := func(dst int, v any) {
		b, _ := json.Marshal(v)
		out[dst] = append(append(out[dst], b...), '\n')
	}
	var lerr error
	if env.Topo.LocalIndex(me) == 0 { // the lowest rank of its node
		n := env.Topo.NodeOf(me)
		host := env.Topo.Host(n)
		put(hostHome(host, size), regMsg{Host: host, Node: n, Leader: me, Dir: -1})
	}
	for k := me; k < oldNodes(m); k += size {
		host, err := old.nodeName(k)
		if err != nil {
			lerr = err
			host = ""
		}
		put(hostHome(host, size), regMsg{Host: host, Node: -1, Dir: k})
	}
	in, err := exchange.Sparse(env.Comm, tagReshapeReg, exchange.ByPeer(out))
	if err != nil {
		return nil, fmt.Errorf("register host names: %w", err)
	}
	leaders := map[string]int{}
	var dirs []regMsg
	for _, msg := range in {
		if err := eachLine(msg.Data, func(b []byte) error {
			var r regMsg
			if err := json.Unmarshal(b, &r); err != nil {
				return err
			}
			if r.Node >= 0 {
				leaders[r.Host] = r.Leader
			} else {
				dirs = append(dirs, r)
			}
			return nil
		}); err != nil && lerr == nil {
			lerr = fmt.Errorf("decode rank %d's registrations: %w", msg.Peer, err)
		}
	}
	out = map[int][]byte{}
	nodes := env.Topo.NumNodes()
	for _, d := range dirs {
		lister, ok := leaders[d.Host]
		if !ok || d.Host == "" {
			lister = nodeLeaderOf(env, d.Dir%nodes)
		}
		put(lister, d.Dir)
	}
	in, err = exchange.Sparse(env.Comm, tagReshapeList, exchange.ByPeer(out))
	if err != nil {
		return nil, fmt.Errorf("hand out old node directories: %w", err)
	}
	var mine []int
	for _, msg := range in {
		if err := eachLine(msg.Data, func(b []byte) error {
			k, err := strconv.Atoi(string(b))
			if err == nil {
				mine = append(mine, k)
			}
			return err
		}); err != nil && lerr == nil {
			lerr = fmt.Errorf("decode rank %d's listing orders: %w", msg.Peer, err)
		}
	}
	slices.Sort(mine)
	return slices.Compact(mine), e.agree(lerr, "hand out the old node directories of "+m.Dir())
}

// sortedRanks returns the ranks of a set, ascending.
func sortedRanks(set map[int]bool) []int {
	out := make([]int, 0, len(set))
	for q := range set {
		out = append(out, q)
	}
	slices.Sort(out)
	return out
}

// eachLine calls fn on every non-empty line of b.
func eachLine(b []byte, fn func([]byte) error) error {
	for len(b) > 0 {
		i := slices.Index(b, '\n')
		if i < 0 {
			i = len(b)
		}
		if i > 0 {
			if err := fn(b[:i]); err != nil {
				return err
			}
		}
		b = b[min(i+1, len(b)):]
	}
	return nil
}

// candMsg is a candidate source of old rank Of, for its home: the
// manifest entry, where it lies (Node, -1 for the global area) and the
// rank that verifies it.
type candMsg struct {
	Of       int  `json:"o"`
	Entry    File `json:"f"`
	Node     int  `json:"k"`
	Verifier int  `json:"v"`
}

// parseRankFile parses a file name written by [RankFileName]: its role
// and rank.
func parseRankFile(name string) (string, int, bool) {
	base, ok := strings.CutSuffix(name, ".fti")
	if !ok || len(base) < 7 {
		return "", 0, false
	}
	role, num := base[:len(base)-6], base[len(base)-6:]
	r, err := strconv.Atoi(num)
	if err != nil || r < 0 {
		return "", 0, false
	}
	return role, r, true
}

// reshapeList lists the old node directories this rank was given and
// sends each file found there, as a candidate, to its old rank's home;
// a rank of the lister's node verifies it, the work spread by bytes.
// It returns how many of its directories hold a file. Collective.
func (s *spreadRun) list(dirs []int) (int, error) {
	e, m, old := s.e, s.m, s.old
	env := e.env
	node := env.Topo.NodeRanks(env.Topo.NodeOf(env.Rank))
	load := map[string][]int64{} // per role, the bytes given to each rank of the node
	out := map[int][]byte{}
	var lerr error
	nonEmpty := 0
	for _, k := range dirs {
		st := e.cfg.NodeStore(k)
		ents, err := st.Driver.ReadDir(st.Path(m.Dir()))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				env.Logger.Debug("old node directory unreadable", zap.String("dir", st.Path(m.Dir())), zap.Error(err))
			}
			continue
		}
		found := false
		for _, de := range ents {
			role, of, ok := parseRankFile(de.Name())
			if !ok || de.IsDir() || of >= m.Ranks || (role != RoleData && role != RolePartner) {
				continue
			}
			holder := of
			if role == RolePartner {
				holder = oldRight(m, of)
			}
			files, err := old.rankFiles(holder)
			if err != nil {
				lerr = cmp.Or(lerr, err)
				continue
			}
			for _, f := range files {
				if f.Role != role || f.Of != of || f.Where != Local || f.Attrs[AttrInContainer] != "" ||
					f.Name != path.Join(m.Dir(), de.Name()) {
					continue
				}
				l := load[role]
				if l == nil {
					l = make([]int64, len(node))
					load[role] = l
				}
				v := 0
				for i := range l {
					if l[i] < l[v] {
						v = i
					}
				}
				l[v] += max(f.Size, 1)
				found = true
				b, _ := json.Marshal(candMsg{Of: of, Entry: f, Node: k, Verifier: node[v]})
				dst := HomeOf(of, m.Ranks, env.Comm.Size())
				out[dst] = append(append(out[dst], b...), '\n')
			}
		}
		if found {
			nonEmpty++
		}
	}
	s.cands = map[int][]candMsg{}
	in, err := exchange.Sparse(env.Comm, tagReshapeCand, exchange.ByPeer(out))
	if err != nil {
		return 0, fmt.Errorf("send the old files found: %w", err)
	}
	for _, msg := range in {
		if err := eachLine(msg.Data, func(b []byte) error {
			var c candMsg
			if err := json.Unmarshal(b, &c); err != nil {
				return err
			}
			if HomeOf(c.Of, m.Ranks, env.Comm.Size()) != env.Rank {
				return fmt.Errorf("a candidate of old rank %d, whose home is rank %d", c.Of, HomeOf(c.Of, m.Ranks, env.Comm.Size()))
			}
			s.cands[c.Of] = append(s.cands[c.Of], c)
			return nil
		}); err != nil && lerr == nil {
			lerr = fmt.Errorf("decode rank %d's candidates: %w", msg.Peer, err)
		}
	}
	return nonEmpty, e.agree(lerr, "list the old node directories of "+m.Dir())
}

// HomeRanks returns, ascending, the old ranks of oldRanks that rank me
// of a run of size ranks is home for ([HomeOf]).
func HomeRanks(oldRanks, size, me int) []int {
	// o*size/oldRanks == me exactly for o in [ceil(me*N/size), ceil((me+1)*N/size)).
	lo := (int64(me)*int64(oldRanks) + int64(size) - 1) / int64(size)
	hi := (int64(me+1)*int64(oldRanks) + int64(size) - 1) / int64(size)
	out := make([]int, 0, hi-lo)
	for o := lo; o < min(hi, int64(oldRanks)); o++ {
		out = append(out, int(o))
	}
	return out
}

// orderCands sorts the candidates of each old rank this rank is home
// for by preference (data file, partner copy, by node) and appends the
// L4 container's task, which the home verifies.
func (s *spreadRun) orderCands() error {
	e, m := s.e, s.m
	var lerr error
	for _, o := range HomeRanks(m.Ranks, e.env.Comm.Size(), e.env.Rank) {
		cs := s.cands[o]
		slices.SortStableFunc(cs, func(a, b candMsg) int {
			return cmp.Or(cmp.Compare(roleOrder(a.Entry.Role), roleOrder(b.Entry.Role)), cmp.Compare(a.Node, b.Node))
		})
		files, err := s.old.rankFiles(o)
		if err != nil {
			lerr = cmp.Or(lerr, err)
		}
		for _, f := range files {
			if f.Role == RoleData && f.Of == o && f.Attrs[AttrContainer] != "" {
				cs = append(cs, candMsg{Of: o, Entry: f, Node: -1, Verifier: e.env.Rank})
				break
			}
		}
		s.cands[o] = cs
	}
	return e.agree(lerr, "read the old manifest entries of "+m.Dir())
}

func roleOrder(role string) int {
	if role == RoleData {
		return 0
	}
	return 1
}

// jobMsg asks a verifier to verify candidate C; resMsg is its answer.
type jobMsg struct {
	C candMsg `json:"c"`
}

type resMsg struct {
	Of       int    `json:"o"`
	Err      string `json:"e,omitempty"`
	Checksum Digest `json:"s"`
	Held     bool   `json:"h,omitempty"`
}

// reshapeVerify runs the verification rounds: each home sends the next
// candidate of every old rank it has no source for to its verifier,
// until every old rank has a verified source or no candidate is left.
// It returns this rank's verified sources and its homes' sources, and
// why each home old rank left without a source has none. Collective.
func (s *spreadRun) verify() (verified, home map[int]ReshapeSource, missing map[int][]string, err error) {
	e, m := s.e, s.m
	env := e.env
	verified, home, missing = map[int]ReshapeSource{}, map[int]ReshapeSource{}, map[int][]string{}
	next := map[int]int{}
	var held int64
	mine := HomeRanks(m.Ranks, env.Comm.Size(), env.Rank)
	for {
		out := map[int][]byte{}
		asked := map[int]bool{}
		jobs := int64(0)
		for _, o := range mine {
			if _, ok := home[o]; ok || next[o] >= len(s.cands[o]) {
				continue
			}
			c := s.cands[o][next[o]]
			b, _ := json.Marshal(jobMsg{C: c})
			out[c.Verifier] = append(append(out[c.Verifier], b...), '\n')
			asked[c.Verifier] = true
			jobs++
		}
		total, err := env.Comm.AllreduceInt64(jobs, comm.Sum)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("count verification jobs: %w", err)
		}
		if total == 0 {
			break
		}
		in, err := exchange.Sparse(env.Comm, tagReshapeJob, exchange.ByPeer(out))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("send verification jobs: %w", err)
		}
		out = map[int][]byte{}
		for _, msg := range in {
			out[msg.Peer] = nil // every home that asked gets an answer
			derr := eachLine(msg.Data, func(b []byte) error {
				var j jobMsg
				if err := json.Unmarshal(b, &j); err != nil {
					return err
				}
				c := j.C
				keep := env.ImageLimit > 0 && held+c.Entry.Size <= env.ImageLimit
				sum, img, verr := e.verifyCand(c.Of, reshapeCand{entry: c.Entry, node: c.Node}, keep)
				res := resMsg{Of: c.Of, Checksum: sum}
				if verr != nil {
					res.Err = verr.Error()
				} else {
					src := ReshapeSource{Rank: c.Of, Entry: c.Entry, Node: c.Node, Reader: env.Rank, Checksum: sum}
					if img != nil {
						res.Held, src.Held, src.Image = true, true, img
						held += int64(len(img))
					}
					verified[c.Of] = src
				}
				rb, _ := json.Marshal(res)
				out[msg.Peer] = append(append(out[msg.Peer], rb...), '\n')
				return nil
			})
			if derr != nil {
				return nil, nil, nil, fmt.Errorf("decode rank %d's verification jobs: %w", msg.Peer, derr)
			}
		}
		answers, err := exchange.Reply(env.Comm, tagReshapeRes, sortedRanks(asked), out)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("send verification results: %w", err)
		}
		got := map[int]resMsg{}
		for peer, b := range answers {
			if derr := eachLine(b, func(b []byte) error {
				var r resMsg
				err := json.Unmarshal(b, &r)
				got[r.Of] = r
				return err
			}); derr != nil {
				return nil, nil, nil, fmt.Errorf("decode rank %d's verification results: %w", peer, derr)
			}
		}
		for _, o := range mine {
			if _, ok := home[o]; ok || next[o] >= len(s.cands[o]) {
				continue
			}
			c := s.cands[o][next[o]]
			r, ok := got[o]
			switch {
			case !ok:
				missing[o] = append(missing[o], fmt.Sprintf("rank %d did not report on %s", c.Verifier, c.Entry.Name))
				next[o]++
			case r.Err != "":
				missing[o] = append(missing[o], r.Err)
				next[o]++
			default:
				home[o] = ReshapeSource{Rank: o, Entry: c.Entry, Node: c.Node, Reader: c.Verifier, Checksum: r.Checksum, Held: r.Held}
				delete(missing, o)
			}
		}
	}
	for _, o := range mine {
		if _, ok := home[o]; ok {
			continue
		}
		if len(s.cands[o]) == 0 {
			missing[o] = append(missing[o], "no rank of this run sees any copy of its data (data file, partner copy or L4)")
		}
		if len(missing[o]) == 0 {
			missing[o] = []string{"no candidate was verified"}
		}
	}
	for o := range missing {
		if _, ok := home[o]; ok {
			delete(missing, o)
		}
	}
	return verified, home, missing, nil
}

// missingReport is the merge of the old ranks left without a source:
// how many, and the first few with why.
type missingReport struct {
	Count int64          `json:"n"`
	First []missingEntry `json:"f,omitempty"`
}

type missingEntry struct {
	Rank int      `json:"r"`
	Why  []string `json:"w"`
}

// reportedMissing is how many old ranks a missing-source error names.
const reportedMissing = 6

// agreeMissing merges every home's missing old ranks: every rank gets
// their number and the first [reportedMissing] with why. Collective.
func (s *spreadRun) agreeMissing(missing map[int][]string) (missingReport, error) {
	e := s.e
	var mine missingReport
	for o, why := range missing {
		mine.Count++
		mine.First = append(mine.First, missingEntry{Rank: o, Why: why})
	}
	slices.SortFunc(mine.First, func(a, b missingEntry) int { return a.Rank - b.Rank })
	mine.First = mine.First[:min(len(mine.First), reportedMissing)]
	raw, _ := json.Marshal(mine)
	raw, err := exchange.Merge(e.env.Comm, tagReshapeMiss, raw, func(lo, hi []byte) []byte {
		var a, b missingReport
		if json.Unmarshal(lo, &a) != nil || json.Unmarshal(hi, &b) != nil {
			return lo
		}
		a.Count += b.Count
		a.First = append(a.First, b.First...)
		a.First = a.First[:min(len(a.First), reportedMissing)]
		out, _ := json.Marshal(a)
		return out
	})
	if err != nil {
		return missingReport{}, fmt.Errorf("agree on the old ranks without a source: %w", err)
	}
	var all missingReport
	if err := json.Unmarshal(raw, &all); err != nil {
		return missingReport{}, fmt.Errorf("decode the old ranks without a source: %w", err)
	}
	return all, nil
}
