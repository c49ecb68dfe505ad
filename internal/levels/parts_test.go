package levels

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// partsWorld is 8 ranks, one per node, in parts of 2 ranks: 4 parts, 3
// of them led by a rank other than 0.
type partsWorld struct {
	cl *cluster
}

func newPartsWorld(t *testing.T) *partsWorld {
	cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 1)
	cl.policy = keepAll{}
	return &partsWorld{cl: cl}
}

// run opens an engine on every rank (parts of 2 ranks) and calls fn.
func (w *partsWorld) run(fn func(e *Engine) error) error {
	return runWorld(8, func(c comm.Comm) error {
		env := w.cl.env(c)
		cfg := w.cl.config()
		cfg.PartRanks = 2
		e, err := NewEngine(env, cfg)
		if err != nil {
			return err
		}
		if err := e.Open(); err != nil {
			return err
		}
		defer e.Release()
		return fn(e)
	})
}

// commit takes checkpoints 1 and 2 at L1.
func (w *partsWorld) commit(t *testing.T) {
	require.NoError(t, w.run(func(e *Engine) error {
		for id := int64(1); id <= 2; id++ {
			if _, _, err := e.Checkpoint(id, L1, writeBytes(payload(e.env.Rank, id, 500))); err != nil {
				return err
			}
		}
		return nil
	}))
}

// part returns the paths of both copies of part i of checkpoint seq at L1.
func (w *partsWorld) part(seq uint64, i int) [2]string {
	return [2]string{filepath.Join(w.cl.root, "meta", PartName(seq, L1, i)),
		filepath.Join(w.cl.root, "global", ReplicaDir, PartName(seq, L1, i))}
}

// committed returns the sequence numbers committed after Open.
func (w *partsWorld) committed(t *testing.T) ([]uint64, error) {
	var seqs []uint64
	err := w.run(func(e *Engine) error {
		if e.env.Rank == 0 {
			for _, m := range e.Committed() {
				seqs = append(seqs, m.Seq)
			}
		}
		// Every rank recovers the newest from its part.
		m, src, err := e.Recover()
		if err != nil {
			return err
		}
		b, err := readSource(src)
		if err == nil && string(b) != string(payload(e.env.Rank, m.ID, 500)) {
			err = fmt.Errorf("rank %d: wrong data", e.env.Rank)
		}
		return err
	})
	return seqs, err
}

// TestPartsOfACommit: a checkpoint of 8 ranks in parts of 2 has 4 parts,
// each copy written by its leader, named by the root; every rank's view
// holds its own part only.
func TestPartsOfACommit(t *testing.T) {
	w := newPartsWorld(t)
	require.NoError(t, w.run(func(e *Engine) error {
		m, _, err := e.Checkpoint(1, L1, writeBytes(payload(e.env.Rank, 1, 500)))
		if err != nil {
			return err
		}
		if m.NumParts() != 4 || m.PartRanks() != 2 || m.Files != nil || m.Nodes != nil {
			return fmt.Errorf("rank %d: %d parts of %d, files %v", e.env.Rank, m.NumParts(), m.PartRanks(), m.Files != nil)
		}
		held := 0
		for i := range 4 {
			if m.view.has(i) != nil {
				held++
			}
		}
		leader := e.env.Rank%2 == 0
		if (leader && held != 1) || (!leader && held != 0) {
			return fmt.Errorf("rank %d holds %d parts", e.env.Rank, held)
		}
		if (e.env.Rank == 0) != (m.refs != nil) {
			return fmt.Errorf("rank %d: root held %v", e.env.Rank, m.refs != nil)
		}
		return nil
	}))
	for i := range 4 {
		for _, p := range w.part(1, i) {
			_, err := os.Stat(p)
			require.NoError(t, err, "part %d", i)
		}
	}
	ms, err := ScanManifests(Store{vfd.Sec2{}, filepath.Join(w.cl.root, "meta")})
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.NoError(t, ms[0].Err)
	for r := range 8 {
		d, ok := ms[0].M.DataFile(r)
		require.True(t, ok)
		assert.Equal(t, RankFileName(CheckpointDir(1), RoleData, r), d.Name)
	}
}

// TestPartMissingBesideTheIntentMarker: a root whose part has no copy,
// beside its intent marker (a crash while the parts were written), is a
// checkpoint that never committed: start-up removes it, the root kept as
// .broken, and the older one is the newest.
func TestPartMissingBesideTheIntentMarker(t *testing.T) {
	w := newPartsWorld(t)
	w.commit(t)
	for _, p := range w.part(2, 2) {
		require.NoError(t, os.Remove(p))
	}
	require.NoError(t, os.WriteFile(filepath.Join(w.cl.root, "meta", PendingName(2)), []byte("ftigo-pending 2\n"), 0o644))
	seqs, err := w.committed(t)
	require.NoError(t, err)
	assert.Equal(t, []uint64{1}, seqs)
	assert.False(t, w.cl.exists(t, "meta/"+PartsDirName(2)))
	assert.False(t, w.cl.exists(t, "local/node0000/"+CheckpointDir(2)))
	assert.True(t, w.cl.exists(t, "meta/"+ManifestName(2)+BrokenSuffix))
	assert.False(t, w.cl.exists(t, "meta/"+PendingName(2)))
}

// TestPartMissingIsLostMetadata: without the intent marker, a committed
// root whose part has no copy is lost metadata: start-up changes nothing
// and names the part.
func TestPartMissingIsLostMetadata(t *testing.T) {
	w := newPartsWorld(t)
	w.commit(t)
	for _, p := range w.part(2, 2) {
		require.NoError(t, os.Remove(p))
	}
	err := w.run(func(*Engine) error { return nil })
	require.ErrorIs(t, err, ErrMetadataLost)
	assert.Contains(t, err.Error(), CheckpointDir(2))
	assert.Contains(t, err.Error(), "L1-000002.part")
	assert.True(t, w.cl.exists(t, "meta/"+ManifestName(2)))
	assert.True(t, w.cl.exists(t, "local/node0004/"+CheckpointDir(2)))
}

// TestPartCopyRepaired: a damaged or missing copy of a part is rewritten
// by its leader from the other copy (the damaged bytes kept as .broken),
// with a warning naming it; a part the root does not name goes.
func TestPartCopyRepaired(t *testing.T) {
	for _, how := range []string{"flipped", "missing", "other checkpoint's"} {
		t.Run(how, func(t *testing.T) {
			w := newPartsWorld(t)
			w.commit(t)
			ps := w.part(2, 3)
			good, err := os.ReadFile(ps[1])
			require.NoError(t, err)
			switch how {
			case "flipped":
				b := append([]byte(nil), good...)
				b[len(b)/2] ^= 1
				require.NoError(t, os.WriteFile(ps[0], b, 0o644))
			case "missing":
				require.NoError(t, os.Remove(ps[0]))
			default:
				other, err := os.ReadFile(w.part(1, 3)[0])
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(ps[0], other, 0o644))
			}
			stray := filepath.Join(w.cl.root, "meta", PartName(2, L3, 0))
			require.NoError(t, os.WriteFile(stray, good, 0o644))
			seqs, err := w.committed(t)
			require.NoError(t, err)
			assert.Equal(t, []uint64{1, 2}, seqs)
			fixed, err := os.ReadFile(ps[0])
			require.NoError(t, err)
			assert.Equal(t, good, fixed)
			_, err = os.Stat(ps[0] + BrokenSuffix)
			assert.Equal(t, how != "missing", err == nil, "damaged bytes kept: %v", err)
			_, err = os.Stat(stray)
			assert.True(t, errors.Is(err, os.ErrNotExist), "a part the root does not name is removed")
		})
	}
	// The warning names the copy (checked once, on a fresh world).
	w := newPartsWorld(t)
	w.commit(t)
	require.NoError(t, os.Remove(w.part(2, 1)[1]))
	core, logs := observer.New(zap.WarnLevel)
	require.NoError(t, runWorld(8, func(c comm.Comm) error {
		env := w.cl.env(c)
		env.Logger = zap.New(core)
		cfg := w.cl.config()
		cfg.PartRanks = 2
		e, err := NewEngine(env, cfg)
		if err != nil {
			return err
		}
		defer e.Release()
		return e.Open()
	}))
	found := false
	for _, l := range logs.All() {
		if strings.Contains(l.Message, "manifest part copy repaired") && strings.Contains(l.Message, w.part(2, 1)[1]) {
			found = true
		}
	}
	assert.True(t, found, "a warning names the repaired part copy")
}

// TestViewLoadsOtherParts: a rank reads another block's entries from its
// part on storage, checked; a part damaged in both copies is an error.
func TestViewLoadsOtherParts(t *testing.T) {
	w := newPartsWorld(t)
	w.commit(t)
	require.NoError(t, w.run(func(e *Engine) error {
		m := e.Committed()[1]
		other := (e.env.Rank + 4) % 8
		fs, err := m.RankFiles(other)
		if err != nil {
			return err
		}
		if len(fs) != 1 || fs[0].Of != other {
			return fmt.Errorf("rank %d: rank %d's files %+v", e.env.Rank, other, fs)
		}
		return nil
	}))
	for _, p := range w.part(2, 1) {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		b[len(b)-3] ^= 1
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}
	// Start-up refuses (lost metadata); a view loading it on its own
	// reports the damage.
	require.ErrorIs(t, w.run(func(*Engine) error { return nil }), ErrMetadataLost)
	root, err := os.ReadFile(filepath.Join(w.cl.root, "meta", ManifestName(2)))
	require.NoError(t, err)
	m, err := ParseManifest("root", root)
	require.NoError(t, err)
	m.attachLoader(Store{vfd.Sec2{}, filepath.Join(w.cl.root, "meta")}, Store{vfd.Sec2{}, filepath.Join(w.cl.root, "global")})
	_, err = m.RankFiles(2)
	require.ErrorIs(t, err, ErrBadManifest)
	_, err = m.RankFiles(5)
	require.NoError(t, err)
}
