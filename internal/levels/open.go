package levels

import (
	"bytes"
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
	"github.com/ftigo/ftigo/vfd"
)

// lostFilesShown is how many surviving files of a checkpoint with lost
// metadata an error names (per node at most, in total).
const lostFilesShown = 8

// openStart is what rank 0 tells every rank at start-up, once it has
// read the metadata: a few values per checkpoint, whatever the number of
// ranks.
type openStart struct {
	// Known lists the checkpoints whose metadata decides their state (a
	// valid root copy or a marker): a node's files of any other
	// checkpoint are files without metadata.
	Known []uint64 `json:"known,omitempty"`
	// Cands are the checkpoints that may be committed: a valid root copy
	// and no deletion marker. Their parts are checked.
	Cands []openCand `json:"cands,omitempty"`
}

// openCand is one checkpoint that may be committed.
type openCand struct {
	// Head is the copy start-up prefers; Alt the other, when both are
	// valid but differ. Alt is used when Head's parts are not all valid,
	// and tried by recovery when the copies describe different
	// checkpoints (Disagree).
	Head     viewHeader  `json:"head"`
	Alt      *viewHeader `json:"alt,omitempty"`
	Disagree bool        `json:"disagree,omitempty"`
	// HeadCopy is 0 when Head is the primary, 1 when the replica.
	HeadCopy int `json:"head_copy,omitempty"`
}

// openFinal is what rank 0 decided, once the parts were checked.
type openFinal struct {
	// Lost is set when some checkpoint's metadata is lost: every rank
	// sends rank 0 its findings, and returns the error rank 0 makes.
	Lost     bool     `json:"lost,omitempty"`
	LostSeqs []uint64 `json:"lost_seqs,omitempty"`
	// Committed are indices of Cands; Swapped those committed through
	// Alt (Head's parts are not all valid); AltKept those whose alternate
	// stays a candidate for recovery.
	Committed []int `json:"committed,omitempty"`
	Swapped   []int `json:"swapped,omitempty"`
	AltKept   []int `json:"alt_kept,omitempty"`
	// Deleting are the checkpoints whose deletion is completed now (for
	// levels with a [Remover]).
	Deleting []viewHeader `json:"deleting,omitempty"`
	// Above is the newest uncommitted checkpoint whose intent marker
	// stays, naming nodes outside the job's (0: none). Its number is
	// not reused: the next checkpoint is numbered above it.
	Above uint64 `json:"above,omitempty"`
}

// partOrder is what rank 0 tells a leader to check: part Part of
// candidate Cand (its alternate with Alt), against Ref, or the part's
// bytes themselves (Raw) for a whole manifest of versions 1 and 2.
type partOrder struct {
	Cand int      `json:"cand"`
	Alt  bool     `json:"alt,omitempty"`
	Part int      `json:"part"`
	Ref  *PartRef `json:"ref,omitempty"`
	Raw  []byte   `json:"raw,omitempty"`
}

// partCheck is what a leader found of one part it was told to check.
type partCheck struct {
	order  partOrder
	part   *Part
	raw    []byte
	copies [2]partCopy
	err    error
}

// openFacts is what a rank found, sent to rank 0 when metadata is lost.
type openFacts struct {
	Areas []AreaSeq    `json:"areas,omitempty"`
	Parts []partFailed `json:"parts,omitempty"`
}

// partFailed is a part without a valid copy, as its leader found it.
type partFailed struct {
	Cand int    `json:"cand"`
	Alt  bool   `json:"alt,omitempty"`
	Why  string `json:"why"`
}

// Open creates the directories, reads the checkpoint metadata and puts
// it in order, then removes everything a crashed run left half-written.
// Collective.
//
// Rank 0 reads both copies of every root (meta area and the
// [ReplicaDir] of the global area) and the markers. Each part's leader
// reads both copies of its part of every checkpoint that may be
// committed, and the lowest rank of every node lists its node's
// checkpoint directories. Each checkpoint number is classified by
// [SeqScan.State]. Nobody receives another node's listing or another
// part's files: rank 0 broadcasts what it found, a fixed-size reduction
// gathers the others' verdicts, and only lost metadata has their
// findings gathered, to name the files. A committed checkpoint whose
// root or part copy is missing or damaged gets it rewritten from the
// valid one (the damaged bytes are kept as *.broken, and a warning names
// the file and why); uncommitted checkpoints and interrupted deletions
// are cleaned up. When the metadata of some checkpoint is lost (files
// or damaged copies, no valid copy, no marker; or a part without a valid
// copy), Open changes nothing and returns, on every rank, an error
// wrapping [ErrMetadataLost] that names the checkpoint, the damaged
// copies and the surviving files.
func (e *Engine) Open() error {
	e.Wait()
	env := e.env
	if err := e.openDirs(); err != nil {
		return err
	}

	// Rank 0 reads the roots and the markers, and tells every rank what
	// it found; it tells each leader which parts to check.
	var sc *metaScan
	var start openStart
	var orders [][]byte
	var serr error
	if env.Rank == 0 {
		sc, start, orders, serr = e.scanStart()
	}
	if err := e.agree(serr, "read checkpoint metadata"); err != nil {
		return err
	}
	if err := e.bcastJSON(&start, "start-up plan"); err != nil {
		return err
	}
	mine, err := rootToLeaders(env.Comm, e.layout(), tagPartOrder, orders)
	if err != nil {
		return fmt.Errorf("levels: start-up: %w", err)
	}

	// The leaders check their parts; each node's lowest rank lists its
	// node's checkpoint directories. One reduction gathers the flags.
	checks, cerr := e.checkParts(start, mine)
	var areas []AreaSeq
	var aerr error
	if e.nodeLeader() {
		areas, aerr = ScanArea(env.Local)
	}
	if err := e.agree(errors.Join(cerr, aerr), "read node-local checkpoint metadata"); err != nil {
		return err
	}
	flags := make([]int64, 1+2*len(start.Cands))
	if len(unknownFiles(areas, start.Known)) > 0 {
		flags[0] = 1
	}
	for _, c := range checks {
		if c.err != nil {
			k := 1 + 2*c.order.Cand
			if c.order.Alt {
				k++
			}
			flags[k] = 1
		}
	}
	if err := comm.AllreduceInt64s(env.Comm, flags, comm.Max); err != nil {
		return err
	}

	// Rank 0 decides; lost metadata is named from everyone's findings.
	var final openFinal
	var scan []SeqScan
	if env.Rank == 0 {
		scan, final = e.decide(sc, start, flags)
	}
	if err := e.bcastJSON(&final, "start-up decision"); err != nil {
		return err
	}
	if final.Lost {
		return e.lostError(sc, start, final, areas, checks)
	}

	// Every rank takes its views; the leaders repair part copies and hand
	// their ranks their parts.
	if err := e.takeViews(start, final, checks); err != nil {
		return err
	}
	if env.Rank == 0 {
		e.rootViews(sc, start, final)
	}
	e.nextSeq = final.Above + 1
	if n := len(e.committed); n > 0 {
		e.nextSeq = max(e.nextSeq, e.committed[n-1].Seq+1)
	}
	e.prefetch() // read while the start-up below goes on

	return e.openFinish(scan, sc, final)
}

// openDirs creates the areas' directories: rank 0 the meta, global and
// replica ones, each node's lowest rank its node's. Collective.
func (e *Engine) openDirs() error {
	env := e.env
	var local error
	if env.Rank == 0 {
		repl := replicaStore(env.Global)
		if path.Clean(env.Meta.Dir) == path.Clean(repl.Dir) {
			local = fmt.Errorf("meta_dir %s is the directory of the manifest replicas (glbl_dir/%s): choose another meta_dir", env.Meta.Dir, ReplicaDir)
		} else {
			// Synced at the end, beside the first checkpoint's intent marker.
			local = errors.Join(env.Meta.Driver.MkdirAll(env.Meta.Dir, 0o755),
				env.Global.Driver.MkdirAll(env.Global.Dir, 0o755), repl.Driver.MkdirAll(repl.Dir, 0o755))
		}
	}
	if e.nodeLeader() {
		local = errors.Join(local, env.Local.Driver.MkdirAll(env.Local.Dir, 0o755))
	}
	return e.agree(local, "create directories")
}

// openFinish removes what crashed runs left, makes the directories
// durable and writes the first checkpoint's intent marker ahead.
// Collective.
func (e *Engine) openFinish(scan []SeqScan, sc *metaScan, final openFinal) error {
	env := e.env
	cerr := e.cleanOrphans()
	for _, h := range final.Deleting {
		m := e.adopt(h.manifest(), nil)
		cerr = errors.Join(cerr, removeElsewhere(e.levels[h.Level], e.env, m))
		if e.nodeLeader() {
			// A checkpoint of another shape has directories on nodes
			// this job may not have: removed where seen, as a
			// retirement does ([Engine.removeFiles]).
			cerr = errors.Join(cerr, e.removeOtherNodes(e.env, m))
		}
	}
	if err := e.agree(cerr, "clean half-written checkpoints"); err != nil {
		return err
	}
	var ferr error
	if env.Rank == 0 {
		ferr = e.finishClean(scan, sc.tmp)
	}
	if err := e.agree(ferr, "remove start-up markers"); err != nil {
		return err
	}
	// The directories made durable, every one on the way up at once, and
	// with the meta directory the first checkpoint's intent marker, so
	// that the checkpoint writes its data under the final names at once
	// (see [Engine.premark]).
	var dirs []Store
	var markErr error
	if env.Rank == 0 {
		markErr = createPending(env.Meta, e.nextSeq, e.numNodes())
		dirs = append(dirs, env.Meta, env.Global, replicaStore(env.Global))
	}
	if e.nodeLeader() {
		dirs = append(dirs, env.Local)
	}
	if err := e.agree(runAll(syncPaths(dirs)), "create directories"); err != nil {
		return err
	}
	ok, err := vote(env.Comm, markErr == nil)
	if err != nil {
		return err
	}
	if markErr != nil {
		env.Logger.Warn("writing the first checkpoint's intent marker ahead failed; it is written beside the data", zap.Error(markErr))
	}
	e.intent, e.markErr = 0, nil
	if ok {
		e.intent = e.nextSeq
	}
	return nil
}

// bcastJSON broadcasts rank 0's v to every rank, which decodes it into v.
func (e *Engine) bcastJSON(v any, what string) error {
	var b []byte
	if e.env.Rank == 0 {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err // cannot happen: plain data
		}
	}
	b, err := comm.BcastBytes(e.env.Comm, 0, b)
	if err != nil {
		return err
	}
	if e.env.Rank == 0 {
		return nil
	}
	e.decoded.Add(int64(len(b)))
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("levels: decode the %s: %w", what, err)
	}
	return nil
}

// unknownFiles returns the checkpoints of a node's listing with
// published files that rank 0 knows no metadata of.
func unknownFiles(areas []AreaSeq, known []uint64) []AreaSeq {
	var out []AreaSeq
	for _, a := range areas {
		if _, ok := slices.BinarySearch(known, a.Seq); !ok && len(a.Files)+a.More > 0 {
			out = append(out, a)
		}
	}
	return out
}

// scanStart runs on rank 0: it reads the metadata and the global area,
// lists the checkpoints that may be committed and, for each part's
// leader, the parts it checks.
func (e *Engine) scanStart() (*metaScan, openStart, [][]byte, error) {
	env := e.env
	var st openStart
	sc, err := scanMeta(env.Meta, env.Global, env.Run)
	if err != nil {
		return nil, st, nil, err
	}
	ga, err := ScanArea(env.Global)
	if err != nil {
		return nil, st, nil, err
	}
	sc.addArea(ga)
	lay := e.layout()
	orders := make([][]partOrder, lay.parts())
	for _, s := range sc.list() {
		if s.State() != SeqUncommitted || s.Pending != "" {
			st.Known = append(st.Known, s.Seq)
		}
		good := s.Valid()
		if good == nil || s.Deleting != "" {
			continue
		}
		ci := len(st.Cands)
		c := openCand{Head: e.headerOf(good.M)}
		if good == &s.Replica {
			c.HeadCopy = 1
		}
		e.orderParts(orders, lay, ci, false, good.M)
		other := &s.Primary
		if good == other {
			other = &s.Replica
		}
		if other.State == CopyValid && !bytes.Equal(other.Raw, good.Raw) {
			h := e.headerOf(other.M)
			c.Alt, c.Disagree = &h, s.disagreeing(good) != nil
			e.orderParts(orders, lay, ci, true, other.M)
		}
		st.Cands = append(st.Cands, c)
	}
	msgs := make([][]byte, len(orders))
	for i, o := range orders {
		if msgs[i], err = json.Marshal(o); err != nil {
			return nil, st, nil, err
		}
	}
	return sc, st, msgs, nil
}

// headerOf returns the header of manifest m read by rank 0, a whole
// manifest cut into parts of this engine's size.
func (e *Engine) headerOf(m *Manifest) viewHeader {
	if m.version != ManifestVersionParts && m.partRanks == 0 {
		m.partRanks = partRanksFor(m.NodeSize, m.GroupSize, e.cfg.PartRanks)
	}
	return m.header()
}

// orderParts adds the checks of every part of m (candidate ci) to the
// leaders' orders: part i of a checkpoint of this run's layout goes to
// its leader, the parts of another layout in turn to every leader.
func (e *Engine) orderParts(orders [][]partOrder, lay layout, ci int, alt bool, m *Manifest) {
	var whole []*Part
	if m.version != ManifestVersionParts {
		whole = partsOf(m)
	}
	for i := range m.NumParts() {
		o := partOrder{Cand: ci, Alt: alt, Part: i}
		if whole != nil {
			raw, err := marshalPart(m, i, whole[i].Nodes, whole[i].Files)
			if err != nil {
				continue // cannot happen: it was just decoded
			}
			o.Raw = raw
		} else {
			o.Ref = &m.refs[i]
		}
		k := i % len(orders)
		if sameLayout(m, lay) {
			k = i
		}
		orders[k] = append(orders[k], o)
	}
}

// sameLayout reports whether m's parts are this run's: part i is the
// one whose leader is rank lay.first(i).
func sameLayout(m *Manifest, lay layout) bool {
	return m.Ranks == lay.ranks && m.PartRanks() == lay.per
}

// checkParts reads the parts this rank (a leader) was told to check
// (mine: its orders from rank 0). The error is a failure to read the
// orders; a part without a valid copy is in its check.
func (e *Engine) checkParts(start openStart, mine []byte) ([]*partCheck, error) {
	if mine == nil {
		return nil, nil
	}
	e.decoded.Add(int64(len(mine)))
	var orders []partOrder
	if err := json.Unmarshal(mine, &orders); err != nil {
		return nil, fmt.Errorf("levels: decode the parts to check: %w", err)
	}
	env := e.env
	var out []*partCheck
	for _, o := range orders {
		if o.Cand < 0 || o.Cand >= len(start.Cands) || (o.Alt && start.Cands[o.Cand].Alt == nil) {
			return nil, fmt.Errorf("levels: bad part order %+v", o)
		}
		h := start.Cands[o.Cand].Head
		if o.Alt {
			h = *start.Cands[o.Cand].Alt
		}
		m := h.manifest()
		c := &partCheck{order: o}
		if o.Raw != nil {
			e.decoded.Add(int64(len(o.Raw)))
			c.part, c.err = parsePart("manifest part", o.Raw, m, o.Part)
			c.raw = o.Raw
			c.copies = [2]partCopy{{State: CopyValid}, {State: CopyValid}}
		} else {
			c.part, c.copies = readBoth(env.Meta, env.Global, m, o.Part, o.Ref, e.decoded)
			for _, pc := range c.copies {
				if pc.State == CopyValid && c.raw == nil {
					c.raw = pc.Raw
				}
			}
			if c.part == nil {
				c.err = fmt.Errorf("part %s has no valid copy: %s is %s (%v); %s is %s (%v)",
					partBase(m.Level, o.Part), c.copies[0].Path, c.copies[0].State, c.copies[0].Err,
					c.copies[1].Path, c.copies[1].State, c.copies[1].Err)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// decide runs on rank 0 once the flags are in: the candidates whose
// parts are not all valid lose their commit (beside an intent marker)
// or their metadata (without one), and the states follow.
func (e *Engine) decide(sc *metaScan, start openStart, flags []int64) ([]SeqScan, openFinal) {
	var final openFinal
	swapped := map[int]bool{}
	for ci, c := range start.Cands {
		headBad, altBad := flags[1+2*ci] != 0, flags[2+2*ci] != 0
		if headBad {
			markPartless(sc, c, false, "")
			swapped[ci] = c.Alt != nil && !altBad
		}
		if c.Alt != nil && altBad {
			markPartless(sc, c, true, "")
		}
	}
	scan := sc.list()
	byseq := map[uint64]*SeqScan{}
	for i := range scan {
		byseq[scan[i].Seq] = &scan[i]
		switch scan[i].State() {
		case SeqLost:
			final.Lost = true
			final.LostSeqs = append(final.LostSeqs, scan[i].Seq)
		case SeqDeleting:
			if dm := scan[i].DeletingM; dm != nil {
				final.Deleting = append(final.Deleting, e.headerOf(dm))
			}
		case SeqUncommitted:
			if len(scan[i].LeftOn(e.numNodes())) > 0 {
				final.Above = max(final.Above, scan[i].Seq)
			}
		}
	}
	if flags[0] != 0 {
		final.Lost = true // a node holds files no metadata names
	}
	for ci, c := range start.Cands {
		if s := byseq[c.Head.Seq]; s != nil && s.State() == SeqCommitted {
			final.Committed = append(final.Committed, ci)
			switch {
			case swapped[ci]:
				final.Swapped = append(final.Swapped, ci)
			case c.Alt != nil && c.Disagree && flags[2+2*ci] == 0:
				final.AltKept = append(final.AltKept, ci)
			}
		}
	}
	return scan, final
}

// markPartless makes the root copy of candidate c (its alternate with
// alt) damaged in rank 0's scan, and the other copy too when it holds
// the same bytes: some part it names has no valid copy (why, as its
// leader found it, when known).
func markPartless(sc *metaScan, c openCand, alt bool, why string) {
	s := sc.bySeq[c.Head.Seq]
	k := c.HeadCopy
	if alt {
		k = 1 - k
	}
	cp, other := &s.Primary, &s.Replica
	if k == 1 {
		cp, other = other, cp
	}
	if why == "" {
		why = "a part it names has no valid copy"
	}
	for _, x := range []*ManifestCopy{cp, other} {
		if x == cp || (x.State == CopyValid && bytes.Equal(x.Raw, cp.Raw)) {
			x.State, x.Err = CopyDamaged, &CorruptionError{Path: x.Path, Rank: -1, Err: fmt.Errorf("%w: %s", ErrBadManifest, why)}
		}
	}
}

// lostError gathers every rank's findings on rank 0, which names the
// checkpoints whose metadata is lost, and returns that error on every
// rank. Collective; only after lost metadata.
func (e *Engine) lostError(sc *metaScan, start openStart, final openFinal, areas []AreaSeq, checks []*partCheck) error {
	env := e.env
	var facts openFacts
	var mine []AreaSeq
	for _, a := range areas {
		_, lost := slices.BinarySearch(final.LostSeqs, a.Seq)
		_, known := slices.BinarySearch(start.Known, a.Seq)
		if lost || (!known && len(a.Files)+a.More > 0) {
			mine = append(mine, a)
		}
	}
	facts.Areas = SummarizeArea(mine, lostFilesShown)
	for _, c := range checks {
		if c.err != nil {
			facts.Parts = append(facts.Parts, partFailed{Cand: c.order.Cand, Alt: c.order.Alt, Why: c.err.Error()})
		}
	}
	b, err := json.Marshal(facts)
	if err != nil {
		return err
	}
	all, err := comm.GathervBytes(env.Comm, 0, b)
	if err != nil {
		return err
	}
	var msg []byte
	if env.Rank == 0 {
		msg = []byte(e.describeFacts(sc, start, all))
	}
	msg, err = comm.BcastBytes(env.Comm, 0, msg)
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: %s", ErrMetadataLost, msg)
}

// describeFacts merges every rank's findings into rank 0's scan and
// describes the checkpoints whose metadata is lost.
func (e *Engine) describeFacts(sc *metaScan, start openStart, all [][]byte) string {
	for _, b := range all {
		e.decoded.Add(int64(len(b)))
		var f openFacts
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		sc.addArea(f.Areas)
		for _, p := range f.Parts {
			if p.Cand >= 0 && p.Cand < len(start.Cands) {
				markPartless(sc, start.Cands[p.Cand], p.Alt, p.Why)
			}
		}
	}
	scan := sc.list()
	var lost []*SeqScan
	var valid []uint64
	for i := range scan {
		switch scan[i].State() {
		case SeqLost:
			lost = append(lost, &scan[i])
		case SeqCommitted:
			valid = append(valid, scan[i].Seq)
		}
	}
	if len(lost) == 0 {
		return "a node reported files of a checkpoint without metadata, but no checkpoint is lost (the files went since)"
	}
	env := e.env
	return describeLost(lost, valid, LostDirs{Meta: env.Meta.Dir, Global: env.Global.Dir, Local: env.Local.Dir})
}

// takeViews gives every rank its view of each committed checkpoint: its
// part's file lists, from its leader, which first repairs the copies of
// the parts it checked. Collective.
func (e *Engine) takeViews(start openStart, final openFinal, checks []*partCheck) error {
	env := e.env
	lay := e.layout()
	chosen := func(ci int) (viewHeader, bool) { return final.chosen(start, ci) }
	var wants []want
	for _, ci := range final.Committed {
		if h, alt := chosen(ci); sameLayout(h.manifest(), lay) {
			wants = append(wants, want{ci, alt})
		}
	}
	for _, ci := range final.AltKept {
		if sameLayout(start.Cands[ci].Alt.manifest(), lay) {
			wants = append(wants, want{ci, true})
		}
	}
	var msgs [][]byte
	var lerr error
	parts := map[want]*Part{}
	if lay.isLeader(env.Rank) {
		msgs, lerr = e.leaderParts(start, final, checks, wants, parts)
	}
	got, err := fromLeader(env.Comm, lay, tagPartForward, msgs)
	if err != nil {
		return fmt.Errorf("levels: start-up: %w", err)
	}
	var raws [][]byte
	if lerr == nil && !lay.isLeader(env.Rank) {
		raws, lerr = unpackBytes(got)
		if lerr == nil && len(raws) != len(wants) {
			lerr = fmt.Errorf("levels: %d parts handed out, want %d", len(raws), len(wants))
		}
	}
	for k := 0; lerr == nil && k < len(raws); k++ {
		w := wants[k]
		h := start.Cands[w.ci].Head
		if w.alt {
			h = *start.Cands[w.ci].Alt
		}
		e.decoded.Add(int64(len(raws[k])))
		parts[w], lerr = parsePart("manifest part", raws[k], h.manifest(), lay.index(env.Rank))
	}
	if err := e.agree(lerr, "take the parts of the committed checkpoints"); err != nil {
		return err
	}
	e.committed = e.committed[:0]
	e.unrecoverable, e.skipped, e.alt, e.unconverted = nil, nil, nil, nil
	for _, ci := range final.Committed {
		h, alt := chosen(ci)
		e.committed = append(e.committed, e.adopt(h.manifest(), nil, parts[want{ci, alt}]))
	}
	for _, ci := range final.AltKept {
		if e.alt == nil {
			e.alt = map[uint64]*Manifest{}
		}
		a := *start.Cands[ci].Alt
		e.alt[a.Seq] = e.adopt(a.manifest(), nil, parts[want{ci, true}])
	}
	return nil
}

// want names a copy of a candidate: its Head, or its Alt.
type want struct {
	ci  int
	alt bool
}

// chosen returns the copy candidate ci is committed through, and
// whether it is the alternate.
func (f openFinal) chosen(start openStart, ci int) (viewHeader, bool) {
	if slices.Contains(f.Swapped, ci) {
		return *start.Cands[ci].Alt, true
	}
	return start.Cands[ci].Head, false
}

// leaderParts runs on a leader: it repairs the copies of the parts it
// checked of the committed checkpoints, and returns what each rank of
// its part receives (the bytes of the parts wants names), putting its
// own parts into parts.
func (e *Engine) leaderParts(start openStart, final openFinal, checks []*partCheck, wants []want, parts map[want]*Part) ([][]byte, error) {
	env := e.env
	lay := e.layout()
	committed := map[want]bool{}
	for _, w := range final.Committed {
		_, alt := final.chosen(start, w)
		committed[want{w, alt}] = true
	}
	for _, w := range final.AltKept {
		committed[want{w, true}] = true
	}
	mine := map[want]*partCheck{}
	for _, c := range checks {
		w := want{c.order.Cand, c.order.Alt}
		if !committed[w] {
			continue
		}
		if c.order.Ref != nil {
			e.repairPart(c)
		}
		if c.order.Part == lay.index(env.Rank) {
			mine[w] = c
		}
	}
	var lerr error
	raws := make([][]byte, len(wants))
	for k, w := range wants {
		if c := mine[w]; c != nil && c.raw != nil {
			raws[k], parts[w] = c.raw, c.part
		} else {
			lerr = fmt.Errorf("levels: no part %d of candidate %d to hand out", lay.index(env.Rank), w.ci)
		}
	}
	packed := packBytes(raws)
	msgs := make([][]byte, lay.count(lay.index(env.Rank)))
	for j := range msgs {
		msgs[j] = packed
	}
	return msgs, lerr
}

// repairPart rewrites a missing or damaged copy of a part from the valid
// one (its leader): the damaged bytes are kept as .broken, and a warning
// names the copy and why. Failures are logged: the part stays readable
// through the other copy.
func (e *Engine) repairPart(c *partCheck) {
	if c.part == nil {
		return
	}
	log := e.env.Logger
	var good *partCopy
	for k := range c.copies {
		if c.copies[k].State == CopyValid {
			good = &c.copies[k]
			break
		}
	}
	dirs := partCopies(e.env.Meta, e.env.Global)
	for k := range c.copies {
		x := &c.copies[k]
		if x.State == CopyValid || good == nil {
			continue
		}
		d := dirs[k].Driver
		why := "missing"
		var err error
		if x.State != CopyMissing {
			why = fmt.Sprintf("%s: %v", x.State, x.Err)
			err = d.Rename(x.Path, x.Path+BrokenSuffix)
		}
		if err == nil {
			err = d.MkdirAll(path.Dir(x.Path), 0o755) // a crash may have left no directory
		}
		if err == nil {
			err = vfd.WriteFileAtomic(d, x.Path, good.Raw)
		}
		if err != nil {
			log.Warn("manifest part copy could not be repaired; the checkpoint stays committed through the other copy",
				zap.String("path", x.Path), zap.String("why", why), zap.String("from", good.Path), zap.Error(err))
			continue
		}
		log.Warn(fmt.Sprintf("manifest part copy repaired: %s (%s), from %s", x.Path, why, good.Path),
			zap.String("path", x.Path), zap.String("why", why), zap.String("from", good.Path))
	}
}

// rootViews gives rank 0's views of the committed checkpoints their
// roots (to rewrite them), and repairs the root copies.
func (e *Engine) rootViews(sc *metaScan, start openStart, final openFinal) {
	for k, ci := range final.Committed {
		s := sc.bySeq[start.Cands[ci].Head.Seq]
		good := s.Valid()
		e.repair(s, good)
		holdRoot(e.committed[k], good.M)
		if a := e.alt[s.Seq]; a != nil {
			if other := s.disagreeing(good); other != nil {
				holdRoot(a, other.M)
			}
		}
	}
}

// holdRoot gives view v what rank 0 needs to rewrite its root: the part
// table of root m, or the whole manifest m stands for.
func holdRoot(v, m *Manifest) {
	if m.version == ManifestVersionParts {
		v.refs = m.refs
		return
	}
	v.whole = m
}

// LostError returns nil when no checkpoint of scan has lost its metadata
// ([SeqLost]), and otherwise the error [Engine.Open] returns: it wraps
// [ErrMetadataLost], names each such checkpoint with its manifest copies
// and surviving files, and says how to proceed.
func LostError(scan []SeqScan) error { return LostErrorIn(scan, LostDirs{}) }

// LostDirs are the run's directories a lost-metadata error names as
// where it looked (each may be empty: the error then names the key).
type LostDirs struct {
	Meta   string // meta_dir
	Global string // the run's directory in glbl_dir
	Local  string // one node's run directory in ckpt_dir (an example)
}

// where names the directory of key, with its path when known.
func (d LostDirs) where(key, dir string) string {
	if dir == "" {
		return key
	}
	return key + " (" + dir + ")"
}

// LostErrorIn is [LostError] naming the run's directories dirs.
func LostErrorIn(scan []SeqScan, dirs LostDirs) error {
	var lost []*SeqScan
	var valid []uint64
	for i := range scan {
		switch scan[i].State() {
		case SeqLost:
			lost = append(lost, &scan[i])
		case SeqCommitted:
			valid = append(valid, scan[i].Seq)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrMetadataLost, describeLost(lost, valid, dirs))
}

// describeLost says, in one line, which checkpoints lost their
// metadata, what is left of the newest, and how to proceed. Each path
// appears once.
func describeLost(lost []*SeqScan, valid []uint64, in LostDirs) string {
	var b strings.Builder
	s := lost[len(lost)-1] // the newest, which a restart would want
	fmt.Fprintf(&b, "checkpoint %s has no valid manifest and no marker: ", CheckpointDir(s.Seq))
	damaged := false
	for i, c := range []ManifestCopy{s.Primary, s.Replica} {
		if s.Primary.State == CopyMissing && s.Replica.State == CopyMissing {
			fmt.Fprintf(&b, "both copies are missing (%s, %s)", s.Primary.Path, s.Replica.Path)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		switch {
		case c.State == CopyMissing:
			fmt.Fprintf(&b, "%s is missing", c.Path)
		case vfd.ErrorNames(c.Err, c.Path):
			damaged = true
			fmt.Fprintf(&b, "a copy is %s (%v)", c.State, c.Err)
		default:
			damaged = true
			fmt.Fprintf(&b, "%s is %s (%v)", c.Path, c.State, c.Err)
		}
	}
	if n := len(s.Files) + s.MoreFiles; n > 0 {
		files := slices.Clone(s.Files)
		sort.Strings(files)
		verb := "survive"
		if n == 1 {
			verb = "survives"
		}
		fmt.Fprintf(&b, "; %d of its files %s, such as %s, but cannot be verified", n, verb, files[0])
	}
	names := make([]string, 0, min(len(lost), lostFilesShown))
	for _, l := range lost[:min(len(lost), lostFilesShown)] {
		names = append(names, CheckpointDir(l.Seq))
		damaged = damaged || l.Primary.bad() || l.Replica.bad()
	}
	dirs := strings.Join(names, ", ")
	if len(lost) > 1 {
		fmt.Fprintf(&b, "; %d checkpoints are in this state", len(lost))
		if len(lost) > len(names) {
			dirs += fmt.Sprintf(" and %d more", len(lost)-len(names))
		}
	}
	b.WriteString("; to ")
	if len(valid) > 0 {
		fmt.Fprintf(&b, "restart from %s", CheckpointDir(valid[len(valid)-1]))
	} else {
		b.WriteString("start afresh")
	}
	// The newest's parts directories (version 3) go too: parts alone
	// still say the metadata was lost.
	parts := ""
	if len(s.PartsDirs) > 0 {
		parts = strings.Join(s.PartsDirs, ", ") + ", "
	}
	local := "every node's ckpt_dir"
	if in.Local != "" {
		local += " (such as " + in.Local + ")"
	}
	areas := in.where("glbl_dir", in.Global) + " and " + local
	if damaged {
		fmt.Fprintf(&b, ", move %sthe damaged manifest copies and the directories %s out of %s, %s", parts, dirs, in.where("meta_dir", in.Meta), areas)
	} else if parts != "" {
		fmt.Fprintf(&b, ", move %sand %s out of %s", parts, dirs, areas)
	} else {
		fmt.Fprintf(&b, ", move the directories %s out of %s", dirs, areas)
	}
	return b.String()
}

// repair rewrites every copy of committed checkpoint s that is not the
// valid copy good: a missing copy is written, a damaged or foreign one
// is moved aside as .broken first. An intent marker left beside a valid
// copy (a crash after the commit) goes once the copies are in place.
// Failures are logged: the checkpoint stays committed through good.
func (e *Engine) repair(s *SeqScan, good *ManifestCopy) {
	env := e.env
	log := env.Logger
	ok := true
	for _, c := range []*ManifestCopy{&s.Primary, &s.Replica} {
		if c == good || (c.State == CopyValid && bytes.Equal(c.Raw, good.Raw)) {
			continue
		}
		if c == s.disagreeing(good) {
			// Which copy is this run's only recovery can tell
			// (Engine.Recover tries both, then rewrites the other).
			log.Warn(fmt.Sprintf("manifest copies %s and %s are both valid but describe different checkpoints (one is another run's?); recovery tries %s first, then the other", good.Path, c.Path, good.Path))
			ok = false
			continue
		}
		d := env.Meta.Driver
		if c == &s.Replica {
			d = env.Global.Driver
		}
		why := c.State.String()
		switch c.State {
		case CopyValid:
			why = "differs from " + good.Path
		case CopyDamaged, CopyForeign:
			why = fmt.Sprintf("%s: %v", c.State, c.Err)
		}
		var err error
		if c.State != CopyMissing {
			err = d.Rename(c.Path, c.Path+BrokenSuffix)
			if c.State == CopyValid && err == nil {
				err = d.Remove(c.Path + BrokenSuffix) // stale, not damaged: nothing to keep
			}
		}
		if err == nil {
			err = vfd.WriteFileAtomic(d, c.Path, good.Raw)
		}
		if err != nil {
			ok = false
			log.Warn("manifest copy could not be repaired; the checkpoint stays committed through the other copy",
				zap.String("path", c.Path), zap.String("why", why), zap.String("from", good.Path), zap.Error(err))
			continue
		}
		msg := "manifest copy repaired"
		if c.State == CopyMissing {
			msg = "manifest copy missing, rewritten"
		}
		fields := []zap.Field{zap.String("path", c.Path), zap.String("why", why), zap.String("from", good.Path)}
		if c.State == CopyDamaged || c.State == CopyForeign {
			fields = append(fields, zap.String("kept-as", c.Path+BrokenSuffix))
		}
		log.Warn(fmt.Sprintf("%s: %s (%s), from %s", msg, c.Path, why, good.Path), fields...)
	}
	if s.Pending != "" && ok {
		if err := removeIfExists(env.Meta.Driver, s.Pending); err != nil {
			log.Warn("removing the intent marker of a committed checkpoint", zap.String("path", s.Pending), zap.Error(err))
		}
	}
}

// finishClean runs on rank 0 after every rank removed the leftovers of
// uncommitted checkpoints and interrupted deletions: it moves their
// damaged copies aside, removes their remaining copies and the tmp files
// of the metadata directories, syncs, and only then removes their
// markers (so a crash in between leaves a marker for the next start-up).
func (e *Engine) finishClean(scan []SeqScan, tmp []string) error {
	env := e.env
	meta, repl := env.Meta, replicaStore(env.Global)
	var errs []error
	var markers []string
	type leftMarker struct {
		path string
		raw  []byte
	}
	var rewrites []leftMarker
	changed := false
	for i := range scan {
		s := &scan[i]
		lerrs, lchanged := cleanLeftovers(s, meta, repl)
		errs = append(errs, lerrs...)
		changed = changed || lchanged
		st := s.State()
		if st == SeqCommitted {
			errs = append(errs, tidyParts(s, meta, repl)...)
		}
		if st != SeqUncommitted && st != SeqDeleting {
			// Superseded markers naming a checkpoint that never
			// committed: stale, they go (no sync needed: one that comes
			// back is stale again).
			for _, sup := range s.Superseded {
				errs = append(errs, removeIfExists(meta.Driver, sup.Path))
			}
			continue
		}
		for _, c := range []*ManifestCopy{&s.Primary, &s.Replica} {
			d := meta.Driver
			if c == &s.Replica {
				d = repl.Driver
			}
			switch {
			case c.State == CopyMissing:
			case st == SeqUncommitted:
				// A copy written after a crash left the marker, or damaged
				// since: kept for forensics.
				env.Logger.Warn("manifest of an uncommitted checkpoint moved aside", zap.String("path", c.Path),
					zap.Stringer("state", c.State), zap.NamedError("why", c.Err))
				errs = append(errs, d.Rename(c.Path, c.Path+BrokenSuffix))
				changed = true
			default:
				errs = append(errs, removeIfExists(d, c.Path))
				changed = true
			}
		}
		for _, d := range s.PartsDirs {
			errs = append(errs, storeOf(d, meta, repl).RemoveAll(d))
			changed = true
		}
		pending := s.Pending
		if st == SeqDeleting {
			if left := e.unreached(s.deletionNodes()); len(left) > 0 {
				// A deletion this job cannot finish everywhere: an intent
				// marker names the nodes it cannot reach (see
				// [Engine.endDeletion]).
				p := s.Pending
				if p == "" {
					p = meta.Path(PendingName(s.Seq))
				}
				pending = "" // rewritten, not removed
				rewrites = append(rewrites, leftMarker{p, pendingContent(s.Seq, left)})
				env.Logger.Warn(fmt.Sprintf("checkpoint %s was deleted on the nodes this job reaches; files may remain on %s: its intent marker %s stays until a job on them removes them",
					CheckpointDir(s.Seq), joinRanges(left), p))
			}
		}
		if left := s.LeftOn(e.numNodes()); len(left) > 0 {
			// Files may remain on nodes this job does not have: the marker
			// stays, naming them, so that no scan takes those files for
			// lost metadata and a job on those nodes removes them.
			rewrites = append(rewrites, leftMarker{s.Pending, pendingContent(s.Seq, left)})
			env.Logger.Warn(fmt.Sprintf("checkpoint %s was interrupted on nodes this job does not have (%s): its intent marker %s stays until a job on them removes their files",
				CheckpointDir(s.Seq), joinRanges(left), s.Pending))
		} else if pending != "" {
			markers = append(markers, pending)
		}
		if s.Deleting != "" {
			markers = append(markers, s.Deleting)
		}
		for _, sup := range s.Superseded {
			markers = append(markers, sup.Path)
		}
		env.Logger.Debug("removing what is left of checkpoint", zap.String("dir", CheckpointDir(s.Seq)), zap.Stringer("state", st))
	}
	for _, p := range tmp {
		d := meta.Driver
		if path.Dir(p) == path.Clean(repl.Dir) {
			d = repl.Driver
		}
		errs = append(errs, removeIfExists(d, p))
		changed = true
	}
	if changed || len(markers) > 0 {
		errs = append(errs, meta.Driver.SyncDir(meta.Dir), repl.Driver.SyncDir(repl.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		return err // the markers stay: the next start-up finishes
	}
	// A marker rewritten names fewer nodes: those cleaned are gone for
	// good (synced by the node leaders before this runs).
	for _, w := range rewrites {
		errs = append(errs, vfd.WriteFileAtomic(meta.Driver, w.path, w.raw))
	}
	if len(rewrites) > 0 {
		// A deletion marker goes only once the intent marker that
		// replaces it is durable.
		errs = append(errs, meta.Driver.SyncDir(meta.Dir))
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	for _, p := range markers {
		errs = append(errs, removeIfExists(meta.Driver, p))
	}
	if len(markers) > 0 {
		errs = append(errs, meta.Driver.SyncDir(meta.Dir))
	}
	return errors.Join(errs...)
}

// cleanLeftovers removes the tmp copies of s's manifests, whatever its
// state, and what its parts directories hold beside parts (rank 0). It
// reports whether the meta or replica directory changed.
func cleanLeftovers(s *SeqScan, meta, repl Store) (errs []error, changed bool) {
	for _, l := range s.Leftovers {
		switch {
		case path.Dir(l) == path.Clean(meta.Dir) && strings.HasSuffix(l, manifestSuffix+TmpSuffix):
			errs = append(errs, removeIfExists(meta.Driver, l))
			changed = true
		case path.Dir(l) == path.Clean(repl.Dir):
			errs = append(errs, repl.Driver.RemoveAll(l))
			changed = true
		case slices.Contains(s.PartsDirs, l) || slices.Contains(s.PartsDirs, path.Dir(l)):
			errs = append(errs, storeOf(l, meta, repl).RemoveAll(l))
		}
	}
	return errs, changed
}

// tidyParts removes from committed checkpoint s's parts directories the
// parts its root does not name (another level's, after a raise), and a
// whole manifest's parts directories (a raise that did not commit).
// Unsynced: one that comes back is removed again.
func tidyParts(s *SeqScan, meta, repl Store) []error {
	good := s.Valid()
	if good == nil {
		return nil
	}
	var errs []error
	if good.M.version != ManifestVersionParts {
		for _, d := range s.PartsDirs {
			errs = append(errs, storeOf(d, meta, repl).RemoveAll(d))
		}
		return errs
	}
	for _, p := range s.PartFiles {
		lvl, i, _ := parsePartBase(path.Base(p))
		if lvl != good.M.Level || i >= len(good.M.refs) {
			errs = append(errs, removeIfExists(storeOf(p, meta, repl), p))
		}
	}
	return errs
}

// storeOf returns the driver of p: the replica directory's when p lies
// in it, the meta area's otherwise.
func storeOf(p string, meta, repl Store) vfd.Driver {
	if strings.HasPrefix(p, path.Clean(repl.Dir)+"/") {
		return repl.Driver
	}
	return meta.Driver
}

// cleanOrphans removes, in the areas this rank is responsible for, every
// checkpoint directory that is not committed and every tmp file inside
// committed ones.
func (e *Engine) cleanOrphans() error {
	keep := map[string]bool{}
	for _, m := range e.committed {
		keep[m.Dir()] = true
	}
	var errs []error
	clean := func(s Store) {
		ents, err := s.Driver.ReadDir(s.Dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return
		}
		changed := false
		for _, de := range ents {
			name := de.Name()
			base := strings.TrimSuffix(name, TmpSuffix)
			if _, ok := parseSeq(base, ""); !ok {
				continue
			}
			if keep[name] {
				errs = append(errs, e.cleanTmp(s, name))
				continue
			}
			e.env.Logger.Debug("removing uncommitted checkpoint", zap.String("path", s.Path(name)))
			errs = append(errs, s.Driver.RemoveAll(s.Path(name)))
			changed = true
		}
		if changed {
			errs = append(errs, s.Driver.SyncDir(s.Dir))
		}
	}
	if e.nodeLeader() {
		clean(e.env.Local)
	}
	if e.env.Rank == 0 {
		clean(e.env.Global)
	}
	return errors.Join(errs...)
}

func (e *Engine) cleanTmp(s Store, dir string) error {
	ents, err := s.Driver.ReadDir(s.Path(dir))
	if err != nil {
		return err
	}
	var errs []error
	for _, de := range ents {
		if strings.HasSuffix(de.Name(), TmpSuffix) {
			errs = append(errs, s.Driver.Remove(s.Path(path.Join(dir, de.Name()))))
		}
	}
	return errors.Join(errs...)
}

// joinRanges names the nodes of span ("node0003, node0005-node0007").
func joinRanges(span []NodeRange) string {
	names := make([]string, len(span))
	for i, r := range span {
		names[i] = r.String()
	}
	return strings.Join(names, ", ")
}
