package levels

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

func sampleDCPManifest() *Manifest {
	m := sampleManifest()
	m.Seq = 9
	m.DCP = &DCP{Chain: []uint64{5, 7}, BlockSize: 16384, Written: 4096, Protected: 81920}
	for r := range m.Files {
		m.Files[r][0].Name = fmt.Sprintf("ckpt00000009/data%06d.fti", r)
		m.Files[r][0].Attrs = map[string]string{AttrFormat: FormatDelta, AttrImageSize: "40960",
			AttrImage: "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	}
	return m
}

func TestManifestDCPGolden(t *testing.T) {
	m := sampleDCPManifest()
	b, err := m.Marshal()
	require.NoError(t, err)
	golden := filepath.Join("testdata", "v2.manifest")
	if *rewrite {
		require.NoError(t, os.WriteFile(golden, b, 0o644))
	}
	want, err := vfd.ReadFile(vfd.Sec2{}, golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(b), "manifest encoding changed: the format is frozen")
	assert.True(t, bytes.HasPrefix(b, []byte("ftigo-manifest 2\n")))
	got, err := ParseManifest(golden, want)
	require.NoError(t, err)
	assert.Equal(t, m, got)
	p, ok := got.Parent()
	assert.True(t, ok)
	assert.EqualValues(t, 7, p)
	assert.Equal(t, 3, got.Layers())
	assert.True(t, got.DependsOn(5))
	assert.False(t, got.DependsOn(9))
	assert.InDelta(t, 0.05, got.DCP.Share(), 1e-9)

	// A full manifest stays version 1, byte for byte.
	v1, err := sampleManifest().Marshal()
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(v1, []byte("ftigo-manifest 1\n")))
}

func TestManifestDCPInvalid(t *testing.T) {
	reseal := func(version int, mutate func(m *Manifest)) []byte {
		m := sampleDCPManifest()
		mutate(m)
		b, err := m.Marshal()
		require.NoError(t, err)
		return bytes.Replace(b, []byte("ftigo-manifest 2"), []byte(fmt.Sprintf("ftigo-manifest %d", version)), 1)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		msg  string
	}{
		{"version 1 with dcp", reseal(1, func(*Manifest) {}), "version 1 with a dcp field"},
		{"empty chain", reseal(2, func(m *Manifest) { m.DCP.Chain = nil }), "empty chain"},
		{"chain not below seq", reseal(2, func(m *Manifest) { m.DCP.Chain = []uint64{5, 9} }), "strictly increasing"},
		{"chain unordered", reseal(2, func(m *Manifest) { m.DCP.Chain = []uint64{7, 5} }), "strictly increasing"},
		{"written above protected", reseal(2, func(m *Manifest) { m.DCP.Written = 1 << 20 }), "written of"},
		{"block size", reseal(2, func(m *Manifest) { m.DCP.BlockSize = 100 }), "block size 100"},
		{"data not a delta", reseal(2, func(m *Manifest) { delete(m.Files[1][0].Attrs, AttrFormat) }), "not marked ftiff-delta"},
		{"bad image checksum", reseal(2, func(m *Manifest) { m.Files[0][0].Attrs[AttrImage] = "zz" }), "bad image attribute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseManifest("m", tc.b)
			require.ErrorIs(t, err, ErrBadManifest)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	// Version 2 without dcp.
	b, err := sampleManifest().Marshal()
	require.NoError(t, err)
	_, err = ParseManifest("m", bytes.Replace(b, []byte("ftigo-manifest 1"), []byte("ftigo-manifest 2"), 1))
	require.ErrorIs(t, err, ErrBadManifest)
	assert.Contains(t, err.Error(), "version 2 without a dcp field")
}

func TestKeepChains(t *testing.T) {
	mk := func(seq uint64, chain ...uint64) *Manifest {
		m := &Manifest{Seq: seq, Level: L1}
		if chain != nil {
			m.DCP = &DCP{Chain: chain}
		}
		return m
	}
	committed := []*Manifest{mk(1), mk(2, 1), mk(3, 1, 2), mk(4), mk(5, 4)}
	seqs := func(ms []*Manifest) []uint64 {
		var out []uint64
		for _, m := range ms {
			out = append(out, m.Seq)
		}
		return out
	}
	// FTI's rule would drop 1..4 once 5 committed: 4 is 5's base.
	assert.Equal(t, []uint64{3, 2, 1}, seqs(keepChains(committed, committed[:4])), "newest first, the kept chain spared")
	// Dropping 2 alone while 3 stays: 3 needs it.
	assert.Empty(t, keepChains(committed, committed[1:2]))
	assert.Equal(t, []uint64{5, 3, 2, 1}, seqs(keepChains(committed, []*Manifest{committed[0], committed[1], committed[2], committed[4]})))
}

// deltaWorld checkpoints FTI-FF files (full, then deltas) on n ranks at
// L1 and returns, per checkpoint, every rank's state.
type dcpRank struct {
	parent fileformat.Parent
	have   bool
}

// ffWrite returns the WriteFunc of a full FTI-FF file of data.
func ffWrite(data []byte, rs *dcpRank, id int64, rank int) WriteFunc {
	return func(f vfd.File) (int64, Digest, bool, error) {
		lay, sum, err := fileformat.Write(f, fileformat.Meta{CkptID: id, Rank: int32(rank), Level: 1},
			[]fileformat.Var{{ID: 1, Data: data}}, nil, fileformat.WithBlockSize(1024))
		if err != nil {
			return 0, Digest{}, false, err
		}
		rs.parent, rs.have = fileformat.Parent{Layout: lay, Summary: sum}, true
		return sum.FileSize, Digest{}, false, nil
	}
}

// deltaWrite returns the WriteFunc and info of a delta of data on rs's parent.
func deltaWrite(data []byte, rs *dcpRank, id int64, rank int) (WriteFunc, func() DeltaInfo) {
	var info DeltaInfo
	w := func(f vfd.File) (int64, Digest, bool, error) {
		lay, sum, st, err := fileformat.WriteDelta(f, fileformat.Meta{CkptID: id, Rank: int32(rank), Level: 1},
			[]fileformat.Var{{ID: 1, Data: data}}, rs.parent, fileformat.WithBlockSize(1024))
		if err != nil {
			return 0, Digest{}, false, err
		}
		rs.parent = fileformat.Parent{Layout: lay, Summary: sum}
		info = DeltaInfo{Image: Digest(sum.Checksum), ImageSize: sum.FileSize, DataStats: DataStats{Written: st.Written, Protected: sum.DataSize}}
		return st.FileSize, Digest(st.Digest), true, nil
	}
	return w, func() DeltaInfo { return info }
}

func dcpData(rank int, v int) []byte {
	b := payload(rank, 1, 20*1024)
	for k := 1; k <= v; k++ {
		b[(k*3%20)*1024+rank] ^= byte(k) // one block more per version
	}
	return b
}

func TestDifferentialCheckpointChain(t *testing.T) {
	const n = 4
	cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 2)
	require.NoError(t, cl.run(n, func(e *Engine) error {
		rs := &dcpRank{}
		r := e.env.Rank
		if _, _, err := e.Checkpoint(1, L1, ffWrite(dcpData(r, 0), rs, 1, r)); err != nil {
			return err
		}
		for v := 1; v <= 3; v++ {
			parent := e.Committed()[len(e.Committed())-1]
			w, info := deltaWrite(dcpData(r, v), rs, int64(v+1), r)
			m, st, err := e.Checkpoint(int64(v+1), L1, w, Differential(parent, 1024, info))
			if err != nil {
				return err
			}
			want := make([]uint64, v)
			for i := range want {
				want[i] = uint64(i + 1)
			}
			if !slices.Equal(m.DCP.Chain, want) {
				return fmt.Errorf("chain %v, want %v", m.DCP.Chain, want)
			}
			// v=1: one block per rank differs from the base; each later
			// version changes one more block than its parent has.
			if st.Data.Written != 1024 || m.DCP.Written != n*1024 || m.DCP.Protected != st.TotalData.Protected || st.TotalData.Written != n*1024 {
				return fmt.Errorf("v%d: written %d (total %d, manifest %d)", v, st.Data.Written, st.TotalData.Written, m.DCP.Written)
			}
			f, _ := m.DataFile(r)
			if f.Attrs[AttrFormat] != FormatDelta || f.Attrs[AttrImage] != Digest(rs.parent.Summary.Checksum).String() {
				return fmt.Errorf("data entry attrs %v", f.Attrs)
			}
			if got := len(e.Committed()); got != v+1 {
				return fmt.Errorf("after v%d: %d committed, the whole chain must stay", v, got)
			}
		}
		// Deleting a layer the newest needs is refused.
		if err := e.Delete(e.Committed()[0]); !errors.Is(err, ErrInUse) {
			return fmt.Errorf("delete of the base: %v", err)
		}
		// A parent at another level, or not committed, is refused.
		last := e.Committed()[len(e.Committed())-1]
		w, info := deltaWrite(dcpData(r, 4), rs, 9, r)
		if _, _, err := e.Checkpoint(9, L4, w, Differential(last, 1024, info)); !errors.Is(err, ErrLevelUnavailable) && !errors.Is(err, ErrBadParent) {
			return fmt.Errorf("parent at another level: %v", err)
		}
		gone := &Manifest{Seq: 99, Level: L1}
		if _, _, err := e.Checkpoint(9, L1, w, Differential(gone, 1024, info)); !errors.Is(err, ErrBadParent) {
			return fmt.Errorf("parent not committed: %v", err)
		}
		return nil
	}))

	// Restart: the newest recovers through its chain, bit for bit.
	var mu sync.Mutex
	got := map[int][]byte{}
	require.NoError(t, cl.run(n, func(e *Engine) error {
		m, src, err := e.Recover()
		if err != nil {
			return err
		}
		if m.Seq != 4 || len(src.Chain) != 3 {
			return fmt.Errorf("recovered %s with %d layers", m.Dir(), len(src.Chain))
		}
		b, err := readImageVar(src)
		mu.Lock()
		got[e.env.Rank] = b
		mu.Unlock()
		if err != nil {
			return err
		}
		// A full checkpoint at L1 supersedes the chain.
		rs := &dcpRank{}
		if _, _, err := e.Checkpoint(10, L1, ffWrite(dcpData(e.env.Rank, 9), rs, 10, e.env.Rank)); err != nil {
			return err
		}
		if c := e.Committed(); len(c) != 1 || c[0].ID != 10 {
			return fmt.Errorf("after a full checkpoint: %d committed", len(c))
		}
		return nil
	}))
	for r := range n {
		assert.Equal(t, dcpData(r, 3), got[r], "rank %d", r)
	}
}

// readImageVar restores variable 1 of src's image, every block verified.
func readImageVar(src Source) ([]byte, error) {
	f, err := OpenSource(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rd, err := fileformat.Open(f)
	if err != nil {
		return nil, err
	}
	n, err := rd.StoredSize(1)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	return b, rd.ReadVar(1, b)
}

// TestDifferentialCorruptBase: a damaged base makes its whole chain
// unrecoverable; with keep_last_n an older full checkpoint is used.
func TestDifferentialCorruptLayer(t *testing.T) {
	for _, target := range []string{"base", "middle delta", "newest delta"} {
		t.Run(target, func(t *testing.T) {
			const n = 2
			cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 1)
			cl.policy = FTIPolicy{KeepLast: 10}
			require.NoError(t, cl.run(n, func(e *Engine) error {
				r := e.env.Rank
				rs := &dcpRank{}
				// An older full checkpoint, then the chain 2 <- 3 <- 4.
				if _, _, err := e.Checkpoint(1, L1, ffWrite(dcpData(r, 0), &dcpRank{}, 1, r)); err != nil {
					return err
				}
				if _, _, err := e.Checkpoint(2, L1, ffWrite(dcpData(r, 1), rs, 2, r)); err != nil {
					return err
				}
				for v := 2; v <= 3; v++ {
					parent := e.Committed()[len(e.Committed())-1]
					w, info := deltaWrite(dcpData(r, v), rs, int64(v+1), r)
					if _, _, err := e.Checkpoint(int64(v+1), L1, w, Differential(parent, 1024, info)); err != nil {
						return err
					}
				}
				return nil
			}))
			seq := map[string]uint64{"base": 2, "middle delta": 3, "newest delta": 4}[target]
			p := filepath.Join(cl.root, "local", "node0001", CheckpointDir(seq), "data000001.fti")
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			b[fileformat.HeaderSize+100] ^= 1 // a data byte (a delta's first stored block)
			require.NoError(t, os.WriteFile(p, b, 0o644))
			require.NoError(t, cl.run(n, func(e *Engine) error {
				m, src, err := e.Recover()
				if err != nil {
					return err
				}
				want := map[string]int64{"base": 1, "middle delta": 2, "newest delta": 3}[target]
				if m.ID != want {
					return fmt.Errorf("recovered id %d, want %d", m.ID, want)
				}
				if len(e.Skipped()) == 0 || !strings.Contains(e.Skipped()[0].Err.Error(), "digest mismatch") {
					return fmt.Errorf("skipped %v", e.Skipped())
				}
				got, err := readImageVar(src)
				if err != nil {
					return err
				}
				if !bytes.Equal(got, dcpData(e.env.Rank, int(want)-1)) {
					return fmt.Errorf("rank %d: wrong data", e.env.Rank)
				}
				return nil
			}))
		})
	}
}

// TestCompactChain compacts a chain into a full checkpoint: same image,
// new full file, the chain dropped once it is committed.
func TestCompactChain(t *testing.T) {
	const n = 2
	cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 1)
	require.NoError(t, runWorld(n, func(c comm.Comm) error {
		e, err := NewEngine(cl.env(c), Config{Levels: []Level{Local1{}}, PartRanks: testPartRanks()})
		if err != nil {
			return err
		}
		if err := e.Open(); err != nil {
			return err
		}
		defer e.Wait()
		r := c.Rank()
		rs := &dcpRank{}
		if _, _, err := e.Checkpoint(1, L1, ffWrite(dcpData(r, 0), rs, 1, r)); err != nil {
			return err
		}
		for v := 1; v <= 2; v++ {
			w, info := deltaWrite(dcpData(r, v), rs, int64(v+1), r)
			if _, _, err := e.Checkpoint(int64(v+1), L1, w, Differential(e.Committed()[len(e.Committed())-1], 1024, info)); err != nil {
				return err
			}
		}
		last := e.Committed()[len(e.Committed())-1]
		m, _, err := e.Compact(last, last.Level, nil)
		if err != nil {
			return err
		}
		if m.DCP != nil || m.ID != 3 || len(e.Committed()) != 1 {
			return fmt.Errorf("compacted %+v, %d committed", m, len(e.Committed()))
		}
		f, _ := m.DataFile(r)
		if f.Attrs[AttrDigest] != DigestFTIFF || f.Digest != Digest(rs.parent.Summary.Checksum) {
			return fmt.Errorf("compacted data entry %+v, image checksum %s", f, Digest(rs.parent.Summary.Checksum))
		}
		src, err := e.Source(m)
		if err != nil {
			return err
		}
		got, err := readImageVar(src)
		if err == nil && !bytes.Equal(got, dcpData(r, 2)) {
			err = fmt.Errorf("rank %d: compacted data differs", r)
		}
		return err
	}))
}
