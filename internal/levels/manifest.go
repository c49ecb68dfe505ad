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
	// is version 2.
	DCP *DCP `json:"dcp,omitempty"`
	// Compressed is set when the checkpoint's writers stored some
	// variable compressed or at reduced precision: the bytes of variable
	// data it wrote and the bytes they take (optional: older manifests
	// and uncompressed checkpoints have none).
	Compressed *Compressed `json:"compressed,omitempty"`
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
// when there is none.
func (m *Manifest) DataFile(r int) (File, bool) {
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
// number of its name. Reads are bounded by [MaxManifestSize]. It changes
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
// with the BLAKE3-256 of the JSON bytes.
func (m *Manifest) Marshal() ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("levels: encode manifest: %w", err)
	}
	sum := b3.Sum256(body)
	var b bytes.Buffer
	version := ManifestVersion
	if m.DCP != nil {
		version = ManifestVersionDCP
	}
	fmt.Fprintf(&b, "%s %d\n", ManifestMagic, version)
	b.Write(body)
	b.WriteByte('\n')
	b.WriteString(hashPrefix)
	b.WriteString(hex.EncodeToString(sum[:]))
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// ParseManifest decodes and checks a manifest read from path (path is used
// in errors only). Every failure is a *CorruptionError wrapping
// [ErrBadManifest].
func ParseManifest(path string, b []byte) (*Manifest, error) {
	bad := func(off int, format string, a ...any) error {
		return &CorruptionError{Path: path, Rank: -1, Offset: int64(off), Err: fmt.Errorf("%w: "+format, append([]any{ErrBadManifest}, a...)...)}
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return nil, bad(0, "no magic line")
	}
	var version int
	head := string(b[:nl])
	if !strings.HasPrefix(head, ManifestMagic+" ") {
		return nil, bad(0, "bad magic %q", truncate(head))
	}
	v, err := strconv.Atoi(head[len(ManifestMagic)+1:])
	if err != nil {
		return nil, bad(len(ManifestMagic)+1, "bad version %q", truncate(head))
	}
	version = v
	if version != ManifestVersion && version != ManifestVersionDCP {
		return nil, bad(len(ManifestMagic)+1, "unsupported version %d", version)
	}
	rest := b[nl+1:]
	nl2 := bytes.IndexByte(rest, '\n')
	if nl2 < 0 {
		return nil, bad(nl+1, "truncated body")
	}
	body := rest[:nl2]
	tail := rest[nl2+1:]
	hoff := nl + 1 + nl2 + 1
	if !bytes.HasPrefix(tail, []byte(hashPrefix)) || len(tail) != len(hashPrefix)+64+1 || tail[len(tail)-1] != '\n' {
		return nil, bad(hoff, "bad hash line")
	}
	var want Digest
	if err := want.UnmarshalText(tail[len(hashPrefix) : len(tail)-1]); err != nil {
		return nil, bad(hoff+len(hashPrefix), "bad hash: %v", err)
	}
	if got := b3.Sum256(body); got != want {
		return nil, bad(nl+1, "hash mismatch")
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, bad(nl+1, "decode: %v", err)
	}
	if err := m.validate(); err != nil {
		return nil, bad(nl+1, "%v", err)
	}
	if (m.DCP != nil) != (version == ManifestVersionDCP) {
		return nil, bad(len(ManifestMagic)+1, "version %d with%s a dcp field", version, map[bool]string{true: "", false: "out"}[m.DCP != nil])
	}
	return &m, nil
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
			if f.Where != Local && f.Where != Global && f.Where != Meta {
				return fmt.Errorf("rank %d: file %q: bad area %d", r, f.Name, f.Where)
			}
			if f.Size < 0 || f.Of < 0 || f.Of >= m.Ranks {
				return fmt.Errorf("rank %d: file %q: bad size or owner", r, f.Name)
			}
			if f.Name == "" || strings.HasPrefix(f.Name, "/") || strings.Contains(f.Name, "..") {
				return fmt.Errorf("rank %d: bad file name %q", r, f.Name)
			}
		}
	}
	for r := 0; r < m.Ranks; r++ {
		if _, ok := m.DataFile(r); !ok {
			return fmt.Errorf("no data file for rank %d", r)
		}
	}
	if c := m.Compressed; c != nil && (c.Logical <= 0 || c.Stored < 0 || c.Stored > c.Logical) {
		return fmt.Errorf("compressed: %d stored bytes for %d logical bytes", c.Stored, c.Logical)
	}
	return m.validateDCP()
}
