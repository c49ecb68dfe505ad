package levels

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/ftigo/ftigo/vfd"
)

// An engine's manifests are views: the fields every rank shares and the
// parts this rank holds (its own block's), loading other parts from
// storage on demand. Rank 0 also holds the root.

// viewHeader is what every rank holds of a checkpoint besides its file
// lists. It moves in start-up's broadcast and between an application
// rank and its head.
type viewHeader struct {
	Version    int         `json:"v"`
	Run        string      `json:"run,omitempty"`
	Seq        uint64      `json:"seq"`
	ID         int64       `json:"id"`
	Level      ID          `json:"level"`
	Ranks      int         `json:"ranks"`
	NodeSize   int         `json:"node_size"`
	GroupSize  int         `json:"group_size"`
	Time       int64       `json:"time"`
	Kept       bool        `json:"kept,omitempty"`
	DCP        *DCP        `json:"dcp,omitempty"`
	Compressed *Compressed `json:"compressed,omitempty"`
	Bytes      int64       `json:"bytes"`
	Nodes      Digest      `json:"nodes"`
	PartRanks  int         `json:"part_ranks"`
	RaisedFrom *Digest     `json:"raised_from,omitempty"`
	Identity   Digest      `json:"identity"`
}

// header returns m's shared fields. For a whole manifest it computes
// what a view keeps of it (O(ranks): rank 0 only).
func (m *Manifest) header() viewHeader {
	h := viewHeader{Version: m.version, Run: m.Run, Seq: m.Seq, ID: m.ID, Level: m.Level, Ranks: m.Ranks, NodeSize: m.NodeSize,
		GroupSize: m.GroupSize, Time: m.Time, Kept: m.Kept, DCP: m.DCP, Compressed: m.Compressed, Bytes: m.Bytes(), Nodes: m.nodesDigest(),
		PartRanks: m.PartRanks(), RaisedFrom: m.raisedFrom, Identity: m.ident()}
	if m.Nodes != nil {
		h.Nodes = nodesSum(m.Nodes)
	}
	return h
}

// manifest returns a manifest of the header's fields, with no view.
func (h viewHeader) manifest() *Manifest {
	return &Manifest{Run: h.Run, Seq: h.Seq, ID: h.ID, Level: h.Level, Ranks: h.Ranks, NodeSize: h.NodeSize, GroupSize: h.GroupSize,
		Time: h.Time, Kept: h.Kept, DCP: h.DCP, Compressed: h.Compressed, version: h.Version, bytes: h.Bytes, hasBytes: true, nodes: h.Nodes,
		partRanks: h.PartRanks, raisedFrom: h.RaisedFrom, identity: h.Identity}
}

// check refuses a header no engine writes (from a peer's message).
func (h viewHeader) check() error {
	m := h.manifest()
	switch {
	case !m.Level.Valid() || m.Ranks <= 0 || m.NodeSize <= 0 || m.Ranks%m.NodeSize != 0 || m.partRanks <= 0:
		return fmt.Errorf("%w: checkpoint header seq %d: level %d, %d ranks, node size %d, %d ranks per part",
			ErrBadManifest, h.Seq, int(h.Level), h.Ranks, h.NodeSize, h.PartRanks)
	}
	if err := m.Compressed.check(); err != nil {
		return fmt.Errorf("%w: checkpoint header seq %d: %w", ErrBadManifest, h.Seq, err)
	}
	return m.validateChain()
}

// viewWire is a rank's view as it travels between processes.
type viewWire struct {
	Head viewHeader `json:"head"`
	Rank int        `json:"rank"`
	Own  []File     `json:"own"`
	// Refs is the root's part table, when the rank holds it (rank 0).
	Refs []PartRef `json:"refs,omitempty"`
}

// MarshalView encodes what rank of m's view holds that a [Engine.RaiseFor]
// on its behalf needs: the shared fields and the rank's own file list.
func (m *Manifest) MarshalView(rank int) ([]byte, error) {
	own, err := m.RankFiles(rank)
	if err != nil {
		return nil, err
	}
	return json.Marshal(viewWire{Head: m.header(), Rank: rank, Own: own, Refs: m.refs})
}

// ParseView decodes a [Manifest.MarshalView] message (path names it in
// errors). The view it returns loads other ranks' parts only once an
// engine adopts it ([Engine.RaiseFor], [Engine.AdoptRaised]).
func ParseView(path string, b []byte) (*Manifest, error) {
	var w viewWire
	if err := decodeStrict(b, &w); err != nil {
		return nil, &CorruptionError{Path: path, Rank: -1, Err: fmt.Errorf("%w: %v", ErrBadManifest, err)}
	}
	if err := w.Head.check(); err != nil {
		return nil, &CorruptionError{Path: path, Rank: w.Rank, Err: err}
	}
	if w.Rank < 0 || w.Rank >= w.Head.Ranks {
		return nil, &CorruptionError{Path: path, Rank: -1, Err: fmt.Errorf("%w: rank %d of %d", ErrBadManifest, w.Rank, w.Head.Ranks)}
	}
	m := w.Head.manifest()
	for _, f := range w.Own {
		if err := checkEntry(m, w.Rank, f); err != nil {
			return nil, &CorruptionError{Path: path, Rank: w.Rank, Err: fmt.Errorf("%w: %v", ErrBadManifest, err)}
		}
	}
	if w.Refs != nil {
		if m.version != ManifestVersionParts || len(w.Refs) != m.NumParts() {
			return nil, &CorruptionError{Path: path, Rank: w.Rank, Err: fmt.Errorf("%w: %d part references for %d parts", ErrBadManifest, len(w.Refs), m.NumParts())}
		}
		m.refs = w.Refs
	}
	m.view = &view{self: w.Rank, own: w.Own}
	return m, nil
}

// adopt gives m a view of this engine: own is this rank's file list
// (nil: none), parts the parts it holds, and other parts load from
// storage. An existing view keeps its parts.
func (e *Engine) adopt(m *Manifest, own []File, parts ...*Part) *Manifest {
	v := &view{self: e.env.Rank, own: own, parts: map[int]*Part{}}
	if old := m.view; old != nil {
		old.mu.Lock()
		for i, p := range old.parts {
			v.parts[i] = p
		}
		if v.own == nil && old.self == v.self {
			v.own = old.own
		}
		old.mu.Unlock()
	}
	for _, p := range parts {
		if p != nil {
			v.parts[p.Index] = p
		}
	}
	v.load = e.loaderFor(m)
	m.view = v
	return m
}

// loaderFor returns how this rank loads a part of m from storage: a
// version 3 part from its two copies, checked against the root when this
// rank holds it and against m's fields otherwise; a part of a whole
// manifest (versions 1, 2) by reading the whole manifest once, checked
// against m's identity.
func (e *Engine) loaderFor(m *Manifest) func(int) (*Part, error) {
	meta, global, decoded := e.env.Meta, e.env.Global, e.decoded
	if m.version == ManifestVersionParts {
		refs := m.refs
		return func(i int) (*Part, error) {
			var want *PartRef
			if i < len(refs) {
				want = &refs[i]
			}
			p, cs, err := loadPart(meta, global, m, i, want)
			for _, c := range cs {
				decoded.Add(int64(len(c.Raw)))
			}
			return p, err
		}
	}
	var once sync.Once
	var whole *Manifest
	var werr error
	return func(i int) (*Part, error) {
		once.Do(func() {
			whole, werr = loadWhole(meta, global, m)
			if whole != nil {
				decoded.Add(whole.bytes)
				whole.partRanks = m.partRanks
			}
		})
		if werr != nil {
			return nil, werr
		}
		return whole.Part(i)
	}
}

// loadWhole reads the whole manifest (version 1 or 2) m stands for: the
// primary, or the replica, whichever holds m (the same identity). Its
// bytes field holds the size read.
func loadWhole(meta, global Store, m *Manifest) (*Manifest, error) {
	var errs []error
	for _, s := range []Store{meta, replicaStore(global)} {
		p := s.Path(ManifestName(m.Seq))
		raw, err := vfd.ReadFileLimit(s.Driver, p, MaxManifestSize)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		w, err := ParseManifest(p, raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if w.ident() != m.identity {
			errs = append(errs, fmt.Errorf("%s describes another checkpoint than the one committed", p))
			continue
		}
		w.bytes = int64(len(raw))
		return w, nil
	}
	return nil, fmt.Errorf("%w: checkpoint %s: %w", ErrBadManifest, m.Dir(), errors.Join(errs...))
}

// partsOf splits whole manifest w into its parts (rank 0 at start-up,
// for the leaders).
func partsOf(w *Manifest) []*Part {
	out := make([]*Part, w.NumParts())
	for i := range out {
		out[i], _ = w.Part(i)
	}
	return out
}
