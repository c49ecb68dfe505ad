package gsd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

var sec2 = vfd.Sec2{}

func tmpName(t testing.TB, name string) string { return filepath.Join(t.TempDir(), name) }

// writeThree writes the worked example of the format spec: three frames of
// a 2×2 float32 "temperature" and a uint64 "step", frame 1 with an extra
// int16 chunk with a long name.
func writeThree(t testing.TB, d vfd.Driver, name string, opts ...Option) {
	t.Helper()
	w, err := Create(d, name, "heat2d-probe", "heat2d", MakeVersion(1, 2), append([]Option{WithSync(false)}, opts...)...)
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		f := float32(10 * i)
		require.NoError(t, WriteChunk(w, "temperature", []float32{f, f + 1, f + 2, f + 3}, 2, 2))
		require.NoError(t, WriteChunk(w, "step", []uint64{uint64(i)}, 1, 1))
		if i == 1 {
			require.NoError(t, WriteChunk(w, "extra/long_chunk_name_for_v2", []int16{1, -2}, 2, 1))
		}
		require.NoError(t, w.EndFrame())
	}
	require.NoError(t, w.Close())
}

func TestLayoutMatchesReferenceWriter(t *testing.T) {
	name := tmpName(t, "three.gsd")
	writeThree(t, sec2, name)
	got, err := os.ReadFile(name)
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/three.gsd")
	require.NoError(t, err)
	assert.Equal(t, want, got, "byte-exact against the golden file")

	// The facts of the spec's worked example (reference writer, same calls).
	require.Len(t, got, 5452)
	le := binary.LittleEndian
	assert.Equal(t, []byte{0xdf, 0x65, 0xdf, 0x65, 0xdf, 0x65, 0xdf, 0x65}, got[:8])
	assert.Equal(t, uint64(256), le.Uint64(got[8:]))
	assert.Equal(t, uint64(128), le.Uint64(got[16:]))
	assert.Equal(t, uint64(4352), le.Uint64(got[24:]))
	assert.Equal(t, uint64(16), le.Uint64(got[32:]))
	assert.Equal(t, uint32(0x00010002), le.Uint32(got[40:]))
	assert.Equal(t, uint32(0x00020000), le.Uint32(got[44:]))
	assert.Equal(t, "heat2d-probe", cString(got[48:112]))
	assert.Equal(t, "heat2d", cString(got[112:176]))
	wantEntries := []Entry{
		{0, 2, 5376, 2, 0, TypeFloat32, 0}, {0, 1, 5392, 1, 1, TypeUint64, 0},
		{1, 2, 5400, 2, 0, TypeFloat32, 0}, {1, 1, 5416, 1, 1, TypeUint64, 0}, {1, 2, 5424, 1, 2, TypeInt16, 0},
		{2, 2, 5428, 2, 0, TypeFloat32, 0}, {2, 1, 5444, 1, 1, TypeUint64, 0},
	}
	for i, e := range wantEntries {
		assert.Equal(t, e, decodeEntry(got[256+32*i:]), "entry %d", i)
	}
	assert.Equal(t, make([]byte, 32), got[256+32*7:256+32*8], "end marker")
	const names = "temperature\x00step\x00extra/long_chunk_name_for_v2\x00"
	assert.Equal(t, names, string(got[4352:4352+len(names)]))
	assert.Equal(t, make([]byte, 1024-len(names)), got[4352+len(names):5376])
}

func TestRoundTripAllTypes(t *testing.T) {
	name := tmpName(t, "types.gsd")
	w, err := Create(sec2, name, "app", "schema", MakeVersion(3, 1), WithSync(false))
	require.NoError(t, err)
	const frames = 3
	for f := 0; f < frames; f++ {
		k := f + 1
		require.NoError(t, WriteChunk(w, "u8", []uint8{0, 255, uint8(k)}, 3, 1))
		require.NoError(t, WriteChunk(w, "u16", []uint16{65535, uint16(k)}, 1, 2))
		require.NoError(t, WriteChunk(w, "u32", []uint32{math.MaxUint32, uint32(k)}, 2, 1))
		require.NoError(t, WriteChunk(w, "u64", []uint64{math.MaxUint64, uint64(k)}, 2, 1))
		require.NoError(t, WriteChunk(w, "i8", []int8{-128, 127, int8(-k)}, 3, 1))
		require.NoError(t, WriteChunk(w, "i16", []int16{-32768, int16(-k)}, 2, 1))
		require.NoError(t, WriteChunk(w, "i32", []int32{math.MinInt32, int32(-k)}, 2, 1))
		require.NoError(t, WriteChunk(w, "i64", []int64{math.MinInt64, int64(-k)}, 2, 1))
		require.NoError(t, WriteChunk(w, "f32", []float32{1.5, float32(k), -0.25, 3, 4, 5}, 2, 3))
		require.NoError(t, WriteChunk(w, "f64", []float64{math.Pi, float64(k)}, 2, 1))
		require.NoError(t, WriteChunk(w, "empty", []float64{}, 0, 1))
		require.NoError(t, w.WriteRaw("raw", TypeUint8, 2, 2, []byte{1, 2, 3, byte(k)}))
		require.NoError(t, w.EndFrame())
	}
	require.NoError(t, w.Close())
	require.NoError(t, Verify(sec2, name))

	r, err := Open(sec2, name)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, uint64(frames), r.NFrames())
	assert.Equal(t, "app", r.Application())
	s, sv := r.Schema()
	assert.Equal(t, "schema", s)
	assert.Equal(t, MakeVersion(3, 1), sv)
	assert.Equal(t, Version2, r.Version())
	assert.Equal(t, []string{"u8", "u16", "u32", "u64"}, r.ChunkNames("u"))
	assert.Len(t, r.ChunkNames(""), 12)
	for f := uint64(0); f < frames; f++ {
		k := int(f) + 1
		u8, e, err := ReadChunk[uint8](r, f, "u8")
		require.NoError(t, err)
		assert.Equal(t, []uint8{0, 255, uint8(k)}, u8)
		assert.Equal(t, Entry{Frame: f, N: 3, M: 1, Location: e.Location, ID: 0, Type: TypeUint8}, e)
		u16, _, _ := ReadChunk[uint16](r, f, "u16")
		assert.Equal(t, []uint16{65535, uint16(k)}, u16)
		u64, _, _ := ReadChunk[uint64](r, f, "u64")
		assert.Equal(t, []uint64{math.MaxUint64, uint64(k)}, u64)
		i8, _, _ := ReadChunk[int8](r, f, "i8")
		assert.Equal(t, []int8{-128, 127, int8(-k)}, i8)
		i64, _, _ := ReadChunk[int64](r, f, "i64")
		assert.Equal(t, []int64{math.MinInt64, int64(-k)}, i64)
		f32, e, _ := ReadChunk[float32](r, f, "f32")
		assert.Equal(t, []float32{1.5, float32(k), -0.25, 3, 4, 5}, f32)
		assert.Equal(t, uint64(2), e.N)
		assert.Equal(t, uint32(3), e.M)
		row1, err := ReadRows[float32](r, f, "f32", 1, 1)
		require.NoError(t, err)
		assert.Equal(t, []float32{3, 4, 5}, row1)
		f64, _, _ := ReadChunk[float64](r, f, "f64")
		assert.Equal(t, []float64{math.Pi, float64(k)}, f64)
		empty, e, err := ReadChunk[float64](r, f, "empty")
		require.NoError(t, err)
		assert.Empty(t, empty)
		assert.NotZero(t, e.Location)
		raw, e, err := r.ReadChunkRaw(f, "raw")
		require.NoError(t, err)
		assert.Equal(t, []byte{1, 2, 3, byte(k)}, raw)
		assert.Equal(t, TypeUint8, e.Type)
		rows, err := r.ReadRowsRaw(f, "i32", 1, 1)
		require.NoError(t, err)
		assert.Equal(t, binary.LittleEndian.AppendUint32(nil, uint32(int32(-k))), rows)
	}
	_, _, err = ReadChunk[float64](r, 0, "f32")
	assert.ErrorIs(t, err, ErrType)
	_, err = ReadRows[float32](r, 0, "f32", 1, 2)
	assert.ErrorIs(t, err, ErrShape)
	_, err = r.ChunkInfo(frames, "f32")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = r.ChunkInfo(0, "nope")
	assert.ErrorIs(t, err, ErrNotFound)
	assert.False(t, r.ChunkExists(0, "nope"))
	assert.True(t, r.ChunkExists(2, "raw"))
}

func TestWriterRejectsBadInput(t *testing.T) {
	name := tmpName(t, "bad.gsd")
	w, err := Create(sec2, name, "a", "s", 0, WithSync(false))
	require.NoError(t, err)
	defer w.Close()
	_, err = Create(sec2, name, "a", "s", 0)
	assert.ErrorIs(t, err, fs.ErrExist, "Create does not overwrite")

	require.NoError(t, WriteChunk(w, "x", []int32{1}, 1, 1))
	tests := []struct {
		name string
		err  error
		do   func() error
	}{
		{"duplicate", ErrDuplicateChunk, func() error { return WriteChunk(w, "x", []int32{2}, 1, 1) }},
		{"type 11", ErrType, func() error { return w.WriteRaw("c", TypeCharacter, 1, 1, []byte{'a'}) }},
		{"type 0", ErrType, func() error { return w.WriteRaw("c", 0, 1, 1, []byte{'a'}) }},
		{"type 12", ErrType, func() error { return w.WriteRaw("c", 12, 1, 1, []byte{'a'}) }},
		{"shape", ErrShape, func() error { return WriteChunk(w, "y", []int32{1, 2, 3}, 2, 1) }},
		{"M 0", ErrShape, func() error { return WriteChunk(w, "y", []int32{}, 0, 0) }},
		{"raw size", ErrShape, func() error { return w.WriteRaw("y", TypeFloat64, 1, 1, []byte{1}) }},
		{"empty name", ErrName, func() error { return WriteChunk(w, "", []int32{1}, 1, 1) }},
		{"NUL in name", ErrName, func() error { return WriteChunk(w, "a\x00b", []int32{1}, 1, 1) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { assert.ErrorIs(t, tc.do(), tc.err) })
	}
	require.NoError(t, w.EndFrame())
	require.NoError(t, WriteChunk(w, "x", []int32{2}, 1, 1), "the same name in the next frame is fine")
}

// TestGrowthAndLongNames writes enough frames and names to relocate the
// index and the namelist several times.
func TestGrowthAndLongNames(t *testing.T) {
	name := tmpName(t, "grow.gsd")
	w, err := Create(sec2, name, "grow", "test", MakeVersion(1, 0), WithSync(false))
	require.NoError(t, err)
	longName := func(i int) string { return fmt.Sprintf("group/%03d/", i) + strings.Repeat("x", 100+i) }
	const frames, names = 300, 40
	for f := 0; f < frames; f++ {
		require.NoError(t, WriteChunk(w, "frame", []uint32{uint32(f)}, 1, 1))
		if f%10 == 0 {
			i := f / 10 % names
			require.NoError(t, WriteChunk(w, longName(i), []int64{int64(f), int64(i)}, 1, 2))
		}
		require.NoError(t, w.EndFrame())
	}
	require.NoError(t, w.Close())
	require.NoError(t, Verify(sec2, name))
	r, err := Open(sec2, name)
	require.NoError(t, err)
	defer r.Close()
	h := r.Header()
	assert.Greater(t, h.IndexAllocated, uint64(frames), "index grew")
	assert.NotEqual(t, int64(256), h.IndexLocation, "index moved")
	assert.NotEqual(t, int64(4352), h.NameLocation, "namelist moved")
	assert.Equal(t, uint64(frames), r.NFrames())
	assert.Len(t, r.ChunkNames("group/"), 30)
	for f := uint64(0); f < frames; f++ {
		v, _, err := ReadChunk[uint32](r, f, "frame")
		require.NoError(t, err)
		assert.Equal(t, []uint32{uint32(f)}, v)
		if f%10 == 0 {
			v, _, err := ReadChunk[int64](r, f, longName(int(f/10%names)))
			require.NoError(t, err)
			assert.Equal(t, []int64{int64(f), int64(f / 10 % names)}, v)
		}
	}
}

func TestEmptyFramesGrowIndexFirst(t *testing.T) {
	name := tmpName(t, "empty.gsd")
	w, err := Create(sec2, name, "a", "s", 0, WithSync(false))
	require.NoError(t, err)
	for i := 0; i < 200; i++ {
		require.NoError(t, w.EndFrame())
	}
	require.NoError(t, WriteChunk(w, "late", []uint8{7}, 1, 1))
	require.NoError(t, w.EndFrame())
	require.NoError(t, w.Close())
	require.NoError(t, Verify(sec2, name), "frame 200 must stay below the index capacity")
	r, err := Open(sec2, name)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, uint64(201), r.NFrames())
	assert.Equal(t, uint64(256), r.Header().IndexAllocated)
	assert.False(t, r.ChunkExists(5, "late"))
	v, _, err := ReadChunk[uint8](r, 200, "late")
	require.NoError(t, err)
	assert.Equal(t, []uint8{7}, v)
}

func TestAppendContinuesAfterLastFrame(t *testing.T) {
	name := tmpName(t, "append.gsd")
	writeThree(t, sec2, name)
	w, err := OpenAppend(sec2, name, WithSync(false))
	require.NoError(t, err)
	assert.Equal(t, uint64(3), w.Frame())
	require.NoError(t, WriteChunk(w, "step", []uint64{3}, 1, 1))
	require.NoError(t, WriteChunk(w, "new/name", []float32{9}, 1, 1))
	require.NoError(t, w.EndFrame())
	// A frame with chunks but not ended is dropped at Close.
	require.NoError(t, WriteChunk(w, "step", []uint64{4}, 1, 1))
	require.NoError(t, w.Close())
	require.NoError(t, Verify(sec2, name))
	r, err := Open(sec2, name)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, uint64(4), r.NFrames())
	assert.Equal(t, []string{"temperature", "step", "extra/long_chunk_name_for_v2", "new/name"}, r.ChunkNames(""))
	v, _, err := ReadChunk[uint64](r, 3, "step")
	require.NoError(t, err)
	assert.Equal(t, []uint64{3}, v)
	tv, _, err := ReadChunk[float32](r, 2, "temperature")
	require.NoError(t, err)
	assert.Equal(t, []float32{20, 21, 22, 23}, tv)
}

func TestBufferedModeCommitsOnBoundAndInterval(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	name := tmpName(t, "buf.gsd")
	w, err := Create(sec2, name, "a", "s", 0, WithSync(false), WithClock(clock), WithBuffered(100, time.Minute))
	require.NoError(t, err)
	frames := func() uint64 {
		r, err := Open(sec2, name)
		require.NoError(t, err)
		defer r.Close()
		return r.NFrames()
	}
	for i := 0; i < 3; i++ { // 3×40 bytes: the third EndFrame reaches 100
		require.NoError(t, WriteChunk(w, "d", make([]float64, 5), 5, 1))
		require.NoError(t, w.EndFrame())
		if i < 2 {
			assert.Equal(t, uint64(0), frames(), "frame %d still buffered", i)
		}
	}
	assert.Equal(t, uint64(3), frames())
	assert.Equal(t, uint64(1), w.Commits())
	require.NoError(t, WriteChunk(w, "d", make([]float64, 1), 1, 1))
	require.NoError(t, w.EndFrame())
	assert.Equal(t, uint64(3), frames())
	now = now.Add(61 * time.Second)
	require.NoError(t, WriteChunk(w, "d", make([]float64, 1), 1, 1))
	require.NoError(t, w.EndFrame())
	assert.Equal(t, uint64(5), frames(), "interval passed")
	require.NoError(t, WriteChunk(w, "d", make([]float64, 1), 1, 1))
	require.NoError(t, w.EndFrame())
	assert.Equal(t, uint64(5), frames())
	require.NoError(t, w.Flush())
	assert.Equal(t, uint64(6), frames(), "explicit Flush")
	assert.Equal(t, uint64(3), w.Commits())
	require.NoError(t, w.Close())
	assert.ErrorIs(t, w.EndFrame(), ErrClosed)
}

func TestRefreshSeesNewFrames(t *testing.T) {
	name := tmpName(t, "live.gsd")
	w, err := Create(sec2, name, "a", "s", 0, WithSync(false))
	require.NoError(t, err)
	require.NoError(t, WriteChunk(w, "x", []int32{0}, 1, 1))
	require.NoError(t, w.EndFrame())
	r, err := Open(sec2, name)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, uint64(1), r.NFrames())
	for f := 1; f < 300; f++ { // past the first index block and namelist
		require.NoError(t, WriteChunk(w, "x", []int32{int32(f)}, 1, 1))
		require.NoError(t, WriteChunk(w, fmt.Sprintf("name-%d-%s", f%50, strings.Repeat("n", 40)), []int32{int32(f)}, 1, 1))
		require.NoError(t, w.EndFrame())
		if f%37 == 0 {
			require.NoError(t, r.Refresh())
			assert.Equal(t, uint64(f+1), r.NFrames())
			v, _, err := ReadChunk[int32](r, uint64(f), "x")
			require.NoError(t, err)
			assert.Equal(t, []int32{int32(f)}, v)
		}
	}
	// An uncommitted (buffered) chunk is invisible.
	require.NoError(t, WriteChunk(w, "x", []int32{-1}, 1, 1))
	require.NoError(t, r.Refresh())
	assert.Equal(t, uint64(300), r.NFrames())
	assert.Len(t, r.ChunkNames("name-"), 50)
	require.NoError(t, w.Close())
}

func TestCorruptionErrorFormat(t *testing.T) {
	e := &CorruptionError{Path: "f.gsd", Part: "index", Entry: 3, Frame: 2, Chunk: "step", Offset: 352, Reason: "bad", Err: ErrCorrupt}
	assert.Equal(t, `gsd: f.gsd: corrupt index entry 3 (frame 2, chunk "step") at offset 352: bad`, e.Error())
	assert.ErrorIs(t, e, ErrCorrupt)
	io := &CorruptionError{Part: "data", Entry: -1, Offset: 9, Reason: "read", Err: errors.New("disk")}
	assert.Equal(t, "gsd: <reader>: corrupt data at offset 9: read: disk", io.Error())
	assert.ErrorIs(t, io, ErrCorrupt)
}

func TestReadRejectsDamage(t *testing.T) {
	base, err := os.ReadFile("testdata/three.gsd")
	require.NoError(t, err)
	le := binary.LittleEndian
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(base)) }
	tests := []struct {
		name  string
		data  []byte
		err   error
		entry int64
	}{
		{"short", base[:100], ErrNotGSD, -1},
		{"magic", mod(func(b []byte) []byte { b[0] = 0; return b }), ErrNotGSD, -1},
		{"version 3.0", mod(func(b []byte) []byte { le.PutUint32(b[44:], 0x00030000); return b }), ErrVersion, -1},
		{"namelist alloc 0", mod(func(b []byte) []byte { le.PutUint64(b[32:], 0); return b }), ErrCorrupt, -1},
		{"namelist past EOF", mod(func(b []byte) []byte { le.PutUint64(b[32:], 1<<40); return b }), ErrCorrupt, -1},
		{"index past EOF", mod(func(b []byte) []byte { le.PutUint64(b[16:], 1<<58); return b }), ErrCorrupt, -1},
		{"namelist no NUL", mod(func(b []byte) []byte { b[5375] = 'x'; return b }), ErrCorrupt, -1},
		{"data cut", base[:len(base)-1], ErrCorrupt, 6},
		{"bad type", mod(func(b []byte) []byte { b[256+32+30] = 12; return b }), ErrCorrupt, 1},
		{"bad id", mod(func(b []byte) []byte { le.PutUint16(b[256+64+28:], 9); return b }), ErrCorrupt, 2},
		{"frame back", mod(func(b []byte) []byte { le.PutUint64(b[256+96:], 0); le.PutUint64(b[256+64:], 2); return b }), ErrCorrupt, 3},
		{"huge N", mod(func(b []byte) []byte { le.PutUint64(b[256+8:], math.MaxUint64); return b }), ErrCorrupt, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.data), int64(len(tc.data)))
			require.ErrorIs(t, err, tc.err)
			var ce *CorruptionError
			if tc.entry >= 0 {
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.entry, ce.Entry)
				assert.Equal(t, int64(256+32*tc.entry), ce.Offset)
			}
			assert.Error(t, VerifyReaderAt(bytes.NewReader(tc.data), int64(len(tc.data)), "x.gsd"))
		})
	}
}

func TestReadIntoReusesMemory(t *testing.T) {
	name := tmpName(t, "into.gsd")
	writeThree(t, sec2, name)
	r, err := Open(sec2, name)
	require.NoError(t, err)
	defer r.Close()
	buf := make([]float32, 0, 8)
	for f := uint64(0); f < 3; f++ {
		got, e, err := ReadChunkInto(r, f, "temperature", buf)
		require.NoError(t, err)
		assert.Equal(t, uint64(2), e.N)
		assert.Equal(t, []float32{float32(10 * f), float32(10*f + 1), float32(10*f + 2), float32(10*f + 3)}, got)
		assert.Same(t, &buf[:1][0], &got[0], "read into the caller's memory")
	}
	row, err := ReadRowsInto(r, 1, "temperature", 1, 1, make([]float32, 1))
	require.NoError(t, err)
	assert.Equal(t, []float32{12, 13}, row, "grown when too small")
}
