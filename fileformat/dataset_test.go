package fileformat

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// datasetCase is a rank's piece of two global datasets: var 1 (float64,
// rows 2..3 of a 4x3 array "field") and var 4 (int32, elements 5..9 of a
// sparse 1-D "ids"), plus var 2, which belongs to no dataset.
func datasetCase() ([]Var, []Dataset, []Subset) {
	vars := []Var{
		{ID: 1, Name: "u", Type: Float64, Data: asBytes([]float64{6, 7, 8, 9, 10, 11})},
		{ID: 2, Name: "step", Type: Int64, Data: asBytes([]int64{42})},
		{ID: 4, Name: "ids", Type: Int32, Data: asBytes([]int32{5, 6, 7, 8, 9})},
	}
	ds := []Dataset{
		{ID: 9, Name: "meta/ids", Shape: []int64{20}, Type: Int32, Sparse: true},
		{ID: 3, Name: "field", Shape: []int64{4, 3}, Type: Float64},
	}
	subs := []Subset{
		{VarID: 4, Dataset: 9, Offset: []int64{5}, Count: []int64{5}},
		{VarID: 1, Dataset: 3, Offset: []int64{2, 0}, Count: []int64{2, 3}},
	}
	return vars, ds, subs
}

func TestDatasetsRoundTrip(t *testing.T) {
	vars, ds, subs := datasetCase()
	m := &memFile{name: "ds.fti"}
	_, sum, err := Write(m, Meta{CkptID: 4, Rank: 1, Level: 1}, vars, nil, WithDatasets(ds, subs), WithClock(fixedClock))
	require.NoError(t, err)
	_, planned, err := Plan(vars, nil, WithDatasets(ds, subs))
	require.NoError(t, err)
	assert.Equal(t, sum.FileSize, planned, "Plan counts the extension area")

	r, err := Open(m)
	require.NoError(t, err)
	require.NoError(t, r.Verify())
	assert.Equal(t, VersionExt, r.Version())
	assert.Equal(t, uint16(VersionExt), le.Uint16(m.b[8:]), "header version")
	assert.Equal(t, uint16(VersionExt), le.Uint16(m.b[len(m.b)-FBSize+8:]), "file block version")

	// Sorted by id, element sizes resolved.
	want := []Dataset{
		{ID: 3, Name: "field", Shape: []int64{4, 3}, Type: Float64, ElemSize: 8},
		{ID: 9, Name: "meta/ids", Shape: []int64{20}, Type: Int32, ElemSize: 4, Sparse: true},
	}
	assert.Equal(t, want, r.Datasets())
	assert.Equal(t, []Subset{subs[1], subs[0]}, r.Subsets())
	s, ok := r.SubsetOf(4)
	assert.True(t, ok)
	assert.Equal(t, subs[0], s)
	_, ok = r.SubsetOf(2)
	assert.False(t, ok, "var 2 maps onto no dataset")
	for _, v := range vars {
		got := make([]byte, len(v.Data))
		require.NoError(t, r.ReadVar(v.ID, got))
		assert.Equal(t, v.Data, got)
	}
	vi, err := r.VarByName("step")
	require.NoError(t, err)
	assert.Equal(t, int32(2), vi.ID)
	_, err = r.VarByName("nope")
	assert.ErrorIs(t, err, ErrNoVar)
}

// TestDatasetsNoneIsVersion1 checks that a file without datasets is byte
// for byte what the writer produced before extensions existed.
func TestDatasetsNoneIsVersion1(t *testing.T) {
	vars, _, _ := datasetCase()
	a, b := &memFile{name: "a"}, &memFile{name: "b"}
	_, _, err := Write(a, Meta{CkptID: 1}, vars, nil, WithClock(fixedClock))
	require.NoError(t, err)
	_, _, err = Write(b, Meta{CkptID: 1}, vars, nil, WithClock(fixedClock), WithDatasets(nil, nil))
	require.NoError(t, err)
	assert.Equal(t, a.b, b.b)
	assert.Equal(t, uint16(Version), le.Uint16(a.b[8:]))
	r, err := Open(a)
	require.NoError(t, err)
	assert.Equal(t, Version, r.Version())
	assert.Empty(t, r.Datasets())
	assert.Empty(t, r.Subsets())
}

func TestDatasetsWriteRefuses(t *testing.T) {
	vars, ds, subs := datasetCase()
	clone := func() ([]Dataset, []Subset) {
		d := make([]Dataset, len(ds))
		for i := range ds {
			d[i] = ds[i].Clone()
		}
		s := make([]Subset, len(subs))
		for i := range subs {
			s[i] = subs[i].Clone()
		}
		return d, s
	}
	tests := []struct {
		name   string
		mutate func(d []Dataset, s []Subset) ([]Dataset, []Subset)
		want   string
	}{
		{"dataset id twice", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			d[1].ID = 9
			return d, s
		}, "dataset id 9 used twice"},
		{"name twice", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			d[1].Name = "meta/ids"
			return d, s
		}, "both named"},
		{"subset outside", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			s[1].Offset[0] = 3
			return d, s
		}, "outside dataset 3"},
		{"negative offset", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			s[0].Offset[0] = -1
			return d, s
		}, "outside"},
		{"rank mismatch", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			s[1].Offset, s[1].Count = []int64{2}, []int64{6}
			return d, s
		}, "rank 1/1 in dataset 3"},
		{"element size", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			d[1].Type = Float32
			d[1].Shape = []int64{4, 6}
			s[1].Count = []int64{2, 6}
			return d, s
		}, "8-byte elements (float64) but dataset 3 \"field\" has 4-byte elements"},
		{"element type", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			d[1].Type = Int64
			return d, s
		}, "variable 1 is float64 but dataset 3"},
		{"size", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			s[1].Count = []int64{1, 3}
			return d, s
		}, "variable 1 has 48 bytes but its subset [1 3]"},
		{"unknown dataset", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			return d[:1], s
		}, "dataset 3, which is not defined"},
		{"unknown variable", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			s[0].VarID = 77
			return d, s
		}, "variable 77, which is not in the file"},
		{"variable twice", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			return d, append(s, Subset{VarID: 4, Dataset: 9, Offset: []int64{10}, Count: []int64{5}})
		}, "variable 4 mapped onto two subsets"},
		{"zero extent", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			d[0].Shape = []int64{0}
			return d, s[1:]
		}, "extent 0 of dimension 0"},
		{"rank 0", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			d[0].Shape = nil
			return d, s[1:]
		}, "rank 0"},
		{"rank 33", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			d[0].Shape = make([]int64, 33)
			return d, s[1:]
		}, "rank 33"},
		{"overflow", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			d[0].Shape = []int64{1 << 40, 1 << 40}
			return d, s[1:]
		}, "overflows"},
		{"bad name", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			d[0].Name = "a//b"
			return d, s
		}, "path component"},
		{"negative id", func(d []Dataset, s []Subset) ([]Dataset, []Subset) {
			d[0].ID = -2
			return d, s[1:]
		}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, s := tc.mutate(clone())
			_, _, err := Write(&memFile{name: "x"}, Meta{}, vars, nil, WithDatasets(d, s))
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
			_, _, err = Plan(vars, nil, WithDatasets(d, s))
			assert.ErrorIs(t, err, ErrInvalid)
		})
	}
}

// patchExt writes a dataset file, lets edit change its extension area (a
// copy, possibly resized) and returns the resealed file bytes.
func patchExt(t *testing.T, edit func(ext []byte) []byte) []byte {
	t.Helper()
	vars, ds, subs := datasetCase()
	m := &memFile{name: "p.fti"}
	_, _, err := Write(m, Meta{CkptID: 4, Rank: 1}, vars, nil, WithDatasets(ds, subs), WithClock(fixedClock))
	require.NoError(t, err)
	fb := m.b[len(m.b)-FBSize:]
	metaOff := int64(le.Uint64(fb[72:]))
	extOff := extStart(m.b)
	require.Greater(t, extOff, metaOff)
	ext := edit(append([]byte(nil), m.b[extOff:len(m.b)-FBSize]...))
	b := append(append(append([]byte(nil), m.b[:extOff]...), ext...), fb...)
	nfb := b[len(b)-FBSize:]
	le.PutUint64(nfb[40:], uint64(len(b)))
	le.PutUint64(nfb[80:], uint64(len(b)-FBSize)-uint64(metaOff))
	return resealed(b)
}

// extStart returns the file offset of the extension area of a version-2
// file b, from its trailer at the end of the metadata block.
func extStart(b []byte) int64 {
	end := int64(len(b)) - FBSize
	return end - int64(le.Uint64(b[end-extTrailerSize+8:]))
}

// appendRecord adds a record before the trailer of the extension area
// ext and updates the trailer's count and size.
func appendRecord(ext []byte, kind, flags uint16, body []byte) []byte {
	n := len(ext) - extTrailerSize
	tr := append([]byte(nil), ext[n:]...)
	out := append([]byte(nil), ext[:n]...)
	var h [16]byte
	le.PutUint16(h[0:], kind)
	le.PutUint16(h[2:], 1)
	le.PutUint32(h[4:], uint32(flags))
	le.PutUint64(h[8:], uint64(len(body)))
	out = append(out, h[:]...)
	out = append(out, body...)
	out = append(out, make([]byte, pad8(int64(len(body)))-int64(len(body)))...)
	le.PutUint32(tr[0:], le.Uint32(tr[0:])+1)
	le.PutUint64(tr[8:], uint64(len(out)+extTrailerSize))
	return append(out, tr...)
}

// TestDatasetsExtensionRecords checks the reader's rules for records it
// does not know: an optional one is skipped, a required one refuses the
// file with ErrVersion; and that damaged records are corruption.
func TestDatasetsExtensionRecords(t *testing.T) {
	b := patchExt(t, func(ext []byte) []byte { return appendRecord(ext, 77, 0, []byte("future")) })
	r, err := Open(&memFile{name: "opt.fti", b: b})
	require.NoError(t, err, "an unknown optional record is skipped")
	assert.Len(t, r.Datasets(), 2)
	require.NoError(t, r.Verify())

	b = patchExt(t, func(ext []byte) []byte { return appendRecord(ext, 77, extRequired, []byte("future")) })
	_, err = Open(&memFile{name: "req.fti", b: b})
	assert.ErrorIs(t, err, ErrVersion)
	var ce *CorruptionError
	assert.ErrorAs(t, err, &ce)

	corrupt := map[string]func(ext []byte) []byte{
		"magic":        func(ext []byte) []byte { ext[len(ext)-1] = 'X'; return ext },
		"record count": func(ext []byte) []byte { le.PutUint32(ext[len(ext)-extTrailerSize:], 3); return ext },
		"stray bytes": func(ext []byte) []byte {
			n := len(ext) - extTrailerSize
			out := append(append(append([]byte(nil), ext[:n]...), make([]byte, 8)...), ext[n:]...)
			le.PutUint64(out[len(out)-extTrailerSize+8:], uint64(len(out)))
			return out
		},
		"size":          func(ext []byte) []byte { le.PutUint64(ext[len(ext)-extTrailerSize+8:], 8); return ext },
		"reserved":      func(ext []byte) []byte { ext[len(ext)-20] = 1; return ext },
		"unknown flags": func(ext []byte) []byte { ext[4] = 2; return ext },
		"length":        func(ext []byte) []byte { le.PutUint64(ext[8:], 1<<40); return ext },
		"rank zero": func(ext []byte) []byte {
			ext[16+5] = 0 // first dataset record's rank
			return ext
		},
		"empty": func(ext []byte) []byte { return ext[:0] },
		"subset outside": func(ext []byte) []byte {
			// last record: the subset of var 4 at offset 5 of 20 (count 5); make the count 18.
			i := bytes.LastIndex(ext[:len(ext)-extTrailerSize], binary.LittleEndian.AppendUint64(nil, 5))
			le.PutUint64(ext[i:], 18)
			return ext
		},
	}
	for name, edit := range corrupt {
		t.Run(name, func(t *testing.T) {
			_, err := Open(&memFile{name: "c.fti", b: patchExt(t, edit)})
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrCorrupt)
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, 1, ce.Rank)
		})
	}
}

// TestReadVarAt reads random ranges of fragmented variables with various
// block sizes and compares them with the whole variable.
func TestReadVarAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, bs := range []int{MinBlockSize, 4096} {
		first := []Var{{ID: 0, Data: pattern(10000, 1)}, {ID: 1, Data: pattern(3000, 2)}}
		m1 := &memFile{name: "1"}
		lay, _, err := Write(m1, Meta{}, first, nil, WithBlockSize(bs))
		require.NoError(t, err)
		// Var 0 grows into a second container; var 1 shrinks.
		second := []Var{{ID: 0, Data: pattern(3<<20+777, 3)}, {ID: 1, Data: pattern(1500, 4)}}
		m := &memFile{name: "2"}
		_, _, err = Write(m, Meta{}, second, lay, WithBlockSize(bs))
		require.NoError(t, err)
		r, err := Open(m)
		require.NoError(t, err)
		require.Equal(t, 2, r.vars[r.byID[0]].Chunks)
		for _, v := range second {
			n := int64(len(v.Data))
			ranges := [][2]int64{{0, n}, {0, 0}, {n, 0}, {1, 1}, {int64(bs) - 1, 2}, {10000 - 5, 10}, {0, 10000}, {10000, n - 10000}}
			for i := 0; i < 200; i++ {
				off := rng.Int64N(n + 1)
				ranges = append(ranges, [2]int64{off, rng.Int64N(n - off + 1)})
			}
			for _, rg := range ranges {
				if rg[1] < 0 || rg[0]+rg[1] > n {
					continue
				}
				dst := make([]byte, rg[1])
				require.NoError(t, r.ReadVarAt(v.ID, dst, rg[0]), "var %d [%d,+%d)", v.ID, rg[0], rg[1])
				if !bytes.Equal(v.Data[rg[0]:rg[0]+rg[1]], dst) {
					t.Fatalf("bs %d var %d [%d,+%d): bytes differ", bs, v.ID, rg[0], rg[1])
				}
			}
		}
		err = r.ReadVarAt(1, make([]byte, 10), 1495)
		assert.ErrorIs(t, err, ErrSize)
		err = r.ReadVarAt(1, make([]byte, 1), -1)
		assert.ErrorIs(t, err, ErrSize)
		err = r.ReadVarAt(5, nil, 0)
		assert.ErrorIs(t, err, ErrNoVar)
	}
}

// TestReadVarAtCorruption flips one byte of a variable and checks that a
// range touching its block fails, naming the block's offset, with the
// destination zeroed, while ranges elsewhere still read.
func TestReadVarAtCorruption(t *testing.T) {
	data := pattern(8*MinBlockSize, 9)
	m := &memFile{name: "c.fti"}
	_, sum, err := Write(m, Meta{Rank: 2}, []Var{{ID: 3, Data: data}}, nil, WithBlockSize(MinBlockSize))
	require.NoError(t, err)
	fptr := sum.Chunks[0].Fptr
	m.b[fptr+3*MinBlockSize+100] ^= 1
	r, err := Open(m)
	require.NoError(t, err)
	for _, rg := range [][2]int64{{3*MinBlockSize + 100, 1}, {3 * MinBlockSize, MinBlockSize}, {0, 8 * MinBlockSize}, {4*MinBlockSize - 24, 20}} {
		dst := bytes.Repeat([]byte{0xee}, int(rg[1]))
		err := r.ReadVarAt(3, dst, rg[0])
		require.ErrorIs(t, err, ErrHashMismatch, "range %v", rg)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, fptr+3*MinBlockSize, ce.Offset)
		assert.Equal(t, int32(3), ce.VarID)
		assert.Equal(t, 2, ce.Rank)
		assert.Equal(t, make([]byte, rg[1]), dst, "zeroed on error")
	}
	dst := make([]byte, 3*MinBlockSize)
	require.NoError(t, r.ReadVarAt(3, dst, 0))
	assert.Equal(t, data[:3*MinBlockSize], dst)
	dst = make([]byte, 4*MinBlockSize-10)
	require.NoError(t, r.ReadVarAt(3, dst, 4*MinBlockSize+10))
	assert.Equal(t, data[4*MinBlockSize+10:], dst)
}

// goldenDatasets writes datasets.fti: datasetCase as rank 1 of checkpoint 4.
func goldenDatasets(t *testing.T) []byte {
	vars, ds, subs := datasetCase()
	m := &memFile{name: "datasets.fti"}
	_, _, err := Write(m, Meta{CkptID: 4, Rank: 1, Level: 1, Timestamp: goldenTimestamp}, vars, nil,
		WithBlockSize(1024), WithDatasets(ds, subs)) // 1024: the golden file's block size
	require.NoError(t, err)
	return m.b
}

// TestGoldenDatasets checks the checked-in version-2 golden file byte for
// byte and decodes its extension area with the offsets of
// docs/format/ftiff.md, independently of the decoder.
func TestGoldenDatasets(t *testing.T) {
	b := goldenDatasets(t)
	path := filepath.Join("testdata", "datasets.fti")
	if os.Getenv(updateGoldenEnv) == "1" {
		require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, path, b))
	}
	want, err := vfd.ReadFile(vfd.Sec2{}, path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, b), "written bytes differ from the golden file")

	u16 := func(off int) uint16 { return binary.LittleEndian.Uint16(b[off:]) }
	u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
	u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
	assert.Equal(t, uint16(2), u16(8))            // header version
	assert.Equal(t, uint16(2), u16(len(b)-192+8)) // FB version
	fb := len(b) - 192
	nbh := int(u64(fb + 88))
	metaOff, metaSize := int(u64(fb+72)), int(u64(fb+80))
	// MB: 3 variable records (names "u", "step", "ids": 32 B each), one BMD,
	// 3 VMDs, 3 block hashes, then the extension area.
	ext := metaOff + 3*32 + 16 + 3*88 + nbh*32
	require.Equal(t, 3, nbh)
	tr := metaOff + metaSize - 24         // the trailer ends the metadata block
	assert.Equal(t, uint32(4), u32(tr))   // records
	assert.Equal(t, uint32(0), u32(tr+4)) // reserved
	assert.Equal(t, uint64(metaOff+metaSize-ext), u64(tr+8))
	assert.Equal(t, []byte("FTIFFEXT"), b[tr+16:tr+24])
	p := ext
	// Record 0: dataset 3 "field" [4 3] float64.
	assert.Equal(t, uint16(1), u16(p))    // kind dataset
	assert.Equal(t, uint16(1), u16(p+2))  // record version
	assert.Equal(t, uint32(0), u32(p+4))  // flags: optional
	assert.Equal(t, uint64(37), u64(p+8)) // 16 + 2*8 + 5
	d := p + 16
	assert.Equal(t, uint32(3), u32(d))
	assert.Equal(t, byte(Float64), b[d+4])
	assert.Equal(t, byte(2), b[d+5])      // rank
	assert.Equal(t, uint16(0), u16(d+6))  // flags
	assert.Equal(t, uint32(8), u32(d+8))  // element size
	assert.Equal(t, uint32(5), u32(d+12)) // name length
	assert.Equal(t, uint64(4), u64(d+16))
	assert.Equal(t, uint64(3), u64(d+24))
	assert.Equal(t, "field", string(b[d+32:d+37]))
	assert.Equal(t, make([]byte, 3), b[d+37:d+40]) // padding to 8
	p = d + 40
	// Record 1: dataset 9 "meta/ids" [20] int32, sparse.
	assert.Equal(t, uint16(1), u16(p))
	assert.Equal(t, uint64(16+8+8), u64(p+8))
	d = p + 16
	assert.Equal(t, uint32(9), u32(d))
	assert.Equal(t, byte(Int32), b[d+4])
	assert.Equal(t, uint16(1), u16(d+6)) // sparse
	assert.Equal(t, uint64(20), u64(d+16))
	assert.Equal(t, "meta/ids", string(b[d+24:d+32]))
	p = d + 32
	// Record 2: subset of var 1 in dataset 3, offset [2 0], count [2 3].
	assert.Equal(t, uint16(2), u16(p))
	assert.Equal(t, uint64(16+32), u64(p+8))
	s := p + 16
	assert.Equal(t, uint32(1), u32(s))
	assert.Equal(t, uint32(3), u32(s+4))
	assert.Equal(t, byte(2), b[s+8])
	assert.Equal(t, make([]byte, 7), b[s+9:s+16])
	assert.Equal(t, []uint64{2, 0, 2, 3}, []uint64{u64(s + 16), u64(s + 24), u64(s + 32), u64(s + 40)})
	p = s + 48
	// Record 3: subset of var 4 in dataset 9, offset [5], count [5].
	assert.Equal(t, uint16(2), u16(p))
	s = p + 16
	assert.Equal(t, uint32(4), u32(s))
	assert.Equal(t, uint32(9), u32(s+4))
	assert.Equal(t, []uint64{5, 5}, []uint64{u64(s + 16), u64(s + 24)})
	assert.Equal(t, tr, s+32, "the trailer follows the last record")
}

// FuzzDatasetExt mutates the extension area of a version-2 file (the rest
// resealed so the hashes match) and checks that Open never panics and that
// whatever it accepts is consistent: every subset inside its dataset and
// sized like its variable, and the file rewrites to the same records.
func FuzzDatasetExt(f *testing.F) {
	vars, ds, subs := datasetCase()
	m := &memFile{name: "seed"}
	if _, _, err := Write(m, Meta{CkptID: 4, Rank: 1}, vars, nil, WithDatasets(ds, subs), WithClock(fixedClock)); err != nil {
		f.Fatal(err)
	}
	i := extStart(m.b)
	prefix, ext, fbb := m.b[:i], m.b[i:len(m.b)-FBSize], m.b[len(m.b)-FBSize:]
	f.Add(ext)
	f.Add(ext[len(ext)-extTrailerSize:])
	f.Add(appendRecord(append([]byte(nil), ext...), 5, 0, []byte{1, 2, 3}))
	f.Fuzz(func(t *testing.T, e []byte) {
		b := append(append(append([]byte(nil), prefix...), e...), fbb...)
		nfb := b[len(b)-FBSize:]
		metaOff := le.Uint64(nfb[72:])
		le.PutUint64(nfb[40:], uint64(len(b)))
		le.PutUint64(nfb[80:], uint64(len(b)-FBSize)-metaOff)
		r, err := Open(&memFile{name: "fuzz", b: resealed(b)})
		if err != nil {
			return
		}
		dsm := map[int32]Dataset{}
		for _, d := range r.Datasets() {
			if d.Check() != nil {
				t.Fatalf("accepted bad dataset %v", d)
			}
			dsm[d.ID] = d
		}
		var vs []Var
		for _, v := range r.Vars() {
			dst := make([]byte, v.Size)
			if err := r.ReadVar(v.ID, dst); err != nil {
				t.Fatal(err)
			}
			vs = append(vs, Var{ID: v.ID, Name: v.Name, Type: v.Type, ElemSize: v.ElemSize, Data: dst})
		}
		for _, s := range r.Subsets() {
			d, ok := dsm[s.Dataset]
			if !ok || s.CheckIn(d) != nil {
				t.Fatalf("accepted subset %v outside its dataset", s)
			}
			v, _ := r.Var(s.VarID)
			if s.CheckVar(d, v.Type, v.ElemSize, v.Size) != nil {
				t.Fatalf("accepted subset %v not matching var %v", s, v)
			}
		}
		again := &memFile{name: "again"}
		if _, _, err := Write(again, r.Meta(), vs, nil, WithDatasets(r.Datasets(), r.Subsets())); err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		r2, err := Open(again)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		assert.Equal(t, r.Datasets(), r2.Datasets())
		assert.Equal(t, r.Subsets(), r2.Subsets())
	})
}

// TestDatasetsStreamedMetadata: a version-2 file whose metadata block is
// larger than the reader's 1 MiB buffer is parsed in pieces, the
// extension area taken from the end of the stream.
func TestDatasetsStreamedMetadata(t *testing.T) {
	const n = 5 << 20 // float64 elements: 40 MiB, 40960 block hashes of 1 KiB blocks
	data := make([]byte, 8*n)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	vars := []Var{{ID: 3, Name: "big", Type: Float64, Data: data}}
	ds := []Dataset{{ID: 1, Name: "field", Shape: []int64{4, n}, Type: Float64}}
	subs := []Subset{{VarID: 3, Dataset: 1, Offset: []int64{2, 0}, Count: []int64{1, n}}}
	m := &memFile{name: "streamed.fti"}
	_, _, err := Write(m, Meta{CkptID: 1, Rank: 2}, vars, nil, WithDatasets(ds, subs), WithBlockSize(MinBlockSize))
	require.NoError(t, err)
	fb := decodeFB(m.b[len(m.b)-FBSize:])
	require.Greater(t, fb.metaSize, int64(metaBuf), "the metadata must not fit one buffer")
	r, err := Open(m)
	require.NoError(t, err)
	assert.Equal(t, VersionExt, r.Version())
	assert.Equal(t, ds[0].Name, r.Datasets()[0].Name)
	assert.Equal(t, subs, r.Subsets())
	got := make([]byte, len(data))
	require.NoError(t, r.ReadVar(3, got))
	assert.True(t, bytes.Equal(data, got))
	require.NoError(t, r.Verify())
}

// TestDatasetsHostileTrailer: a 20 GiB version-2 file whose sealed file
// block is consistent but whose extension trailer claims a size no
// metadata block can hold is refused, naming the trailer's offset, after
// allocating a few MiB at most; a trailer that takes the place of the
// variable records leaves the counts unfit.
func TestDatasetsHostileTrailer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		extSize uint64
		what    string
	}{
		{"beyond the metadata", 1 << 40, "bad trailer"},
		{"not a multiple of 8", 28, "bad trailer"},
		{"below the trailer", 16, "bad trailer"},
		{"the whole metadata", 0, "does not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr, tail := hostileTail(t, size20G, func(fb *fileBlock) { fb.version = VersionExt })
			hdr = append([]byte(nil), hdr...)
			le.PutUint16(hdr[8:], VersionExt)
			fb := decodeFB(tail)
			b := fb.encode()
			h := fbHash(hdr, b[:])
			copy(b[fbHashOff:], h[:])
			var tr [extTrailerSize]byte
			size := tc.extSize
			if size == 0 {
				size = uint64(fb.metaSize)
			}
			le.PutUint64(tr[8:], size)
			copy(tr[16:], extMagic[:])
			f := newSparse("hostile2.fti", hdr, append(tr[:], b[:]...), size20G)
			var err error
			alloc := allocDuring(func() { _, err = Open(f) })
			require.ErrorIs(t, err, ErrCorrupt)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, err.Error(), tc.what)
			if tc.extSize != 0 {
				assert.Equal(t, int64(size20G-FBSize-extTrailerSize), ce.Offset, "the trailer's offset")
			}
			assert.Less(t, alloc, uint64(8<<20), "allocated %d bytes", alloc)
		})
	}
}
