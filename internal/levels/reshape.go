package levels

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
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
// its own ([Engine.Recover] calls it when [Config.NodeStore] is set),
// spread over the ranks (reshape_spread.go):
//
//  1. Listing: each old node directory (Config.NodeStore(k), k over the
//     checkpoint's nodes) is listed by the lowest rank of one node of
//     this run: the node on the host that wrote it, else node k mod the
//     number of nodes. Under MPI with node-local storage a node sees only
//     the directories on its own disk; on a shared file system, or in an
//     in-process world, every node sees every directory.
//  2. Sources: every old rank's data can be read from its data file, from
//     its L2 partner copy, from its task of the L4 container, or from the
//     L4 HDF5 file, in that order of preference; a source in the global
//     area is seen by every rank. The lister sends each file it finds to
//     the old rank's home ([HomeOf]), naming a rank of its node to verify
//     it.
//  3. Verification pass: each old rank's preferred source is verified
//     completely (as [VerifyFile] does) by that rank; a source that fails
//     gives way to the next one, in further rounds, until every old rank
//     has a verified source or none is left. The outcome is agreed on
//     every rank.
//  4. L2, L3: when some old rank has no readable copy and the level can
//     rebuild offline ([OfflineRebuilder]), rank 0, if it sees every old
//     node directory that holds a file, rebuilds the lost files in place
//     (an in-process decode of the old groups, as `ftigo rebuild` does)
//     and the pass runs again.
//
// Nothing is rebuilt for redundancy's sake: the run only needs to read
// the data once; its own next checkpoint is written in its own shape.
// The result, [Engine.Reshaped], gives each rank the sources it verified
// and those of the old ranks it is home for: where the data is and which
// rank verified it. The runtime (package ckpt) reads or ships the bytes
// each rank needs.

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
	// Checksum is the FTI-FF file checksum of the verified bytes (another
	// rank opening the same path checks it before trusting the file);
	// zero for an HDF5 source.
	Checksum Digest
	// Held says the Reader keeps the source's bytes in memory, read as
	// they were verified under [Env.ImageLimit] (the budget of all the
	// sources a rank verifies). The Reader is then the only rank that
	// reads it: the others get their bytes from it, so every byte is read
	// from storage once.
	Held bool
	// Image, on the Reader only, holds those bytes. The runtime lets go
	// of it once restored.
	Image []byte `json:"-"`
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
// recoverable, as one rank sees it.
type Reshape struct {
	Manifest *Manifest
	// Home holds the sources of the old ranks this rank is home for
	// ([HomeOf]), by old rank.
	Home map[int]ReshapeSource
	// Verified holds the sources this rank verified, by old rank, with
	// their Image when held.
	Verified map[int]ReshapeSource
}

// Reshaped returns the checkpoint of another shape the last
// [Engine.Recover] chose, or nil when it chose one of this run's shape
// (whose data each rank reads from the [Source] Recover returned).
func (e *Engine) Reshaped() *Reshape { return e.reshape }

// OtherShape reports whether m was written by another number of ranks,
// with another node layout or another group size than this run's.
func (e *Engine) OtherShape(m *Manifest) bool { return e.otherShape(e.env.Topo, m) }

// otherShape is [Engine.OtherShape] against topology t.
func (e *Engine) otherShape(t *partner.Topology, m *Manifest) bool {
	if m.Ranks != t.NumRanks() || m.NodeSize != t.NodeSize() || m.GroupSize != t.GroupSize() {
		return true
	}
	sh := e.shapeOf(t)
	switch {
	case m.shape == sh:
		// Written by this engine on t: the same table.
	case m.Nodes != nil:
		if !slices.Equal(m.Nodes, []string(t.Table())) {
			return true
		}
	case m.nodesDigest() != sh.digest():
		return true
	}
	// Same table: FTI places ranks on nodes in blocks; a run launched
	// with another placement moved ranks between nodes.
	return !t.InBlocks()
}

// reshapeCand is one possible source of an old rank's data.
type reshapeCand struct {
	entry File
	node  int // old node directory, -1 for the global area
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

// oldTopology returns the topology of m's run, with ranks placed on
// nodes in blocks of NodeSize as FTI does. It names every old node:
// rank 0's work on the failure path, or offline.
func oldTopology(m *Manifest) (*partner.Topology, error) {
	old := partEntries{m}
	nodes := make([]string, m.NumNodes())
	for k := range nodes {
		var err error
		if nodes[k], err = old.nodeName(k); err != nil {
			return nil, err
		}
	}
	ids := make([]string, m.Ranks)
	for r := range ids {
		ids[r] = nodes[r/max(m.NodeSize, 1)]
	}
	return partner.NewTopologyTable(m.Ranks, m.NodeSize, m.GroupSize, ids, partner.NodeTable(nodes))
}

// reshapeRebuild has rank 0 rebuild the lost files of m offline (L2,
// L3), when it sees every old node directory in which the listing found
// a file (nonEmpty of them). The rebuild decodes every lost group: it
// is rank 0's work alone, on the failure path. Collective.
func (e *Engine) reshapeRebuild(m *Manifest, l Level, nonEmpty int) error {
	env := e.env
	rb := offlineRebuilder(l)
	if rb == nil {
		return fmt.Errorf("%v keeps no redundancy to rebuild from", m.Level)
	}
	var lerr error
	if env.Rank == 0 {
		seen := 0
		for k := range oldNodes(m) {
			s := e.cfg.NodeStore(k)
			if ents, err := s.Driver.ReadDir(s.Path(m.Dir())); err == nil && len(ents) > 0 {
				seen++
			}
		}
		if seen < nonEmpty {
			lerr = fmt.Errorf("no rank of this run sees every surviving node directory of %s, so its lost files cannot be rebuilt here (rank 0 sees %d of the %d that hold files)", m.Dir(), seen, nonEmpty)
		} else {
			// Every old rank's entries, on rank 0 alone: the rebuild
			// reads every lost group.
			full, err := LoadFull(m)
			var topo *partner.Topology
			if err == nil {
				topo, err = oldTopology(full)
			}
			if err == nil {
				var paths []string
				paths, err = rb.RebuildOffline(full, topo, e.cfg.NodeStore, partnerOptions(env))
				if len(paths) > 0 {
					env.Logger.Info(fmt.Sprintf("rebuilt %d lost files of %s (written by %d ranks) for this run of %d", len(paths), m.Dir(), m.Ranks, env.Comm.Size()),
						zap.Strings("paths", paths))
				}
			}
			lerr = err
		}
	}
	return comm.Agree(env.Comm, lerr, fmt.Sprintf("rebuild %s on rank 0", m.Dir()))
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
	if m.NumNodes()*max(m.NodeSize, 1) != m.Ranks {
		return fmt.Errorf("%s: %w: %d ranks on nodes of %d", what, ErrTopologyMismatch, m.Ranks, m.NodeSize)
	}
	if m.DCP != nil {
		// Its data files are deltas: an old rank's data is the image of its
		// chain, which the redistribution does not assemble (yet).
		return fmt.Errorf("%s: %w: a differential checkpoint (on %v) is restored by the %d ranks that wrote it only; a restart of another shape uses a full checkpoint",
			what, ErrTopologyMismatch, m.DCP.Chain, m.Ranks)
	}
	run := &spreadRun{e: e, m: m, old: partEntries{m}}
	rebuilt := false
	for {
		dirs, err := run.listers()
		if err != nil {
			return err
		}
		nonEmpty, err := run.list(dirs)
		if err != nil {
			return err
		}
		if err := run.orderCands(); err != nil {
			return err
		}
		verified, home, missing, err := run.verify()
		if err != nil {
			return err
		}
		rep, err := run.agreeMissing(missing)
		if err != nil {
			return err
		}
		if rep.Count == 0 {
			e.reshape = &Reshape{Manifest: m, Home: home, Verified: verified}
			readers := int64(0)
			if len(verified) > 0 {
				readers = 1
			}
			if readers, err = env.Comm.AllreduceInt64(readers, comm.Sum); err != nil {
				return err
			}
			if env.Rank == 0 {
				env.Logger.Info(fmt.Sprintf("%s, written by %d ranks, is recoverable by this run of %d ranks", what, m.Ranks, env.Comm.Size()),
					zap.Int("old-ranks", m.Ranks), zap.Int64("verifying-ranks", readers))
			}
			return nil
		}
		if rebuilt || offlineRebuilder(l) == nil {
			return reshapeMissing(what, m, env.Comm.Size(), rep)
		}
		total, err := env.Comm.AllreduceInt64(int64(nonEmpty), comm.Sum)
		if err != nil {
			return err
		}
		if err := e.reshapeRebuild(m, l, int(total)); err != nil {
			return fmt.Errorf("%s: %w: %w", what, ErrUnrecoverable, errors.Join(err, reshapeMissing(what, m, env.Comm.Size(), rep)))
		}
		rebuilt = true
	}
}

// reshapeMissing describes the old ranks without a readable copy: the
// first [reportedMissing] of them, with why, and how many more.
func reshapeMissing(what string, m *Manifest, size int, rep missingReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (written by %d ranks, recovering on %d): no readable copy of the data of old rank", what, m.Ranks, size)
	if rep.Count > 1 {
		b.WriteString("s")
	}
	for i, x := range rep.First {
		fmt.Fprintf(&b, " %d (%s)", x.Rank, strings.Join(x.Why, "; "))
		if i < len(rep.First)-1 || rep.Count > int64(len(rep.First)) {
			b.WriteString(",")
		}
	}
	if more := rep.Count - int64(len(rep.First)); more > 0 {
		fmt.Fprintf(&b, " and %d more", more)
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
	if e.cfg.NodeStore == nil || !e.otherShape(env.Topo, m) {
		return nil
	}
	var errs []error
	for k := range m.NumNodes() {
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
