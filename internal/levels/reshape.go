package levels

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// A checkpoint of another shape is one written by another number of
// ranks, or by the same number placed on nodes differently (ranks that
// moved between hosts). The files of such a checkpoint are not where the
// levels look for them in this run, so the engine recovers it in a way of
// its own ([Engine.Recover] calls it when [Config.NodeStore] is set):
//
//  1. Listing: the lowest rank of every node of this run lists, in each
//     old node directory it can see (Config.NodeStore(k), k over the
//     checkpoint's nodes), the checkpoint's files; the lists are
//     exchanged. Under MPI with node-local storage a node sees only the
//     directories on its own disk; on a shared file system, or in an
//     in-process world, every node sees every directory.
//  2. Sources: every old rank's data can be read from its data file, from
//     its L2 partner copy, from its task of the L4 container, or from the
//     L4 HDF5 file, in that order of preference; a source in the global
//     area is seen by every rank.
//  3. Verification pass: each old rank's preferred source is verified
//     completely (as [VerifyFile] does) by one rank that sees it, the
//     work spread by bytes; a source that fails gives way to the next one,
//     in further rounds, until every old rank has a verified source or
//     none is left. The outcome is agreed on every rank.
//  4. L3: when some old rank has no readable copy and the level can
//     rebuild offline ([OfflineRebuilder]), the lowest rank that sees
//     every surviving node directory of the checkpoint rebuilds the lost
//     files in place (an in-process decode of the old groups, as
//     `ftigo rebuild` does) and the pass runs again.
//
// Nothing is rebuilt for redundancy's sake: the run only needs to read
// the data once; its own next checkpoint is written in its own shape.
// The result, [Engine.Reshaped], says for every old rank where its data
// is, which rank verified it and which ranks can read it themselves; the
// runtime (package ckpt) reads or ships the bytes each rank needs.

// ReshapeSource is where one old rank's data is read in a run of another
// shape.
type ReshapeSource struct {
	// Rank is the old rank.
	Rank int
	// Entry is the manifest entry whose bytes hold the data: the rank's
	// data file, an L2 partner copy, or the data entry of an L4 task or of
	// the L4 HDF5 file.
	Entry File
	// Node is the old node directory (Config.NodeStore(Node)) holding
	// Entry when it lies in the local area; -1 otherwise.
	Node int
	// Reader is the rank of this run that verified the source; it sends
	// the bytes other ranks need and cannot read themselves.
	Reader int
	// Seen lists the ranks of this run that can read the source, ascending.
	Seen []int
	// Checksum is the FTI-FF file checksum of the verified bytes (another
	// rank opening the same path checks it before trusting the file);
	// zero for an HDF5 source.
	Checksum Digest
	// Image, on the Reader only, holds the source's bytes as they were
	// verified, read into memory under [Env.ImageLimit] (the budget of
	// all the sources a rank verifies); Seen is then the Reader alone, so
	// that the other ranks get their bytes from it and every byte is read
	// from storage once. The runtime lets go of it once restored.
	Image []byte
}

// Sees reports whether rank can read the source itself.
func (s ReshapeSource) Sees(rank int) bool {
	_, ok := slices.BinarySearch(s.Seen, rank)
	return ok
}

// IsH5 reports whether the source is an old rank's part of an HDF5
// checkpoint file (read with h5ckpt; [ReshapeSource.Open] refuses it).
func (s ReshapeSource) IsH5() bool { return s.Entry.Attrs[AttrDigest] == DigestH5 }

// Open opens the source on this rank as an FTI-FF file: the file in its
// old node directory (nodes(s.Node)) or the task in the L4 container of
// global. The caller checks the FTI-FF checksum against s.Checksum.
func (s ReshapeSource) Open(global Store, nodes func(int) Store) (vfd.File, error) {
	switch {
	case s.IsH5():
		return nil, fmt.Errorf("levels: old rank %d's source is an HDF5 checkpoint: open it with h5ckpt", s.Rank)
	case s.Node >= 0:
		st := nodes(s.Node)
		return vfd.OpenRead(st.Driver, st.Path(s.Entry.Name))
	default:
		return OpenTask(global, s.Entry)
	}
}

// Reshape is a checkpoint of another shape that [Engine.Recover] found
// recoverable: where every old rank's data is read.
type Reshape struct {
	Manifest *Manifest
	// Sources[r] is old rank r's source.
	Sources []ReshapeSource
}

// Reshaped returns the checkpoint of another shape the last
// [Engine.Recover] chose, or nil when it chose one of this run's shape
// (whose data each rank reads from the [Source] Recover returned).
func (e *Engine) Reshaped() *Reshape { return e.reshape }

// OtherShape reports whether m was written by another number of ranks,
// with another node layout or another group size than this run's.
func (e *Engine) OtherShape(m *Manifest) bool { return otherShape(e.env.Topo, m) }

// otherShape is [Engine.OtherShape] against topology t.
func otherShape(t *partner.Topology, m *Manifest) bool {
	if m.Ranks != t.NumRanks() || m.NodeSize != t.NodeSize() || m.GroupSize != t.GroupSize() || !slices.Equal(m.Nodes, []string(t.Table())) {
		return true
	}
	// Same table: FTI places ranks on nodes in blocks; a run launched
	// with another placement moved ranks between nodes.
	for r := range m.Ranks {
		if t.NodeOf(r) != r/max(m.NodeSize, 1) {
			return true
		}
	}
	return false
}

// reshapeCand is one possible source of an old rank's data.
type reshapeCand struct {
	entry File
	node  int   // old node directory, -1 for the global area
	seen  []int // ranks of this run that see it
}

// localEntries lists the manifest's entries that are files of their own
// in a node's local area, in a fixed order (holder, then position).
func localEntries(m *Manifest) []File {
	var out []File
	for _, fs := range m.Files {
		for _, f := range fs {
			if f.Where == Local && f.Attrs[AttrInContainer] == "" {
				out = append(out, f)
			}
		}
	}
	return out
}

// reshapeListing lists, on the lowest rank of each node, the files of m
// in every old node directory this node sees, and gives every rank
// every node's list. seen[i][k] lists the ranks that see local entry i
// in old node directory k. Collective.
func (e *Engine) reshapeListing(m *Manifest, entries []File) ([]map[int][]int, error) {
	env := e.env
	idx := map[string][]int{}
	for i, f := range entries {
		idx[path.Base(f.Name)] = append(idx[path.Base(f.Name)], i)
	}
	var mine []byte
	if e.nodeLeader() {
		found := map[int][]int{} // old node -> entry indices
		for k := range len(m.Nodes) {
			s := e.cfg.NodeStore(k)
			ents, err := s.Driver.ReadDir(s.Path(m.Dir()))
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					env.Logger.Debug("old node directory unreadable", zap.String("dir", s.Path(m.Dir())), zap.Error(err))
				}
				continue
			}
			for _, de := range ents {
				for _, i := range idx[de.Name()] {
					// Only files of the manifest's own directory.
					if path.Dir(entries[i].Name) == m.Dir() && !de.IsDir() {
						found[k] = append(found[k], i)
					}
				}
			}
		}
		mine, _ = json.Marshal(found)
	}
	all, err := comm.AllgatherBytes(env.Comm, mine)
	if err != nil {
		return nil, fmt.Errorf("exchange old node listings: %w", err)
	}
	seen := make([]map[int][]int, len(entries))
	for i := range seen {
		seen[i] = map[int][]int{}
	}
	for r, b := range all {
		if len(b) == 0 {
			continue
		}
		var found map[int][]int
		if err := json.Unmarshal(b, &found); err != nil {
			return nil, fmt.Errorf("decode rank %d's listing: %w", r, err)
		}
		ranks := env.Topo.NodeRanks(env.Topo.NodeOf(r))
		for k, is := range found {
			for _, i := range is {
				if i >= 0 && i < len(entries) {
					seen[i][k] = append(seen[i][k], ranks...)
				}
			}
		}
	}
	for i := range seen {
		for k := range seen[i] {
			slices.Sort(seen[i][k])
			seen[i][k] = slices.Compact(seen[i][k])
		}
	}
	return seen, nil
}

// reshapeCands lists every old rank's candidate sources in order of
// preference.
func (e *Engine) reshapeCands(m *Manifest, entries []File, seen []map[int][]int) [][]reshapeCand {
	all := make([]int, e.env.Comm.Size())
	for i := range all {
		all[i] = i
	}
	cands := make([][]reshapeCand, m.Ranks)
	add := func(i int) {
		f := entries[i]
		if f.Of < 0 || f.Of >= m.Ranks {
			return
		}
		ks := make([]int, 0, len(seen[i]))
		for k := range seen[i] {
			ks = append(ks, k)
		}
		sort.Ints(ks)
		for _, k := range ks {
			cands[f.Of] = append(cands[f.Of], reshapeCand{entry: f, node: k, seen: seen[i][k]})
		}
	}
	for _, role := range []string{RoleData, RolePartner} {
		for i, f := range entries {
			if f.Role == role {
				add(i)
			}
		}
	}
	for r := range m.Ranks {
		if f, ok := m.DataFile(r); ok && f.Attrs[AttrContainer] != "" {
			cands[r] = append(cands[r], reshapeCand{entry: f, node: -1, seen: all})
		}
	}
	return cands
}

// verifyCand verifies candidate c of old rank r completely and returns
// the FTI-FF checksum of its bytes (zero for an HDF5 source). With image
// (and a source verifyImage reads) it reads the bytes into memory as it
// verifies them and returns them too.
func (e *Engine) verifyCand(r int, c reshapeCand, image bool) (Digest, []byte, error) {
	f := c.entry
	if f.Attrs[AttrDigest] == DigestH5 {
		return Digest{}, nil, verifyH5(e.env.Global, f, r)
	}
	store := e.env.Global // the data file's task in the L4 container
	if c.node >= 0 {
		store = e.cfg.NodeStore(c.node)
	}
	var img []byte
	var err error
	switch {
	case image && imageKind(f) && (c.node >= 0 || f.Attrs[AttrInContainer] != ""):
		img, err = verifyImage(store, f, transfer(e.env))
	case c.node >= 0:
		err = VerifyFile(store, f)
	default:
		err = verifyTask(store, f)
	}
	if err != nil {
		return Digest{}, nil, err
	}
	if f.Attrs[AttrDigest] == DigestFTIFF {
		return f.Digest, img, nil
	}
	// A BLAKE3-checked copy: its FTI-FF checksum binds later readers.
	var vf vfd.File
	if img != nil {
		vf = vfd.BytesFile(store.Path(f.Name), img)
	} else {
		src := ReshapeSource{Rank: r, Entry: f, Node: c.node}
		if vf, err = src.Open(e.env.Global, e.cfg.NodeStore); err != nil {
			return Digest{}, nil, err
		}
	}
	defer vf.Close()
	rd, err := fileformat.Open(vf)
	if err != nil {
		return Digest{}, nil, &CorruptionError{Path: vf.Name(), Rank: r, Err: fmt.Errorf("%w: %w", ErrDigestMismatch, err)}
	}
	return Digest(rd.Summary().Checksum), img, nil
}

// reshapeResult is one rank's verdict on a source it verified.
type reshapeResult struct {
	Rank     int    `json:"r"`
	Err      string `json:"e,omitempty"`
	Checksum Digest `json:"c"`
	// Held: the verifying rank keeps the bytes in memory and sends every
	// other rank what it needs of them.
	Held bool `json:"h,omitempty"`
}

// reshapeVerify runs the verification pass: rounds in which each old
// rank without a verified source has its next candidate verified by the
// least loaded rank that sees it. It returns the sources and, for the old
// ranks left without one, why. Collective.
func (e *Engine) reshapeVerify(m *Manifest, cands [][]reshapeCand) ([]ReshapeSource, map[int][]string, error) {
	env := e.env
	srcs := make([]ReshapeSource, m.Ranks)
	done := make([]bool, m.Ranks)
	next := make([]int, m.Ranks)
	why := map[int][]string{}
	load := make([]int64, env.Comm.Size())
	imgs := map[int][]byte{} // the images this rank keeps, by old rank
	var held int64
	for {
		type job struct {
			r      int
			c      reshapeCand
			reader int
		}
		var jobs []job
		for r := range m.Ranks {
			if done[r] || next[r] >= len(cands[r]) {
				continue
			}
			c := cands[r][next[r]]
			reader := -1
			for _, q := range c.seen {
				if reader < 0 || load[q] < load[reader] {
					reader = q
				}
			}
			if reader < 0 {
				next[r]++
				continue
			}
			load[reader] += max(c.entry.Size, 1)
			jobs = append(jobs, job{r: r, c: c, reader: reader})
		}
		if len(jobs) == 0 {
			break
		}
		var mine []reshapeResult
		for _, j := range jobs {
			if j.reader != env.Rank {
				continue
			}
			keep := env.ImageLimit > 0 && held+j.c.entry.Size <= env.ImageLimit
			sum, img, err := e.verifyCand(j.r, j.c, keep)
			res := reshapeResult{Rank: j.r, Checksum: sum}
			if err != nil {
				res.Err = err.Error()
			} else if img != nil {
				res.Held, imgs[j.r] = true, img
				held += int64(len(img))
			}
			mine = append(mine, res)
		}
		b, err := json.Marshal(mine)
		if err != nil {
			return nil, nil, err
		}
		all, err := comm.AllgatherBytes(env.Comm, b)
		if err != nil {
			return nil, nil, fmt.Errorf("exchange verification results: %w", err)
		}
		got := map[int]reshapeResult{}
		for q, raw := range all {
			var rs []reshapeResult
			if err := json.Unmarshal(raw, &rs); err != nil {
				return nil, nil, fmt.Errorf("decode rank %d's verification results: %w", q, err)
			}
			for _, x := range rs {
				got[x.Rank] = x
			}
		}
		for _, j := range jobs {
			x, ok := got[j.r]
			switch {
			case !ok:
				why[j.r] = append(why[j.r], fmt.Sprintf("rank %d did not report on %s", j.reader, j.c.entry.Name))
				next[j.r]++
			case x.Err != "":
				why[j.r] = append(why[j.r], x.Err)
				next[j.r]++
			default:
				done[j.r] = true
				srcs[j.r] = ReshapeSource{Rank: j.r, Entry: j.c.entry, Node: j.c.node, Reader: j.reader, Seen: j.c.seen, Checksum: x.Checksum}
				if x.Held {
					srcs[j.r].Seen, srcs[j.r].Image = []int{j.reader}, imgs[j.r]
				}
			}
		}
	}
	missing := map[int][]string{}
	for r := range m.Ranks {
		if !done[r] {
			missing[r] = why[r]
			if len(cands[r]) == 0 {
				missing[r] = append(missing[r], "no rank of this run sees any copy of its data (data file, partner copy or L4)")
			}
		}
	}
	return srcs, missing, nil
}

// oldTopology returns the topology of m's run, with ranks placed on
// nodes in blocks of NodeSize as FTI does.
func oldTopology(m *Manifest) (*partner.Topology, error) {
	ids := make([]string, m.Ranks)
	for r := range ids {
		n := r / max(m.NodeSize, 1)
		if n >= len(m.Nodes) {
			return nil, fmt.Errorf("%w: rank %d on node %d of %d", ErrTopologyMismatch, r, n, len(m.Nodes))
		}
		ids[r] = m.Nodes[n]
	}
	return partner.NewTopologyTable(m.Ranks, m.NodeSize, m.GroupSize, ids, partner.NodeTable(m.Nodes))
}

// reshapeRebuild has the lowest rank that sees every old node directory
// any rank sees rebuild the lost files of m offline (L2, L3). Collective.
func (e *Engine) reshapeRebuild(m *Manifest, l Level, entries []File, seen []map[int][]int) error {
	env := e.env
	rb := offlineRebuilder(l)
	if rb == nil {
		return fmt.Errorf("%v keeps no redundancy to rebuild from", m.Level)
	}
	// Which ranks see each old node directory that holds anything.
	dirs := map[int]map[int]bool{}
	for i := range entries {
		for k, rs := range seen[i] {
			if dirs[k] == nil {
				dirs[k] = map[int]bool{}
			}
			for _, q := range rs {
				dirs[k][q] = true
			}
		}
	}
	rebuilder := -1
	for q := range env.Comm.Size() {
		all := true
		for _, rs := range dirs {
			if !rs[q] {
				all = false
				break
			}
		}
		if all {
			rebuilder = q
			break
		}
	}
	if rebuilder < 0 {
		return fmt.Errorf("no rank of this run sees every surviving node directory of %s, so its lost files cannot be rebuilt here", m.Dir())
	}
	var lerr error
	if env.Rank == rebuilder {
		topo, err := oldTopology(m)
		if err == nil {
			var paths []string
			paths, err = rb.RebuildOffline(m, topo, e.cfg.NodeStore, partnerOptions(env))
			if len(paths) > 0 {
				env.Logger.Info(fmt.Sprintf("rebuilt %d lost files of %s (written by %d ranks) for this run of %d", len(paths), m.Dir(), m.Ranks, env.Comm.Size()),
					zap.Strings("paths", paths))
			}
		}
		lerr = err
	}
	return comm.Agree(env.Comm, lerr, fmt.Sprintf("rebuild %s on rank %d", m.Dir(), rebuilder))
}

// recoverReshaped recovers committed checkpoint m of another shape (see
// the comment at the top of this file) and, on success, records the
// sources for [Engine.Reshaped]. Collective; the error is identical on
// every rank.
func (e *Engine) recoverReshaped(m *Manifest, what string) error {
	env := e.env
	if e.cfg.NodeStore == nil {
		return fmt.Errorf("%s: %w: written by %d ranks, running %d", what, ErrTopologyMismatch, m.Ranks, env.Comm.Size())
	}
	l, ok := e.levels[m.Level]
	if !ok {
		return fmt.Errorf("%s: %w", what, ErrLevelUnavailable)
	}
	if len(m.Files) != m.Ranks {
		return fmt.Errorf("%s: %w: manifest lists files of %d ranks, says %d", what, ErrTopologyMismatch, len(m.Files), m.Ranks)
	}
	if m.DCP != nil {
		// Its data files are deltas: an old rank's data is the image of its
		// chain, which the redistribution does not assemble (yet).
		return fmt.Errorf("%s: %w: a differential checkpoint (on %v) is restored by the %d ranks that wrote it only; a restart of another shape uses a full checkpoint",
			what, ErrTopologyMismatch, m.DCP.Chain, m.Ranks)
	}
	entries := localEntries(m)
	rebuilt := false
	for {
		seen, err := e.reshapeListing(m, entries)
		if err != nil {
			return err
		}
		srcs, missing, err := e.reshapeVerify(m, e.reshapeCands(m, entries, seen))
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			e.reshape = &Reshape{Manifest: m, Sources: srcs}
			if env.Rank == 0 {
				readers := map[int]int{}
				for _, s := range srcs {
					readers[s.Reader]++
				}
				env.Logger.Info(fmt.Sprintf("%s, written by %d ranks, is recoverable by this run of %d ranks", what, m.Ranks, env.Comm.Size()),
					zap.Int("old-ranks", m.Ranks), zap.Int("verifying-ranks", len(readers)))
			}
			return nil
		}
		if rebuilt || offlineRebuilder(l) == nil {
			return reshapeMissing(what, m, env.Comm.Size(), missing)
		}
		if err := e.reshapeRebuild(m, l, entries, seen); err != nil {
			return fmt.Errorf("%s: %w: %w", what, ErrUnrecoverable, errors.Join(err, reshapeMissing(what, m, env.Comm.Size(), missing)))
		}
		rebuilt = true
	}
}

// reshapeMissing describes the old ranks without a readable copy.
func reshapeMissing(what string, m *Manifest, size int, missing map[int][]string) error {
	ranks := make([]int, 0, len(missing))
	for r := range missing {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	var b strings.Builder
	fmt.Fprintf(&b, "%s (written by %d ranks, recovering on %d): no readable copy of the data of old rank", what, m.Ranks, size)
	if len(ranks) > 1 {
		b.WriteString("s")
	}
	for i, r := range ranks {
		if i == 6 {
			fmt.Fprintf(&b, " and %d more", len(ranks)-i)
			break
		}
		fmt.Fprintf(&b, " %d (%s)", r, strings.Join(missing[r], "; "))
		if i < len(ranks)-1 {
			b.WriteString(",")
		}
	}
	return &reshapeError{msg: b.String()}
}

type reshapeError struct{ msg string }

func (e *reshapeError) Error() string { return e.msg }
func (e *reshapeError) Unwrap() error { return ErrMissingFile }

// removeOtherNodes removes checkpoint m's directory from every old node
// directory this node sees besides its own (a checkpoint of another shape
// may have files in directories of nodes this run does not have). Called
// by the lowest rank of each node; a directory already gone is no error.
func (e *Engine) removeOtherNodes(env *Env, m *Manifest) error {
	if e.cfg.NodeStore == nil || !otherShape(env.Topo, m) {
		return nil
	}
	var errs []error
	for k := range len(m.Nodes) {
		s := e.cfg.NodeStore(k)
		if path.Clean(s.Dir) == path.Clean(env.Local.Dir) {
			continue
		}
		if _, err := s.Driver.Stat(s.Path(m.Dir())); err != nil {
			continue // not seen from this node
		}
		if err := removeDir(s, m.Dir()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
