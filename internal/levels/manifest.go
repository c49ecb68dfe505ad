package levels

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/vfd"
)

// Manifest format constants; see docs/format/manifest.md.
//
// wire format: never change.
const (
	ManifestMagic   = "ftigo-manifest"
	ManifestVersion = 1
	// ManifestVersionDCP is the version of the manifests of differential
	// checkpoints (those with a DCP field); full checkpoints keep version 1.
	ManifestVersionDCP = 2
	manifestPrefix     = "ckpt"
	manifestSuffix     = ".manifest"
	hashPrefix         = "blake3 "
)

// Manifest describes one committed checkpoint. It is written last, by rank
// 0, in two copies (meta area and global area); a checkpoint is committed
// when a valid copy exists (docs/format/manifest.md).
type Manifest struct {
	// Run is the run that committed the checkpoint and owns its files
	// (see [RunFile]); empty for a run from before run ids.
	Run string `json:"run,omitempty"`
	// Seq is the commit sequence number (strictly increasing over a run
	// and its restarts); it names the checkpoint's directories.
	Seq uint64 `json:"seq"`
	// ID is the application's checkpoint id.
	ID int64 `json:"id"`
	// Level is the level the checkpoint was taken at.
	Level ID `json:"level"`
	// Ranks is the number of application ranks.
	Ranks int `json:"ranks"`
	// NodeSize and GroupSize are the topology parameters.
	NodeSize  int `json:"node_size"`
	GroupSize int `json:"group_size"`
	// Nodes lists the node identifiers (hostnames, or node%04d names) in node-index order.
	Nodes []string `json:"nodes"`
	// Time is the commit time in Unix nanoseconds.
	Time int64 `json:"time"`
	// Files lists, per holding rank, the files that rank holds; Files[r][0]
	// is rank r's data file unless the level keeps data elsewhere.
	Files [][]File `json:"files"`
	// Kept marks the checkpoint Finalize kept for the next run
	// (keep_last_ckpt); a restart from it reports that status.
	Kept bool `json:"kept,omitempty"`
	// DCP is set for a differential checkpoint: the checkpoints it
	// depends on and what it wrote (docs/format/dcp.md). Such a manifest
	// is version 2, or a version 3 root with a dcp field.
	DCP *DCP `json:"dcp,omitempty"`
	// Compressed is set when the checkpoint's writers stored some
	// variable compressed or at reduced precision: the bytes of variable
	// data it wrote and the bytes they take (optional: older manifests
	// and uncompressed checkpoints have none).
	Compressed *Compressed `json:"compressed,omitempty"`

	// The fields below are version 3's and an engine's (see parts.go).
	// Files and Nodes are nil in a root and in an engine's view: the
	// file lists live in parts, read with [Manifest.Part],
	// [Manifest.RankFiles] and [Manifest.DataFile].

	// version is 0 for a manifest built in memory (written as version 1
	// or 2), else the version it was read or written as.
	version int
	// bytes is the total size of the data entries, when hasBytes.
	bytes    int64
	hasBytes bool
	// nodes is the hash of the node table (when Nodes is nil). A
	// manifest this engine built leaves it zero and names its topology
	// in shape instead: the hash is computed when something needs it
	// ([Manifest.nodesDigest]).
	nodes Digest
	shape *topoShape
	// partRanks is the number of ranks per part (0: the default layout).
	partRanks int
	// raisedFrom is a root's raised_from.
	raisedFrom *Digest
	// identity is the BLAKE3 of the body of the root (or whole manifest)
	// with Kept false: what a raised root's raised_from names.
	identity Digest
	// refs is a root's part table (rank 0, and manifests read from
	// storage).
	refs []PartRef
	// whole is, on rank 0, the whole manifest of versions 1 and 2 a view
	// stands for (to rewrite it).
	whole *Manifest
	// view holds the parts this rank loaded and loads the others.
	view *view
}

// Compressed sums, over the ranks, the variable data a checkpoint wrote
// (its dirty blocks for a differential one): Logical bytes as the
// program holds them, Stored bytes as the files hold them.
type Compressed struct {
	Logical int64 `json:"logical_bytes"`
	Stored  int64 `json:"stored_bytes"`
}

// Ratio is Logical / Stored, the compression ratio (1 when nothing was
// stored).
func (c *Compressed) Ratio() float64 {
	if c == nil || c.Stored <= 0 {
		return 1
	}
	return float64(c.Logical) / float64(c.Stored)
}

// check refuses totals no commit writes (nil is fine).
func (c *Compressed) check() error {
	if c != nil && (c.Logical <= 0 || c.Stored < 0 || c.Stored > c.Logical) {
		return fmt.Errorf("compressed: %d stored bytes for %d logical bytes", c.Stored, c.Logical)
	}
	return nil
}

// compressedOf returns the manifest field for the totals d, nil when no
// rank reported compressed data.
func compressedOf(d DataStats) *Compressed {
	if d.Logical <= 0 {
		return nil
	}
	return &Compressed{Logical: d.Logical, Stored: d.Stored}
}

// Dir returns the checkpoint's directory name in every area.
func (m *Manifest) Dir() string { return CheckpointDir(m.Seq) }

// DataFile returns the file with role "data" protecting rank r, and false
// when there is none (or its part cannot be loaded: see
// [Manifest.RankFiles]).
func (m *Manifest) DataFile(r int) (File, bool) {
	if m.Files == nil {
		if v := m.view; v != nil && v.own != nil && v.self == r {
			// A rank's own list is where its data entry is.
			for _, f := range v.own {
				if f.Role == RoleData && f.Of == r {
					return f, true
				}
			}
			return File{}, false
		}
		if r < 0 || r >= m.Ranks {
			return File{}, false
		}
		p, err := m.Part(m.PartOf(r))
		if err != nil {
			return File{}, false
		}
		return p.dataFile(r)
	}
	if r >= 0 && r < len(m.Files) {
		for _, f := range m.Files[r] {
			if f.Role == RoleData && f.Of == r {
				return f, true
			}
		}
	}
	for _, fs := range m.Files {
		for _, f := range fs {
			if f.Role == RoleData && f.Of == r {
				return f, true
			}
		}
	}
	return File{}, false
}

// Bytes returns the total size of the data files.
func (m *Manifest) Bytes() int64 {
	if m.hasBytes {
		return m.bytes
	}
	var n int64
	for _, fs := range m.Files {
		for _, f := range fs {
			if f.Role == RoleData {
				n += f.Size
			}
		}
	}
	return n
}

// Roles of checkpoint files.
//
// wire format: never change.
const (
	RoleData      = "data"
	RolePartner   = "partner"
	RoleParity    = "parity"
	RoleContainer = "container"
)

// CheckpointDir returns the directory name of checkpoint seq in every
// area: "ckpt" and the zero-padded sequence number.
func CheckpointDir(seq uint64) string { return fmt.Sprintf("%s%08d", manifestPrefix, seq) }

// ManifestName returns the manifest file name of checkpoint seq inside the meta area.
func ManifestName(seq uint64) string { return CheckpointDir(seq) + manifestSuffix }

// RankFileName returns the conventional name of a per-rank file of a
// checkpoint: dir/<role><rank%06d>.fti, for example
// "ckpt00000007/data000003.fti". Levels name their files with it.
func RankFileName(dir, role string, rank int) string {
	return fmt.Sprintf("%s/%s%06d.fti", dir, role, rank)
}

// parseSeq parses "ckpt%08d" + suffix and returns the number.
func parseSeq(name, suffix string) (uint64, bool) {
	if !strings.HasPrefix(name, manifestPrefix) || !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	num := name[len(manifestPrefix) : len(name)-len(suffix)]
	if len(num) < 8 {
		return 0, false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(num, 10, 64)
	return v, err == nil
}

// ScannedManifest is one manifest file of a meta area, as
// [ScanManifests] found it: either usable (M and Raw set) or not (Err).
type ScannedManifest struct {
	// Name is the file name in the meta area; Seq the number it carries.
	Name string
	Seq  uint64
	// Raw is the file's bytes and M their decoding, when Err is nil.
	Raw []byte
	M   *Manifest
	// Err says why the manifest is unusable: the read error, or a
	// *CorruptionError wrapping [ErrBadManifest] (bad content, or a
	// sequence number other than the one in its name).
	Err error
}

// ScanManifests reads and checks every manifest ("ckpt%08d.manifest") in
// one directory — the meta area, or the replica directory of the global
// area — and returns them in sequence order, with the check every copy
// gets: the manifest parses ([ParseManifest]) and holds the sequence
// number of its name; a version 3 root has every part it names valid in
// the parts directory beside it, and M lists every rank's files. Reads
// are bounded by [MaxManifestSize]. It changes
// nothing on disk. [ScanCheckpoints] gives the whole picture start-up
// acts on: both copies, the markers and the files of each checkpoint.
func ScanManifests(meta Store) ([]ScannedManifest, error) {
	ents, err := meta.Driver.ReadDir(meta.Dir)
	if err != nil {
		return nil, vfd.WrapPath(err, "list", meta.Dir)
	}
	return scanManifests(meta, ents), nil
}

// scanManifests checks the manifests among the entries ents of meta.
func scanManifests(meta Store, ents []fs.DirEntry) []ScannedManifest {
	var out []ScannedManifest
	for _, de := range ents {
		name := de.Name()
		seq, ok := parseSeq(name, manifestSuffix)
		if !ok {
			continue
		}
		sm := ScannedManifest{Name: name, Seq: seq}
		p := meta.Path(name)
		raw, err := vfd.ReadFileLimit(meta.Driver, p, MaxManifestSize)
		if err == nil {
			var m *Manifest
			m, err = ParseManifest(p, raw)
			if err == nil && m.Seq != seq {
				err = &CorruptionError{Path: p, Rank: -1, Err: fmt.Errorf("%w: holds seq %d", ErrBadManifest, m.Seq)}
			}
			if err == nil {
				// A root's parts, from the parts directory beside it.
				m, err = loadFullFrom(m, meta)
			}
			if err == nil {
				sm.Raw, sm.M = raw, m
			}
		}
		sm.Err = err
		out = append(out, sm)
	}
	// Names order by number only up to 8 digits; sequence order always.
	slices.SortStableFunc(out, func(a, b ScannedManifest) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	return out
}

// MarshalText encodes a digest as lowercase hex.
func (d Digest) MarshalText() ([]byte, error) {
	out := make([]byte, hex.EncodedLen(len(d)))
	hex.Encode(out, d[:])
	return out, nil
}

// UnmarshalText decodes a hex digest.
func (d *Digest) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != len(d) {
		return fmt.Errorf("digest: want %d hex digits, got %d", 2*len(d), len(b))
	}
	_, err := hex.Decode(d[:], b)
	return err
}

// String returns the digest in hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// Marshal encodes the manifest: a magic line, one line of JSON, and a line
// with the BLAKE3-256 of the JSON bytes. A version 3 manifest encodes as
// its root, which only rank 0 (and a manifest read from storage) holds;
// elsewhere Marshal fails. Use [Manifest.MarshalView] to pass a rank's
// view between processes.
func (m *Manifest) Marshal() ([]byte, error) {
	if m.version == ManifestVersionParts {
		return m.marshalRoot()
	}
	w := m
	if m.Files == nil && m.whole != nil {
		x := *m.whole
		x.Kept = m.Kept
		w = &x
	}
	body, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("levels: encode manifest: %w", err)
	}
	version := ManifestVersion
	if w.DCP != nil {
		version = ManifestVersionDCP
	}
	return frame(ManifestMagic, version, body), nil
}

// rootBody is the JSON body of a version 3 root.
type rootBody struct {
	Run        string      `json:"run,omitempty"`
	Seq        uint64      `json:"seq"`
	ID         int64       `json:"id"`
	Level      ID          `json:"level"`
	Ranks      int         `json:"ranks"`
	NodeSize   int         `json:"node_size"`
	GroupSize  int         `json:"group_size"`
	Nodes      Digest      `json:"nodes_blake3"`
	Time       int64       `json:"time"`
	Bytes      int64       `json:"bytes"`
	PartRanks  int         `json:"part_ranks"`
	Parts      []PartRef   `json:"parts"`
	Kept       bool        `json:"kept,omitempty"`
	DCP        *DCP        `json:"dcp,omitempty"`
	Compressed *Compressed `json:"compressed,omitempty"`
	RaisedFrom *Digest     `json:"raised_from,omitempty"`
}

// rootBody returns m's root body; refs must be set.
func (m *Manifest) rootBody() rootBody {
	return rootBody{Run: m.Run, Seq: m.Seq, ID: m.ID, Level: m.Level, Ranks: m.Ranks, NodeSize: m.NodeSize, GroupSize: m.GroupSize,
		Nodes: m.nodesDigest(), Time: m.Time, Bytes: m.bytes, PartRanks: m.PartRanks(), Parts: m.refs, Kept: m.Kept, DCP: m.DCP,
		Compressed: m.Compressed, RaisedFrom: m.raisedFrom}
}

// marshalRoot encodes m's root.
func (m *Manifest) marshalRoot() ([]byte, error) {
	if len(m.refs) != m.layout().parts() {
		return nil, fmt.Errorf("levels: checkpoint %s: this rank holds no root to write (only rank 0 does)", m.Dir())
	}
	body, err := json.Marshal(m.rootBody())
	if err != nil {
		return nil, fmt.Errorf("levels: encode root: %w", err)
	}
	return frame(ManifestMagic, ManifestVersionParts, body), nil
}

// ident returns m's identity: recorded, or computed from a whole
// manifest's body.
func (m *Manifest) ident() Digest {
	if m.identity == (Digest{}) && m.version != ManifestVersionParts && m.Files != nil {
		if d, err := m.computeIdentity(); err == nil {
			return d
		}
	}
	return m.identity
}

// computeIdentity returns the BLAKE3 of m's body with Kept false: a
// root's (refs set) or a whole manifest's (Files set).
func (m *Manifest) computeIdentity() (Digest, error) {
	x := *m
	x.Kept = false
	var body []byte
	var err error
	if m.version == ManifestVersionParts {
		body, err = json.Marshal(x.rootBody())
	} else {
		body, err = json.Marshal(&x)
	}
	if err != nil {
		return Digest{}, err
	}
	return b3.Sum256(body), nil
}

// ParseManifest decodes and checks a manifest read from path (path is used
// in errors only): a whole manifest of version 1 or 2, or a version 3
// root (its parts are not read: see [LoadFull]). Every failure is a
// *CorruptionError wrapping [ErrBadManifest].
func ParseManifest(path string, b []byte) (*Manifest, error) {
	bad := func(off int, format string, a ...any) error {
		return &CorruptionError{Path: path, Rank: -1, Offset: int64(off), Err: fmt.Errorf("%w: "+format, append([]any{ErrBadManifest}, a...)...)}
	}
	version, body, nl, err := unframe(path, ManifestMagic, b, ManifestVersion, ManifestVersionDCP, ManifestVersionParts)
	if err != nil {
		return nil, err
	}
	if version == ManifestVersionParts {
		return parseRoot(body, bad, nl)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, bad(nl, "decode: %v", err)
	}
	if err := m.validate(); err != nil {
		return nil, bad(nl, "%v", err)
	}
	if (m.DCP != nil) != (version == ManifestVersionDCP) {
		return nil, bad(len(ManifestMagic)+1, "version %d with%s a dcp field", version, map[bool]string{true: "", false: "out"}[m.DCP != nil])
	}
	return &m, nil
}

// parseRoot decodes a version 3 root's body (at offset off).
func parseRoot(body []byte, bad func(int, string, ...any) error, off int) (*Manifest, error) {
	var rb rootBody
	if err := decodeStrict(body, &rb); err != nil {
		return nil, bad(off, "decode: %v", err)
	}
	m := &Manifest{Run: rb.Run, Seq: rb.Seq, ID: rb.ID, Level: rb.Level, Ranks: rb.Ranks, NodeSize: rb.NodeSize, GroupSize: rb.GroupSize,
		Time: rb.Time, Kept: rb.Kept, DCP: rb.DCP, Compressed: rb.Compressed, version: ManifestVersionParts, bytes: rb.Bytes, hasBytes: true,
		nodes: rb.Nodes, partRanks: rb.PartRanks, raisedFrom: rb.RaisedFrom, refs: rb.Parts}
	if err := m.validateRoot(); err != nil {
		return nil, bad(off, "%v", err)
	}
	var err error
	if m.identity, err = m.computeIdentity(); err != nil {
		return nil, bad(off, "%v", err)
	}
	return m, nil
}

// validateRoot checks what a root says on its own.
func (m *Manifest) validateRoot() error {
	if m.Run != "" {
		if err := ValidRunID(m.Run); err != nil {
			return err
		}
	}
	switch {
	case !m.Level.Valid():
		return fmt.Errorf("level %d out of range", int(m.Level))
	case m.Ranks <= 0:
		return fmt.Errorf("ranks %d", m.Ranks)
	case m.NodeSize <= 0 || m.Ranks%m.NodeSize != 0:
		return fmt.Errorf("node size %d does not divide %d ranks", m.NodeSize, m.Ranks)
	case m.GroupSize <= 0:
		return fmt.Errorf("group size %d", m.GroupSize)
	case m.partRanks <= 0 || m.partRanks%m.NodeSize != 0:
		return fmt.Errorf("part_ranks %d is not a positive multiple of node size %d", m.partRanks, m.NodeSize)
	case len(m.refs) != m.layout().parts():
		return fmt.Errorf("%d parts for %d ranks of %d per part", len(m.refs), m.Ranks, m.partRanks)
	case m.bytes < 0:
		return fmt.Errorf("bytes %d", m.bytes)
	}
	if err := m.Compressed.check(); err != nil {
		return err
	}
	for i, r := range m.refs {
		if r.Size <= 0 || r.Size > MaxManifestSize {
			return fmt.Errorf("part %d: size %d", i, r.Size)
		}
	}
	return m.validateChain()
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func (m *Manifest) validate() error {
	if m.Run != "" {
		if err := ValidRunID(m.Run); err != nil {
			return err
		}
	}
	if !m.Level.Valid() {
		return fmt.Errorf("level %d out of range", int(m.Level))
	}
	if m.Ranks <= 0 || len(m.Files) != m.Ranks {
		return fmt.Errorf("ranks %d but %d file lists", m.Ranks, len(m.Files))
	}
	if m.NodeSize <= 0 || m.Ranks%m.NodeSize != 0 {
		return fmt.Errorf("node size %d does not divide %d ranks", m.NodeSize, m.Ranks)
	}
	if len(m.Nodes) != m.Ranks/m.NodeSize {
		return fmt.Errorf("%d node names for %d nodes", len(m.Nodes), m.Ranks/m.NodeSize)
	}
	for r, fs := range m.Files {
		for _, f := range fs {
			if err := checkEntry(m, r, f); err != nil {
				return err
			}
		}
	}
	for r := 0; r < m.Ranks; r++ {
		if _, ok := m.DataFile(r); !ok {
			return fmt.Errorf("no data file for rank %d", r)
		}
	}
	if err := m.Compressed.check(); err != nil {
		return err
	}
	return m.validateDCP()
}
