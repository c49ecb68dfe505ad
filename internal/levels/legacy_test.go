package levels

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// The legacy run: testdata/legacy-run was written by ftigo before
// issue 28 (main at 6990e03), whose manifests are whole files of
// versions 1 and 2. TestWriteLegacyRun wrote it, with that version's
// engine; run from a later version it writes that version's layout, so
// the directory is kept as it was.

// legacyRun is the world of the legacy run: 8 ranks, 2 per node,
// groups of 2 nodes (4 nodes, 2 sectors).
const (
	legacyRanks    = 8
	legacyNodeSize = 2
	legacyGroup    = 2
)

// legacyData is rank r's variable of checkpoint id in the legacy run.
func legacyData(r int, id int64) []byte { return payload(r, id, 2048+64*r) }

// legacyDelta is rank r's variable of the differential checkpoint 2:
// checkpoint 1's with one block changed.
func legacyDelta(r int) []byte {
	b := legacyData(r, 1)
	b[1024+r] ^= 0x5a
	return b
}

// legacyLevels are the levels of the legacy run.
func legacyLevels() []Level {
	return []Level{Local1{}, Partner2{}, RS3{}, Global4{Inline: true}}
}

// legacyEnv is rank c's environment of a run over root.
func legacyEnv(c comm.Comm, topo *partner.Topology, d vfd.Driver, root string, clock *atomic.Int64) *Env {
	return &Env{
		Comm: c, Topo: topo, Rank: c.Rank(),
		Local:     Store{d, filepath.Join(root, "local", topo.NodeDir(topo.NodeOf(c.Rank())))},
		Global:    Store{d, filepath.Join(root, "global")},
		Meta:      Store{d, filepath.Join(root, "meta")},
		BlockSize: 1000,
		Now:       func() time.Time { return time.Unix(1700000000, clock.Add(1)) },
	}
}

// TestWriteLegacyRun writes the legacy run into $FTIGO_WRITE_LEGACY_RUN:
// checkpoint 1 at L1, 2 a differential L1 on 1, 3 at L2, 4 at L3, 5 at
// L4 (inline), 6 at L1 raised to L3. Nothing is dropped.
func TestWriteLegacyRun(t *testing.T) {
	root := os.Getenv("FTIGO_WRITE_LEGACY_RUN")
	if root == "" {
		t.Skip("writes testdata/legacy-run when FTIGO_WRITE_LEGACY_RUN names a directory")
	}
	topo, err := partner.NewTopology(legacyRanks, legacyNodeSize, legacyGroup, nil)
	require.NoError(t, err)
	var clock atomic.Int64
	require.NoError(t, comm.Run(legacyRanks, func(c comm.Comm) error {
		e, err := NewEngine(legacyEnv(c, topo, vfd.Sec2{}, root, &clock), Config{Levels: legacyLevels(), Policy: keepAll{}})
		if err != nil {
			return err
		}
		if err := e.Open(); err != nil {
			return err
		}
		defer e.Release()
		r := c.Rank()
		rs := &dcpRank{}
		m1, _, err := e.Checkpoint(1, L1, ffWrite(legacyData(r, 1), rs, 1, r))
		if err != nil {
			return err
		}
		w, info := deltaWrite(legacyDelta(r), rs, 2, r)
		if _, _, err := e.Checkpoint(2, L1, w, Differential(m1, 1024, info)); err != nil {
			return err
		}
		for _, x := range []struct {
			id  int64
			lvl ID
		}{{3, L2}, {4, L3}, {5, L4}} {
			if _, _, err := e.Checkpoint(x.id, x.lvl, ffWrite(legacyData(r, x.id), &dcpRank{}, x.id, r)); err != nil {
				return fmt.Errorf("checkpoint %d: %w", x.id, err)
			}
		}
		m6, _, err := e.Checkpoint(6, L1, ffWrite(legacyData(r, 6), &dcpRank{}, 6, r))
		if err != nil {
			return err
		}
		priv, err := c.Split(0, r)
		if err != nil {
			return err
		}
		defer priv.Close()
		up, _, err := e.Raise(m6, L3, priv)
		if err != nil {
			return err
		}
		if len(e.Committed()) != 6 || up.Level != L3 {
			return errors.New("the legacy run keeps six checkpoints")
		}
		return nil
	}, comm.WithTimeout(time.Minute)))
}

// legacyCopy copies testdata/legacy-run into a fresh directory.
func legacyCopy(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "run")
	require.NoError(t, os.CopyFS(root, os.DirFS("testdata/legacy-run")))
	return root
}

// legacyWorld runs fn on every rank of the legacy run's world over root,
// with parts of 4 ranks (the legacy manifests are cut into two) and pol.
func legacyWorld(t *testing.T, root string, pol Policy, fn func(e *Engine) error) {
	t.Helper()
	topo, err := partner.NewTopology(legacyRanks, legacyNodeSize, legacyGroup, nil)
	require.NoError(t, err)
	var clock atomic.Int64
	clock.Store(1 << 40)
	require.NoError(t, comm.Run(legacyRanks, func(c comm.Comm) error {
		e, err := NewEngine(legacyEnv(c, topo, vfd.Sec2{}, root, &clock), Config{Levels: legacyLevels(), Policy: pol, PartRanks: 4})
		if err != nil {
			return err
		}
		if err := e.Open(); err != nil {
			return err
		}
		defer e.Release()
		return fn(e)
	}, comm.WithTimeout(time.Minute)))
}

// legacyWant is rank r's variable in the legacy run's checkpoint id.
func legacyWant(r int, id int64) []byte {
	if id == 2 {
		return legacyDelta(r)
	}
	return legacyData(r, id)
}

// TestLegacyRun: a run directory written before issue 28 (manifests of
// versions 1 and 2, one file listing every rank) starts up: every
// checkpoint is committed, each recovers bit for bit, the L2 and L3 ones
// after a node is lost; a checkpoint of the run gets a version 3
// manifest, a legacy L1 checkpoint raised gets a version 3 root, and
// retention removes the legacy manifests.
func TestLegacyRun(t *testing.T) {
	root := legacyCopy(t)
	levelsOf := map[int64]ID{1: L1, 2: L1, 3: L2, 4: L3, 5: L4, 6: L3}
	legacyWorld(t, root, keepAll{}, func(e *Engine) error {
		r := e.env.Rank
		c := e.Committed()
		if len(c) != 6 {
			return fmt.Errorf("rank %d: %d committed, want 6", r, len(c))
		}
		for i, m := range c {
			if m.Seq != uint64(i+1) || m.ID != int64(i+1) || m.Level != levelsOf[m.ID] || m.Ranks != legacyRanks {
				return fmt.Errorf("rank %d: checkpoint %d is seq %d id %d %v", r, i, m.Seq, m.ID, m.Level)
			}
			if (m.DCP != nil) != (m.ID == 2) {
				return fmt.Errorf("rank %d: checkpoint %d: dcp %v", r, m.ID, m.DCP)
			}
			if m.Files != nil {
				return fmt.Errorf("rank %d: checkpoint %d lists every rank's files", r, m.ID)
			}
			src, err := e.RecoverOne(m)
			if err != nil {
				return err
			}
			b, err := readImageVar(src)
			if err != nil {
				return fmt.Errorf("rank %d: checkpoint %d: %w", r, m.ID, err)
			}
			if !slices.Equal(b, legacyWant(r, m.ID)) {
				return fmt.Errorf("rank %d: checkpoint %d: wrong data", r, m.ID)
			}
		}
		return nil
	})
	// The legacy manifests are untouched by start-up and recovery.
	for seq := uint64(1); seq <= 6; seq++ {
		got, err := os.ReadFile(filepath.Join(root, "meta", ManifestName(seq)))
		require.NoError(t, err)
		want, err := os.ReadFile(filepath.Join("testdata/legacy-run/meta", ManifestName(seq)))
		require.NoError(t, err)
		require.Equal(t, want, got, "seq %d", seq)
	}

	// Node 1 lost: the L2, L3 and L4 checkpoints recover, the L1 ones do not.
	require.NoError(t, os.RemoveAll(filepath.Join(root, "local", "node0001")))
	legacyWorld(t, root, keepAll{}, func(e *Engine) error {
		r := e.env.Rank
		for _, m := range e.Committed() {
			src, err := e.RecoverOne(m)
			if m.Level == L1 {
				if err == nil || !strings.Contains(err.Error(), "checkpoint file missing") {
					return fmt.Errorf("rank %d: L1 checkpoint %d without node 1: %v", r, m.ID, err)
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("rank %d: checkpoint %d (%v) without node 1: %w", r, m.ID, m.Level, err)
			}
			b, err := readImageVar(src)
			if err != nil || !slices.Equal(b, legacyWant(r, m.ID)) {
				return fmt.Errorf("rank %d: checkpoint %d: wrong data (%v)", r, m.ID, err)
			}
		}
		return nil
	})

	// A new checkpoint at L4 supersedes them all (FTI's rule): once the
	// removal is settled only its version 3 manifest is left.
	legacyWorld(t, root, FTIPolicy{}, func(e *Engine) error {
		r := e.env.Rank
		if _, _, err := e.Checkpoint(7, L4, ffWrite(legacyData(r, 7), &dcpRank{}, 7, r)); err != nil {
			return err
		}
		return e.Settle()
	})
	ents, err := os.ReadDir(filepath.Join(root, "meta"))
	require.NoError(t, err)
	var names []string
	for _, de := range ents {
		names = append(names, de.Name())
	}
	assert.Equal(t, []string{ManifestName(7), PartsDirName(7)}, names)
	raw, err := os.ReadFile(filepath.Join(root, "meta", ManifestName(7)))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(raw), "ftigo-manifest 3\n"))
	legacyWorld(t, root, FTIPolicy{}, func(e *Engine) error {
		m, src, err := e.Recover()
		if err != nil {
			return err
		}
		b, err := readImageVar(src)
		if err != nil || m.ID != 7 || !slices.Equal(b, legacyData(e.env.Rank, 7)) {
			return fmt.Errorf("rank %d: recovered %d (%v)", e.env.Rank, m.ID, err)
		}
		return nil
	})
}

// TestLegacyRaiseAndKeep: a legacy L1 checkpoint raised to L2 gets a
// version 3 root naming the legacy body (raised_from); a crash between
// the primary and the replica leaves a version 3 primary and the legacy
// replica, which start-up takes for the same checkpoint and repairs.
// Keep rewrites a legacy manifest as a legacy manifest.
func TestLegacyRaiseAndKeep(t *testing.T) {
	root := legacyCopy(t)
	legacyWorld(t, root, keepAll{}, func(e *Engine) error {
		m := e.Committed()[0] // seq 1, L1
		priv, err := e.env.Comm.Split(0, e.env.Rank)
		if err != nil {
			return err
		}
		defer priv.Close()
		up, _, err := e.Raise(m, L2, priv)
		if err != nil {
			return err
		}
		if up.Level != L2 || up.Seq != 1 || up.Time != m.Time {
			return fmt.Errorf("raised %v seq %d", up.Level, up.Seq)
		}
		k, err := e.Keep(e.Committed()[5]) // seq 6, a legacy L3 raised before
		if err != nil {
			return err
		}
		if !k.Kept {
			return errors.New("not kept")
		}
		return nil
	})
	raw, err := os.ReadFile(filepath.Join(root, "meta", ManifestName(1)))
	require.NoError(t, err)
	up, err := ParseManifest("primary", raw)
	require.NoError(t, err)
	assert.Equal(t, ManifestVersionParts, up.version)
	old, err := os.ReadFile(filepath.Join("testdata/legacy-run/meta", ManifestName(1)))
	require.NoError(t, err)
	l1, err := ParseManifest("legacy", old)
	require.NoError(t, err)
	require.NotNil(t, up.raisedFrom)
	assert.Equal(t, l1.ident(), *up.raisedFrom)
	assert.True(t, SameCheckpoint(l1, up))
	kept, err := os.ReadFile(filepath.Join(root, "global", ReplicaName(6)))
	require.NoError(t, err)
	km, err := ParseManifest("kept", kept)
	require.NoError(t, err)
	assert.True(t, km.Kept)
	assert.Equal(t, 0, km.version, "a legacy manifest stays one")
	assert.True(t, strings.HasPrefix(string(kept), "ftigo-manifest 1\n"))

	// The crash between the two renames: the legacy L1 replica back.
	require.NoError(t, os.WriteFile(filepath.Join(root, "global", ReplicaName(1)), old, 0o644))
	legacyWorld(t, root, keepAll{}, func(e *Engine) error {
		m := e.Committed()[0]
		if m.Level != L2 || !e.Committed()[5].Kept {
			return fmt.Errorf("after the crash: %v, kept %v", m.Level, e.Committed()[5].Kept)
		}
		src, err := e.RecoverOne(m)
		if err != nil {
			return err
		}
		b, err := readImageVar(src)
		if err != nil || !slices.Equal(b, legacyData(e.env.Rank, 1)) {
			return fmt.Errorf("rank %d: wrong data (%v)", e.env.Rank, err)
		}
		return nil
	})
	repaired, err := os.ReadFile(filepath.Join(root, "global", ReplicaName(1)))
	require.NoError(t, err)
	assert.Equal(t, raw, repaired, "the replica repaired from the raised primary")
}
