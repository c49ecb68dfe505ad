package levels

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// TestRaise commits checkpoints at L1, raises them to L2, L3 and L4
// over a private communicator, and checks the manifests, retention and
// that a restart survives the loss of a node only after the raise.
func TestRaise(t *testing.T) {
	for _, lvl := range []ID{L2, L3, L4} {
		t.Run(lvl.String(), func(t *testing.T) {
			w := newL23World(t, vfd.Sec2{}, 8, 1, 4, 0)
			w.levels = append(w.levels, Global4{Inline: true})
			// Checkpoint 1 raised, checkpoint 2 raised: 1 is dropped.
			for id := int64(1); id <= 2; id++ {
				require.NoError(t, w.run(func(e *Engine) error {
					m, _, err := e.Checkpoint(id, L1, writeBytes(l23Payload(e.env.Rank, id)))
					if err != nil {
						return err
					}
					priv, err := e.env.Comm.Split(0, e.env.Rank)
					if err != nil {
						return err
					}
					defer priv.Close()
					up, _, err := e.Raise(m, lvl, priv)
					if err != nil {
						return err
					}
					if up.Level != lvl || up.Seq != m.Seq || up.Time != m.Time {
						return errors.New("raised manifest has the wrong level, seq or time")
					}
					if len(e.Committed()) != 1 {
						return errors.New("retention after the raise kept the older checkpoint")
					}
					// Raising twice is refused.
					if _, _, err := e.Raise(up, lvl, priv); !errors.Is(err, ErrNotRaisable) {
						return errors.New("second raise not refused")
					}
					return nil
				}))
			}
			scan, err := ScanCheckpoints(Store{w.d, w.root + "/meta"}, Store{w.d, w.root + "/global"})
			require.NoError(t, err)
			committed := 0
			for _, s := range scan {
				if s.State() != SeqCommitted {
					continue
				}
				committed++
				require.NotNil(t, s.Primary.M)
				assert.Equal(t, lvl, s.Primary.M.Level)
				assert.Equal(t, uint64(2), s.Seq)
				assert.True(t, string(s.Primary.Raw) == string(s.Replica.Raw), "both copies rewritten")
			}
			assert.Equal(t, 1, committed)
			// Lose node 0 and node 2: L2, L3 and L4 recover checkpoint 2.
			eraseNodeDirs(0, 2)(w)
			ms, errs := w.recover()
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
				assert.Equal(t, int64(2), ms[r].ID)
				assert.Equal(t, lvl, ms[r].Level)
			}
		})
	}
}

// TestRaiseFailureKeepsL1 fails the L2 copy on one rank: every rank
// gets the error, the checkpoint stays committed at L1 and recovers.
func TestRaiseFailureKeepsL1(t *testing.T) {
	w := newL23World(t, vfd.Sec2{}, 4, 1, 4, 0)
	w.levels = []Level{Local1{}, Partner2{Buffers: &partner.Buffers{}}}
	errs := make([]error, 4)
	require.NoError(t, w.run(func(e *Engine) error {
		m, _, err := e.Checkpoint(1, L1, writeBytes(l23Payload(e.env.Rank, 1)))
		if err != nil {
			return err
		}
		if e.env.Rank == 2 {
			e.env.Local.Driver = vfd.NewFault(vfd.Sec2{}, vfd.OnPath("*partner*", []vfd.OpKind{vfd.OpOpen, vfd.OpWrite}, errors.New("no space left")))
		}
		_, _, errs[e.env.Rank] = e.Raise(m, L2, nil)
		e.env.Local.Driver = vfd.Sec2{}
		if c := e.Committed(); len(c) != 1 || c[0].Level != L1 {
			return errors.New("checkpoint not left at L1")
		}
		return nil
	}))
	for r, err := range errs {
		require.ErrorIs(t, err, ErrVoteFailed, "rank %d", r)
		assert.Contains(t, err.Error(), "rank 2")
		assert.Equal(t, errs[0].Error(), err.Error())
	}
	for n := range 4 {
		assert.Empty(t, w.ckptFiles(n, "partner*"), "node %d: partner files of the failed raise removed", n)
	}
	ms, rerrs := w.recover()
	for r, err := range rerrs {
		require.NoError(t, err, "rank %d", r)
		assert.Equal(t, L1, ms[r].Level)
	}
}

// TestRaiseChecksTheL1File: a data file damaged between its L1 commit
// and the raise fails the raise (the partner copy would carry the
// damage): the checkpoint stays at L1. The sender finds the damaged
// header as it reads the file's preamble against its recorded checksum;
// its right neighbour, offered no copy, fails too.
func TestRaiseChecksTheL1File(t *testing.T) {
	w := newL23World(t, vfd.Sec2{}, 4, 1, 4, 0)
	errs := make([]error, 4)
	require.NoError(t, w.run(func(e *Engine) error {
		m, _, err := e.Checkpoint(1, L1, ftiffWrite(e.env.Rank, 1))
		if err != nil {
			return err
		}
		if d, _ := m.DataFile(e.env.Rank); d.Attrs[AttrDigest] != DigestFTIFF {
			return errors.New("the L1 data file has no FTI-FF digest: the test does not test the check")
		}
		if err := e.env.Comm.Barrier(); err != nil {
			return err
		}
		if e.env.Rank == 1 {
			d, _ := m.DataFile(1)
			w.corrupt(e.env.Local.Path(d.Name))
		}
		if err := e.env.Comm.Barrier(); err != nil {
			return err
		}
		_, _, errs[e.env.Rank] = e.Raise(m, L2, nil)
		if c := e.Committed(); len(c) != 1 || c[0].Level != L1 {
			return errors.New("checkpoint not left at L1")
		}
		return nil
	}))
	for r, err := range errs {
		require.ErrorIs(t, err, ErrVoteFailed, "rank %d", r)
		assert.Contains(t, err.Error(), "2 ranks (1, 2)")
		assert.Contains(t, err.Error(), "data000001.fti")
	}
	require.ErrorIs(t, errs[1], ErrDigestMismatch)
}

// TestRaiseForAdoptRaised raises checkpoints with RaiseFor (which neither needs the
// checkpoint committed in the engine nor retains) and records them with
// AdoptRaised (which retains): the same result as Raise.
func TestRaiseForAdoptRaised(t *testing.T) {
	w := newL23World(t, vfd.Sec2{}, 4, 1, 4, 0)
	for id := int64(1); id <= 2; id++ {
		require.NoError(t, w.run(func(e *Engine) error {
			m, _, err := e.Checkpoint(id, L1, writeBytes(l23Payload(e.env.Rank, id)))
			if err != nil {
				return err
			}
			// Another engine of the same rank, never opened, raises it.
			other, err := NewEngine(e.env, Config{Levels: e.cfg.Levels, PartRanks: testPartRanks()})
			if err != nil {
				return err
			}
			up, _, err := other.RaiseFor(m, L2, nil)
			if err != nil {
				return err
			}
			if up.Level != L2 || up.Seq != m.Seq {
				return errors.New("raised manifest has the wrong level or seq")
			}
			if len(other.Committed()) != 0 {
				return errors.New("RaiseFor recorded the checkpoint")
			}
			if _, _, err := other.RaiseFor(up, L3, nil); !errors.Is(err, ErrNotRaisable) {
				return errors.New("raising a checkpoint that is not at L1 not refused")
			}
			if err := e.AdoptRaised(up, nil); err != nil {
				return err
			}
			cm := e.Committed()
			if len(cm) != 1 || cm[0].Seq != up.Seq || cm[0].Level != L2 {
				return errors.New("AdoptRaised did not record the L2 checkpoint and drop the older one")
			}
			return nil
		}))
	}
	require.NoError(t, w.run(func(e *Engine) error {
		stranger := &Manifest{Seq: 99, Level: L2}
		if err := e.AdoptRaised(stranger, nil); !errors.Is(err, ErrNotRaisable) {
			return errors.New("adopting an unknown checkpoint not refused")
		}
		return nil
	}))
	eraseNodeDirs(1)(w)
	ms, errs := w.recover()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
		assert.Equal(t, int64(2), ms[r].ID)
		assert.Equal(t, L2, ms[r].Level)
	}
}

// TestRaiseReplicaFailureKeepsL1: the replica of the raised manifest
// cannot be renamed into place (rank 0 writes both copies): the primary,
// already rewritten at L2, gets its L1 bytes back, the raise fails on
// every rank, and the checkpoint stays committed and restartable at L1.
func TestRaiseReplicaFailureKeepsL1(t *testing.T) {
	w := newL23World(t, vfd.Sec2{}, 4, 1, 4, 0)
	w.levels = []Level{Local1{}, Partner2{Buffers: &partner.Buffers{}}}
	errs := make([]error, 4)
	require.NoError(t, w.run(func(e *Engine) error {
		m, _, err := e.Checkpoint(1, L1, writeBytes(l23Payload(e.env.Rank, 1)))
		if err != nil {
			return err
		}
		if e.env.Rank == 0 {
			e.env.Global.Driver = vfd.NewFault(e.env.Global.Driver, vfd.OnPath("*"+manifestSuffix, []vfd.OpKind{vfd.OpRename}, errors.New("replica area gone")))
		}
		_, _, errs[e.env.Rank] = e.Raise(m, L2, nil)
		if c := e.Committed(); len(c) != 1 || c[0].Level != L1 {
			return errors.New("checkpoint not left at L1")
		}
		if e.env.Rank == 0 {
			raw, err := vfd.ReadFile(e.env.Meta.Driver, e.env.Meta.Path(ManifestName(m.Seq)))
			if err != nil {
				return err
			}
			pm, err := ParseManifest("primary", raw)
			if err != nil {
				return err
			}
			if pm.Level != L1 {
				return errors.New("primary manifest not restored to L1")
			}
		}
		return nil
	}))
	for r, err := range errs {
		require.ErrorIs(t, err, ErrVoteFailed, "rank %d", r)
		assert.Contains(t, err.Error(), "manifest replica")
	}
	ms, rerrs := w.recover()
	for r, err := range rerrs {
		require.NoError(t, err, "rank %d", r)
		assert.Equal(t, L1, ms[r].Level)
	}
}

// TestRaiseRefusesAManifestWithoutTheRanksData: a manifest that lists
// files for a rank but not its data file (damaged, or a head's request
// built from one) is not raised: another entry is never sent in the data file's place. Every
// rank fails the vote naming the rank, and the checkpoint stays at L1.
func TestRaiseRefusesAManifestWithoutTheRanksData(t *testing.T) {
	w := newL23World(t, vfd.Sec2{}, 4, 1, 4, 0)
	errs := make([]error, 4)
	require.NoError(t, w.run(func(e *Engine) error {
		m, _, err := e.Checkpoint(1, L1, ftiffWrite(e.env.Rank, 1))
		if err != nil {
			return err
		}
		// The request a head gets: rank 1's own list holds no data file.
		raw, err := m.MarshalView(e.env.Rank)
		if err != nil {
			return err
		}
		var req viewWire
		if err := json.Unmarshal(raw, &req); err != nil {
			return err
		}
		if e.env.Rank == 1 {
			d, ok := m.DataFile(1)
			if !ok {
				return errors.New("rank 1 has no data file: the test does not test the check")
			}
			other := cloneFile(d)
			other.Role, other.Of = RolePartner, 0 // an existing file, listed as something else
			req.Own = []File{other}
		}
		if raw, err = json.Marshal(req); err != nil {
			return err
		}
		bad, err := ParseView("head request", raw)
		if err != nil {
			return err
		}
		_, _, errs[e.env.Rank] = e.RaiseFor(bad, L2, nil) // as a head raises a manifest it was sent
		if c := e.Committed(); len(c) != 1 || c[0].Level != L1 {
			return errors.New("checkpoint not left at L1")
		}
		return nil
	}))
	for r, err := range errs {
		require.ErrorIs(t, err, ErrVoteFailed, "rank %d", r)
		if r == 1 { // the rank that found it; the others get its message
			require.ErrorIs(t, err, ErrMissingFile)
		}
		assert.Contains(t, err.Error(), "lists no data file for rank 1", "rank %d", r)
	}
}

// TestRaiseVerifiesInItsReadPass: at every level the raise checks the
// L1 data file in the read pass of its post-processing (the partner
// copy, the encoding, the copy into the L4 container). A byte of rank 1's
// FTI-FF file flipped after its L1 commit (in the header, the data, the
// metadata or the file block) fails the raise on every rank with
// ErrVoteFailed, on rank 1 with ErrDigestMismatch; nothing the raise
// wrote stays, the checkpoint stays at L1, and the restart, which cannot
// use it, gets the previous checkpoint (raised before) bit for bit.
func TestRaiseVerifiesInItsReadPass(t *testing.T) {
	for _, lc := range []struct {
		name string
		lvl  ID
		l4   Level
	}{{"L2", L2, nil}, {"L3", L3, nil}, {"L4-inline", L4, Global4{Inline: true}}, {"L4", L4, Global4{}}} {
		for _, at := range []string{"header", "data", "metadata", "fileblock"} {
			t.Run(lc.name+"/"+at, func(t *testing.T) {
				w := newL23World(t, vfd.Sec2{}, 4, 1, 4, 0)
				if lc.l4 != nil {
					w.levels = append(w.levels, lc.l4)
				}
				first := make([][]byte, 4) // each rank's file of checkpoint 1
				errs := make([]error, 4)
				var dir2 string
				require.NoError(t, w.run(func(e *Engine) error {
					r := e.env.Rank
					for id := int64(1); id <= 2; id++ {
						m, _, err := e.Checkpoint(id, L1, ftiffWrite(r, id))
						if err != nil {
							return err
						}
						d, _ := m.DataFile(r)
						if d.Attrs[AttrDigest] != DigestFTIFF {
							return errors.New("the L1 data file has no FTI-FF digest: the test does not test the check")
						}
						name := e.env.Local.Path(d.Name)
						if id == 1 {
							if first[r], err = os.ReadFile(name); err != nil {
								return err
							}
							if _, _, err := e.Raise(m, lc.lvl, nil); err != nil {
								return fmt.Errorf("raise of the sound checkpoint 1: %w", err)
							}
							continue
						}
						if r == 0 {
							dir2 = m.Dir()
						}
						if err := e.env.Comm.Barrier(); err != nil {
							return err
						}
						if r == 1 {
							flipByte(t, name, at)
						}
						if err := e.env.Comm.Barrier(); err != nil {
							return err
						}
						_, _, errs[r] = e.Raise(m, lc.lvl, nil)
						c := e.Committed()
						if last := c[len(c)-1]; last.Seq != m.Seq || last.Level != L1 {
							return fmt.Errorf("checkpoint 2 is at %v after the failed raise", last.Level)
						}
					}
					return nil
				}))
				for r, err := range errs {
					require.ErrorIs(t, err, ErrVoteFailed, "rank %d", r)
					if lc.lvl != L2 {
						assert.Contains(t, err.Error(), "changed since its L1 commit", "rank %d", r)
					}
				}
				if lc.lvl == L2 && at == "data" {
					// L2 keeps the FTI-FF checksum: the sender does not
					// hash, the receiver checks every block as it arrives
					// and refuses the copy of rank 1's data.
					require.ErrorIs(t, errs[2], partner.ErrHashMismatch)
					require.ErrorIs(t, errs[2], fileformat.ErrHashMismatch)
					var pe *partner.CorruptionError
					require.ErrorAs(t, errs[2], &pe)
					assert.Equal(t, 1, pe.Rank)
				} else {
					// At L2 the sender finds damaged metadata as it reads
					// the preamble against the recorded checksum.
					require.ErrorIs(t, errs[1], ErrDigestMismatch)
					if lc.lvl == L2 {
						var pe *partner.CorruptionError
						require.ErrorAs(t, errs[1], &pe)
						assert.Equal(t, 1, pe.Rank)
					} else {
						var ce *CorruptionError
						require.ErrorAs(t, errs[1], &ce)
						assert.Equal(t, 1, ce.Rank)
					}
				}
				// Only the L1 data files of checkpoint 2 are left.
				var left []string
				require.NoError(t, filepath.WalkDir(w.root, func(p string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() && strings.Contains(p, dir2) && !strings.HasSuffix(p, ".manifest") && !strings.HasSuffix(p, partExt) { // the manifest copies stay
						left = append(left, filepath.Base(p))
					}
					return err
				}))
				want := make([]string, 4)
				for r := range want {
					want[r] = path.Base(RankFileName(dir2, RoleData, r))
				}
				assert.ElementsMatch(t, want, left)
				got := make([][]byte, 4)
				ids := make([]int64, 4)
				require.NoError(t, w.run(func(e *Engine) error {
					m, src, err := e.Recover()
					if err != nil {
						return err
					}
					ids[e.env.Rank] = m.ID
					got[e.env.Rank], err = readSource(src)
					return err
				}))
				for r := range got {
					assert.Equal(t, int64(1), ids[r], "rank %d restarts checkpoint 1", r)
					assert.True(t, bytes.Equal(first[r], got[r]), "rank %d: checkpoint 1's data, bit for bit", r)
				}
			})
		}
	}
}

// flipByte flips one byte of the FTI-FF file name in the part named.
func flipByte(t *testing.T, name, part string) {
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	var off int
	switch part {
	case "header":
		off = 20
	case "data":
		off = fileformat.HeaderSize + 4000
	case "metadata":
		off = len(b) - fileformat.FBSize - 40
	case "fileblock":
		off = len(b) - 50
	}
	b[off] ^= 0x20
	require.NoError(t, os.WriteFile(name, b, 0o644))
}

// TestRaiseManifestFailureKeepsL1 fails each operation on the raised
// manifest copies (staged under tmp names while the new files are
// published, then renamed over the L1 copies, the primary first): every
// rank fails the vote, both copies are the L1 manifest again, no staged
// copy is left, and the checkpoint recovers at L1.
func TestRaiseManifestFailureKeepsL1(t *testing.T) {
	tests := []struct {
		name    string
		replica bool // the fault is on the global area's driver
		glob    string
		op      vfd.OpKind
	}{
		{"stage primary", false, "*" + manifestSuffix + TmpSuffix, vfd.OpOpen},
		{"sync staged primary", false, "*" + manifestSuffix + TmpSuffix, vfd.OpSync},
		{"stage replica", true, "*" + manifestSuffix + TmpSuffix, vfd.OpOpen},
		{"sync staged replica", true, "*" + manifestSuffix + TmpSuffix, vfd.OpSync},
		{"rename primary", false, "*" + manifestSuffix + TmpSuffix, vfd.OpRename},
		{"sync primary dir", false, "", vfd.OpSyncDir},
		{"rename replica", true, "*" + manifestSuffix + TmpSuffix, vfd.OpRename},
		{"sync replica dir", true, ReplicaDir, vfd.OpSyncDir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newL23World(t, vfd.Sec2{}, 4, 1, 4, 0)
			w.levels = []Level{Local1{}, Partner2{Buffers: &partner.Buffers{}}}
			errs := make([]error, 4)
			require.NoError(t, w.run(func(e *Engine) error {
				m, _, err := e.Checkpoint(1, L1, writeBytes(l23Payload(e.env.Rank, 1)))
				if err != nil {
					return err
				}
				meta, global := e.env.Meta.Driver, e.env.Global.Driver
				if e.env.Rank == 0 {
					glob := tc.glob
					if glob == "" {
						glob = path.Clean(e.env.Meta.Dir)
					}
					inj := vfd.OnPath(glob, []vfd.OpKind{tc.op}, errors.New("injected"))
					if tc.replica {
						e.env.Global.Driver = vfd.NewFault(global, inj)
					} else {
						e.env.Meta.Driver = vfd.NewFault(meta, inj)
					}
				}
				_, _, errs[e.env.Rank] = e.Raise(m, L2, nil)
				e.env.Meta.Driver, e.env.Global.Driver = meta, global
				if c := e.Committed(); len(c) != 1 || c[0].Level != L1 {
					return errors.New("checkpoint not left at L1")
				}
				if e.env.Rank == 0 {
					ds, ps := e.copyPaths(m.Seq)
					for i := range ds {
						raw, err := vfd.ReadFile(ds[i], ps[i])
						if err != nil {
							return err
						}
						cm, err := ParseManifest(ps[i], raw)
						if err != nil {
							return err
						}
						if cm.Level != L1 {
							return fmt.Errorf("%s left at %v", ps[i], cm.Level)
						}
						if _, err := ds[i].Stat(ps[i] + TmpSuffix); !errors.Is(err, fs.ErrNotExist) {
							return fmt.Errorf("staged copy %s left: %v", ps[i]+TmpSuffix, err)
						}
					}
				}
				return nil
			}))
			for r, err := range errs {
				require.ErrorIs(t, err, ErrVoteFailed, "rank %d", r)
				assert.Contains(t, err.Error(), "injected", "rank %d", r)
				assert.Equal(t, errs[0].Error(), err.Error())
			}
			ms, rerrs := w.recover()
			for r, err := range rerrs {
				require.NoError(t, err, "rank %d", r)
				assert.Equal(t, L1, ms[r].Level)
			}
		})
	}
}

// TestRaiseInterruptedBetweenCopies: a crash after the raised
// primary was installed but before the replica was leaves the replica at
// L1, whose data entry carries the FTI-FF checksum. A raise by an
// earlier version replaced it with the BLAKE3 of the bytes in the
// primary (the raise now keeps it: the primary is rewritten here as
// that version wrote it). Start-up must take the two copies for one
// checkpoint: rewrite the stale replica from the primary at start-up and
// recover at L3 bit for bit. Without attrs.l1digest start-up took them
// for two runs' copies: it warned and left the replica stale until a
// Recover had tried both.
func TestRaiseInterruptedBetweenCopies(t *testing.T) {
	w := newL23World(t, vfd.Sec2{}, 4, 1, 4, 0)
	first := make([][]byte, 4) // each rank's data file
	require.NoError(t, w.run(func(e *Engine) error {
		m, _, err := e.Checkpoint(1, L1, ftiffWrite(e.env.Rank, 1))
		if err != nil {
			return err
		}
		d, _ := m.DataFile(e.env.Rank)
		if first[e.env.Rank], err = vfd.ReadFile(e.env.Local.Driver, e.env.Local.Path(d.Name)); err != nil {
			return err
		}
		var stale []byte
		replica := e.env.Global.Path(ReplicaName(m.Seq))
		if e.env.Rank == 0 {
			if stale, err = vfd.ReadFile(e.env.Global.Driver, replica); err != nil {
				return err
			}
		}
		up, _, err := e.Raise(m, L3, nil)
		if err != nil {
			return err
		}
		if d, _ := up.DataFile(e.env.Rank); d.Attrs[AttrDigest] != DigestFTIFF || d.Attrs[AttrL1Digest] != "" {
			return errors.New("the raised data entry does not keep its FTI-FF checksum")
		}
		if err := e.env.Comm.Barrier(); err != nil {
			return err
		}
		if e.env.Rank != 0 {
			return nil
		}
		// The primary as the earlier version wrote it.
		old := *up
		old.Files = make([][]File, len(up.Files))
		for r := range up.Files {
			for _, f := range up.Files[r] {
				f = cloneFile(f)
				if f.Role == RoleData {
					delete(f.Attrs, AttrDigest)
					f.Attrs[AttrL1Digest] = f.Digest.String()
					f.Digest = Digest(blake3.Sum256(first[r]))
				}
				old.Files[r] = append(old.Files[r], f)
			}
		}
		raw, err := old.Marshal()
		if err != nil {
			return err
		}
		if err := vfd.WriteFileAtomic(e.env.Meta.Driver, e.env.Meta.Path(ManifestName(m.Seq)), raw); err != nil {
			return err
		}
		// the replica as the crash left it
		return vfd.WriteFileAtomic(e.env.Global.Driver, replica, stale)
	}))
	// Start-up alone (no Recover, which would rewrite a copy it found
	// disagreeing after the fact) repairs the replica.
	require.NoError(t, w.run(func(e *Engine) error { return nil }))
	scan, err := ScanCheckpoints(Store{w.d, w.root + "/meta"}, Store{w.d, w.root + "/global"})
	require.NoError(t, err)
	i := slices.IndexFunc(scan, func(s SeqScan) bool { return s.Seq == 1 })
	require.GreaterOrEqual(t, i, 0, "checkpoint 1's copies")
	require.NotNil(t, scan[i].Primary.M)
	assert.Equal(t, L3, scan[i].Primary.M.Level)
	assert.True(t, string(scan[i].Primary.Raw) == string(scan[i].Replica.Raw), "the stale L1 replica was not rewritten from the raised primary")
	got := make([][]byte, 4)
	levels := make([]ID, 4)
	require.NoError(t, w.run(func(e *Engine) error {
		m, src, err := e.Recover()
		if err != nil {
			return err
		}
		levels[e.env.Rank] = m.Level
		got[e.env.Rank], err = readSource(src)
		return err
	}))
	for r := range got {
		assert.Equal(t, L3, levels[r], "rank %d", r)
		assert.True(t, bytes.Equal(first[r], got[r]), "rank %d: the data, bit for bit", r)
	}
}
