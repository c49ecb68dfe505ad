package levels

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"
)

// rewriteManifest rewrites both copies of the last committed manifest
// (its parts and its root) with edit applied to each of its entries; an
// error of edit fails the run.
func (w *ffWorld) rewriteManifest(edit func(r int, f *File) error) {
	w.t.Helper()
	require.NoError(w.t, w.run(func(e *Engine) error {
		if e.env.Rank != 0 {
			return nil
		}
		m := fullOf(w.t, e.Committed()[0])
		for r := range m.Files {
			for i := range m.Files[r] {
				if err := edit(r, &m.Files[r][i]); err != nil {
					return err
				}
			}
		}
		return RewriteManifest(e.env.Meta, e.env.Global, m)
	}))
}

// TestL2RecoversMixedManifests: an L2 checkpoint whose data entries
// record the FTI-FF checksum and whose copies the BLAKE3 of their bytes,
// or the other way round (entries a manifest edited by hand, or merged
// from two versions, may hold), recovers: a lost data file is restored
// from its copy and a damaged copy is re-sent, each checked against what
// its own entry records; a lost data file whose copy is damaged is never
// restored from it.
func TestL2RecoversMixedManifests(t *testing.T) {
	for _, dataFTIFF := range []bool{true, false} {
		for _, tc := range []string{"lost data", "damaged copy", "lost data, damaged copy"} {
			t.Run(fmt.Sprintf("data ftiff %v, %s", dataFTIFF, tc), func(t *testing.T) {
				w := newFFWorld(t)
				for r, err := range w.checkpointWith(1, L2, w.write(1, nil)) {
					require.NoError(t, err, "rank %d", r)
				}
				files := append([][]byte(nil), w.files...)
				w.rewriteManifest(func(_ int, f *File) error {
					if (f.Role == RoleData) == dataFTIFF {
						return nil // keeps the FTI-FF checksum
					}
					f.Attrs = nil
					f.Digest = Digest(blake3.Sum256(files[f.Of]))
					return nil
				})
				dataOf1 := path.Join(w.nodeDir(w.topo.NodeOf(1)), RankFileName(CheckpointDir(1), RoleData, 1))
				copyOf1 := path.Join(w.nodeDir(w.topo.NodeOf(2)), RankFileName(CheckpointDir(1), RolePartner, 1))
				if tc != "damaged copy" {
					require.NoError(t, os.Remove(dataOf1))
				}
				if tc != "lost data" {
					b, err := os.ReadFile(copyOf1)
					require.NoError(t, err)
					b[len(b)/2] ^= 0x08
					require.NoError(t, os.WriteFile(copyOf1, b, 0o644))
				}
				ids, got, errs := w.recoverFiles()
				if tc == "lost data, damaged copy" {
					// Never restored from the damaged copy, whichever
					// side checks it.
					for r := range 4 {
						require.ErrorIs(t, errs[r], ErrUnrecoverable, "rank %d", r)
						assert.Regexp(t, `(data000001\.fti\.tmp \(rank 1\)|file of rank 1) at offset \d+: hash mismatch: after receiving`, errs[r].Error(), "rank %d", r)
						assert.Contains(t, errs[r].Error(), "data000001.fti.tmp", "rank %d", r)
					}
					_, err := os.Stat(dataOf1)
					require.ErrorIs(t, err, fs.ErrNotExist)
					_, err = os.Stat(dataOf1 + TmpSuffix)
					require.ErrorIs(t, err, fs.ErrNotExist)
					return
				}
				for r := range 4 {
					require.NoError(t, errs[r], "rank %d", r)
					assert.Equal(t, int64(1), ids[r], "rank %d", r)
					assert.True(t, bytes.Equal(files[r], got[r]), "rank %d", r)
				}
				for _, p := range []string{dataOf1, copyOf1} {
					b, err := os.ReadFile(p)
					require.NoError(t, err)
					assert.True(t, bytes.Equal(files[1], b), "%s", p)
				}
			})
		}
	}
}

// TestL2RestoreNamesTheDamagedCopy: a lost data file whose partner copy
// is damaged in its header, metadata or file block (so that its holder
// cannot even read its preamble) is not restored, and every rank's error
// says that both are lost and names the damaged copy, its holder and
// the offset of the damage (it said that the holder "sent no file
// header").
func TestL2RestoreNamesTheDamagedCopy(t *testing.T) {
	for _, region := range []string{"header", "metadata", "file block"} {
		t.Run(region, func(t *testing.T) {
			w := newFFWorld(t)
			for r, err := range w.checkpointWith(1, L2, w.write(1, nil)) {
				require.NoError(t, err, "rank %d", r)
			}
			dataOf1 := path.Join(w.nodeDir(w.topo.NodeOf(1)), RankFileName(CheckpointDir(1), RoleData, 1))
			copyOf1 := path.Join(w.nodeDir(w.topo.NodeOf(2)), RankFileName(CheckpointDir(1), RolePartner, 1))
			require.NoError(t, os.Remove(dataOf1))
			b, err := os.ReadFile(copyOf1)
			require.NoError(t, err)
			off := map[string]int{"header": 10, "metadata": int(w.areas[path.Base(dataOf1)][1]) + 5, "file block": len(b) - 40}[region]
			b[off] ^= 0x01
			require.NoError(t, os.WriteFile(copyOf1, b, 0o644))
			_, _, errs := w.recoverFiles()
			for r := range 4 {
				require.ErrorIs(t, errs[r], ErrUnrecoverable, "rank %d", r)
				msg := errs[r].Error()
				assert.Contains(t, msg, "its data file and its partner copy on rank 2 (node 2) are both lost", "rank %d", r)
				assert.Contains(t, msg, "corrupt file of rank 2 at offset ", "rank %d", r)
				assert.Contains(t, msg, copyOf1+": ", "rank %d", r)
				assert.NotContains(t, msg, "sent no file header", "rank %d", r)
			}
			_, err = os.Stat(dataOf1)
			require.ErrorIs(t, err, fs.ErrNotExist)
		})
	}
}
