package levels

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/ftigo/ftigo/vfd"
)

// Names of the checkpoint metadata beside the manifests (docs/format/manifest.md).
//
// wire format: never change.
const (
	// ReplicaDir is the directory of the global area that holds the
	// replica of every manifest, under the manifest's own name
	// (glbl_dir/<run>/manifests/ckpt%08d.manifest). Being a subdirectory, the
	// replica never collides with the primary, even when meta_dir is
	// glbl_dir.
	ReplicaDir = "manifests"
	// PendingSuffix names the intent marker of a checkpoint being written
	// (meta_dir/ckpt%08d.pending): durable before any file of the
	// checkpoint is published, removed once a manifest copy is.
	PendingSuffix = ".pending"
	// DeletingSuffix names the marker of a checkpoint being deleted
	// (meta_dir/ckpt%08d.deleting, the primary manifest renamed): durable
	// before the last manifest copy goes, removed once every file has.
	DeletingSuffix = ".deleting"
	// SupersededInfix names the marker of a checkpoint that a newer one
	// drops when it commits (meta_dir/ckpt%08d.superseded-%08d, the
	// second number the newer checkpoint's): made durable with the newer
	// checkpoint's manifest, it makes the older one a deletion as soon as
	// (and only if) the newer one is committed, or was and is being
	// deleted; removed once the deletion marker is durable.
	SupersededInfix = ".superseded-"
	// BrokenSuffix is appended to a damaged manifest copy moved aside
	// (kept for forensics, ignored otherwise).
	BrokenSuffix = ".broken"
	// LockName is the lock file in meta_dir that one job (or runtime, or
	// offline tool) holds while it uses the run's directories.
	LockName = "ftigo.lock"
)

// MaxManifestSize bounds the bytes read from a manifest copy or marker
// (256 MiB: about a million file entries); a larger file is damaged.
const MaxManifestSize = 256 << 20

// ReplicaName returns the replica's name of checkpoint seq, relative to
// the global area.
func ReplicaName(seq uint64) string { return path.Join(ReplicaDir, ManifestName(seq)) }

// PendingName returns the intent marker's name of checkpoint seq in the meta area.
func PendingName(seq uint64) string { return CheckpointDir(seq) + PendingSuffix }

// DeletingName returns the deletion marker's name of checkpoint seq in the meta area.
func DeletingName(seq uint64) string { return CheckpointDir(seq) + DeletingSuffix }

// SupersededName returns the name, in the meta area, of the marker saying
// that checkpoint seq is dropped when checkpoint by commits.
func SupersededName(seq, by uint64) string {
	return fmt.Sprintf("%s%s%08d", CheckpointDir(seq), SupersededInfix, by)
}

// parseSuperseded returns the numbers a superseded marker's name holds.
func parseSuperseded(name string) (seq, by uint64, ok bool) {
	head, tail, found := strings.Cut(name, SupersededInfix)
	if !found {
		return 0, 0, false
	}
	if seq, ok = parseSeq(head, ""); !ok {
		return 0, 0, false
	}
	if by, ok = parseSeq(manifestPrefix+tail, ""); !ok {
		return 0, 0, false
	}
	return seq, by, true
}

// Supersession is a superseded marker: the checkpoint is dropped when
// checkpoint By is committed (or being deleted).
type Supersession struct {
	Path string
	By   uint64
}

// CopyState is the state of one copy of a checkpoint's manifest.
type CopyState int

// States of a manifest copy.
const (
	// CopyMissing: no file.
	CopyMissing CopyState = iota
	// CopyValid: the file parses, its hash checks and it holds the
	// sequence number of its name.
	CopyValid
	// CopyDamaged: unreadable, too large, or bad content or hash; or a
	// root some part of which has no valid copy.
	CopyDamaged
	// CopyForeign: a valid manifest of another checkpoint (swapped or
	// copied from elsewhere); not valid under this name.
	CopyForeign
)

// String returns "missing", "valid", "damaged" or "foreign".
func (s CopyState) String() string {
	switch s {
	case CopyMissing:
		return "missing"
	case CopyValid:
		return "valid"
	case CopyDamaged:
		return "damaged"
	case CopyForeign:
		return "foreign"
	}
	return fmt.Sprintf("copy-state(%d)", int(s))
}

// ManifestCopy is one copy of a manifest as a scan found it.
type ManifestCopy struct {
	// Path is the file's path (in the meta area for the primary, in
	// the global area for the replica).
	Path  string
	State CopyState
	// Raw and M are the bytes and their decoding when State is
	// CopyValid (M is also set for CopyForeign).
	Raw []byte
	M   *Manifest
	// Err says why the copy is not valid (nil when valid or missing).
	Err error
}

// bad reports whether the copy exists but is not valid.
func (c ManifestCopy) bad() bool { return c.State == CopyDamaged || c.State == CopyForeign }

// SeqState is what start-up makes of a checkpoint's metadata.
type SeqState int

// Checkpoint states, from [SeqScan.State].
const (
	// SeqCommitted: at least one valid manifest copy and no deletion
	// marker. A missing or damaged copy is repaired from the valid one.
	SeqCommitted SeqState = iota
	// SeqUncommitted: never committed — an intent marker without a
	// valid copy (the job died between publishing files and writing the
	// manifest), or nothing but tmp files and empty directories. Its
	// leftovers are removed.
	SeqUncommitted
	// SeqDeleting: a deletion marker, or a superseded marker naming a
	// newer checkpoint that is committed (or being deleted); the
	// deletion is completed.
	SeqDeleting
	// SeqLost: no valid copy and no marker, yet published files or
	// damaged copies exist: its metadata was lost. Start-up refuses to
	// guess (see [ErrMetadataLost]).
	SeqLost
)

// String returns "committed", "uncommitted", "deleting" or "lost".
func (s SeqState) String() string {
	switch s {
	case SeqCommitted:
		return "committed"
	case SeqUncommitted:
		return "uncommitted"
	case SeqDeleting:
		return "deleting"
	case SeqLost:
		return "lost"
	}
	return fmt.Sprintf("seq-state(%d)", int(s))
}

// SeqScan is everything a scan found about one checkpoint number.
type SeqScan struct {
	Seq uint64
	// Primary is meta_dir/ckpt%08d.manifest, Replica
	// glbl_dir/<run>/manifests/ckpt%08d.manifest.
	Primary, Replica ManifestCopy
	// Pending is the path of the intent marker, "" when absent.
	// PendingNodes are the nodes it names: those that may hold the
	// checkpoint's node-local files (nil when it names none, a marker
	// of an older version or one a crash left empty).
	Pending      string
	PendingNodes []NodeRange
	// Deleting is the path of the deletion marker, "" when absent;
	// DeletingM its decoding when it parses (it is the renamed primary).
	Deleting  string
	DeletingM *Manifest
	// Superseded are the superseded markers of the checkpoint;
	// SupersededBy is the newer checkpoint, committed or being deleted,
	// that one of them names (0: none), which makes this one a deletion.
	Superseded   []Supersession
	SupersededBy uint64
	// Files are published files (names without the tmp suffix) found in
	// the checkpoint's directories of the scanned areas, as paths;
	// MoreFiles counts those found but not listed (start-up lists only a
	// few per node).
	Files     []string
	MoreFiles int
	// Leftovers are tmp files, tmp directories and empty checkpoint
	// directories of the scanned areas, and tmp copies of manifests.
	Leftovers []string
	// Broken are copies moved aside earlier (*.broken), for forensics.
	Broken []string
	// PartsDirs are the checkpoint's parts directories found (version 3:
	// beside the primary and the replica root), PartFiles the parts in
	// them (any level; tmp files and empty directories are Leftovers).
	PartsDirs []string
	PartFiles []string
}

// State classifies the checkpoint by the rules of docs/format/manifest.md.
func (s *SeqScan) State() SeqState {
	switch {
	case s.Deleting != "" || s.SupersededBy != 0:
		return SeqDeleting
	case s.Primary.State == CopyValid || s.Replica.State == CopyValid:
		return SeqCommitted
	case s.Pending != "":
		return SeqUncommitted
	case len(s.Files) > 0 || s.MoreFiles > 0 || len(s.PartFiles) > 0 || s.Primary.bad() || s.Replica.bad():
		return SeqLost
	}
	return SeqUncommitted
}

// LeftOn returns, for an uncommitted checkpoint whose intent marker
// names its nodes, those of them outside the nodes 0..nodes-1 of a job:
// node-local storage that job cannot reach, where the checkpoint's
// files may remain after it cleaned its own. Nil otherwise.
func (s *SeqScan) LeftOn(nodes int) []NodeRange {
	if s.Pending == "" || s.State() != SeqUncommitted {
		return nil
	}
	return outside(s.PendingNodes, nodes)
}

// deletionNodes returns the number of nodes that may hold the files of a
// checkpoint being deleted: those of its manifest, or of its intent
// marker when that names more (0: unknown).
func (s *SeqScan) deletionNodes() int {
	n := 0
	if s.DeletingM != nil {
		n = s.DeletingM.NumNodes()
	}
	for _, r := range s.PendingNodes {
		n = max(n, r.Last+1)
	}
	return n
}

// Valid returns the copy to use for a committed checkpoint, or nil. When
// both are valid but differ (a crash while [Engine.Keep] rewrote them),
// the one marked Kept wins, otherwise the primary.
func (s *SeqScan) Valid() *ManifestCopy {
	p, r := &s.Primary, &s.Replica
	switch {
	case p.State == CopyValid && r.State == CopyValid:
		if r.M.Kept && !p.M.Kept {
			return r
		}
		return p
	case p.State == CopyValid:
		return p
	case r.State == CopyValid:
		return r
	}
	return nil
}

// disagreeing returns the copy other than good when both are valid and
// describe different checkpoints (they differ beyond Kept, which a crash
// while Finalize marked them leaves), or nil.
func (s *SeqScan) disagreeing(good *ManifestCopy) *ManifestCopy {
	other := &s.Replica
	if good == other {
		other = &s.Primary
	}
	if good == nil || other.State != CopyValid || good.State != CopyValid || SameCheckpoint(good.M, other.M) {
		return nil
	}
	return other
}

// SameCheckpoint reports whether two manifests describe the same
// checkpoint. They do when equal but for Kept. They do too when one is
// the other raised to a higher level ([Engine.Raise]). Those differ only
// in Level and in the files the raise added to each rank's list. The
// raise rewrites the primary, then the replica: a crash in between
// leaves the two.
func SameCheckpoint(a, b *Manifest) bool {
	if a.version == ManifestVersionParts || b.version == ManifestVersionParts {
		lo, hi := a, b
		if lo.Level > hi.Level {
			lo, hi = hi, lo
		}
		if lo.Level != hi.Level {
			// hi raised from lo: it names lo's body.
			return lo.Level == L1 && hi.raisedFrom != nil && *hi.raisedFrom == lo.ident()
		}
		return a.version == b.version && a.ident() == b.ident()
	}
	x, y := *a, *b
	x.Kept, y.Kept = false, false
	if x.Level != y.Level {
		lo, hi := &x, &y
		if lo.Level > hi.Level {
			lo, hi = hi, lo
		}
		if !filesWithin(lo.Files, hi.Files) {
			return false
		}
		x.Level, y.Level, x.Files, y.Files = 0, 0, nil, nil
	}
	ab, err1 := x.Marshal()
	bb, err2 := y.Marshal()
	return err1 == nil && err2 == nil && bytes.Equal(ab, bb)
}

// raisedIn reports whether files holds f as rewritten by a raise that
// records the BLAKE3 (earlier versions did at L2 and L3). That is the
// same entry with its FTI-FF checksum replaced by the BLAKE3 of its
// bytes, kept under [AttrL1Digest].
func raisedIn(f File, files []File) bool {
	if f.Attrs[AttrDigest] != DigestFTIFF {
		return false
	}
	for _, g := range files {
		if g.Attrs[AttrL1Digest] != f.Digest.String() || g.Attrs[AttrDigest] != "" {
			continue
		}
		x, y := cloneFile(f), cloneFile(g)
		delete(x.Attrs, AttrDigest)
		delete(y.Attrs, AttrL1Digest)
		x.Digest, y.Digest = Digest{}, Digest{}
		bx, err1 := json.Marshal(x)
		by, err2 := json.Marshal(y)
		if err1 == nil && err2 == nil && bytes.Equal(bx, by) {
			return true
		}
	}
	return false
}

// filesWithin reports whether every rank's files in lo are among that
// rank's files in hi.
func filesWithin(lo, hi [][]File) bool {
	if len(lo) != len(hi) {
		return false
	}
	for r := range lo {
		have := map[string]bool{}
		for _, f := range hi[r] {
			if b, err := json.Marshal(f); err == nil {
				have[string(b)] = true
			}
		}
		for _, f := range lo[r] {
			b, err := json.Marshal(f)
			if err != nil || !(have[string(b)] || raisedIn(f, hi[r])) {
				return false
			}
		}
	}
	return true
}

// AreaSeq is what one storage area holds of checkpoint Seq.
type AreaSeq struct {
	Seq       uint64   `json:"seq"`
	Files     []string `json:"files,omitempty"`
	Leftovers []string `json:"leftovers,omitempty"`
	// More counts published files left out of Files (see [SummarizeArea]).
	More int `json:"more,omitempty"`
}

// SummarizeArea keeps at most keep published files per checkpoint in
// as, counting the others in More, and drops the leftovers: what
// start-up needs from a node to tell lost metadata and name it.
func SummarizeArea(as []AreaSeq, keep int) []AreaSeq {
	out := make([]AreaSeq, len(as))
	for i, a := range as {
		out[i] = AreaSeq{Seq: a.Seq, Files: a.Files, More: a.More}
		if len(a.Files) > keep {
			out[i].Files, out[i].More = a.Files[:keep], a.More+len(a.Files)-keep
		}
	}
	return out
}

// ScanArea lists the checkpoint directories ("ckpt%08d", and tmp
// entries named after one) of area s with their published files and
// their leftovers, in sequence order. It changes nothing. A missing area
// holds nothing.
func ScanArea(s Store) ([]AreaSeq, error) {
	ents, err := s.Driver.ReadDir(s.Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, vfd.WrapPath(err, "list", s.Dir)
	}
	bySeq := map[uint64]*AreaSeq{}
	get := func(seq uint64) *AreaSeq {
		if a := bySeq[seq]; a != nil {
			return a
		}
		a := &AreaSeq{Seq: seq}
		bySeq[seq] = a
		return a
	}
	for _, de := range ents {
		name := de.Name()
		if seq, ok := parseSeq(strings.TrimSuffix(name, TmpSuffix), ""); ok {
			a := get(seq)
			full := s.Path(name)
			if strings.HasSuffix(name, TmpSuffix) {
				a.Leftovers = append(a.Leftovers, full)
				continue
			}
			if !de.IsDir() {
				a.Files = append(a.Files, full)
				continue
			}
			sub, err := s.Driver.ReadDir(full)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return nil, vfd.WrapPath(err, "list", full)
			}
			for _, f := range sub {
				p := path.Join(full, f.Name())
				if strings.HasSuffix(f.Name(), TmpSuffix) {
					a.Leftovers = append(a.Leftovers, p)
				} else {
					a.Files = append(a.Files, p)
				}
			}
			if len(sub) == 0 {
				a.Leftovers = append(a.Leftovers, full)
			}
		}
	}
	out := make([]AreaSeq, 0, len(bySeq))
	for _, a := range bySeq {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b AreaSeq) int { return cmpSeq(a.Seq, b.Seq) })
	return out, nil
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ScanCheckpoints reads the checkpoint metadata of a run — both copies of
// every manifest (meta area and [ReplicaDir] of the global area), every
// part a valid root names (each copy's M then lists every rank's files;
// a root a part of which has no valid copy is damaged), the intent and
// deletion markers, moved-aside copies — and lists the
// checkpoint directories of the global area and of every local area
// given, and reports per checkpoint number what it found, in sequence
// order. Every read is bounded by [MaxManifestSize]. It changes nothing;
// [Engine.Open] applies the same scan and rules ([SeqScan.State]) and
// then repairs and cleans. Offline tools (ftigo verify, inspect) use it
// to check the metadata itself. A missing area holds nothing; the meta
// area must exist. The checkpoints are those of the run meta names
// ([ReadRun]; [ScanRun] scans a run given).
func ScanCheckpoints(meta, global Store, locals ...Store) ([]SeqScan, error) {
	run, _, err := ReadRun(meta)
	if err != nil {
		return nil, err
	}
	return ScanRun(run, meta, global, locals...)
}

// metaScan accumulates a scan by checkpoint number.
type metaScan struct {
	bySeq map[uint64]*SeqScan
	meta  Store
	repl  Store
	// run is the run the areas belong to: a copy recording another is
	// foreign.
	run string
	// Other tmp files of the meta and replica directories (not named
	// after a checkpoint), removed at start-up.
	tmp []string
}

func (m *metaScan) get(seq uint64) *SeqScan {
	if s := m.bySeq[seq]; s != nil {
		return s
	}
	s := &SeqScan{Seq: seq,
		Primary: ManifestCopy{Path: m.meta.Path(ManifestName(seq))},
		Replica: ManifestCopy{Path: m.repl.Path(ManifestName(seq))}}
	m.bySeq[seq] = s
	return s
}

func (m *metaScan) addArea(as []AreaSeq) {
	for _, a := range as {
		s := m.get(a.Seq)
		s.Files = append(s.Files, a.Files...)
		s.MoreFiles += a.More
		s.Leftovers = append(s.Leftovers, a.Leftovers...)
	}
}

func (m *metaScan) list() []SeqScan {
	out := make([]SeqScan, 0, len(m.bySeq))
	for _, s := range m.bySeq {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b SeqScan) int { return cmpSeq(a.Seq, b.Seq) })
	// Superseded markers, newest first: whether a checkpoint is dropped
	// depends on the state of the newer one its marker names, which may
	// itself be dropped by a still newer one.
	state := map[uint64]SeqState{}
	for i := len(out) - 1; i >= 0; i-- {
		s := &out[i]
		for _, sup := range s.Superseded {
			if st, ok := state[sup.By]; ok && sup.By > s.Seq && (st == SeqCommitted || st == SeqDeleting) {
				s.SupersededBy = sup.By
				break
			}
		}
		if s.SupersededBy != 0 && s.DeletingM == nil {
			if v := s.Valid(); v != nil {
				s.DeletingM = v.M
			}
		}
		state[s.Seq] = s.State()
	}
	return out
}

// replicaStore returns the store of the replica directory.
func replicaStore(global Store) Store {
	return Store{Driver: global.Driver, Dir: global.Path(ReplicaDir)}
}

// scanMeta reads the meta area and the replica directory of run.
func scanMeta(meta, global Store, run string) (*metaScan, error) {
	sc := &metaScan{bySeq: map[uint64]*SeqScan{}, meta: meta, repl: replicaStore(global), run: run}
	ents, err := meta.Driver.ReadDir(meta.Dir)
	if err != nil {
		return nil, vfd.WrapPath(err, "list", meta.Dir)
	}
	sc.scanDir(meta, ents, true)
	rents, err := sc.repl.Driver.ReadDir(sc.repl.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, vfd.WrapPath(err, "list", sc.repl.Dir)
	}
	sc.scanDir(sc.repl, rents, false)
	return sc, nil
}

// scanDir sorts the entries of a metadata directory (meta: the primary
// one, holding the markers too) into the scan.
func (m *metaScan) scanDir(s Store, ents []fs.DirEntry, meta bool) {
	for _, de := range ents {
		name := de.Name()
		full := s.Path(name)
		if seq, ok := parseSeq(name, manifestSuffix); ok {
			c := readCopy(s, name, seq, m.run)
			if meta {
				m.get(seq).Primary = c
			} else {
				m.get(seq).Replica = c
			}
			continue
		}
		if seq, ok := parseSeq(name, PartsSuffix); ok && de.IsDir() {
			m.addPartsDir(s, m.get(seq), full)
			continue
		}
		if seq, ok := parseSeq(name, manifestSuffix+BrokenSuffix); ok {
			m.get(seq).Broken = append(m.get(seq).Broken, full)
			continue
		}
		if seq, ok := parseSeq(name, manifestSuffix+TmpSuffix); ok {
			m.get(seq).Leftovers = append(m.get(seq).Leftovers, full)
			continue
		}
		if !meta {
			if strings.HasSuffix(name, TmpSuffix) {
				m.tmp = append(m.tmp, full)
			}
			continue
		}
		if seq, ok := parseSeq(name, PendingSuffix); ok {
			sq := m.get(seq)
			sq.Pending = full
			if raw, err := vfd.ReadFileLimit(s.Driver, full, maxPendingSize); err == nil {
				sq.PendingNodes, _ = parsePending(raw, seq)
			}
			continue
		}
		if seq, by, ok := parseSuperseded(name); ok {
			sq := m.get(seq)
			sq.Superseded = append(sq.Superseded, Supersession{Path: full, By: by})
			continue
		}
		if seq, ok := parseSeq(name, DeletingSuffix); ok {
			sq := m.get(seq)
			sq.Deleting = full
			if raw, err := vfd.ReadFileLimit(s.Driver, full, MaxManifestSize); err == nil {
				if dm, err := ParseManifest(full, raw); err == nil && dm.Seq == seq {
					sq.DeletingM = dm
				}
			}
			continue
		}
		if strings.HasSuffix(name, TmpSuffix) && !de.IsDir() {
			m.tmp = append(m.tmp, full) // a marker's or the node table's tmp file
		}
	}
}

// addPartsDir records parts directory dir of checkpoint s and its
// entries: parts, and leftovers (tmp files, anything else, and the
// directory itself when empty).
func (m *metaScan) addPartsDir(st Store, s *SeqScan, dir string) {
	s.PartsDirs = append(s.PartsDirs, dir)
	ents, err := st.Driver.ReadDir(dir)
	if err != nil {
		return // gone since: nothing in it
	}
	for _, de := range ents {
		p := path.Join(dir, de.Name())
		if _, _, ok := parsePartBase(de.Name()); ok && !de.IsDir() {
			s.PartFiles = append(s.PartFiles, p)
		} else {
			s.Leftovers = append(s.Leftovers, p)
		}
	}
	if len(ents) == 0 {
		s.Leftovers = append(s.Leftovers, dir)
	}
}

// readCopy reads and checks one manifest copy of run's.
func readCopy(s Store, name string, seq uint64, run string) ManifestCopy {
	p := s.Path(name)
	c := ManifestCopy{Path: p}
	raw, err := vfd.ReadFileLimit(s.Driver, p, MaxManifestSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return c
		}
		c.State, c.Err = CopyDamaged, &CorruptionError{Path: p, Rank: -1, Err: fmt.Errorf("%w: %w", ErrBadManifest, err)}
		return c
	}
	m, err := ParseManifest(p, raw)
	switch {
	case err != nil:
		c.State, c.Err = CopyDamaged, err
	case m.Seq != seq:
		c.State, c.M = CopyForeign, m
		c.Err = &CorruptionError{Path: p, Rank: -1, Err: fmt.Errorf("%w: holds seq %d (another checkpoint's manifest)", ErrBadManifest, m.Seq)}
	case foreignRun(p, m.Run, run) != nil:
		c.State, c.M, c.Err = CopyForeign, m, foreignRun(p, m.Run, run)
	default:
		c.State, c.Raw, c.M = CopyValid, raw, m
	}
	return c
}

// loadParts reads every part of every valid version 3 root copy (both
// part copies, the first valid one used) and makes the copy's M a whole
// manifest. A root some part of which has no valid copy counts as
// damaged: beside an intent marker its checkpoint never committed (the
// job died while the parts were written), without one its metadata is
// lost. O(ranks): offline only.
func (m *metaScan) loadParts(meta, global Store) {
	for _, s := range m.bySeq {
		for _, c := range []*ManifestCopy{&s.Primary, &s.Replica} {
			if c.State != CopyValid || c.M.version != ManifestVersionParts {
				continue
			}
			root := c.M
			root.attachLoader(meta, global)
			full, err := LoadFull(root)
			if err != nil {
				c.State, c.Raw, c.Err = CopyDamaged, nil, &CorruptionError{Path: c.Path, Rank: -1, Err: err}
				continue
			}
			c.M = full
		}
	}
}
