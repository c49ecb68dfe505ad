package h5

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// memSample writes the sample file to an in-memory driver and returns its bytes.
func memSample(t testing.TB) []byte {
	t.Helper()
	c := vfd.NewCore()
	f, err := vfd.CreateTrunc(c, "sample.h5")
	require.NoError(t, err)
	buildSample(t, f)
	n, err := f.Size()
	require.NoError(t, err)
	b := make([]byte, n)
	require.NoError(t, vfd.ReadFull(f, b, 0))
	require.NoError(t, f.Close())
	return b
}

func TestDeterministic(t *testing.T) {
	a, b := memSample(t), memSample(t)
	assert.Equal(t, a, b)
	assert.Equal(t, signature, string(a[:8]))
}

func TestGolden(t *testing.T) {
	got := memSample(t)
	p := filepath.Join("testdata", "sample.h5")
	if *update {
		require.NoError(t, vfd.Sec2{}.MkdirAll("testdata", 0o755))
		require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, p, got))
	}
	want, err := vfd.ReadFile(vfd.Sec2{}, p)
	require.NoError(t, err)
	assert.Equal(t, want, got, "run go test -update to accept a deliberate format change")
}

func TestSuperblockBytes(t *testing.T) {
	sb := encodeSuperblock(2060, 48)
	assert.Equal(t, []byte{0x86, 0xc5, 0xab, 0x82}, sb[44:])
	assert.Len(t, sb, superblockSize)
}

func TestVDSBlockChecksumMatchesLibhdf5(t *testing.T) {
	// The block libhdf5 1.10.8 wrote for two mappings of src.h5:/a (2x3)
	// onto rows 0-1 and 2-3 of a 4x3 dataset, except that libhdf5 chose
	// hyperslab version 1 too; our encoder must give the same bytes.
	got := encodeVDSBlock([]Mapping{
		{File: "src.h5", Dataset: "a", Start: []uint64{0, 0}, Count: []uint64{2, 3}},
		{File: "src.h5", Dataset: "a", Start: []uint64{2, 0}, Count: []uint64{2, 3}},
	})
	assert.Len(t, got, 0x8f)
	assert.Equal(t, uint32(0x11a934b1), binary.LittleEndian.Uint32(got[len(got)-4:]))
}

func TestRoundTrip(t *testing.T) {
	b := memSample(t)
	f, err := Open(bytes.NewReader(b), int64(len(b)), "sample.h5")
	require.NoError(t, err)

	title, ok := f.Root.Attr("title")
	require.True(t, ok)
	assert.Equal(t, "sample", title.String())
	v, _ := f.Root.Attr("version")
	assert.Equal(t, []int64{3}, v.Int64s())

	ints, err := f.Lookup("/ints")
	require.NoError(t, err)
	assert.Equal(t, KindDataset, ints.Kind)
	assert.True(t, ints.Type.Equal(Int32))
	assert.Equal(t, []uint64{2, 3}, ints.Dims)
	data, err := f.ReadData(ints)
	require.NoError(t, err)
	want, _ := binary.Append(nil, binary.LittleEndian, []int32{0, 1, 2, 3, 4, 5})
	assert.Equal(t, want, data)
	o, _ := ints.Attr("origin")
	assert.Equal(t, []int64{7, 8}, o.Int64s())
	assert.Equal(t, []uint64{2}, o.Dims)
	s, _ := ints.Attr("scale")
	assert.Equal(t, []float64{0.5}, s.Float64s())

	sc, err := f.Lookup("grp/scalar")
	require.NoError(t, err)
	assert.Nil(t, sc.Dims)
	d, err := f.ReadData(sc)
	require.NoError(t, err)
	assert.Equal(t, 42.0, Number(Float64, d, 0))

	tb, err := f.Lookup("table")
	require.NoError(t, err)
	assert.True(t, tb.Type.Equal(tableType), tb.Type.Name())
	rows, err := f.ReadData(tb)
	require.NoError(t, err)
	assert.Equal(t, "alpha\x00\x00\x00", string(rows[4:12]))

	ext, ok := f.Root.Link("ext")
	require.True(t, ok)
	assert.True(t, ext.External)
	assert.Equal(t, "sample.h5", ext.File)
	assert.Equal(t, "/grp/floats", ext.Path)

	virt, err := f.Lookup("virt")
	require.NoError(t, err)
	assert.True(t, virt.IsVirtual())
	assert.Equal(t, []Mapping{
		{File: ".", Dataset: "/ints", Start: []uint64{0, 0}, Count: []uint64{2, 3}},
		{File: ".", Dataset: "/ints", Start: []uint64{2, 0}, Count: []uint64{2, 3}},
	}, virt.Virtual)
	assert.Equal(t, []byte{0xff, 0xff, 0xff, 0xff}, virt.Fill)

	var paths []string
	require.NoError(t, f.Walk(func(p string, l Link) error { paths = append(paths, p); return nil }))
	assert.Equal(t, []string{"/ext", "/grp", "/grp/floats", "/grp/scalar", "/ints", "/table", "/virt"}, paths)

	_, err = f.Lookup("/nope")
	assert.ErrorIs(t, err, ErrNotFound)
}

// TestEveryTruncationRejected cuts the sample at every length; the reader
// must refuse each cut with an error, never a panic.
func TestEveryTruncationRejected(t *testing.T) {
	b := memSample(t)
	for n := 0; n < len(b); n++ {
		_, err := Open(bytes.NewReader(b[:n]), int64(n), "cut.h5")
		require.Error(t, err, "length %d", n)
		if n >= superblockSize {
			require.ErrorIs(t, err, ErrTruncated, "length %d", n)
		}
	}
}

// TestNoSuperblockUntilClose checks the write order: before Close the
// first 48 bytes are zero, so no tool can open a cut file.
func TestNoSuperblockUntilClose(t *testing.T) {
	c := vfd.NewCore()
	f, err := vfd.CreateTrunc(c, "x.h5")
	require.NoError(t, err)
	w := NewWriter(f)
	_, err = w.Root().CreateDataset("d", Uint8, []uint64{100}, bytes.Repeat([]byte{7}, 100))
	require.NoError(t, err)
	head := make([]byte, superblockSize)
	_, _ = f.ReadAt(head, 0)
	assert.Equal(t, make([]byte, superblockSize), head)
	sz, _ := f.Size()
	_, err = Open(f, sz, "x.h5")
	assert.ErrorIs(t, err, ErrNotHDF5)
	require.NoError(t, w.Close())
	sz, _ = f.Size()
	assert.Equal(t, w.Size(), sz)
	_, err = Open(f, sz, "x.h5")
	require.NoError(t, err)
}

func TestCorruptedHeaderIsChecksumError(t *testing.T) {
	b := memSample(t)
	f, err := Open(bytes.NewReader(b), int64(len(b)), "s.h5")
	require.NoError(t, err)
	for _, addr := range []uint64{f.Root.Addr, f.Root.Links[1].Object.Addr} {
		c := append([]byte(nil), b...)
		c[addr+8] ^= 0x40
		_, err := Open(bytes.NewReader(c), int64(len(c)), "s.h5")
		require.ErrorIs(t, err, ErrChecksum)
		var ce *CorruptionError
		require.True(t, errors.As(err, &ce))
		assert.Equal(t, int64(addr), ce.Offset)
	}
	c := append([]byte(nil), b...)
	c[20] ^= 1
	_, err = Open(bytes.NewReader(c), int64(len(c)), "s.h5")
	assert.ErrorIs(t, err, ErrChecksum)
}

func TestWriterRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		fn   func(g *Group) error
	}{
		{"size mismatch", func(g *Group) error { _, err := g.CreateDataset("d", Int32, []uint64{3}, make([]byte, 8)); return err }},
		{"slash in name", func(g *Group) error { _, err := g.CreateDataset("a/b", Int8, nil, []byte{1}); return err }},
		{"empty name", func(g *Group) error { _, err := g.CreateGroup(""); return err }},
		{"duplicate", func(g *Group) error {
			_, _ = g.CreateGroup("x")
			_, err := g.CreateGroup("x")
			return err
		}},
		{"bad int size", func(g *Group) error {
			_, err := g.CreateDataset("d", Datatype{Class: ClassFixed, Size: 3}, nil, make([]byte, 3))
			return err
		}},
		{"huge attribute", func(g *Group) error { return g.SetAttr(StringAttr("big", string(make([]byte, 70000)))) }},
		{"mapping outside", func(g *Group) error {
			_, err := g.CreateVirtual("v", Int8, []uint64{4}, nil, []Mapping{{File: "a", Dataset: "b", Start: []uint64{2}, Count: []uint64{3}}})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := vfd.CreateTrunc(vfd.NewCore(), "x.h5")
			require.NoError(t, err)
			w := NewWriter(f)
			assert.ErrorIs(t, tc.fn(w.Root()), ErrInvalid)
		})
	}
}

func TestLongLinkName(t *testing.T) {
	f, err := vfd.CreateTrunc(vfd.NewCore(), "x.h5")
	require.NoError(t, err)
	w := NewWriter(f)
	name := string(bytes.Repeat([]byte("n"), 300))
	_, err = w.Root().CreateDataset(name, Int8, nil, []byte{5})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	sz, _ := f.Size()
	r, err := Open(f, sz, "x.h5")
	require.NoError(t, err)
	o, err := r.Lookup(name)
	require.NoError(t, err)
	d, err := r.ReadData(o)
	require.NoError(t, err)
	assert.Equal(t, []byte{5}, d)
}

func TestVDSNamesWithPercent(t *testing.T) {
	f, err := vfd.CreateTrunc(vfd.NewCore(), "x.h5")
	require.NoError(t, err)
	w := NewWriter(f)
	m := Mapping{File: "fam-%d.1.h5", Dataset: "/a%b", Start: []uint64{0}, Count: []uint64{2}}
	_, err = w.Root().CreateVirtual("v", Int8, []uint64{2}, nil, []Mapping{m})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	blk := encodeVDSBlock([]Mapping{m})
	assert.True(t, bytes.Contains(blk, []byte("fam-%%d.1.h5\x00/a%%b\x00")), "'%%' escaped for libhdf5")
	sz, _ := f.Size()
	r, err := Open(f, sz, "x.h5")
	require.NoError(t, err)
	v, err := r.Lookup("v")
	require.NoError(t, err)
	assert.Equal(t, []Mapping{m}, v.Virtual)
	_, ok := unescapeVDSName("src-%b.h5")
	assert.False(t, ok, "%%b block substitution is outside the profile")
}
