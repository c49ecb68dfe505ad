package levels

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

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
