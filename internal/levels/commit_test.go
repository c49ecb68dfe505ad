package levels

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// TestOpenSupersededMarker: the states a crash can leave around a
// superseded marker (checkpoint 1 dropped when checkpoint 2 commits,
// docs/format/manifest.md). The marker makes checkpoint 1 a deletion
// exactly when checkpoint 2 is committed or being deleted; otherwise it
// is stale and goes, and checkpoint 1 stays. Start-up then leaves no
// marker behind, and never calls checkpoint 1's metadata lost.
func TestOpenSupersededMarker(t *testing.T) {
	primary1, replica1 := "meta/"+ManifestName(1), "global/"+ReplicaName(1)
	primary2, replica2 := "meta/"+ManifestName(2), "global/"+ReplicaName(2)
	for _, tt := range []struct {
		name string
		// what the crash left, applied to two committed checkpoints
		remove []string
		rename [][2]string
		put    []string
		// committed ids after start-up (empty: a fresh start)
		want []int64
		lost bool
	}{
		{name: "newer committed, older copies intact",
			put: []string{"meta/" + SupersededName(1, 2)}, want: []int64{2}},
		{name: "newer committed, older replica removed",
			put: []string{"meta/" + SupersededName(1, 2)}, remove: []string{replica1}, want: []int64{2}},
		{name: "newer committed, older copies gone, its files left",
			put: []string{"meta/" + SupersededName(1, 2)}, remove: []string{primary1, replica1}, want: []int64{2}},
		{name: "newer committed, older already marked deleting",
			put:    []string{"meta/" + SupersededName(1, 2)},
			rename: [][2]string{{primary1, "meta/" + DeletingName(1)}}, want: []int64{2}},
		{name: "newer committed through its replica alone",
			put: []string{"meta/" + SupersededName(1, 2)}, remove: []string{primary2}, want: []int64{2}},
		{name: "newer never committed (intent marker, no copy)",
			put: []string{"meta/" + SupersededName(1, 2), "meta/" + PendingName(2)}, remove: []string{primary2, replica2}, want: []int64{1}},
		{name: "newer never committed (intent marker, damaged copy)",
			put:    []string{"meta/" + SupersededName(1, 2), "meta/" + PendingName(2), primary2},
			remove: []string{replica2}, want: []int64{1}},
		{name: "newer being deleted",
			put:    []string{"meta/" + SupersededName(1, 2)},
			rename: [][2]string{{primary2, "meta/" + DeletingName(2)}}, want: nil},
		{name: "marker naming an older checkpoint is ignored",
			put: []string{"meta/" + SupersededName(2, 1)}, want: []int64{1, 2}},
		{name: "without the marker, files without copies are lost metadata",
			remove: []string{primary1, replica1}, lost: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 1)
			cl.policy = keepAll{}
			require.NoError(t, cl.run(2, func(e *Engine) error {
				for id := int64(1); id <= 2; id++ {
					if _, _, err := e.Checkpoint(id, L1, writeBytes(payload(e.env.Rank, id, 64))); err != nil {
						return err
					}
				}
				return nil
			}))
			for _, r := range tt.rename {
				require.NoError(t, cl.d.Rename(filepath.Join(cl.root, r[0]), filepath.Join(cl.root, r[1])))
			}
			for _, p := range tt.remove {
				require.NoError(t, cl.d.Remove(filepath.Join(cl.root, p)))
			}
			for _, p := range tt.put {
				cl.put(t, p, nil)
			}
			before := cl.listTree(t)
			var committed []int64
			errs := make([]error, 2)
			require.NoError(t, runWorld(2, func(c comm.Comm) error {
				e, err := NewEngine(cl.env(c), Config{Levels: []Level{Local1{}}, Policy: keepAll{}, PartRanks: testPartRanks()})
				if err != nil {
					return err
				}
				defer e.Release()
				if errs[c.Rank()] = e.Open(); errs[c.Rank()] != nil {
					return nil
				}
				var ids []int64
				for _, m := range e.Committed() {
					ids = append(ids, m.ID)
				}
				if len(ids) > 0 {
					m, src, err := e.Recover()
					if err != nil {
						return err
					}
					b, err := readSource(src)
					if err != nil {
						return err
					}
					if m.ID != ids[len(ids)-1] || string(b) != string(payload(c.Rank(), m.ID, 64)) {
						return fmt.Errorf("rank %d recovered checkpoint %d, not the newest committed, or wrong bytes", c.Rank(), m.ID)
					}
				}
				if c.Rank() == 0 {
					committed = ids
				}
				return nil
			}))
			if tt.lost {
				for r, err := range errs {
					require.ErrorIs(t, err, ErrMetadataLost, "rank %d", r)
				}
				assert.Equal(t, before, cl.listTree(t), "a refused start-up changes nothing")
				return
			}
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			assert.Equal(t, tt.want, committed)
			for _, p := range cl.listTree(t) {
				assert.False(t, strings.Contains(p, SupersededInfix), "%s: every superseded marker goes", p)
				assert.False(t, strings.HasSuffix(p, DeletingSuffix), "%s: finished deletions leave no marker", p)
			}
			for _, id := range []int64{1, 2} {
				kept := false
				for _, w := range tt.want {
					kept = kept || w == id
				}
				for _, p := range []string{fmt.Sprintf("local/node0000/%s", CheckpointDir(uint64(id))), "meta/" + ManifestName(uint64(id)), "global/" + ReplicaName(uint64(id))} {
					assert.Equal(t, kept, cl.exists(t, p), "%s", p)
				}
			}
		})
	}
}

// TestRetentionLeavesNoMarkers: in steady state a checkpoint drops the
// previous one through a superseded marker; once the background work is
// done, only the newest checkpoint, its copies and the next checkpoint's
// intent marker are left, and after Release not even that.
func TestRetentionLeavesNoMarkers(t *testing.T) {
	cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 1)
	require.NoError(t, cl.run(2, func(e *Engine) error {
		for id := int64(1); id <= 4; id++ {
			if _, _, err := e.Checkpoint(id, L1, writeBytes(payload(e.env.Rank, id, 64))); err != nil {
				return err
			}
			e.Wait()
			if n := len(e.Committed()); n != 1 {
				return fmt.Errorf("after checkpoint %d: %d committed", id, n)
			}
		}
		return nil
	}))
	var meta []string
	for _, p := range cl.listTree(t) {
		if strings.HasPrefix(p, "meta/") {
			meta = append(meta, p)
		}
	}
	// The deletion marker of checkpoint 3 waits for the next commit (or
	// Settle); nothing else but checkpoint 4's manifest: its root and part.
	want := []string{"meta/" + DeletingName(3), "meta/" + ManifestName(4), "meta/" + PartsDirName(4)}
	for i := range (layout{ranks: 2, per: partRanksFor(1, 1, testPartRanks())}).parts() {
		want = append(want, "meta/"+PartName(4, L1, i))
	}
	assert.ElementsMatch(t, want, meta)
	assert.False(t, cl.exists(t, "global/"+ReplicaName(3)))
	assert.False(t, cl.exists(t, "local/node0000/"+CheckpointDir(3)))
}

// TestSupersededMarkerFailure: when the superseded markers cannot be
// created, the commit fails on every rank and the previous checkpoint
// stays committed and recoverable.
func TestSupersededMarkerFailure(t *testing.T) {
	core := vfd.NewCore()
	cl := newCluster(t, core, "/r", 1)
	require.NoError(t, cl.run(2, func(e *Engine) error {
		_, _, err := e.Checkpoint(1, L1, writeBytes(payload(e.env.Rank, 1, 64)))
		return err
	}))
	boom := errors.New("no space for a marker")
	cl.d = vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpOpen && strings.Contains(op.Path, SupersededInfix) {
			return boom
		}
		return nil
	}))
	errs := make([]error, 2)
	require.NoError(t, cl.run(2, func(e *Engine) error {
		_, _, errs[e.env.Rank] = e.Checkpoint(2, L1, writeBytes(payload(e.env.Rank, 2, 64)))
		return nil
	}))
	for r, err := range errs {
		require.ErrorIs(t, err, ErrVoteFailed, "rank %d", r)
		assert.Equal(t, errs[0].Error(), err.Error())
	}
	cl.d = core
	require.NoError(t, cl.run(2, func(e *Engine) error {
		m, src, err := e.Recover()
		if err != nil {
			return err
		}
		b, err := readSource(src)
		if err == nil && (m.ID != 1 || string(b) != string(payload(e.env.Rank, 1, 64))) {
			err = fmt.Errorf("recovered %d", m.ID)
		}
		return err
	}))
}

// TestCrashAtCommitPoints crashes (a power cut: what [vfd.Core.CrashClone]
// keeps) at, and right after, each named point of the commit protocol in
// a run of checkpoints 2 and 3 after checkpoint 1 (retention dropping
// each previous one), at L1, L2, L3 and the inline L4 (whose partner
// copies, parity files and container are written under their final
// names), and checks that every
// point is reached and that a restart finds checkpoint v-1 or v committed
// — never an older one, never lost metadata, never a fresh start —
// recovers its bytes, and leaves nothing of an uncommitted checkpoint
// ([checkRestarted]).
func TestCrashAtCommitPoints(t *testing.T) {
	for _, lvl := range []ID{L1, L2, L3, L4} {
		t.Run(lvl.String(), func(t *testing.T) { crashAtCommitPoints(t, lvl) })
	}
}

func crashAtCommitPoints(t *testing.T, lvl ID) {
	ext := func(p, suffix string) bool { return strings.HasSuffix(p, suffix) }
	isData := func(p string) bool { return strings.Contains(p, "/data") && ext(p, ".fti") }
	type point struct {
		name  string
		match func(op vfd.Op) bool
	}
	points := []point{
		{"intent marker written ahead", func(op vfd.Op) bool { return op.Kind == vfd.OpOpen && ext(op.Path, PendingSuffix) }},
		{"data file created under its final name", func(op vfd.Op) bool { return op.Kind == vfd.OpOpen && isData(op.Path) }},
		{"data file synced", func(op vfd.Op) bool { return op.Kind == vfd.OpSync && isData(op.Path) }},
		{"checkpoint directory synced", func(op vfd.Op) bool {
			return op.Kind == vfd.OpSyncDir && strings.HasPrefix(filepath.Base(op.Path), "ckpt")
		}},
		{"superseded marker created", func(op vfd.Op) bool { return op.Kind == vfd.OpOpen && strings.Contains(op.Path, SupersededInfix) }},
		{"manifest copy created", func(op vfd.Op) bool { return op.Kind == vfd.OpOpen && ext(op.Path, manifestSuffix) }},
		{"manifest copy synced", func(op vfd.Op) bool { return op.Kind == vfd.OpSync && ext(op.Path, manifestSuffix) }},
		{"meta directory synced", func(op vfd.Op) bool { return op.Kind == vfd.OpSyncDir && ext(op.Path, "/meta") }},
		{"replica directory synced", func(op vfd.Op) bool { return op.Kind == vfd.OpSyncDir && ext(op.Path, "/"+ReplicaDir) }},
		{"primary renamed to its deletion marker", func(op vfd.Op) bool { return op.Kind == vfd.OpRename && ext(op.NewPath, DeletingSuffix) }},
		{"replica removed", func(op vfd.Op) bool {
			return op.Kind == vfd.OpRemove && strings.Contains(op.Path, "/"+ReplicaDir+"/")
		}},
		{"superseded marker removed", func(op vfd.Op) bool { return op.Kind == vfd.OpRemove && strings.Contains(op.Path, SupersededInfix) }},
		{"intent marker removed", func(op vfd.Op) bool { return op.Kind == vfd.OpRemove && ext(op.Path, PendingSuffix) }},
		{"superseded checkpoint directory removed", func(op vfd.Op) bool { return op.Kind == vfd.OpRemoveAll }},
		{"deletion marker removed", func(op vfd.Op) bool { return op.Kind == vfd.OpRemove && ext(op.Path, DeletingSuffix) }},
	}
	if lvl == L4 {
		points = slices.DeleteFunc(points, func(p point) bool { return strings.HasPrefix(p.name, "data file") })
	}
	if lvl != L1 {
		role := map[ID]string{L2: "partner copy", L3: "parity file", L4: "L4 container"}[lvl]
		prefix := "/" + map[ID]string{L2: RolePartner, L3: RoleParity, L4: ContainerName}[lvl]
		suffix := map[ID]string{L2: ".fti", L3: ".fti", L4: ContainerName}[lvl]
		is := func(p string) bool { return strings.Contains(p, prefix) && ext(p, suffix) }
		points = append(points,
			point{role + " created under its final name", func(op vfd.Op) bool { return op.Kind == vfd.OpOpen && is(op.Path) }},
			point{role + " synced", func(op vfd.Op) bool { return op.Kind == vfd.OpSync && is(op.Path) }})
	}
	const n = 2
	newCl := func(d vfd.Driver) *cluster {
		cl := newCluster(t, d, "/r", 1)
		cl.groupSize, cl.levels = n, []Level{Local1{}, Partner2{}, RS3{}, Global4{Inline: true}}
		return cl
	}
	for _, pt := range points {
		for _, after := range []bool{false, true} {
			for nth := 0; ; nth++ {
				name := fmt.Sprintf("%v/%s/after=%v/%d", lvl, pt.name, after, nth)
				core := vfd.NewCore()
				cl := newCl(core)
				require.NoError(t, cl.run(n, func(e *Engine) error {
					_, _, err := e.Checkpoint(1, lvl, writeBytes(payload(e.env.Rank, 1, 100)))
					return err
				}))
				var (
					mu      sync.Mutex
					seen    int
					armed   bool // crash at the next op
					clone   *vfd.Core
					stage   atomic.Int64
					crashAt int64
				)
				boom := errors.New("power cut")
				cl.d = vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
					mu.Lock()
					defer mu.Unlock()
					if clone != nil {
						return boom
					}
					hit := false
					if armed {
						hit = true
					} else if pt.match(op) {
						if seen == nth {
							if after {
								armed = true
							} else {
								hit = true
							}
						}
						seen++
					}
					if hit {
						clone, crashAt = core.CrashClone(), stage.Load()
						return boom
					}
					return nil
				}))
				_ = cl.run(n, func(e *Engine) error {
					for v := int64(2); v <= 3; v++ {
						if e.env.Rank == 0 {
							stage.Store(v)
						}
						if _, _, err := e.Checkpoint(v, lvl, writeBytes(payload(e.env.Rank, v, 100))); err != nil {
							return err
						}
						e.Wait()
					}
					return nil
				})
				if clone == nil {
					require.Greater(t, nth, 0, "%s: the protocol never reaches this point", pt.name)
					t.Logf("%s, after=%v: %d crashes", pt.name, after, nth)
					break
				}
				v := crashAt
				if v == 0 {
					v = 2 // before the first stage was set: while opening
				}
				checkRestarted(t, newCl(clone), n, 100, name, []int64{v - 1, v})
			}
		}
	}
}

// TestCrashAtEveryOpFinalNames crashes at every file operation of L2,
// L3 and inline L4 checkpoints 2 and 3 after checkpoint 1 — partner
// copies, parity and the container (a set of two files) under their
// final names, ranks sharing node directories (L2, L4: two per node; at
// L2 each receives its copy from a rank of the other node), and the
// local-then-copy L4 (its container under its final names too) — keeping
// the synced state only (even operations) or, besides, half the pages
// written since their file's last sync (odd ones), and checks the
// restart as [checkRestarted] does.
func TestCrashAtEveryOpFinalNames(t *testing.T) {
	for _, tc := range []struct {
		lvl             ID
		n, node, groups int
		copied          bool // the local-then-copy L4
	}{{L2, 4, 2, 2, false}, {L3, 4, 1, 4, false}, {L4, 4, 2, 2, false}, {L4, 4, 2, 2, true}} {
		name := tc.lvl.String()
		if tc.copied {
			name += "/local-then-copy"
		}
		t.Run(name, func(t *testing.T) {
			newCl := func(d vfd.Driver) *cluster {
				cl := newCluster(t, d, "/r", tc.node)
				cl.groupSize, cl.levels = tc.groups, []Level{Local1{}, Partner2{}, RS3{}, Global4{Inline: !tc.copied, NFiles: 2}}
				return cl
			}
			stride := 1
			if raceEnabled {
				stride = 3 // every third op under -race; every op otherwise
			}
			for k := 0; ; k += stride {
				core := vfd.NewCore()
				cl := newCl(core)
				require.NoError(t, cl.run(tc.n, func(e *Engine) error {
					_, _, err := e.Checkpoint(1, tc.lvl, writeBytes(payload(e.env.Rank, 1, 3000)))
					return err
				}))
				var (
					mu      sync.Mutex
					ops     int
					clone   *vfd.Core
					stage   atomic.Int64
					crashAt int64
				)
				boom := errors.New("power cut")
				cl.d = vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
					mu.Lock()
					defer mu.Unlock()
					if clone != nil {
						return boom
					}
					if ops++; ops-1 < k {
						return nil
					}
					o := vfd.CrashOptions{}
					if k%2 == 1 {
						o = vfd.CrashOptions{Rand: rand.New(rand.NewPCG(uint64(k), 19)), UnsyncedPages: 0.5}
					}
					clone, crashAt = core.CrashCloneWith(o), stage.Load()
					return boom
				}))
				_ = cl.run(tc.n, func(e *Engine) error {
					for v := int64(2); v <= 3; v++ {
						if e.env.Rank == 0 {
							stage.Store(v)
						}
						if _, _, err := e.Checkpoint(v, tc.lvl, writeBytes(payload(e.env.Rank, v, 3000))); err != nil {
							return err
						}
						e.Wait()
					}
					return nil
				})
				if clone == nil {
					require.Greater(t, k, 100, "too few operations")
					t.Logf("%v: %d operations", tc.lvl, k)
					break
				}
				v := crashAt
				if v == 0 {
					v = 2
				}
				checkRestarted(t, newCl(clone), tc.n, 3000, fmt.Sprintf("%v/op %d", tc.lvl, k), []int64{v - 1, v})
			}
		})
	}
}

// checkRestarted restarts cl after a crash while checkpoint want[1] was
// taken (want[0] the one before it; rank r's data is payload(r, id, size)).
// After start-up alone, the newest committed checkpoint must be one of
// want, and what is on disk must be the committed checkpoints' and
// nothing else: every checkpoint directory of every area is a committed
// checkpoint's and holds exactly the files its manifest lists, all of
// them (so a file an interrupted checkpoint published under its final
// name is never taken into a later one of the same number, and no listed
// name was left undurable), and no tmp file, marker or manifest copy of
// another checkpoint is left (but damaged copies moved aside as .broken).
// Then a second start-up recovers the newest, and every committed
// checkpoint, bit for bit on every rank, and takes and recovers one more
// checkpoint at the newest one's level.
func checkRestarted(t *testing.T, cl *cluster, n, size int, name string, want []int64) {
	t.Helper()
	var committed []*Manifest
	require.NoError(t, runWorld(n, func(c comm.Comm) error {
		e, err := NewEngine(cl.env(c), cl.config())
		if err != nil {
			return err
		}
		defer e.Release()
		if err := e.Open(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			committed = e.Committed()
		}
		return nil
	}), name)
	require.NotEmpty(t, committed, name)
	newest := committed[len(committed)-1].ID
	require.Contains(t, want, newest, "%s: crash while checkpointing %d left %d the newest committed", name, want[1], newest)
	for _, m := range committed {
		require.Contains(t, want, m.ID, "%s: crash while checkpointing %d left %d committed", name, want[1], m.ID)
	}

	// What is on disk is the committed checkpoints' and nothing else.
	topo, err := partner.NewTopology(n, cl.nodeSize, max(cl.groupSize, 1), nil)
	require.NoError(t, err)
	listed := map[string]bool{}
	bySeq := map[uint64]bool{}
	roots := map[uint64]*Manifest{}
	for _, m := range committed {
		bySeq[m.Seq] = true
		roots[m.Seq] = m
		m = fullOf(t, m)
		for r, fs := range m.Files {
			for _, f := range fs {
				if f.Attrs[AttrInContainer] != "" {
					continue // no file of its own
				}
				switch f.Where {
				case Local:
					listed[path.Join("local", topo.NodeDir(topo.NodeOf(r)), f.Name)] = true
				case Global:
					listed[path.Join("global", f.Name)] = true
				}
			}
		}
	}
	for _, p := range driverTree(t, cl.d, cl.root) {
		parts := strings.Split(p, "/")
		base := parts[len(parts)-1]
		assert.False(t, strings.HasSuffix(p, TmpSuffix), "%s: %s left by start-up", name, p)
		switch {
		case (parts[0] == "meta" && len(parts) == 3) || (parts[0] == "global" && len(parts) == 4 && parts[1] == ReplicaDir):
			// A part: of a committed checkpoint, named by its root.
			seq, ok := parseSeq(parts[len(parts)-2], PartsSuffix)
			// A damaged copy moved aside by a repair stays, for forensics.
			lvl, i, isPart := parsePartBase(strings.TrimSuffix(base, BrokenSuffix))
			m := roots[seq]
			assert.True(t, ok && isPart && m != nil && m.Level == lvl && i < m.NumParts(),
				"%s: %s is not a part of a committed checkpoint's root", name, p)
		case parts[0] == "meta" && len(parts) == 2 && strings.HasSuffix(base, PartsSuffix):
			seq, ok := parseSeq(base, PartsSuffix)
			assert.True(t, ok && bySeq[seq], "%s: %s is not a committed checkpoint's parts", name, p)
		case parts[0] == "meta" && len(parts) == 2:
			if seq, ok := parseSeq(base, manifestSuffix); ok {
				assert.True(t, bySeq[seq], "%s: %s is not a committed checkpoint's", name, p)
			} else {
				assert.True(t, strings.HasSuffix(base, BrokenSuffix) || base == LockName,
					"%s: %s (a marker) left by start-up", name, p)
			}
		case len(parts) >= 2 && parts[0] == "global" && parts[1] == ReplicaDir:
			if seq, ok := parseSeq(base, manifestSuffix); ok {
				assert.True(t, bySeq[seq], "%s: %s is not a committed checkpoint's", name, p)
			}
		case (parts[0] == "local" && len(parts) >= 3) || (parts[0] == "global" && len(parts) >= 2):
			dir := parts[1]
			if parts[0] == "local" {
				dir = parts[2]
			}
			seq, ok := parseSeq(dir, "")
			if !ok {
				continue
			}
			if !assert.True(t, bySeq[seq], "%s: %s: start-up left a directory of uncommitted checkpoint %d", name, p, seq) {
				continue
			}
			if (parts[0] == "local" && len(parts) > 3) || (parts[0] == "global" && len(parts) > 2) {
				assert.True(t, listed[p], "%s: %s is in committed checkpoint %d's directory but not in its manifest", name, p, seq)
			}
		}
	}
	for p := range listed {
		assert.True(t, cl.exists(t, p), "%s: %s listed in a committed manifest but missing after the crash", name, p)
	}

	// The restart recovers the newest bit for bit, and every committed
	// checkpoint is whole.
	require.NoError(t, runWorld(n, func(c comm.Comm) error {
		e, err := NewEngine(cl.env(c), cl.config())
		if err != nil {
			return err
		}
		defer e.Release()
		if err := e.Open(); err != nil {
			return err
		}
		if got := e.Committed(); len(got) != len(committed) || got[len(got)-1].Seq != committed[len(committed)-1].Seq {
			return fmt.Errorf("a second start-up finds other checkpoints committed")
		}
		m, src, err := e.Recover()
		if err != nil {
			return err
		}
		b, err := readSource(src)
		if err != nil {
			return err
		}
		if m.ID != newest || !bytes.Equal(b, payload(c.Rank(), m.ID, size)) {
			return fmt.Errorf("rank %d: checkpoint %d recovered, other bytes than the newest's", c.Rank(), m.ID)
		}
		for _, m := range e.Committed() {
			src, err := e.RecoverOne(m)
			if err != nil {
				return fmt.Errorf("committed checkpoint %d: %w", m.ID, err)
			}
			if b, err := readSource(src); err != nil || !bytes.Equal(b, payload(c.Rank(), m.ID, size)) {
				return fmt.Errorf("rank %d: committed checkpoint %d recovers other bytes (%v)", c.Rank(), m.ID, err)
			}
		}
		// The restarted run checkpoints again at the same level, under
		// the number of the checkpoint the crash interrupted when that
		// one did not commit, and recovers it.
		next, _, err := e.Checkpoint(9, m.Level, writeBytes(payload(c.Rank(), 9, size)))
		if err != nil {
			return fmt.Errorf("checkpoint after the restart: %w", err)
		}
		src, err = e.RecoverOne(next)
		if err != nil {
			return fmt.Errorf("checkpoint after the restart: %w", err)
		}
		if b, err := readSource(src); err != nil || !bytes.Equal(b, payload(c.Rank(), 9, size)) {
			return fmt.Errorf("rank %d: the checkpoint after the restart recovers other bytes (%v)", c.Rank(), err)
		}
		return nil
	}), name)
}

// driverTree returns every path under root as d sees it, relative to
// root ("/"-separated), sorted.
func driverTree(t *testing.T, d vfd.Driver, root string) []string {
	var out []string
	var walk func(rel string)
	walk = func(rel string) {
		ents, err := d.ReadDir(path.Join(root, rel))
		require.NoError(t, err)
		for _, de := range ents {
			p := path.Join(rel, de.Name())
			out = append(out, p)
			if de.IsDir() {
				walk(p)
			}
		}
	}
	walk("")
	slices.Sort(out)
	return out
}

// TestFailedRedundancyRemoved fails, one at a time, each open, write and
// sync of the files a level writes under their final names (L2's partner
// copy, L3's parity, the inline L4's container): every rank reports the
// same failure, nothing of the failed checkpoint is left on disk — the
// failed file and every other one, under any name, before any restart —
// and a restart recovers the previous checkpoint bit for bit.
func TestFailedRedundancyRemoved(t *testing.T) {
	const n = 4
	for _, lvl := range []ID{L2, L3, L4} {
		word := map[ID]string{L2: "/" + RolePartner, L3: "/" + RoleParity, L4: "/" + ContainerName}[lvl]
		for _, kind := range []vfd.OpKind{vfd.OpOpen, vfd.OpWrite, vfd.OpSync} {
			for nth := 0; ; nth++ {
				name := fmt.Sprintf("%v/%v/%d", lvl, kind, nth)
				core := vfd.NewCore()
				newCl := func(d vfd.Driver) *cluster {
					cl := newCluster(t, d, "/r", 2)
					cl.groupSize, cl.levels = 2, []Level{Local1{}, Partner2{}, RS3{}, Global4{Inline: true, NFiles: 2}}
					return cl
				}
				cl := newCl(core)
				require.NoError(t, cl.run(n, func(e *Engine) error {
					_, _, err := e.Checkpoint(1, lvl, writeBytes(payload(e.env.Rank, 1, 3000)))
					return err
				}), name)
				var (
					mu   sync.Mutex
					seen int
					hit  bool
				)
				cl.d = vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
					mu.Lock()
					defer mu.Unlock()
					if op.Kind != kind || !strings.Contains(op.Path, word) || !strings.Contains(op.Path, CheckpointDir(2)) {
						return nil
					}
					if seen++; seen-1 == nth {
						hit = true
						return errors.New("injected")
					}
					return nil
				}))
				errs := make([]error, n)
				require.NoError(t, cl.run(n, func(e *Engine) error {
					_, _, errs[e.env.Rank] = e.Checkpoint(2, lvl, writeBytes(payload(e.env.Rank, 2, 3000)))
					return nil
				}), name)
				if !hit {
					require.Greater(t, nth, 0, "%s: never reached", name)
					t.Logf("%v, %v: %d failures", lvl, kind, nth)
					break
				}
				for r, err := range errs {
					require.ErrorIs(t, err, ErrVoteFailed, "%s: rank %d", name, r)
					assert.Equal(t, errs[0].Error(), err.Error(), "%s: ranks disagree", name)
				}
				for _, p := range driverTree(t, core, cl.root) {
					assert.False(t, strings.Contains(p, CheckpointDir(2)), "%s: %s left by the failed checkpoint", name, p)
					assert.False(t, strings.HasSuffix(p, TmpSuffix), "%s: %s left by the failed checkpoint", name, p)
				}
				checkRestarted(t, newCl(core), n, 3000, name, []int64{1, 1})
			}
		}
	}
}

// namingLevel is an L2 whose Prenames names a file its Protect never
// writes nor lists.
type namingLevel struct{ Local1 }

func (namingLevel) ID() ID { return L2 }

func (namingLevel) Prenames(env *Env, p *Pending) []string {
	return []string{RankFileName(p.Dir, RolePartner, env.Rank)}
}

// TestPrenamedButUnlisted: a level that names a file under its final
// name and does not list it fails the checkpoint on every rank, and the
// empty file goes with it (it would otherwise stay, unlisted, in a
// committed checkpoint's directory).
func TestPrenamedButUnlisted(t *testing.T) {
	cl := newCluster(t, vfd.NewCore(), "/r", 1)
	cl.levels = []Level{Local1{}, namingLevel{}}
	errs := make([]error, 2)
	require.NoError(t, cl.run(2, func(e *Engine) error {
		if _, _, err := e.Checkpoint(1, L1, writeBytes(payload(e.env.Rank, 1, 64))); err != nil {
			return err
		}
		_, _, errs[e.env.Rank] = e.Checkpoint(2, L2, writeBytes(payload(e.env.Rank, 2, 64)))
		return nil
	}))
	for r, err := range errs {
		require.ErrorIs(t, err, ErrVoteFailed, "rank %d", r)
		assert.Contains(t, err.Error(), "did not list", "rank %d", r)
	}
	for _, p := range driverTree(t, cl.d, cl.root) {
		assert.False(t, strings.Contains(p, CheckpointDir(2)), "%s left by the failed checkpoint", p)
	}
}
