package levels

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// Version 3 of the manifest: a root naming parts (docs/format/manifest.md).
// A part lists the files of a block of consecutive ranks. Its leader
// (the block's lowest rank) writes it; rank 0 writes the root.
//
// wire format: never change.
const (
	// ManifestVersionParts is the version of a root.
	ManifestVersionParts = 3
	// PartMagic and PartVersion start a part's magic line.
	PartMagic   = "ftigo-part"
	PartVersion = 1
	// PartsSuffix names a checkpoint's parts directory beside its root
	// (meta_dir/ckpt%08d.parts, and glbl_dir/manifests/ckpt%08d.parts).
	PartsSuffix = ".parts"
	// partExt ends a part's name.
	partExt = ".part"
)

// DefaultPartRanks is the number of ranks a part lists at least, unless
// [Config.PartRanks] says otherwise. The writer rounds it up to a
// multiple of node_size·group_size.
const DefaultPartRanks = 64

// PartsDirName returns the name of checkpoint seq's parts directory,
// relative to the directory of its root.
func PartsDirName(seq uint64) string { return CheckpointDir(seq) + PartsSuffix }

// PartName returns the name of part i of checkpoint seq at level lvl,
// relative to the directory of its root:
// "ckpt00000007.parts/L1-000003.part".
func PartName(seq uint64, lvl ID, i int) string {
	return path.Join(PartsDirName(seq), partBase(lvl, i))
}

// partBase is a part's name inside its parts directory.
func partBase(lvl ID, i int) string { return fmt.Sprintf("L%d-%06d%s", int(lvl), i, partExt) }

// parsePartBase returns the level and index a part's name carries.
func parsePartBase(name string) (ID, int, bool) {
	if !strings.HasPrefix(name, "L") || !strings.HasSuffix(name, partExt) {
		return 0, 0, false
	}
	lv, idx, ok := strings.Cut(strings.TrimSuffix(name[1:], partExt), "-")
	if !ok || len(idx) < 6 {
		return 0, 0, false
	}
	l, err1 := strconv.Atoi(lv)
	i, err2 := strconv.Atoi(idx)
	if err1 != nil || err2 != nil || i < 0 || !ID(l).Valid() {
		return 0, 0, false
	}
	return ID(l), i, true
}

// partRanksFor returns the ranks per part of a run of node size ns and
// group size gs for a target of at least target ranks (0: the default):
// the smallest multiple of ns·gs not below it.
func partRanksFor(ns, gs, target int) int {
	s := max(ns, 1) * max(gs, 1)
	if target <= 0 {
		target = DefaultPartRanks
	}
	return s * ((target + s - 1) / s)
}

// layout is how the ranks of a checkpoint fall into parts.
type layout struct {
	ranks, per int
}

func (l layout) parts() int          { return (l.ranks + l.per - 1) / l.per }
func (l layout) index(r int) int     { return r / l.per }
func (l layout) first(i int) int     { return i * l.per }
func (l layout) count(i int) int     { return max(0, min(l.per, l.ranks-i*l.per)) }
func (l layout) leader(r int) int    { return r / l.per * l.per }
func (l layout) isLeader(r int) bool { return r%l.per == 0 }

// PartRef is how a root names a part: the size and the BLAKE3-256 of
// the whole part file.
type PartRef struct {
	Size int64  `json:"size"`
	Sum  Digest `json:"blake3"`
}

// refOf returns the reference of a part file's bytes.
func refOf(raw []byte) PartRef { return PartRef{Size: int64(len(raw)), Sum: b3.Sum256(raw)} }

// Part is one part of a version 3 manifest: the files of ranks First to
// First+len(Files)-1.
type Part struct {
	Index, First int
	// Nodes are the identifiers of the nodes the part's ranks fill,
	// from node First/NodeSize on.
	Nodes []string
	// Files[j] lists the files held by rank First+j.
	Files [][]File
}

// partBody is the JSON body of a part.
type partBody struct {
	Seq   uint64   `json:"seq"`
	ID    int64    `json:"id"`
	Level ID       `json:"level"`
	Time  int64    `json:"time"`
	Index int      `json:"index"`
	First int      `json:"first"`
	Nodes []string `json:"nodes"`
	Files [][]File `json:"files"`
}

// frame encodes body as a manifest-framed file: the magic line, the
// body, the hash line.
func frame(magic string, version int, body []byte) []byte {
	sum := b3.Sum256(body)
	var b bytes.Buffer
	b.Grow(len(magic) + len(body) + len(hashPrefix) + 80)
	fmt.Fprintf(&b, "%s %d\n", magic, version)
	b.Write(body)
	b.WriteByte('\n')
	b.WriteString(hashPrefix)
	b.WriteString(hex.EncodeToString(sum[:]))
	b.WriteByte('\n')
	return b.Bytes()
}

// unframe checks a manifest-framed file of one of the versions and
// returns its version, its body and the body's offset. Every failure is
// a *CorruptionError wrapping [ErrBadManifest].
func unframe(path, magic string, b []byte, versions ...int) (int, []byte, int, error) {
	bad := func(off int, format string, a ...any) error {
		return &CorruptionError{Path: path, Rank: -1, Offset: int64(off), Err: fmt.Errorf("%w: "+format, append([]any{ErrBadManifest}, a...)...)}
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return 0, nil, 0, bad(0, "no magic line")
	}
	head := string(b[:nl])
	if !strings.HasPrefix(head, magic+" ") {
		return 0, nil, 0, bad(0, "bad magic %q", truncate(head))
	}
	version, err := strconv.Atoi(head[len(magic)+1:])
	if err != nil {
		return 0, nil, 0, bad(len(magic)+1, "bad version %q", truncate(head))
	}
	if !slices.Contains(versions, version) {
		return 0, nil, 0, bad(len(magic)+1, "unsupported version %d", version)
	}
	rest := b[nl+1:]
	nl2 := bytes.IndexByte(rest, '\n')
	if nl2 < 0 {
		return 0, nil, 0, bad(nl+1, "truncated body")
	}
	body := rest[:nl2]
	tail := rest[nl2+1:]
	hoff := nl + 1 + nl2 + 1
	if !bytes.HasPrefix(tail, []byte(hashPrefix)) || len(tail) != len(hashPrefix)+64+1 || tail[len(tail)-1] != '\n' {
		return 0, nil, 0, bad(hoff, "bad hash line")
	}
	var want Digest
	if err := want.UnmarshalText(tail[len(hashPrefix) : len(tail)-1]); err != nil {
		return 0, nil, 0, bad(hoff+len(hashPrefix), "bad hash: %v", err)
	}
	if got := b3.Sum256(body); got != want {
		return 0, nil, 0, bad(nl+1, "hash mismatch")
	}
	return version, body, nl + 1, nil
}

// decodeStrict decodes body into v, refusing unknown fields.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON body")
	}
	return nil
}

// marshalPart encodes part i of the checkpoint h with the given nodes
// and file lists.
func marshalPart(h *Manifest, i int, nodes []string, files [][]File) ([]byte, error) {
	body, err := json.Marshal(partBody{Seq: h.Seq, ID: h.ID, Level: h.Level, Time: h.Time, Index: i,
		First: h.layout().first(i), Nodes: nodes, Files: files})
	if err != nil {
		return nil, fmt.Errorf("levels: encode part %d: %w", i, err)
	}
	return frame(PartMagic, PartVersion, body), nil
}

// parsePart decodes and checks part i of checkpoint h read from path.
// Every failure is a *CorruptionError wrapping [ErrBadManifest].
func parsePart(path string, raw []byte, h *Manifest, i int) (*Part, error) {
	_, body, off, err := unframe(path, PartMagic, raw, PartVersion)
	if err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return &CorruptionError{Path: path, Rank: -1, Offset: int64(off),
			Err: fmt.Errorf("%w: "+format, append([]any{ErrBadManifest}, a...)...)}
	}
	var pb partBody
	if err := decodeStrict(body, &pb); err != nil {
		return nil, bad("decode: %v", err)
	}
	lay := h.layout()
	switch {
	case pb.Seq != h.Seq || pb.ID != h.ID || pb.Level != h.Level || pb.Time != h.Time:
		return nil, bad("part of checkpoint seq %d id %d %v time %d, the root says seq %d id %d %v time %d",
			pb.Seq, pb.ID, pb.Level, pb.Time, h.Seq, h.ID, h.Level, h.Time)
	case pb.Index != i || pb.First != lay.first(i):
		return nil, bad("part %d (first rank %d) where part %d (first rank %d) belongs", pb.Index, pb.First, i, lay.first(i))
	case len(pb.Files) != lay.count(i):
		return nil, bad("part %d lists %d ranks, want %d", i, len(pb.Files), lay.count(i))
	case len(pb.Nodes) != lay.count(i)/h.NodeSize:
		return nil, bad("part %d names %d nodes, want %d", i, len(pb.Nodes), lay.count(i)/h.NodeSize)
	}
	for _, n := range pb.Nodes {
		if n == "" || strings.ContainsAny(n, "\n\r") {
			return nil, bad("part %d: bad node name %q", i, truncate(n))
		}
	}
	p := &Part{Index: i, First: pb.First, Nodes: pb.Nodes, Files: pb.Files}
	if err := p.validate(h); err != nil {
		return nil, bad("%v", err)
	}
	return p, nil
}

// validate checks the entries of part p of checkpoint h.
func (p *Part) validate(h *Manifest) error {
	data := make([]int, len(p.Files))
	for j, fs := range p.Files {
		r := p.First + j
		for _, f := range fs {
			if err := checkEntry(h, r, f); err != nil {
				return err
			}
			if f.Role == RoleData {
				if k := f.Of - p.First; k >= 0 && k < len(data) {
					data[k]++
				}
			}
		}
	}
	for j, n := range data {
		if n != 1 {
			return fmt.Errorf("rank %d has %d data files in its part, want 1", p.First+j, n)
		}
	}
	if h.DCP != nil {
		for j := range p.Files {
			f, _ := p.dataFile(p.First + j)
			if err := checkDelta(p.First+j, f); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkEntry checks one file entry held by rank r of a manifest of
// m.Ranks ranks.
func checkEntry(m *Manifest, r int, f File) error {
	if f.Where != Local && f.Where != Global && f.Where != Meta {
		return fmt.Errorf("rank %d: file %q: bad area %d", r, f.Name, f.Where)
	}
	if f.Size < 0 || f.Of < 0 || f.Of >= m.Ranks {
		return fmt.Errorf("rank %d: file %q: bad size or owner", r, f.Name)
	}
	if f.Name == "" || strings.HasPrefix(f.Name, "/") || strings.Contains(f.Name, "..") {
		return fmt.Errorf("rank %d: bad file name %q", r, f.Name)
	}
	return nil
}

// filesOf returns the files held by rank r, when p lists it.
func (p *Part) filesOf(r int) ([]File, bool) {
	if j := r - p.First; j >= 0 && j < len(p.Files) {
		return p.Files[j], true
	}
	return nil, false
}

// dataFile returns rank r's data entry in p.
func (p *Part) dataFile(r int) (File, bool) {
	if fs, ok := p.filesOf(r); ok {
		for _, f := range fs {
			if f.Role == RoleData && f.Of == r {
				return f, true
			}
		}
	}
	for _, fs := range p.Files {
		for _, f := range fs {
			if f.Role == RoleData && f.Of == r {
				return f, true
			}
		}
	}
	return File{}, false
}

// nodesSum returns the hash a root records of a node table.
func nodesSum(nodes []string) Digest {
	h := b3.New()
	for _, n := range nodes {
		h.Write([]byte(n))
		h.Write([]byte{'\n'})
	}
	var d Digest
	copy(d[:], h.Sum(nil))
	return d
}

// tableSum is nodesSum of t's node table, without building the table.
func tableSum(t *partner.Topology) Digest {
	h := b3.New()
	buf := make([]byte, 0, 4096)
	for n := range t.NumNodes() {
		buf = append(append(buf, t.Host(n)...), '\n')
		if len(buf) >= 3072 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	var d Digest
	copy(d[:], h.Sum(nil))
	return d
}

// nodesDigest returns the hash of m's node table: the one read, or
// that of the topology of the engine that built m.
func (m *Manifest) nodesDigest() Digest {
	if m.shape != nil {
		return m.shape.digest()
	}
	return m.nodes
}

// partCopy is one copy of a part as a leader found it.
type partCopy struct {
	Path  string
	State CopyState
	Raw   []byte
	Err   error
}

// partCopies returns the directories of the two copies of a part: those
// of the primary and the replica root.
func partCopies(meta, global Store) [2]Store {
	return [2]Store{meta, replicaStore(global)}
}

// readPart reads one copy of part i of h in dir and checks it: against
// want when given (a root's reference), else against h alone.
func readPart(dir Store, h *Manifest, i int, want *PartRef) (partCopy, *Part) {
	name := dir.Path(PartName(h.Seq, h.Level, i))
	c := partCopy{Path: name}
	raw, err := vfd.ReadFileLimit(dir.Driver, name, MaxManifestSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			c.Err = &CorruptionError{Path: name, Rank: -1, Err: fmt.Errorf("%w: %w", ErrMissingFile, err)}
			return c, nil
		}
		c.State, c.Err = CopyDamaged, &CorruptionError{Path: name, Rank: -1, Err: fmt.Errorf("%w: %w", ErrBadManifest, err)}
		return c, nil
	}
	if want != nil && refOf(raw) != *want {
		c.State = CopyDamaged
		c.Err = &CorruptionError{Path: name, Rank: -1, Err: fmt.Errorf("%w: %d bytes with BLAKE3 %s, the root names %d bytes with %s",
			ErrBadManifest, len(raw), refOf(raw).Sum, want.Size, want.Sum)}
		return c, nil
	}
	p, err := parsePart(name, raw, h, i)
	if err != nil {
		c.State, c.Err = CopyDamaged, err
		return c, nil
	}
	c.State, c.Raw = CopyValid, raw
	return c, p
}

// loadPart reads part i of h from the primary copy, or from the replica
// when the primary is not valid. The error names both copies.
func loadPart(meta, global Store, h *Manifest, i int, want *PartRef) (*Part, [2]partCopy, error) {
	var cs [2]partCopy
	for k, d := range partCopies(meta, global) {
		c, p := readPart(d, h, i, want)
		cs[k] = c
		if p != nil {
			return p, cs, nil
		}
	}
	return nil, cs, fmt.Errorf("%w: part %d of checkpoint %s has no valid copy: %v; %v", ErrBadManifest, i, CheckpointDir(h.Seq), cs[0].Err, cs[1].Err)
}

// readBoth reads both copies of part i of h, checked against want, and
// returns the part from the first valid one; a second copy with the
// same bytes is valid without being decoded again. decoded counts the
// bytes decoded.
func readBoth(meta, global Store, h *Manifest, i int, want *PartRef, decoded *atomic.Int64) (*Part, [2]partCopy) {
	var cs [2]partCopy
	var got *Part
	for k, d := range partCopies(meta, global) {
		if got != nil && want != nil {
			name := d.Path(PartName(h.Seq, h.Level, i))
			c := partCopy{Path: name}
			raw, err := vfd.ReadFileLimit(d.Driver, name, MaxManifestSize)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				c.Err = &CorruptionError{Path: name, Rank: -1, Err: fmt.Errorf("%w: %w", ErrMissingFile, err)}
			case err != nil:
				c.State, c.Err = CopyDamaged, &CorruptionError{Path: name, Rank: -1, Err: fmt.Errorf("%w: %w", ErrBadManifest, err)}
			case refOf(raw) == *want:
				c.State, c.Raw = CopyValid, raw
			default:
				c.State = CopyDamaged
				c.Err = &CorruptionError{Path: name, Rank: -1, Err: fmt.Errorf("%w: %d bytes with BLAKE3 %s, the root names %d bytes with %s",
					ErrBadManifest, len(raw), refOf(raw).Sum, want.Size, want.Sum)}
			}
			cs[k] = c
			continue
		}
		c, p := readPart(d, h, i, want)
		decoded.Add(int64(len(c.Raw)))
		cs[k] = c
		if got == nil {
			got = p
		}
	}
	return got, cs
}

// view is what one rank holds of a checkpoint's file lists: the parts it
// loaded, its own list, and how to load other parts. Safe for concurrent
// use: a background raise and the application may share a manifest.
type view struct {
	mu    sync.Mutex
	parts map[int]*Part
	// own is the list of rank self when its part is not loaded.
	self int
	own  []File
	// load reads part i (nil: parts cannot be loaded).
	load func(i int) (*Part, error)
}

// partOf returns part i, loading it when needed.
func (v *view) partOf(i int) (*Part, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if p := v.parts[i]; p != nil {
		return p, nil
	}
	if v.load == nil {
		return nil, fmt.Errorf("%w: part %d is not loaded here", ErrBadManifest, i)
	}
	p, err := v.load(i)
	if err != nil {
		return nil, err
	}
	if v.parts == nil {
		v.parts = map[int]*Part{}
	}
	v.parts[i] = p
	return p, nil
}

// has returns part i when it is loaded.
func (v *view) has(i int) *Part {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.parts[i]
}

// PartRanks returns the number of ranks each part of m lists (the last
// may list fewer). A manifest of version 1 or 2 has no parts on storage:
// an engine cuts it the same way in memory.
func (m *Manifest) PartRanks() int {
	if m.partRanks > 0 {
		return m.partRanks
	}
	return partRanksFor(m.NodeSize, m.GroupSize, 0)
}

// layout returns how m's ranks fall into parts.
func (m *Manifest) layout() layout { return layout{ranks: m.Ranks, per: m.PartRanks()} }

// NumParts returns the number of parts of m.
func (m *Manifest) NumParts() int { return m.layout().parts() }

// PartOf returns the index of the part listing rank r's files.
func (m *Manifest) PartOf(r int) int { return m.layout().index(r) }

// NumNodes returns the number of nodes of the run that wrote m.
func (m *Manifest) NumNodes() int { return m.Ranks / max(m.NodeSize, 1) }

// Part returns part i of m: from its file lists when m holds every rank's
// (Files), else as this rank's view holds it or loads it from storage
// (every check of docs/format/manifest.md applied). A rank loads only the
// parts it needs: reading every part costs O(ranks).
func (m *Manifest) Part(i int) (*Part, error) {
	lay := m.layout()
	if i < 0 || i >= lay.parts() {
		return nil, fmt.Errorf("levels: checkpoint %s has no part %d", m.Dir(), i)
	}
	if m.Files != nil {
		first, n := lay.first(i), lay.count(i)
		p := &Part{Index: i, First: first, Files: m.Files[first : first+n]}
		if ns := max(m.NodeSize, 1); len(m.Nodes) >= (first+n)/ns {
			p.Nodes = m.Nodes[first/ns : (first+n)/ns]
		}
		return p, nil
	}
	if m.view == nil {
		return nil, fmt.Errorf("%w: checkpoint %s: its parts are not loaded", ErrBadManifest, m.Dir())
	}
	return m.view.partOf(i)
}

// RankFiles returns the files rank r holds in m, loading r's part when
// this rank's view does not hold it ([Manifest.Part]).
func (m *Manifest) RankFiles(r int) ([]File, error) {
	if r < 0 || r >= m.Ranks {
		return nil, fmt.Errorf("levels: checkpoint %s has no rank %d", m.Dir(), r)
	}
	if m.Files != nil {
		return m.Files[r], nil
	}
	if v := m.view; v != nil && v.own != nil && v.self == r && v.has(m.PartOf(r)) == nil {
		return v.own, nil
	}
	p, err := m.Part(m.PartOf(r))
	if err != nil {
		return nil, err
	}
	fs, _ := p.filesOf(r)
	return fs, nil
}

// SameNodes reports whether table is the node table of the run that
// wrote m.
func (m *Manifest) SameNodes(table []string) bool {
	if m.Nodes != nil {
		return slices.Equal(m.Nodes, table)
	}
	return nodesSum(table) == m.nodesDigest()
}

// LoadFull returns m with every rank's file lists and the node names set
// (Files, Nodes), read from its parts. It reads O(ranks) bytes: for one
// rank or an offline tool, never for every rank of a job.
func LoadFull(m *Manifest) (*Manifest, error) {
	if m.Files != nil {
		return m, nil
	}
	full := *m
	full.Files = make([][]File, 0, m.Ranks)
	full.Nodes = make([]string, 0, m.NumNodes())
	for i := range m.NumParts() {
		p, err := m.Part(i)
		if err != nil {
			return nil, err
		}
		full.Files = append(full.Files, p.Files...)
		full.Nodes = append(full.Nodes, p.Nodes...)
	}
	if m.version == ManifestVersionParts && nodesSum(full.Nodes) != m.nodesDigest() {
		return nil, fmt.Errorf("%w: checkpoint %s: the parts' node names do not hash to the root's nodes_blake3", ErrBadManifest, m.Dir())
	}
	full.view = nil
	return &full, nil
}

// attachLoader gives root m (read from dir, the meta area or the
// replica directory) a view that loads its parts from the parts
// directories beside both copies, each checked against the root.
func (m *Manifest) attachLoader(meta, global Store) {
	if m.version != ManifestVersionParts || m.view != nil {
		return
	}
	refs := m.refs
	m.view = &view{self: -1, load: func(i int) (*Part, error) {
		var want *PartRef
		if i < len(refs) {
			want = &refs[i]
		}
		p, _, err := loadPart(meta, global, m, i, want)
		return p, err
	}}
}

// loadFullFrom returns root m with every part read from the parts
// directory of dir (where m was read), each checked against m: a whole
// manifest ([LoadFull]). Other manifests are returned as they are.
func loadFullFrom(m *Manifest, dir Store) (*Manifest, error) {
	if m.version != ManifestVersionParts {
		return m, nil
	}
	x := *m
	refs := m.refs
	x.view = &view{self: -1, load: func(i int) (*Part, error) {
		c, p := readPart(dir, &x, i, &refs[i])
		if p == nil {
			return nil, c.Err
		}
		return p, nil
	}}
	return LoadFull(&x)
}

// RewriteManifest writes full manifest m (every rank's files set, as
// [LoadFull] returns it) over the copies of its checkpoint, as version 3:
// both copies of every part, then both root copies, each replaced
// atomically ([vfd.WriteFileAtomic]). It is for offline tools and tests
// that edit a manifest; a running job never rewrites entries.
func RewriteManifest(meta, global Store, m *Manifest) error {
	root, parts, err := asParts(m)
	if err != nil {
		return err
	}
	dirs := partCopies(meta, global)
	for i, raw := range parts {
		for _, d := range dirs {
			if err := d.Driver.MkdirAll(d.Path(PartsDirName(m.Seq)), 0o755); err != nil {
				return err
			}
			if err := vfd.WriteFileAtomic(d.Driver, d.Path(PartName(m.Seq, m.Level, i)), raw); err != nil {
				return err
			}
		}
	}
	raw, err := root.Marshal()
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := vfd.WriteFileAtomic(d.Driver, d.Path(ManifestName(m.Seq)), raw); err != nil {
			return err
		}
	}
	return nil
}

// asParts returns full manifest m as a version 3 root and the bytes of
// its parts.
func asParts(m *Manifest) (*Manifest, [][]byte, error) {
	if len(m.Files) != m.Ranks || len(m.Nodes) != m.NumNodes() {
		return nil, nil, fmt.Errorf("levels: checkpoint %s: the manifest does not list every rank's files and nodes", m.Dir())
	}
	root := *m
	root.Files, root.Nodes, root.view, root.whole = nil, nil, nil, nil
	root.version, root.nodes, root.bytes, root.hasBytes = ManifestVersionParts, nodesSum(m.Nodes), m.Bytes(), true
	root.partRanks = m.PartRanks()
	root.refs = make([]PartRef, root.NumParts())
	parts := make([][]byte, len(root.refs))
	for i := range root.refs {
		p, err := m.Part(i)
		if err != nil {
			return nil, nil, err
		}
		if parts[i], err = marshalPart(&root, i, p.Nodes, p.Files); err != nil {
			return nil, nil, err
		}
		root.refs[i] = refOf(parts[i])
	}
	var err error
	root.identity, err = root.computeIdentity()
	return &root, parts, err
}
