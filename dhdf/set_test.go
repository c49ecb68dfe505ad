package dhdf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/vfd"
)

var fixedClock = func() time.Time { return time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC) }

// seedSDS1 returns the seed's sds1: 500x200 int32, element (i,j) = 1000*i+j.
func seedSDS1() []byte {
	b := make([]byte, 0, 500*200*4)
	for i := 0; i < 500; i++ {
		for j := 0; j < 200; j++ {
			b = binary.LittleEndian.AppendUint32(b, uint32(1000*i+j))
		}
	}
	return b
}

// seedSDS2 returns the seed's sds2: 1000x1000 float32, element (i,j) = i + j/1000.
func seedSDS2() []byte {
	b := make([]byte, 0, 1000*1000*4)
	for i := 0; i < 1000; i++ {
		for j := 0; j < 1000; j++ {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(i)+float32(j)/1000))
		}
	}
	return b
}

// writeSeedSet writes the seed's example: sds1 500x200 int32 split into
// 300x200 (AHF 1) and 200x200 (AHF 2), sds2 1000x1000 float32 whole in AHF 1.
func writeSeedSet(t testing.TB, d vfd.Driver, base string) {
	t.Helper()
	w, err := Create(base, 2, Options{Driver: d, Now: fixedClock, HostName: "node0"})
	require.NoError(t, err)
	require.NoError(t, w.DefineSDS(SDS{Name: "sds1", Type: h5.Int32, Dims: []uint64{500, 200},
		Attrs: []h5.Attribute{h5.StringAttr("units", "kelvin"), h5.MustAttr("scale", 2.5)}}))
	require.NoError(t, w.DefineSDS(SDS{Name: "sds2", Type: h5.Float32, Dims: []uint64{1000, 1000}}))
	s1 := seedSDS1()
	require.NoError(t, w.WriteChunk("sds1", 1, "sds1_a", []uint64{0, 0}, []uint64{300, 200}, s1[:300*200*4]))
	require.NoError(t, w.WriteChunk("sds1", 2, "sds1_b", []uint64{300, 0}, []uint64{200, 200}, s1[300*200*4:]))
	require.NoError(t, w.WriteChunk("sds2", 1, "sds2_all", []uint64{0, 0}, []uint64{1000, 1000}, seedSDS2()))
	require.NoError(t, w.Close())
}

// writeTinySet writes a 4x3 int16 SDS in two chunks over two AHFs and a
// 2-element float64 SDS with a fill value and one chunk.
func writeTinySet(t testing.TB, d vfd.Driver, base string) {
	t.Helper()
	w, err := Create(base, 2, Options{Driver: d, Now: fixedClock, HostName: "host-a"})
	require.NoError(t, err)
	require.NoError(t, w.DefineSDS(SDS{Name: "t", Type: h5.Int16, Dims: []uint64{4, 3}, Attrs: []h5.Attribute{h5.MustAttr("step", int64(7))}}))
	fill := binary.LittleEndian.AppendUint64(nil, math.Float64bits(-1))
	require.NoError(t, w.DefineSDS(SDS{Name: "u", Type: h5.Float64, Dims: []uint64{3}, Fill: fill}))
	top, _ := binary.Append(nil, binary.LittleEndian, []int16{0, 1, 2, 10, 11, 12})
	bot, _ := binary.Append(nil, binary.LittleEndian, []int16{20, 21, 22, 30, 31, 32})
	require.NoError(t, w.WriteChunk("t", 1, "", []uint64{0, 0}, []uint64{2, 3}, top))
	require.NoError(t, w.WriteChunk("t", 2, "", []uint64{2, 0}, []uint64{2, 3}, bot))
	u, _ := binary.Append(nil, binary.LittleEndian, []float64{1.5, 2.5})
	require.NoError(t, w.WriteChunk("u", 2, "", []uint64{1}, []uint64{2}, u))
	require.NoError(t, w.Close())
}

func TestSeedExampleRoundTrip(t *testing.T) {
	c := vfd.NewCore()
	writeSeedSet(t, c, "seed")
	s, err := Open("seed.h5", Options{Driver: c})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, "2026-11-22T04:00:00Z seed.h5 0", s.SetID())
	assert.Equal(t, []FileInfo{{0, "seed.h5", "node0"}, {1, "seed.1.h5", "node0"}, {2, "seed.2.h5", "node0"}}, s.Files())
	sds := s.SDSs()
	require.Len(t, sds, 2)
	assert.Equal(t, "sds1", sds[0].Name)
	assert.True(t, sds[0].Type.Equal(h5.Int32))
	assert.Equal(t, []uint64{500, 200}, sds[0].Dims)
	assert.Equal(t, []Chunk{
		{FileID: 1, Name: "sds1_a", Origin: []uint64{0, 0}, Dims: []uint64{300, 200}},
		{FileID: 2, Name: "sds1_b", Origin: []uint64{300, 0}, Dims: []uint64{200, 200}},
	}, sds[0].Chunks)
	require.Len(t, sds[0].Attrs, 2)
	assert.Equal(t, "2.5", sds[0].Attrs[0].String())
	assert.Equal(t, "kelvin", sds[0].Attrs[1].String())

	got, err := s.ReadSDS("sds1")
	require.NoError(t, err)
	assert.True(t, bytes.Equal(seedSDS1(), got))
	got, err = s.ReadSDS("sds2")
	require.NoError(t, err)
	assert.True(t, bytes.Equal(seedSDS2(), got))
	ch, err := s.ReadChunk("sds1", "sds1_b")
	require.NoError(t, err)
	assert.True(t, bytes.Equal(seedSDS1()[300*200*4:], ch))

	_, err = s.ReadSDS("nope")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.ReadChunk("sds1", "nope")
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestTinySetStitchAndFill(t *testing.T) {
	c := vfd.NewCore()
	writeTinySet(t, c, "dir/tiny")
	s, err := Open("dir/tiny.h5", Options{Driver: c})
	require.NoError(t, err)
	defer s.Close()
	got, err := s.ReadSDS("t")
	require.NoError(t, err)
	want, _ := binary.Append(nil, binary.LittleEndian, []int16{0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32})
	assert.Equal(t, want, got)
	got, err = s.ReadSDS("u")
	require.NoError(t, err)
	want, _ = binary.Append(nil, binary.LittleEndian, []float64{-1, 1.5, 2.5})
	assert.Equal(t, want, got)
	info, _ := s.SDS("t")
	assert.Equal(t, "t_1_0", info.Chunks[0].Name)
	assert.Equal(t, "t_2_0", info.Chunks[1].Name)
}

func TestPlace3D(t *testing.T) {
	// A 2x3x4 array of bytes assembled from two blocks split on the middle axis.
	dims := []uint64{2, 3, 4}
	want := make([]byte, 24)
	for i := range want {
		want[i] = byte(i)
	}
	block := func(o1, n1 uint64) []byte {
		var b []byte
		for i := uint64(0); i < 2; i++ {
			for j := o1; j < o1+n1; j++ {
				for k := uint64(0); k < 4; k++ {
					b = append(b, want[i*12+j*4+k])
				}
			}
		}
		return b
	}
	got := make([]byte, 24)
	place(got, dims, block(0, 1), []uint64{0, 0, 0}, []uint64{2, 1, 4}, 1)
	place(got, dims, block(1, 2), []uint64{0, 1, 0}, []uint64{2, 2, 4}, 1)
	assert.Equal(t, want, got)
}

func TestDeterministicBytes(t *testing.T) {
	read := func() map[string][]byte {
		c := vfd.NewCore()
		writeTinySet(t, c, "tiny")
		out := map[string][]byte{}
		for _, n := range []string{"tiny.h5", "tiny.1.h5", "tiny.2.h5"} {
			b, err := vfd.ReadFile(c, n)
			require.NoError(t, err)
			out[n] = b
		}
		return out
	}
	assert.Equal(t, read(), read())
}

var update = flagUpdate()

func TestGoldenTinySet(t *testing.T) {
	c := vfd.NewCore()
	writeTinySet(t, c, "tiny")
	for _, n := range []string{"tiny.h5", "tiny.1.h5", "tiny.2.h5"} {
		got, err := vfd.ReadFile(c, n)
		require.NoError(t, err)
		p := filepath.Join("testdata", n)
		if *update {
			require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, p, got))
		}
		want, err := vfd.ReadFile(vfd.Sec2{}, p)
		require.NoError(t, err)
		assert.Equal(t, want, got, "%s changed; run go test -update after a deliberate format change", n)
	}
	// The golden files open as a set from disk too.
	s, err := Open(filepath.Join("testdata", "tiny.h5"), Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

func TestMissingAHF(t *testing.T) {
	c := vfd.NewCore()
	writeTinySet(t, c, "tiny")
	require.NoError(t, c.Remove("tiny.2.h5"))
	_, err := Open("tiny.h5", Options{Driver: c})
	assert.ErrorIs(t, err, ErrMissingFile)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestForeignAHF(t *testing.T) {
	c := vfd.NewCore()
	writeTinySet(t, c, "tiny")
	// Another set written at another time: its AHF 1 swapped in.
	w, err := Create("other", 2, Options{Driver: c, Now: func() time.Time { return fixedClock().Add(time.Second) }})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, c.Rename("other.1.h5", "tiny.1.h5"))
	_, err = Open("tiny.h5", Options{Driver: c})
	assert.ErrorIs(t, err, ErrForeignFile)
	var ce *CorruptionError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, "tiny.1.h5", ce.Path)
}

func TestSwappedFileIDIsForeign(t *testing.T) {
	c := vfd.NewCore()
	writeTinySet(t, c, "tiny")
	require.NoError(t, c.Rename("tiny.1.h5", "tmp.h5"))
	require.NoError(t, c.Rename("tiny.2.h5", "tiny.1.h5"))
	require.NoError(t, c.Rename("tmp.h5", "tiny.2.h5"))
	_, err := Open("tiny.h5", Options{Driver: c})
	assert.ErrorIs(t, err, ErrForeignFile)
}

func TestChunkChecksum(t *testing.T) {
	c := vfd.NewCore()
	writeTinySet(t, c, "tiny")
	s, err := Open("tiny.h5", Options{Driver: c})
	require.NoError(t, err)
	info, _ := s.SDS("t")
	m := s.mem[2]
	o, err := m.h.Lookup("/" + info.Chunks[1].Name)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	// Flip one data byte of the chunk in AHF 2 (raw data has no HDF5 checksum).
	f, err := c.Open("tiny.2.h5", vfd.ReadWrite)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0x55}, int64(o.DataAddr)+3)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	s, err = Open("tiny.h5", Options{Driver: c})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.ReadSDS("t")
	require.ErrorIs(t, err, ErrChecksum)
	var ce *CorruptionError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, "tiny.2.h5", ce.Path)
	assert.Equal(t, int64(o.DataAddr), ce.Offset)
	_, err = s.ReadChunk("t", info.Chunks[0].Name)
	assert.NoError(t, err, "the other chunk is intact")
}

func TestCutMHFEveryLength(t *testing.T) {
	c := vfd.NewCore()
	writeTinySet(t, c, "tiny")
	full, err := vfd.ReadFile(c, "tiny.h5")
	require.NoError(t, err)
	f, err := c.Open("tiny.h5", vfd.ReadWrite)
	require.NoError(t, err)
	for n := len(full) - 1; n >= 0; n-- {
		require.NoError(t, f.Truncate(int64(n)))
		_, err := Open("tiny.h5", Options{Driver: c})
		require.Error(t, err, "cut at %d", n)
	}
	require.NoError(t, f.Close())
	require.NoError(t, vfd.WriteFileAtomic(c, "tiny.h5", full))
	s, err := Open("tiny.h5", Options{Driver: c})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

func TestWriterRejects(t *testing.T) {
	tests := []struct {
		name string
		fn   func(w *Writer) error
	}{
		{"non-numeric type", func(w *Writer) error { return w.DefineSDS(SDS{Name: "x", Type: h5.String(4), Dims: []uint64{2}}) }},
		{"reserved name", func(w *Writer) error { return w.DefineSDS(SDS{Name: FileInfoName, Type: h5.Int8, Dims: []uint64{2}}) }},
		{"zero dim", func(w *Writer) error { return w.DefineSDS(SDS{Name: "x", Type: h5.Int8, Dims: []uint64{0}}) }},
		{"reserved attr", func(w *Writer) error {
			return w.DefineSDS(SDS{Name: "x", Type: h5.Int8, Dims: []uint64{2}, Attrs: []h5.Attribute{h5.MustAttr("rank", int32(1))}})
		}},
		{"chunk outside", func(w *Writer) error {
			_ = w.DefineSDS(SDS{Name: "x", Type: h5.Int8, Dims: []uint64{4}})
			return w.WriteChunk("x", 1, "", []uint64{3}, []uint64{2}, []byte{1, 2})
		}},
		{"chunk overlap", func(w *Writer) error {
			_ = w.DefineSDS(SDS{Name: "x", Type: h5.Int8, Dims: []uint64{4}})
			_ = w.WriteChunk("x", 1, "", []uint64{0}, []uint64{2}, []byte{1, 2})
			return w.WriteChunk("x", 2, "", []uint64{1}, []uint64{2}, []byte{1, 2})
		}},
		{"bad file id", func(w *Writer) error {
			_ = w.DefineSDS(SDS{Name: "x", Type: h5.Int8, Dims: []uint64{4}})
			return w.WriteChunk("x", 3, "", []uint64{0}, []uint64{2}, []byte{1, 2})
		}},
		{"data size", func(w *Writer) error {
			_ = w.DefineSDS(SDS{Name: "x", Type: h5.Int16, Dims: []uint64{4}})
			return w.WriteChunk("x", 1, "", []uint64{0}, []uint64{2}, []byte{1, 2})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Create("x", 2, Options{Driver: vfd.NewCore()})
			require.NoError(t, err)
			assert.ErrorIs(t, tc.fn(w), ErrInvalid)
		})
	}
}

func TestNotASet(t *testing.T) {
	c := vfd.NewCore()
	f, err := vfd.CreateTrunc(c, "plain.h5")
	require.NoError(t, err)
	w := h5.NewWriter(f)
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
	_, err = Open("plain.h5", Options{Driver: c})
	assert.ErrorIs(t, err, ErrNotSet)
	_, err = Open("absent.h5", Options{Driver: c})
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestDocRowLayouts pins the table row layouts stated in docs/format/dhdf.md.
func TestDocRowLayouts(t *testing.T) {
	assert.Equal(t, uint32(514), fileInfoType.Size)
	assert.Equal(t, []uint32{0, 4, 259}, []uint32{fileInfoType.Members[0].Offset, fileInfoType.Members[1].Offset, fileInfoType.Members[2].Offset})
	assert.Equal(t, uint32(515), chunkTableType.Size)
	assert.Equal(t, []uint32{0, 4, 259, 387}, []uint32{chunkTableType.Members[0].Offset, chunkTableType.Members[1].Offset, chunkTableType.Members[2].Offset, chunkTableType.Members[3].Offset})
	rows := encodeChunkTable([]Chunk{{FileID: 3, Name: "c", Origin: []uint64{5, 6}, Dims: []uint64{7, 8}}})
	require.Len(t, rows, 515)
	assert.Equal(t, []byte{3, 0, 0, 0, 'c', 0}, rows[:6])
	assert.Equal(t, []byte{7, 0, 0, 0, 8, 0, 0, 0, 0}, rows[259:268])
	assert.Equal(t, []byte{5, 0, 0, 0, 6, 0, 0, 0, 0}, rows[387:396])
}

func TestCreateRejectsLongSetName(t *testing.T) {
	_, err := Create(string(bytes.Repeat([]byte("s"), 250)), 2, Options{Driver: vfd.NewCore()})
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = Create("ok", 0, Options{Driver: vfd.NewCore()})
	assert.ErrorIs(t, err, ErrInvalid)
}
