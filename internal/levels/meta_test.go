package levels

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// put creates a file (and its directory) under the cluster's root.
func (cl *cluster) put(t *testing.T, rel string, b []byte) {
	full := filepath.Join(cl.root, rel)
	require.NoError(t, cl.d.MkdirAll(filepath.Dir(full), 0o755))
	require.NoError(t, vfd.WriteFileAtomic(cl.d, full, b))
}

// exists reports whether rel exists under the cluster's root.
func (cl *cluster) exists(t *testing.T, rel string) bool {
	_, err := cl.d.Stat(filepath.Join(cl.root, rel))
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	require.NoError(t, err)
	return true
}

// listTree returns every path under the cluster's root, sorted.
func (cl *cluster) listTree(t *testing.T) []string {
	var out []string
	require.NoError(t, filepath.WalkDir(cl.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(cl.root, p)
		out = append(out, rel)
		return nil
	}))
	sort.Strings(out)
	return out
}

// TestOpenUncommittedVsLost: a checkpoint number with no valid manifest
// copy is cleaned at start-up when it was never committed (its intent
// marker is there, or only tmp files are), or when its deletion had
// started (deletion marker); with published files or damaged copies and
// no marker its metadata was lost, and Open refuses on every rank, naming
// the files, and changes nothing.
func TestOpenUncommittedVsLost(t *testing.T) {
	tests := []struct {
		name    string
		files   []string // created under the root, empty
		marker  string   // "", "pending", "deleting"
		lost    bool
		inError []string
	}{
		{"pending with published files", []string{"local/node0000/ckpt00000002/data000001.fti", "global/ckpt00000002/x",
			"local/node0000/ckpt00000002/data000000.fti.tmp"}, "pending", false, nil},
		{"pending with a damaged manifest", []string{"meta/ckpt00000002.manifest", "local/node0000/ckpt00000002/data000001.fti"}, "pending", false, nil},
		{"deleting with a valid manifest and files", []string{"local/node0000/ckpt00000002/data000001.fti"}, "deleting", false, nil},
		{"only tmp files, no marker", []string{"local/node0000/ckpt00000002/data000000.fti.tmp", "meta/ckpt00000002.manifest.tmp",
			"global/ckpt00000002/l4.sion.tmp", "global/manifests/ckpt00000002.manifest.tmp"}, "", false, nil},
		{"empty directories, no marker", []string{"local/node0000/ckpt00000002/", "global/ckpt00000002/"}, "", false, nil},
		{"published local file, no marker", []string{"local/node0000/ckpt00000002/data000001.fti"}, "", true,
			[]string{"checkpoint ckpt00000002 has no valid manifest and no marker: both copies are missing (ckpt_root/meta/ckpt00000002.manifest, ckpt_root/global/manifests/ckpt00000002.manifest); ",
				"1 of its files survives, such as ckpt_root/local/node0000/ckpt00000002/data000001.fti, but cannot be verified; ", "to restart from ckpt00000001, move the directories ckpt00000002"}},
		{"published global file, no marker", []string{"global/ckpt00000002/l4.sion"}, "", true, []string{"global/ckpt00000002/l4.sion"}},
		{"many files, no marker", manyFiles(12), "", true, []string{"12 of its files survive, such as ckpt_root/local/node0000/ckpt00000002/f00, but cannot be verified; "}},
		{"damaged manifest alone, no marker", []string{"meta/ckpt00000002.manifest"}, "", true,
			[]string{"a copy is damaged (ckpt_root/meta/ckpt00000002.manifest at offset 0: bad manifest: no magic line), ckpt_root/global/manifests/ckpt00000002.manifest is missing; ",
				"move the damaged manifest copies and the directories ckpt00000002 out of meta_dir (ckpt_root/meta), glbl_dir (ckpt_root/global) and every node's ckpt_dir (such as ckpt_root/local/node0000)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 2)
			var m1 *Manifest
			require.NoError(t, cl.run(2, func(e *Engine) error {
				m, _, err := e.Checkpoint(1, L1, writeBytes(payload(e.env.Rank, 1, 64)))
				if e.env.Rank == 0 {
					m1 = m
				}
				return err
			}))
			for _, f := range tt.files {
				if strings.HasSuffix(f, "/") {
					require.NoError(t, cl.d.MkdirAll(filepath.Join(cl.root, f), 0o755))
					continue
				}
				cl.put(t, f, nil)
			}
			cl.put(t, "local/node0000/ckpt00000001/data000001.fti.tmp", nil) // a tmp file in a committed checkpoint
			switch tt.marker {
			case "pending":
				cl.put(t, "meta/"+PendingName(2), []byte("x"))
			case "deleting":
				m2 := *m1
				m2.Seq = 2
				raw, err := m2.Marshal()
				require.NoError(t, err)
				cl.put(t, "meta/"+DeletingName(2), raw)
				cl.put(t, "meta/"+ManifestName(2), raw)
			}
			before := cl.listTree(t)
			errs := make([]error, 2)
			require.NoError(t, runWorld(2, func(c comm.Comm) error {
				e, err := NewEngine(cl.env(c), Config{Levels: []Level{Local1{}}, PartRanks: testPartRanks()})
				if err != nil {
					return err
				}
				defer e.Release() // the next checkpoint's intent marker, written ahead, goes
				if errs[c.Rank()] = e.Open(); errs[c.Rank()] != nil {
					return nil
				}
				if e.NextSeq() != 2 || len(e.Committed()) != 1 {
					return fmt.Errorf("next seq %d, %d committed", e.NextSeq(), len(e.Committed()))
				}
				_, _, err = e.Recover()
				return err
			}))
			if tt.lost {
				for r, err := range errs {
					require.ErrorIs(t, err, ErrMetadataLost, "rank %d", r)
					assert.Equal(t, errs[0].Error(), err.Error())
					for _, s := range tt.inError {
						assert.Contains(t, err.Error(), strings.ReplaceAll(s, "ckpt_root/", cl.root+"/"))
					}
					assert.Contains(t, err.Error(), "glbl_dir ("+cl.root+"/global) and every node's ckpt_dir (such as "+cl.root+"/local/node0000)")
					assert.NotContains(t, err.Error(), "\n")
					assert.NotContains(t, err.Error(), "%")
				}
				assert.Equal(t, before, cl.listTree(t), "a refused start-up changes nothing")
				return
			}
			require.NoError(t, errs[0])
			for _, p := range []string{"local/node0000/ckpt00000002", "global/ckpt00000002", "meta/" + ManifestName(2) + TmpSuffix,
				"global/manifests/" + ManifestName(2), "global/manifests/" + ManifestName(2) + TmpSuffix,
				"meta/" + PendingName(2), "meta/" + DeletingName(2), "meta/" + ManifestName(2),
				"local/node0000/ckpt00000001/data000001.fti.tmp"} {
				assert.False(t, cl.exists(t, p), p)
			}
			assert.Equal(t, tt.name == "pending with a damaged manifest", cl.exists(t, "meta/"+ManifestName(2)+BrokenSuffix),
				"a damaged copy of an uncommitted checkpoint is kept aside")
			assert.True(t, cl.exists(t, "local/node0000/ckpt00000001/data000001.fti"))
		})
	}
}

// manyFiles names n published files of checkpoint 2 on node 0.
func manyFiles(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("local/node0000/ckpt00000002/f%02d", i))
	}
	return out
}

// TestOpenRepairsCopies: one valid copy is enough. A damaged, foreign or
// missing copy is rewritten from the valid one (damaged bytes kept as
// .broken), rank 0 alone logs a warning naming the file and why, and a
// leftover intent marker beside a valid copy goes.
func TestOpenRepairsCopies(t *testing.T) {
	for _, tt := range []struct {
		name, target, how, why string
	}{
		{"primary flipped", "meta", "flip", "hash mismatch"},
		{"replica truncated", "replica", "truncate", "bad hash line"},
		{"primary deleted", "meta", "delete", "missing"},
		{"replica emptied", "replica", "empty", "no magic line"},
		{"primary foreign", "meta", "foreign", "holds seq 1"},
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
			meta, repl := filepath.Join(cl.root, "meta"), filepath.Join(cl.root, "global", ReplicaDir)
			good, err := vfd.ReadFile(cl.d, filepath.Join(meta, ManifestName(2)))
			require.NoError(t, err)
			dir := meta
			if tt.target == "replica" {
				dir = repl
			}
			p := filepath.Join(dir, ManifestName(2))
			damaged := append([]byte(nil), good...)
			switch tt.how {
			case "flip":
				damaged[40] ^= 1
			case "truncate":
				damaged = damaged[:len(damaged)-5]
			case "empty":
				damaged = []byte{}
			case "foreign":
				damaged, err = vfd.ReadFile(cl.d, filepath.Join(meta, ManifestName(1)))
				require.NoError(t, err)
			}
			if tt.how == "delete" {
				require.NoError(t, cl.d.Remove(p))
			} else {
				require.NoError(t, vfd.WriteFileAtomic(cl.d, p, damaged))
			}
			cl.put(t, "meta/"+PendingName(2), []byte("left by a crash after the commit"))
			core, logs := observer.New(zapcore.WarnLevel)
			require.NoError(t, runWorld(2, func(c comm.Comm) error {
				env := cl.env(c)
				env.Logger = zap.New(core).With(zap.Int("rank", c.Rank()))
				e, err := NewEngine(env, Config{Levels: []Level{Local1{}}, Policy: keepAll{}, PartRanks: testPartRanks()})
				if err != nil {
					return err
				}
				if err := e.Open(); err != nil {
					return err
				}
				m, _, err := e.Recover()
				if err == nil && m.Seq != 2 {
					err = fmt.Errorf("recovered seq %d", m.Seq)
				}
				return err
			}))
			for _, d := range []string{meta, repl} {
				got, err := vfd.ReadFile(cl.d, filepath.Join(d, ManifestName(2)))
				require.NoError(t, err)
				assert.Equal(t, good, got, "%s repaired", d)
			}
			broken, err := vfd.ReadFile(cl.d, p+BrokenSuffix)
			if tt.how == "delete" {
				assert.ErrorIs(t, err, fs.ErrNotExist)
			} else {
				require.NoError(t, err)
				assert.Equal(t, damaged, broken, "the damaged bytes are kept")
			}
			assert.False(t, cl.exists(t, "meta/"+PendingName(2)), "the intent marker of a committed checkpoint goes")
			warns := logs.FilterMessageSnippet(p).All()
			require.Len(t, warns, 1, "one warning, from rank 0: %v", logs.All())
			assert.Equal(t, int64(0), warns[0].ContextMap()["rank"])
			assert.Contains(t, warns[0].Message, tt.why)
		})
	}
}

// TestOpenLegacyRunDirectory: a run directory written before manifests
// had replicas (no glbl_dir/manifests, no markers) restarts, and its
// replicas are written.
func TestOpenLegacyRunDirectory(t *testing.T) {
	cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 1)
	require.NoError(t, cl.run(2, func(e *Engine) error {
		_, _, err := e.Checkpoint(7, L1, writeBytes(payload(e.env.Rank, 7, 100)))
		return err
	}))
	require.NoError(t, cl.d.RemoveAll(filepath.Join(cl.root, "global", ReplicaDir)))
	require.NoError(t, cl.run(2, func(e *Engine) error {
		m, src, err := e.Recover()
		if err != nil {
			return err
		}
		b, err := readSource(src)
		if err == nil && (m.ID != 7 || string(b) != string(payload(e.env.Rank, 7, 100))) {
			err = fmt.Errorf("recovered %d", m.ID)
		}
		return err
	}))
	assert.True(t, cl.exists(t, "global/"+ReplicaName(1)))
}

// TestOpenRefusesReplicaDirAsMetaDir: meta_dir may be glbl_dir (the
// replica lives in a subdirectory) but not that subdirectory.
func TestOpenRefusesReplicaDirAsMetaDir(t *testing.T) {
	root := t.TempDir()
	for _, tt := range []struct {
		meta string
		ok   bool
	}{{filepath.Join(root, "global"), true}, {filepath.Join(root, "global", ReplicaDir), false}} {
		cl := newCluster(t, vfd.Sec2{}, root, 1)
		err := runWorld(2, func(c comm.Comm) error {
			env := cl.env(c)
			env.Meta.Dir = tt.meta
			e, err := NewEngine(env, Config{Levels: []Level{Local1{}}, PartRanks: testPartRanks()})
			if err != nil {
				return err
			}
			if err := e.Open(); err != nil {
				return err
			}
			if _, _, err := e.Checkpoint(1, L1, writeBytes(payload(c.Rank(), 1, 10))); err != nil {
				return err
			}
			e.Wait()
			// The same directory again: the checkpoint is found.
			if err := e.Open(); err != nil {
				return err
			}
			if n := len(e.Committed()); n != 1 {
				return fmt.Errorf("%d committed", n)
			}
			return e.Delete(e.Committed()[0])
		})
		if tt.ok {
			require.NoError(t, err, tt.meta)
		} else {
			require.ErrorContains(t, err, "is the directory of the manifest replicas")
		}
	}
}

// TestScanCheckpoints: the offline view of the metadata, per checkpoint
// number: both copies' states, the markers, files and leftovers, and the
// state start-up would act on.
func TestScanCheckpoints(t *testing.T) {
	cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 1)
	cl.policy = keepAll{}
	require.NoError(t, cl.run(2, func(e *Engine) error {
		for id := int64(1); id <= 3; id++ {
			if _, _, err := e.Checkpoint(id, L1, writeBytes(payload(e.env.Rank, id, 64))); err != nil {
				return err
			}
		}
		return nil
	}))
	meta := Store{cl.d, filepath.Join(cl.root, "meta")}
	global := Store{cl.d, filepath.Join(cl.root, "global")}
	locals := []Store{{cl.d, filepath.Join(cl.root, "local", "node0000")}, {cl.d, filepath.Join(cl.root, "local", "node0001")}}
	// 1: replica damaged; 2: being deleted; 3: primary gone; 4: pending;
	// 5: lost (a file, no metadata); 6: a foreign primary.
	raw1, err := vfd.ReadFile(cl.d, meta.Path(ManifestName(1)))
	require.NoError(t, err)
	cl.put(t, "global/"+ReplicaName(1), []byte("garbage"))
	require.NoError(t, cl.d.Rename(meta.Path(ManifestName(2)), meta.Path(DeletingName(2))))
	require.NoError(t, cl.d.Remove(meta.Path(ManifestName(3))))
	cl.put(t, "meta/"+PendingName(4), nil)
	cl.put(t, "local/node0001/ckpt00000004/data000001.fti.tmp", nil)
	cl.put(t, "local/node0000/ckpt00000005/data000000.fti", nil)
	cl.put(t, "meta/"+ManifestName(6), raw1)
	cl.put(t, "meta/"+ManifestName(6)+BrokenSuffix, nil)
	before := cl.listTree(t)
	scan, err := ScanCheckpoints(meta, global, locals...)
	require.NoError(t, err)
	assert.Equal(t, before, cl.listTree(t), "a scan changes nothing")
	type row struct {
		seq              uint64
		primary, replica CopyState
		pending, del     bool
		files, leftovers int
		state            SeqState
	}
	var got []row
	for _, s := range scan {
		got = append(got, row{s.Seq, s.Primary.State, s.Replica.State, s.Pending != "", s.Deleting != "", len(s.Files), len(s.Leftovers), s.State()})
	}
	assert.Equal(t, []row{
		{1, CopyValid, CopyDamaged, false, false, 2, 0, SeqCommitted},
		{2, CopyMissing, CopyValid, false, true, 2, 0, SeqDeleting},
		{3, CopyMissing, CopyValid, false, false, 2, 0, SeqCommitted},
		{4, CopyMissing, CopyMissing, true, false, 0, 1, SeqUncommitted},
		{5, CopyMissing, CopyMissing, false, false, 1, 0, SeqLost},
		{6, CopyForeign, CopyMissing, false, false, 0, 0, SeqLost},
	}, got)
	assert.Equal(t, []string{meta.Path(ManifestName(6)) + BrokenSuffix}, scan[5].Broken)
	assert.Equal(t, uint64(2), scan[1].DeletingM.Seq)
	assert.Same(t, &scan[2].Replica, scan[2].Valid())
	err = LostError(scan)
	require.ErrorIs(t, err, ErrMetadataLost)
	assert.Contains(t, err.Error(), "checkpoint ckpt00000006 has no valid manifest and no marker: a copy is foreign ("+meta.Path(ManifestName(6))+" at offset 0: ")
	assert.Contains(t, err.Error(), "2 checkpoints are in this state")
	assert.Contains(t, err.Error(), "move the damaged manifest copies and the directories ckpt00000005, ckpt00000006 out of meta_dir")
	assert.NoError(t, LostError(scan[:4]))

	// Both copies valid but different: the kept one wins.
	m, err := ParseManifest("m", raw1)
	require.NoError(t, err)
	m.Kept = true
	kept, err := m.Marshal()
	require.NoError(t, err)
	cl.put(t, "global/"+ReplicaName(1), kept)
	scan, err = ScanCheckpoints(meta, global)
	require.NoError(t, err)
	require.Equal(t, uint64(1), scan[0].Seq)
	assert.True(t, scan[0].Valid().M.Kept)
}

// TestAbortLeavesNothing: a checkpoint refused by the vote leaves no
// file, no directory and no marker, in any area.
func TestAbortLeavesNothing(t *testing.T) {
	cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 1)
	require.NoError(t, cl.run(2, func(e *Engine) error {
		_, _, err := e.Checkpoint(1, L1, writeBytes(payload(e.env.Rank, 1, 64)))
		return err
	}))
	before := cl.listTree(t)
	boom := errors.New("disk full")
	require.NoError(t, cl.run(2, func(e *Engine) error {
		_, _, err := e.Checkpoint(2, L1, func(f vfd.File) (int64, Digest, bool, error) {
			if _, err := f.WriteAt([]byte("partial"), 0); err != nil {
				return 0, Digest{}, false, err
			}
			if e.env.Rank == 1 {
				return 0, Digest{}, false, boom
			}
			return 7, Digest{}, false, nil
		})
		if !errors.Is(err, ErrVoteFailed) {
			return fmt.Errorf("rank %d: %v", e.env.Rank, err)
		}
		return nil
	}))
	assert.Equal(t, before, cl.listTree(t))
}
