package levels

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// ffWorld is an L2 world of 4 ranks on 4 nodes writing FTI-FF files
// through a driver that counts the bytes read of each rank's files inside
// their data area (after the header, before the metadata).
type ffWorld struct {
	*l23World
	mu   sync.Mutex
	read map[string]int64 // base name -> data-area bytes read
	// areas are the [start, end) data areas of each file, by base name
	// without TmpSuffix (set by the writes).
	areas map[string][2]int64
	files [][]byte // each rank's file of the last checkpoint taken
}

func newFFWorld(t *testing.T) *ffWorld {
	w := &ffWorld{read: map[string]int64{}, areas: map[string][2]int64{}, files: make([][]byte, 4)}
	counter := vfd.NewFault(vfd.Sec2{}, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind != vfd.OpRead {
			return nil
		}
		base := path.Base(op.Path)
		w.mu.Lock()
		defer w.mu.Unlock()
		key := base
		if len(key) > len(TmpSuffix) && key[len(key)-len(TmpSuffix):] == TmpSuffix {
			key = key[:len(key)-len(TmpSuffix)]
		}
		a, ok := w.areas[key]
		if !ok {
			return nil
		}
		lo, hi := max(op.Off, a[0]), min(op.Off+int64(op.Len), a[1])
		if hi > lo {
			w.read[key] += hi - lo
		}
		return nil
	}))
	w.l23World = newL23World(t, counter, 4, 1, 4, 0)
	return w
}

// write returns rank r's FTI-FF write of checkpoint id, which records
// the file's data area and bytes; damage, when not nil, changes the file
// after it was written (the block hashes are those of the bytes before).
func (w *ffWorld) write(id int64, damage func(r int, f vfd.File) error) func(r int) WriteFunc {
	return func(r int) WriteFunc {
		inner := ftiffWrite(r, id)
		return func(f vfd.File) (int64, Digest, bool, error) {
			n, d, ok, err := inner(f)
			if err != nil {
				return n, d, ok, err
			}
			rd, err := fileformat.Open(f)
			if err != nil {
				return n, d, ok, err
			}
			end := int64(fileformat.HeaderSize)
			for _, c := range rd.Summary().Chunks {
				end = max(end, c.Fptr+c.ContainerSize)
			}
			b := make([]byte, n)
			if err := vfd.ReadFull(f, b, 0); err != nil {
				return n, d, ok, err
			}
			w.mu.Lock()
			w.areas[path.Base(RankFileName(CheckpointDir(0), RoleData, r))] = [2]int64{fileformat.HeaderSize, end}
			w.files[r] = b
			w.mu.Unlock()
			if damage != nil {
				err = damage(r, f)
			}
			return n, d, ok, err
		}
	}
}

// resetCount forgets the bytes read so far.
func (w *ffWorld) resetCount() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.read = map[string]int64{}
}

// dataRead returns the data-area bytes read of rank r's data file.
func (w *ffWorld) dataRead(r int) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.read[path.Base(RankFileName(CheckpointDir(0), RoleData, r))]
}

// recoverFiles restarts and returns each rank's recovered checkpoint id
// and bytes, or its error.
func (w *ffWorld) recoverFiles() ([]int64, [][]byte, []error) {
	ids, got, errs := make([]int64, 4), make([][]byte, 4), make([]error, 4)
	require.NoError(w.t, w.run(func(e *Engine) error {
		r := e.env.Rank
		m, src, err := e.Recover()
		if err == nil {
			ids[r] = m.ID
			got[r], err = readSource(src)
		}
		errs[r] = err
		return nil
	}))
	return ids, got, errs
}

// area returns the span of data bytes of rank r's file.
func (w *ffWorld) area(r int) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.areas[path.Base(RankFileName(CheckpointDir(0), RoleData, r))]
	return a[1] - a[0]
}

// TestL2RecordsFTIFF: an L2 checkpoint of FTI-FF files records each data
// file's FTI-FF checksum, as L1 does, and its partner copy the same
// checksum; the data area of each data file is read once (by the
// sender, which does not hash it: partner's tests count the hashing).
func TestL2RecordsFTIFF(t *testing.T) {
	w := newFFWorld(t)
	var m *Manifest
	require.NoError(t, w.run(func(e *Engine) error {
		mm, _, err := e.Checkpoint(1, L2, w.write(1, nil)(e.env.Rank))
		if e.env.Rank == 0 {
			m = mm
		}
		return err
	}))
	for r := range 4 {
		d, ok := m.DataFile(r)
		require.True(t, ok)
		assert.Equal(t, DigestFTIFF, d.Attrs[AttrDigest], "rank %d data entry", r)
		assert.Empty(t, d.Attrs[AttrL1Digest])
		cp, ok := heldFile(m, w.topo.Right(r), RolePartner, r)
		require.True(t, ok, "copy of rank %d", r)
		assert.Equal(t, DigestFTIFF, cp.Attrs[AttrDigest], "copy of rank %d", r)
		assert.Equal(t, d.Digest, cp.Digest, "copy of rank %d", r)
		assert.Equal(t, d.Size, cp.Size)
		b, err := os.ReadFile(path.Join(w.nodeDir(w.topo.NodeOf(w.topo.Right(r))), cp.Name))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(w.files[r], b), "copy of rank %d, byte for byte", r)
		assert.Equal(t, w.area(r), w.dataRead(r), "rank %d: data area read once while checkpointing", r)
	}
	ids, got, errs := w.recoverFiles()
	for r := range 4 {
		require.NoError(t, errs[r], "rank %d", r)
		assert.Equal(t, int64(1), ids[r])
		assert.True(t, bytes.Equal(w.files[r], got[r]), "rank %d", r)
	}
}

// TestL2RecoverFTIFF: recovery of an L2 checkpoint with FTI-FF entries
// restores a lost data file from its copy, reading the copy's data once
// (checked as it arrives), re-sends a damaged copy, and refuses a damaged
// copy as the source of a restore (the restart goes back a checkpoint).
func TestL2RecoverFTIFF(t *testing.T) {
	for _, tc := range []string{"lost data", "damaged copy", "lost data, damaged copy"} {
		t.Run(tc, func(t *testing.T) {
			w := newFFWorld(t)
			for id := int64(1); id <= 2; id++ {
				for r, err := range w.checkpointWith(id, L2, w.write(id, nil)) {
					require.NoError(t, err, "rank %d", r)
				}
			}
			second := append([][]byte(nil), w.files...)
			dataOf1 := path.Join(w.nodeDir(w.topo.NodeOf(1)), RankFileName(CheckpointDir(2), RoleData, 1))
			copyOf1 := path.Join(w.nodeDir(w.topo.NodeOf(2)), RankFileName(CheckpointDir(2), RolePartner, 1))
			if tc != "damaged copy" {
				require.NoError(t, os.Remove(dataOf1))
			}
			if tc != "lost data" {
				b, err := os.ReadFile(copyOf1)
				require.NoError(t, err)
				b[fileformat.HeaderSize+2000] ^= 0x01
				require.NoError(t, os.WriteFile(copyOf1, b, 0o644))
			}
			// the copy is counted as rank 1's data file is
			w.mu.Lock()
			w.areas[path.Base(copyOf1)] = w.areas[path.Base(dataOf1)]
			w.mu.Unlock()
			w.resetCount()
			ids, got, errs := w.recoverFiles()
			if tc == "lost data, damaged copy" {
				// Checkpoint 2 cannot be used, rank 1's data is gone, and
				// checkpoint 1 was dropped when 2 was committed: the
				// restored file was refused, nothing is published.
				for r := range 4 {
					require.ErrorIs(t, errs[r], ErrUnrecoverable, "rank %d", r)
					assert.Contains(t, errs[r].Error(), "corrupt file of rank 1 at offset 0: hash mismatch: after receiving", "rank %d", r)
					assert.Contains(t, errs[r].Error(), "data000001.fti.tmp: rank 1: ", "rank %d", r)
				}
				_, err := os.Stat(dataOf1)
				require.ErrorIs(t, err, fs.ErrNotExist)
				_, err = os.Stat(dataOf1 + TmpSuffix)
				require.ErrorIs(t, err, fs.ErrNotExist)
				return
			}
			for r := range 4 {
				require.NoError(t, errs[r], "rank %d", r)
			}
			for r := range 4 {
				assert.Equal(t, int64(2), ids[r], "rank %d", r)
				assert.True(t, bytes.Equal(second[r], got[r]), "rank %d", r)
			}
			b, err := os.ReadFile(dataOf1)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(second[1], b), "rank 1's data file")
			b, err = os.ReadFile(copyOf1)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(second[1], b), "rank 2's copy of rank 1")
			w.mu.Lock()
			read := w.read[path.Base(copyOf1)]
			w.mu.Unlock()
			if tc == "lost data" {
				assert.Equal(t, w.area(1), read, "the copy's data read once, to restore rank 1")
			}
		})
	}
}

// TestL2RecoversOldManifests: an L2 checkpoint whose manifest records
// whole-file BLAKE3 digests (as written before L2 kept the FTI-FF
// checksum, with attrs.l1digest on a raised data entry) still
// recovers, restoring a lost data file checked against the BLAKE3.
func TestL2RecoversOldManifests(t *testing.T) {
	w := newFFWorld(t)
	for r, err := range w.checkpointWith(1, L2, w.write(1, nil)) {
		require.NoError(t, err, "rank %d", r)
	}
	files := append([][]byte(nil), w.files...)
	// Rewrite both manifest copies as an earlier version wrote them.
	w.rewriteManifest(func(r int, f *File) error {
		if f.Attrs[AttrDigest] != DigestFTIFF {
			return fmt.Errorf("rank %d %s: digest kind %q", r, f.Role, f.Attrs[AttrDigest])
		}
		f.Attrs = nil
		if f.Role == RoleData {
			f.Attrs = map[string]string{AttrL1Digest: f.Digest.String()}
		}
		f.Digest = Digest(blake3.Sum256(files[f.Of]))
		return nil
	})
	require.NoError(t, os.Remove(path.Join(w.nodeDir(w.topo.NodeOf(1)), RankFileName(CheckpointDir(1), RoleData, 1))))
	var got [][]byte
	require.NoError(t, w.run(func(e *Engine) error {
		m := e.Committed()[0]
		if d, _ := m.DataFile(e.env.Rank); d.Attrs[AttrDigest] != "" || d.Attrs[AttrL1Digest] == "" {
			return fmt.Errorf("rank %d: the manifest is not the old kind: %v", e.env.Rank, d.Attrs)
		}
		return nil
	}))
	ids, got, errs := w.recoverFiles()
	for r := range 4 {
		require.NoError(t, errs[r], "rank %d", r)
		assert.Equal(t, int64(1), ids[r])
		assert.True(t, bytes.Equal(files[r], got[r]), "rank %d", r)
	}
}

// TestL3RecordsFTIFF: an L3 checkpoint of FTI-FF files records each data
// file's FTI-FF checksum (the encoder reads the data once and does not
// hash it as a whole) and the parity's BLAKE3; after losing a node, the
// data file rebuilt from parity is checked against the checksum and
// restores bit for bit.
func TestL3RecordsFTIFF(t *testing.T) {
	w := newFFWorld(t)
	w.resetCount()
	var m *Manifest
	require.NoError(t, w.run(func(e *Engine) error {
		mm, _, err := e.Checkpoint(2, L3, w.write(2, nil)(e.env.Rank))
		if e.env.Rank == 0 {
			m = mm
		}
		return err
	}))
	second := append([][]byte(nil), w.files...)
	for r := range 4 {
		d, ok := m.DataFile(r)
		require.True(t, ok)
		assert.Equal(t, DigestFTIFF, d.Attrs[AttrDigest], "rank %d", r)
		par, ok := heldFile(m, r, RoleParity, r)
		require.True(t, ok)
		assert.Empty(t, par.Attrs[AttrDigest], "parity: BLAKE3")
		assert.Equal(t, w.area(r), w.dataRead(r), "rank %d: data area read once", r)
	}
	// node 1 lost: its data and parity files
	require.NoError(t, os.RemoveAll(path.Join(w.nodeDir(w.topo.NodeOf(1)), CheckpointDir(2))))
	ids, got, errs := w.recoverFiles()
	for r := range 4 {
		require.NoError(t, errs[r], "rank %d", r)
		assert.Equal(t, int64(2), ids[r], "rank %d", r)
		assert.True(t, bytes.Equal(second[r], got[r]), "rank %d", r)
	}
}

// TestRefusesDamagedSource: a byte of a data file that changes between
// its write (whose block hashes the checksum covers) and the level's read
// of it is caught before the commit: at L2 the receiver refuses the copy,
// at L3 the check of the bytes the encoder reads fails; every rank fails
// the vote, nothing of the checkpoint is left, and the restart gets the
// previous checkpoint bit for bit (at L3 after losing the damaged rank's
// node). (When L2 recorded the BLAKE3 of the bytes it sent, the damage
// was recorded as the checkpoint; encoded unnoticed at L3, it committed a
// checkpoint the restart could not rebuild, after the previous one was
// dropped.)
func TestRefusesDamagedSource(t *testing.T) {
	for _, tc := range []struct {
		level   ID
		glob    string // the level's files: one per node, checkpoint 1's
		errRank int    // the rank whose error names the damage
		names   string // the file that error names
		is      []error
	}{
		{L2, "partner*", 2, "corrupt file of rank 1 at offset 0: hash mismatch: after receiving: fileformat: ", []error{partner.ErrHashMismatch, fileformat.ErrHashMismatch}},
		{L3, "parity*", 1, "data000001.fti", []error{fileformat.ErrHashMismatch}},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			w := newFFWorld(t)
			for r, err := range w.checkpointWith(1, tc.level, w.write(1, nil)) {
				require.NoError(t, err, "rank %d", r)
			}
			first := append([][]byte(nil), w.files...)
			flip := func(r int, f vfd.File) error {
				if r != 1 {
					return nil
				}
				b := []byte{0}
				if _, err := f.ReadAt(b, fileformat.HeaderSize+100); err != nil {
					return err
				}
				b[0] ^= 0x40
				_, err := f.WriteAt(b, fileformat.HeaderSize+100)
				return err
			}
			errs := w.checkpointWith(2, tc.level, w.write(2, flip))
			for r, err := range errs {
				require.ErrorIs(t, err, ErrVoteFailed, "rank %d", r)
			}
			for _, is := range tc.is {
				require.ErrorIs(t, errs[tc.errRank], is)
			}
			assert.Contains(t, errs[tc.errRank].Error(), tc.names)
			for n := range 4 {
				assert.Len(t, w.ckptFiles(n, tc.glob), 1, "node %d: only checkpoint 1's file", n)
			}
			if tc.level == L3 {
				require.NoError(t, os.RemoveAll(path.Join(w.nodeDir(w.topo.NodeOf(1)), CheckpointDir(1))))
			}
			ids, got, rerrs := w.recoverFiles()
			for r := range 4 {
				require.NoError(t, rerrs[r], "rank %d", r)
				assert.Equal(t, int64(1), ids[r], "rank %d", r)
				assert.True(t, bytes.Equal(first[r], got[r]), "rank %d", r)
			}
		})
	}
}
