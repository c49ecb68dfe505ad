package levels

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

func TestValidRunID(t *testing.T) {
	for _, id := range []string{"2026-12-03_14-05-07_0123456789abcdef0123456789abcdef", "2017-03-14_11-08-52", "a", "A.b-c_d", strings.Repeat("x", MaxRunIDLen)} {
		assert.NoError(t, ValidRunID(id), id)
	}
	for _, id := range []string{"", ".", "..", "../x", "a/b", "-a", "_a", ".a", "a b", "a\x00", "é", "manifests", "ckpt00000001", "ckptx", strings.Repeat("x", MaxRunIDLen+1)} {
		err := ValidRunID(id)
		require.ErrorIs(t, err, ErrBadRun, "%q", id)
	}
}

func TestNewRunID(t *testing.T) {
	now := time.Date(2026, 12, 3, 14, 5, 7, 0, time.Local)
	id, err := NewRunID(now, bytes.NewReader(bytes.Repeat([]byte{0xab}, 16)))
	require.NoError(t, err)
	assert.Equal(t, "2026-12-03_14-05-07_"+strings.Repeat("ab", 16), id, "FTI's exec_id form")
	require.NoError(t, ValidRunID(id))
	_, err = NewRunID(now, bytes.NewReader(nil))
	require.Error(t, err)
}

// TestRunFile: WriteRun and ReadRun round trip through the file's exact
// bytes; a missing file names no run; any other content is an error
// naming the file.
func TestRunFile(t *testing.T) {
	d := vfd.NewCore()
	meta := Store{d, "/m"}
	require.NoError(t, d.MkdirAll("/m", 0o755))
	_, ok, err := ReadRun(meta)
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, WriteRun(meta, "run-1"))
	raw, err := vfd.ReadFile(d, "/m/"+RunFile)
	require.NoError(t, err)
	assert.Equal(t, "ftigo-run run-1\n", string(raw))
	id, ok, err := ReadRun(meta)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "run-1", id)
	require.ErrorIs(t, WriteRun(meta, "../x"), ErrBadRun)
	for _, bad := range []string{"", "ftigo-run run-1", "ftigo-run \n", "ftigo-run ../x\n", "other run-1\n", "ftigo-run a\nb\n"} {
		require.NoError(t, vfd.WriteFileAtomic(d, "/m/"+RunFile, []byte(bad)))
		_, _, err := ReadRun(meta)
		require.ErrorIs(t, err, ErrBadRun, "%q", bad)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "/m/"+RunFile, ce.Path)
	}
	require.NoError(t, RemoveRun(meta))
	require.NoError(t, RemoveRun(meta), "removing twice")
	_, ok, err = ReadRun(meta)
	require.NoError(t, err)
	assert.False(t, ok)
}

func FuzzReadRun(f *testing.F) {
	for _, s := range []string{"ftigo-run run-1\n", "ftigo-run \n", "", "ftigo-run a/b\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := vfd.NewCore()
		meta := Store{d, "/m"}
		require.NoError(t, d.MkdirAll("/m", 0o755))
		require.NoError(t, vfd.WriteFileAtomic(d, "/m/"+RunFile, b))
		id, ok, err := ReadRun(meta)
		if err != nil {
			require.ErrorIs(t, err, ErrBadRun)
			return
		}
		require.True(t, ok)
		require.NoError(t, ValidRunID(id))
		require.NoError(t, WriteRun(meta, id))
		again, err := vfd.ReadFile(d, "/m/"+RunFile)
		require.NoError(t, err)
		require.Equal(t, b, again, "a run file that reads writes back the same bytes")
	})
}

// TestHoldsCheckpointsAndListRuns: a meta_dir holds checkpoints when a
// name starts with a checkpoint's; a global area's runs are its
// directories with a valid id and a manifests directory.
func TestHoldsCheckpointsAndListRuns(t *testing.T) {
	d := vfd.NewCore()
	meta := Store{d, "/m"}
	ok, err := HoldsCheckpoints(meta)
	require.NoError(t, err)
	assert.False(t, ok, "missing")
	require.NoError(t, d.MkdirAll("/m", 0o755))
	for _, name := range []string{LockName, RunFile, "topology", "h5single"} {
		require.NoError(t, vfd.WriteFileAtomic(d, "/m/"+name, nil))
	}
	ok, err = HoldsCheckpoints(meta)
	require.NoError(t, err)
	assert.False(t, ok)
	for _, name := range []string{ManifestName(3), PendingName(4), SupersededName(1, 2), ManifestName(2) + BrokenSuffix} {
		require.NoError(t, d.MkdirAll("/m/x", 0o755))
		require.NoError(t, vfd.WriteFileAtomic(d, "/m/x/"+name, nil))
		ok, err = HoldsCheckpoints(Store{d, "/m/x"})
		require.NoError(t, err)
		assert.True(t, ok, name)
		require.NoError(t, d.RemoveAll("/m/x"))
	}
	for _, dir := range []string{"/g/r1/" + ReplicaDir, "/g/r2/" + ReplicaDir, "/g/empty", "/g/ckpt00000001", "/g/" + ReplicaDir, "/g/bad name/" + ReplicaDir} {
		require.NoError(t, d.MkdirAll(dir, 0o755))
	}
	runs, err := ListRuns(Store{d, "/g"})
	require.NoError(t, err)
	assert.Equal(t, []string{"r1", "r2"}, runs)
	runs, err = ListRuns(Store{d, "/none"})
	require.NoError(t, err)
	assert.Empty(t, runs)
}

// TestManifestOfAnotherRun: every manifest an engine commits records its
// run. A copy recording another run (or none) is foreign to the scan of
// this run, with the error saying whose it is, and start-up rewrites it
// from this run's valid copy, keeping it as .broken. Both copies foreign
// is lost metadata: nothing is adopted.
func TestManifestOfAnotherRun(t *testing.T) {
	const n = 2
	root := t.TempDir()
	rc := newCluster(t, vfd.Sec2{}, root, 1)
	rc.runID = "run-a"
	require.NoError(t, rc.run(n, func(e *Engine) error {
		m, _, err := e.Checkpoint(7, L1, writeBytes(payload(e.env.Rank, 7, 100)))
		if err == nil && m.Run != "run-a" {
			err = fmt.Errorf("committed manifest records run %q", m.Run)
		}
		return err
	}))
	meta, global := Store{vfd.Sec2{}, filepath.Join(root, "meta")}, Store{vfd.Sec2{}, filepath.Join(root, "global", "run-a")}
	replica := global.Path(ReplicaName(1))
	raw, err := os.ReadFile(replica)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `{"run":"run-a","seq":1,`)
	m, err := ParseManifest(replica, raw)
	require.NoError(t, err)

	for _, other := range []string{"run-b", ""} {
		m.Run = other
		foreign, err := m.Marshal()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(replica, foreign, 0o644))
		scan, err := ScanRun("run-a", meta, global)
		require.NoError(t, err)
		require.NotEmpty(t, scan)
		require.Equal(t, uint64(1), scan[0].Seq)
		assert.Equal(t, CopyForeign, scan[0].Replica.State)
		assert.ErrorIs(t, scan[0].Replica.Err, ErrBadManifest)
		assert.Contains(t, scan[0].Replica.Err.Error(), "another run's manifest")
		assert.Equal(t, SeqCommitted, scan[0].State(), "through this run's primary")
		// The scan of the run that copy names takes it as valid.
		scan, err = ScanRun(other, meta, global)
		require.NoError(t, err)
		assert.Equal(t, CopyValid, scan[0].Replica.State)
		assert.Equal(t, CopyForeign, scan[0].Primary.State)

		require.NoError(t, rc.run(n, func(e *Engine) error {
			if c := e.Committed(); len(c) != 1 || c[0].Run != "run-a" || c[0].Seq != 1 {
				return fmt.Errorf("committed %+v", c)
			}
			return nil
		}))
		broken, err := os.ReadFile(replica + BrokenSuffix)
		require.NoError(t, err)
		assert.Equal(t, foreign, broken, "the other run's copy kept aside")
		fixed, err := os.ReadFile(replica)
		require.NoError(t, err)
		assert.Equal(t, raw, fixed, "rewritten from this run's copy")
		require.NoError(t, os.Remove(replica+BrokenSuffix))
	}

	// Both copies another run's: lost metadata, nothing changed.
	m.Run = "run-b"
	foreign, err := m.Marshal()
	require.NoError(t, err)
	for _, p := range []string{replica, meta.Path(ManifestName(1))} {
		require.NoError(t, os.WriteFile(p, foreign, 0o644))
	}
	err = rc.run(n, func(*Engine) error { return nil })
	require.True(t, errors.Is(err, ErrMetadataLost), "%v", err)
	got, err := os.ReadFile(replica)
	require.NoError(t, err)
	assert.Equal(t, foreign, got)
}
