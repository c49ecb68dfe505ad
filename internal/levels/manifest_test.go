package levels

import (
	"bytes"
	"encoding/hex"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/vfd"
)

var rewrite = flag.Bool("rewrite", false, "rewrite golden files in testdata")

func sampleManifest() *Manifest {
	d := func(b byte) Digest {
		var x Digest
		for i := range x {
			x[i] = b + byte(i)
		}
		return x
	}
	return &Manifest{
		Seq: 7, ID: 42, Level: L1, Ranks: 2, NodeSize: 1, GroupSize: 2,
		Nodes: []string{"node-000000", "node-000001"}, Time: 1700000000123456789,
		Files: [][]File{
			{{Role: RoleData, Where: Local, Name: "ckpt00000007/data000000.fti", Size: 4096, Digest: d(1), Of: 0}},
			{{Role: RoleData, Where: Local, Name: "ckpt00000007/data000001.fti", Size: 4104, Digest: d(2), Of: 1},
				{Role: RolePartner, Where: Local, Name: "ckpt00000007/partner000000.fti", Size: 4096, Digest: d(1), Of: 0,
					Attrs: map[string]string{"from": "0"}}},
		},
	}
}

func TestManifestGolden(t *testing.T) {
	m := sampleManifest()
	b, err := m.Marshal()
	require.NoError(t, err)
	golden := filepath.Join("testdata", "v1.manifest")
	if *rewrite {
		require.NoError(t, os.WriteFile(golden, b, 0o644))
	}
	want, err := vfd.ReadFile(vfd.Sec2{}, golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(b), "manifest encoding changed: the format is frozen")
	got, err := ParseManifest(golden, want)
	require.NoError(t, err)
	assert.Equal(t, m, got)
	f, ok := got.DataFile(1)
	require.True(t, ok)
	assert.Equal(t, int64(4104), f.Size)
	assert.Equal(t, int64(8200), got.Bytes())
}

func TestManifestCorruption(t *testing.T) {
	good, err := sampleManifest().Marshal()
	require.NoError(t, err)
	flip := func(i int) []byte {
		b := append([]byte(nil), good...)
		b[i] ^= 0x20
		return b
	}
	tests := []struct {
		name string
		b    []byte
		off  int64
	}{
		{"empty", nil, 0},
		{"magic", flip(0), 0},
		{"version", []byte("ftigo-manifest 2\n{}\nblake3 00\n"), 15},
		{"body bit", flip(40), 17},
		{"truncated", good[:len(good)-10], int64(len(good) - 10 - 72)},
		{"hash digit", flip(len(good) - 5), int64(len(good) - 72)},
		{"no body end", []byte("ftigo-manifest 1\n{"), 17},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest("m", tt.b)
			require.ErrorIs(t, err, ErrBadManifest)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "m", ce.Path)
			_ = tt.off
		})
	}
	// A manifest whose hash is right but whose content is inconsistent.
	m := sampleManifest()
	m.Files = m.Files[:1]
	b, err := m.Marshal()
	require.NoError(t, err)
	_, err = ParseManifest("m", b)
	require.ErrorIs(t, err, ErrBadManifest)
	assert.Contains(t, err.Error(), "ranks 2 but 1 file lists")
}

func FuzzParseManifest(f *testing.F) {
	good, err := sampleManifest().Marshal()
	require.NoError(f, err)
	f.Add(good)
	if b, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join("testdata", "v1.manifest")); err == nil {
		f.Add(b)
	}
	f.Add([]byte("ftigo-manifest 1\n{}\nblake3 af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262\n"))
	if v2, err := sampleDCPManifest().Marshal(); err == nil {
		f.Add(v2)
	}
	cm := sampleManifest()
	cm.Compressed = &Compressed{Logical: 3000, Stored: 1000}
	if b, err := cm.Marshal(); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest("fuzz", b)
		if err != nil {
			require.ErrorIs(t, err, ErrBadManifest)
			return
		}
		// Whatever parses re-encodes and parses to the same value.
		again, err := m.Marshal()
		require.NoError(t, err)
		m2, err := ParseManifest("fuzz", again)
		require.NoError(t, err)
		require.Equal(t, m, m2)
	})
}

// FuzzManifestBody fuzzes the JSON body under a valid magic line and hash,
// so the decoder and the consistency checks are reached.
func FuzzManifestBody(f *testing.F) {
	good, err := sampleManifest().Marshal()
	require.NoError(f, err)
	lines := bytes.Split(good, []byte("\n"))
	f.Add(lines[1], false)
	f.Add([]byte(`{"seq":1,"level":4,"ranks":1,"node_size":1,"nodes":["a"],"files":[[{"role":"data","where":2,"name":"x","of":0}]]}`), false)
	v2, err := sampleDCPManifest().Marshal()
	require.NoError(f, err)
	f.Add(bytes.Split(v2, []byte("\n"))[1], true)
	f.Fuzz(func(t *testing.T, body []byte, dcp bool) {
		if bytes.IndexByte(body, '\n') >= 0 {
			return
		}
		sum := blake3.Sum256(body)
		magic := "ftigo-manifest 1\n"
		if dcp {
			magic = "ftigo-manifest 2\n"
		}
		b := append([]byte(magic), body...)
		b = append(b, "\nblake3 "+hex.EncodeToString(sum[:])+"\n"...)
		m, err := ParseManifest("fuzz", b)
		if err != nil {
			require.ErrorIs(t, err, ErrBadManifest)
			return
		}
		for r := 0; r < m.Ranks; r++ {
			_, ok := m.DataFile(r)
			require.True(t, ok)
		}
		require.Equal(t, dcp, m.DCP != nil, "version 2 exactly when differential")
		if m.DCP != nil {
			p, ok := m.Parent()
			require.True(t, ok)
			require.Less(t, p, m.Seq)
			require.Equal(t, len(m.DCP.Chain)+1, m.Layers())
		}
		again, err := m.Marshal()
		require.NoError(t, err)
		m2, err := ParseManifest("fuzz", again)
		require.NoError(t, err)
		require.Equal(t, m, m2)
	})
}

// TestScanManifests: the scan start-up and offline tools share accepts a
// manifest only when it parses and holds the number of its name, and
// returns every manifest in sequence order (beyond 8 digits too).
func TestScanManifests(t *testing.T) {
	dir := t.TempDir()
	put := func(name string, b []byte) {
		require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, filepath.Join(dir, name), b))
	}
	at := func(seq uint64) []byte {
		m := sampleManifest()
		m.Seq = seq
		b, err := m.Marshal()
		require.NoError(t, err)
		return b
	}
	put(ManifestName(7), at(7))
	put(ManifestName(8), at(3))                            // newer name, other sequence inside
	put(ManifestName(9), []byte("ftigo-manifest 1\n{}\n")) // unreadable
	put(ManifestName(123456789), at(123456789))            // sorts before ckpt00000007 by name
	put("topology", []byte("x"))
	put(ManifestName(10)+TmpSuffix, at(10))
	ms, err := ScanManifests(Store{Driver: vfd.Sec2{}, Dir: dir})
	require.NoError(t, err)
	type row struct {
		seq uint64
		ok  bool
	}
	var got []row
	for _, sm := range ms {
		got = append(got, row{sm.Seq, sm.Err == nil})
		if sm.Err != nil {
			require.ErrorIs(t, sm.Err, ErrBadManifest, sm.Name)
			assert.Nil(t, sm.M)
			continue
		}
		assert.Equal(t, sm.Seq, sm.M.Seq)
		assert.Equal(t, at(sm.Seq), sm.Raw)
	}
	assert.Equal(t, []row{{7, true}, {8, false}, {9, false}, {123456789, true}}, got)
	assert.Contains(t, ms[1].Err.Error(), "holds seq 3")

	_, err = ScanManifests(Store{Driver: vfd.Sec2{}, Dir: filepath.Join(dir, "absent")})
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestSameCheckpoint: Kept and an asynchronous raise (a higher level
// with files added) leave the same checkpoint; another time, another
// digest or a dropped file make another one.
func TestSameCheckpoint(t *testing.T) {
	l1 := sampleManifest()
	l1.Files = [][]File{{l1.Files[0][0]}, {l1.Files[1][0]}}
	kept := *l1
	kept.Kept = true
	up := *l1
	up.Level = L2
	up.Files = [][]File{
		{l1.Files[0][0], {Role: RolePartner, Where: Local, Name: "ckpt00000007/partner000001.fti", Size: 4104, Of: 1}},
		{l1.Files[1][0], {Role: RolePartner, Where: Local, Name: "ckpt00000007/partner000000.fti", Size: 4096, Of: 0}},
	}
	later := *l1
	later.Time++
	otherDigest := *l1
	otherDigest.Files = [][]File{{l1.Files[0][0]}, {l1.Files[1][0]}}
	otherDigest.Files[1][0].Digest[0] ^= 1
	upOther := up
	upOther.Files = [][]File{up.Files[0], {up.Files[1][1]}} // rank 1's data file dropped
	upLater := up
	upLater.Time++
	// An L1 data file with an FTI-FF checksum, whose digest the raise
	// to L2 recomputed as the BLAKE3 of its bytes, keeping the checksum.
	ff := *l1
	ff.Files = [][]File{{cloneFile(l1.Files[0][0])}, {cloneFile(l1.Files[1][0])}}
	ff.Files[1][0].Attrs = map[string]string{AttrDigest: DigestFTIFF}
	ffUp := up
	ffUp.Files = [][]File{up.Files[0], {cloneFile(up.Files[1][0]), up.Files[1][1]}}
	ffUp.Files[1][0].Digest[5] ^= 0x40
	ffUp.Files[1][0].Attrs = map[string]string{AttrL1Digest: l1.Files[1][0].Digest.String()}
	ffUpOther := ffUp
	ffUpOther.Files = [][]File{up.Files[0], {cloneFile(ffUp.Files[1][0]), up.Files[1][1]}}
	ffUpOther.Files[1][0].Attrs[AttrL1Digest] = otherDigest.Files[1][0].Digest.String()
	ffUpResized := ffUp
	ffUpResized.Files = [][]File{up.Files[0], {cloneFile(ffUp.Files[1][0]), up.Files[1][1]}}
	ffUpResized.Files[1][0].Size++
	for _, tc := range []struct {
		name string
		a, b *Manifest
		want bool
	}{
		{"itself", l1, l1, true},
		{"kept", l1, &kept, true},
		{"raised", l1, &up, true},
		{"raised, other order", &up, l1, true},
		{"raised and kept", &kept, &up, true},
		{"another time", l1, &later, false},
		{"another digest", l1, &otherDigest, false},
		{"raise without a file of the lower level", l1, &upOther, false},
		{"raise at another time", l1, &upLater, false},
		{"raised, FTI-FF checksum recomputed", &ff, &ffUp, true},
		{"raised, FTI-FF checksum recomputed, other order", &ffUp, &ff, true},
		{"raised from another FTI-FF checksum", &ff, &ffUpOther, false},
		{"raised, recomputed entry of another size", &ff, &ffUpResized, false},
		{"raised, checksum not kept", &ff, &up, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, SameCheckpoint(tc.a, tc.b))
		})
	}
}

// TestManifestV3Golden: the sample manifest as a version 3 root and its
// one part, byte for byte; both parse back, the part checked against the
// root, and the whole manifest read from them equals the sample.
func TestManifestV3Golden(t *testing.T) {
	m := sampleManifest()
	root, parts, err := asParts(m)
	require.NoError(t, err)
	require.Len(t, parts, 1)
	b, err := root.Marshal()
	require.NoError(t, err)
	goldenRoot := filepath.Join("testdata", "v3.manifest")
	goldenPart := filepath.Join("testdata", "v3.parts", "L1-000000.part")
	if *rewrite {
		require.NoError(t, os.MkdirAll(filepath.Dir(goldenPart), 0o755))
		require.NoError(t, os.WriteFile(goldenRoot, b, 0o644))
		require.NoError(t, os.WriteFile(goldenPart, parts[0], 0o644))
	}
	wantRoot, err := vfd.ReadFile(vfd.Sec2{}, goldenRoot)
	require.NoError(t, err)
	wantPart, err := vfd.ReadFile(vfd.Sec2{}, goldenPart)
	require.NoError(t, err)
	assert.Equal(t, string(wantRoot), string(b), "root encoding changed: the format is frozen")
	assert.Equal(t, string(wantPart), string(parts[0]), "part encoding changed: the format is frozen")

	got, err := ParseManifest(goldenRoot, wantRoot)
	require.NoError(t, err)
	assert.Equal(t, ManifestVersionParts, got.version)
	assert.Nil(t, got.Files)
	assert.Equal(t, int64(8200), got.Bytes())
	assert.Equal(t, 64, got.PartRanks())
	assert.True(t, got.SameNodes(m.Nodes))
	assert.False(t, got.SameNodes([]string{"node-000000", "other"}))
	require.Equal(t, []PartRef{{Size: int64(len(wantPart)), Sum: blake3.Sum256(wantPart)}}, got.refs)
	p, err := parsePart(goldenPart, wantPart, got, 0)
	require.NoError(t, err)
	assert.Equal(t, m.Files, p.Files)
	assert.Equal(t, m.Nodes, p.Nodes)
	got.view = &view{parts: map[int]*Part{0: p}}
	full, err := LoadFull(got)
	require.NoError(t, err)
	assert.Equal(t, m.Files, full.Files)
	assert.Equal(t, m.Nodes, full.Nodes)
	f, ok := got.DataFile(1)
	require.True(t, ok)
	assert.Equal(t, int64(4104), f.Size)

	// A part of another commit (another time, level, index) is refused.
	for name, h := range map[string]func(*Manifest){
		"time":  func(x *Manifest) { x.Time++ },
		"level": func(x *Manifest) { x.Level = L2 },
		"id":    func(x *Manifest) { x.ID++ },
	} {
		x := *got
		h(&x)
		_, err := parsePart(goldenPart, wantPart, &x, 0)
		require.ErrorIs(t, err, ErrBadManifest, name)
		assert.Contains(t, err.Error(), "the root says", name)
	}
	_, err = parsePart(goldenPart, wantPart, got, 1)
	require.ErrorIs(t, err, ErrBadManifest)
}

// FuzzParsePart fuzzes a part's body under a valid magic line and hash,
// checked against the sample root.
func FuzzParsePart(f *testing.F) {
	root, parts, err := asParts(sampleManifest())
	require.NoError(f, err)
	f.Add(bytes.Split(parts[0], []byte("\n"))[1])
	f.Add([]byte(`{"seq":7,"id":42,"level":1,"time":1700000000123456789,"index":0,"first":0,"nodes":["a","b"],"files":[[],[]]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if bytes.IndexByte(body, '\n') >= 0 {
			return
		}
		raw := frame(PartMagic, PartVersion, body)
		p, err := parsePart("fuzz", raw, root, 0)
		if err != nil {
			require.ErrorIs(t, err, ErrBadManifest)
			return
		}
		require.Len(t, p.Files, root.Ranks)
		for r := range root.Ranks {
			_, ok := p.dataFile(r)
			require.True(t, ok, "rank %d", r)
		}
		again, err := marshalPart(root, 0, p.Nodes, p.Files)
		require.NoError(t, err)
		p2, err := parsePart("fuzz", again, root, 0)
		require.NoError(t, err)
		twice, err := marshalPart(root, 0, p2.Nodes, p2.Files)
		require.NoError(t, err)
		require.Equal(t, string(again), string(twice))
	})
}

// FuzzRootBody fuzzes a version 3 root's body under a valid magic line
// and hash.
func FuzzRootBody(f *testing.F) {
	root, _, err := asParts(sampleManifest())
	require.NoError(f, err)
	b, err := root.Marshal()
	require.NoError(f, err)
	f.Add(bytes.Split(b, []byte("\n"))[1])
	f.Fuzz(func(t *testing.T, body []byte) {
		if bytes.IndexByte(body, '\n') >= 0 {
			return
		}
		m, err := ParseManifest("fuzz", frame(ManifestMagic, ManifestVersionParts, body))
		if err != nil {
			require.ErrorIs(t, err, ErrBadManifest)
			return
		}
		require.Equal(t, m.NumParts(), len(m.refs))
		require.Zero(t, m.PartRanks()%m.NodeSize)
		again, err := m.Marshal()
		require.NoError(t, err)
		m2, err := ParseManifest("fuzz", again)
		require.NoError(t, err)
		require.Equal(t, m, m2)
	})
}

// FuzzParseView fuzzes the view a rank sends its head.
func FuzzParseView(f *testing.F) {
	root, parts, err := asParts(sampleManifest())
	require.NoError(f, err)
	p, err := parsePart("p", parts[0], root, 0)
	require.NoError(f, err)
	root.view = &view{parts: map[int]*Part{0: p}}
	for r := range 2 {
		b, err := root.MarshalView(r)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseView("fuzz", b)
		if err != nil {
			require.ErrorIs(t, err, ErrBadManifest)
			return
		}
		require.NotNil(t, m.view)
		again, err := m.MarshalView(m.view.self)
		require.NoError(t, err)
		m2, err := ParseView("fuzz", again)
		require.NoError(t, err)
		require.Equal(t, m.header(), m2.header())
	})
}

// TestRootRecordsRun: a version 3 root records its run, which parses
// back and travels in the view header; the parts stay as without a run
// (the root's hash covers them); a root naming a bad run is damaged.
func TestRootRecordsRun(t *testing.T) {
	m := sampleManifest()
	_, plain, err := asParts(m)
	require.NoError(t, err)
	m.Run = "2026-12-02_04-44-12_b6cd9753"
	root, parts, err := asParts(m)
	require.NoError(t, err)
	assert.Equal(t, plain, parts, "a part records no run")
	b, err := root.Marshal()
	require.NoError(t, err)
	assert.Contains(t, string(b), `{"run":"2026-12-02_04-44-12_b6cd9753","seq":7,`)
	got, err := ParseManifest("root", b)
	require.NoError(t, err)
	assert.Equal(t, m.Run, got.Run)
	assert.Equal(t, m.Run, got.header().manifest().Run)

	for _, bad := range []string{"manifests", "ckpt7", "a/b"} {
		x := *root
		x.Run = bad
		raw, err := x.marshalRoot()
		require.NoError(t, err)
		_, err = ParseManifest("root", raw)
		require.ErrorIs(t, err, ErrBadManifest, bad)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce, bad)
		assert.Equal(t, "root", ce.Path)
	}
}

// TestManifestCompressed: the optional compressed field round-trips,
// its absence (every older manifest) reads as nil, and inconsistent
// counts are refused.
func TestManifestCompressed(t *testing.T) {
	m := sampleManifest()
	m.Compressed = &Compressed{Logical: 3000, Stored: 1000}
	b, err := m.Marshal()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"compressed":{"logical_bytes":3000,"stored_bytes":1000}`)
	got, err := ParseManifest("m", b)
	require.NoError(t, err)
	assert.Equal(t, m, got)
	assert.InDelta(t, 3.0, got.Compressed.Ratio(), 1e-12)
	old, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join("testdata", "v1.manifest"))
	require.NoError(t, err)
	got, err = ParseManifest("v1", old)
	require.NoError(t, err)
	assert.Nil(t, got.Compressed)
	assert.Equal(t, 1.0, got.Compressed.Ratio())
	for _, c := range []Compressed{{0, 0}, {100, -1}, {100, 101}, {-5, -10}} {
		m.Compressed = &c
		b, err := m.Marshal()
		require.NoError(t, err)
		_, err = ParseManifest("m", b)
		require.ErrorIs(t, err, ErrBadManifest, "%+v", c)
		assert.Contains(t, err.Error(), "compressed: ")
	}
	assert.Nil(t, compressedOf(DataStats{Written: 10, Protected: 10}))
	assert.Equal(t, &Compressed{Logical: 10, Stored: 4}, compressedOf(DataStats{Written: 10, Protected: 10, Logical: 10, Stored: 4}))

	// A version 3 root records it too, and a view's header carries it.
	m.Compressed = &Compressed{Logical: 3000, Stored: 1000}
	root, _, err := asParts(m)
	require.NoError(t, err)
	b, err = root.Marshal()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"compressed":{"logical_bytes":3000,"stored_bytes":1000}`)
	got, err = ParseManifest("root", b)
	require.NoError(t, err)
	assert.Equal(t, m.Compressed, got.Compressed)
	h := got.header()
	require.NoError(t, h.check())
	assert.Equal(t, m.Compressed, h.manifest().Compressed)
	for _, c := range []Compressed{{0, 0}, {100, 101}} {
		x := *root
		x.Compressed = &c
		raw, err := x.marshalRoot()
		require.NoError(t, err)
		_, err = ParseManifest("root", raw)
		require.ErrorIs(t, err, ErrBadManifest, "%+v", c)
		assert.Contains(t, err.Error(), "compressed: ")
		h.Compressed = &c
		require.ErrorIs(t, h.check(), ErrBadManifest, "%+v", c)
	}
}
