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

// openPlan is what rank 0 decides at start-up and every rank applies.
type openPlan struct {
	// Committed holds the manifest (bytes) of every committed checkpoint.
	Committed [][]byte `json:"committed,omitempty"`
	// Deleting holds the manifests of checkpoints whose deletion is
	// completed now (for levels with a [Remover]).
	Deleting [][]byte `json:"deleting,omitempty"`
	// Lost, when set, is the error every rank returns.
	Lost string `json:"lost,omitempty"`
	// Alternates holds, for a committed checkpoint whose two copies are
	// valid but disagree (beyond Kept), the copy not in Committed.
	Alternates [][]byte `json:"alternates,omitempty"`
	// Above is the newest uncommitted checkpoint whose intent marker
	// stays, naming nodes outside the job's (0: none). Its number is
	// not reused: the next checkpoint is numbered above it.
	Above uint64 `json:"above,omitempty"`
}

// Open creates the directories, reads the checkpoint metadata and puts
// it in order, then removes everything a crashed run left half-written.
// Collective.
//
// Rank 0 reads both copies of every manifest (meta area and the
// [ReplicaDir] of the global area) and the markers, the lowest rank of
// every node lists its node's checkpoint directories, and each checkpoint
// number is classified by [SeqScan.State]. A committed checkpoint whose
// copy is missing or damaged gets it rewritten from the valid one (the
// damaged bytes are kept as *.broken, and rank 0 logs a warning naming
// the file and why); uncommitted checkpoints and interrupted deletions
// are cleaned up. When the metadata of some checkpoint is lost (files or
// damaged copies, no valid copy, no marker), Open changes nothing and
// returns, on every rank, an error wrapping [ErrMetadataLost] that names
// the checkpoint, the damaged copies and the surviving files.
func (e *Engine) Open() error {
	e.Wait()
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
	if err := e.agree(local, "create directories"); err != nil {
		return err
	}

	// Every node's checkpoint directories, for rank 0.
	var mine []byte
	var serr error
	if e.nodeLeader() {
		var as []AreaSeq
		if as, serr = ScanArea(env.Local); serr == nil {
			// A few names per checkpoint are enough to name lost files:
			// every rank receives every node's listing.
			mine, serr = json.Marshal(SummarizeArea(as, lostFilesShown))
		}
	}
	if err := e.agree(serr, "list node-local checkpoint directories"); err != nil {
		return err
	}
	areas, err := comm.AllgatherBytes(env.Comm, mine)
	if err != nil {
		return err
	}

	var plan openPlan
	var scan []SeqScan
	var tmp []string
	var perr error
	if env.Rank == 0 {
		plan, scan, tmp, perr = e.plan(areas)
	}
	if err := e.agree(perr, "read checkpoint metadata"); err != nil {
		return err
	}
	var payload []byte
	if env.Rank == 0 {
		if payload, perr = json.Marshal(plan); perr != nil {
			return perr // cannot happen: plain data
		}
	}
	payload, err = comm.BcastBytes(env.Comm, 0, payload)
	if err != nil {
		return err
	}
	plan = openPlan{}
	if err := json.Unmarshal(payload, &plan); err != nil {
		return fmt.Errorf("levels: decode start-up plan: %w", err)
	}
	if plan.Lost != "" {
		return fmt.Errorf("%w: %s", ErrMetadataLost, plan.Lost)
	}
	e.committed = e.committed[:0]
	for _, raw := range plan.Committed {
		m, err := ParseManifest("manifest", raw)
		if err != nil {
			return err // rank 0 parsed it already; cannot happen
		}
		e.committed = append(e.committed, m)
	}
	sort.Slice(e.committed, func(i, j int) bool { return e.committed[i].Seq < e.committed[j].Seq })
	e.nextSeq = plan.Above + 1
	if n := len(e.committed); n > 0 {
		e.nextSeq = max(e.nextSeq, e.committed[n-1].Seq+1)
	}
	e.unrecoverable, e.skipped, e.alt, e.unconverted = nil, nil, nil, nil
	for _, raw := range plan.Alternates {
		m, err := ParseManifest("manifest", raw)
		if err != nil {
			return err // rank 0 parsed it already; cannot happen
		}
		if e.alt == nil {
			e.alt = map[uint64]*Manifest{}
		}
		e.alt[m.Seq] = m
	}
	e.prefetch() // read while the start-up below goes on

	cerr := e.cleanOrphans()
	for _, raw := range plan.Deleting {
		if m, err := ParseManifest("manifest", raw); err == nil {
			cerr = errors.Join(cerr, removeElsewhere(e.levels[m.Level], e.env, m))
			if e.nodeLeader() {
				// A checkpoint of another shape has directories on nodes
				// this job may not have: removed where seen, as a
				// retirement does ([Engine.removeFiles]).
				cerr = errors.Join(cerr, e.removeOtherNodes(e.env, m))
			}
		}
	}
	if err := e.agree(cerr, "clean half-written checkpoints"); err != nil {
		return err
	}
	var ferr error
	if env.Rank == 0 {
		ferr = e.finishClean(scan, tmp)
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

// plan runs on rank 0: it scans the metadata, merges the node listings,
// classifies every checkpoint number and, unless some checkpoint's
// metadata is lost, repairs the committed ones.
func (e *Engine) plan(areas [][]byte) (openPlan, []SeqScan, []string, error) {
	env := e.env
	sc, err := scanMeta(env.Meta, env.Global, env.Run)
	if err != nil {
		return openPlan{}, nil, nil, err
	}
	ga, err := ScanArea(env.Global)
	if err != nil {
		return openPlan{}, nil, nil, err
	}
	sc.addArea(ga)
	for r, b := range areas {
		if len(b) == 0 {
			continue
		}
		var as []AreaSeq
		if err := json.Unmarshal(b, &as); err != nil {
			return openPlan{}, nil, nil, fmt.Errorf("decode rank %d's listing: %w", r, err)
		}
		sc.addArea(as)
	}
	scan := sc.list()
	var plan openPlan
	var lost []*SeqScan
	var valid []uint64
	for i := range scan {
		s := &scan[i]
		switch s.State() {
		case SeqLost:
			lost = append(lost, s)
		case SeqCommitted:
			valid = append(valid, s.Seq)
		}
	}
	if len(lost) > 0 {
		plan.Lost = describeLost(lost, valid, LostDirs{Meta: env.Meta.Dir, Global: env.Global.Dir, Local: env.Local.Dir})
		return plan, scan, sc.tmp, nil
	}
	for i := range scan {
		s := &scan[i]
		switch s.State() {
		case SeqCommitted:
			good := s.Valid()
			if other := s.disagreeing(good); other != nil {
				plan.Alternates = append(plan.Alternates, other.Raw)
			}
			e.repair(s, good)
			plan.Committed = append(plan.Committed, good.Raw)
		case SeqDeleting:
			if s.DeletingM != nil {
				if raw, err := s.DeletingM.Marshal(); err == nil {
					plan.Deleting = append(plan.Deleting, raw)
				}
			}
		case SeqUncommitted:
			if len(s.LeftOn(e.numNodes())) > 0 {
				plan.Above = max(plan.Above, s.Seq)
			}
		}
	}
	return plan, scan, sc.tmp, nil
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
	local := "every node's ckpt_dir"
	if in.Local != "" {
		local += " (such as " + in.Local + ")"
	}
	areas := in.where("glbl_dir", in.Global) + " and " + local
	if damaged {
		fmt.Fprintf(&b, ", move the damaged manifest copies and the directories %s out of %s, %s", dirs, in.where("meta_dir", in.Meta), areas)
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
		// Tmp copies of manifests, whatever the checkpoint's state.
		for _, l := range s.Leftovers {
			if path.Dir(l) == path.Clean(meta.Dir) && strings.HasSuffix(l, manifestSuffix+TmpSuffix) {
				errs = append(errs, removeIfExists(meta.Driver, l))
				changed = true
			} else if path.Dir(l) == path.Clean(repl.Dir) {
				errs = append(errs, removeIfExists(repl.Driver, l))
				changed = true
			}
		}
		st := s.State()
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
		if left := s.LeftOn(e.numNodes()); len(left) > 0 {
			// Files may remain on nodes this job does not have: the marker
			// stays, naming them, so that no scan takes those files for
			// lost metadata and a job on those nodes removes them.
			rewrites = append(rewrites, leftMarker{s.Pending, pendingContent(s.Seq, left)})
			env.Logger.Warn(fmt.Sprintf("checkpoint %s was interrupted on nodes this job does not have (%s): its intent marker %s stays until a job on them removes their files",
				CheckpointDir(s.Seq), joinRanges(left), s.Pending))
		} else if s.Pending != "" {
			markers = append(markers, s.Pending)
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
	for _, p := range markers {
		errs = append(errs, removeIfExists(meta.Driver, p))
	}
	if len(markers) > 0 {
		errs = append(errs, meta.Driver.SyncDir(meta.Dir))
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
