package encode

import (
	"bytes"
	"encoding/binary"
	"flag"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

var rewrite = flag.Bool("rewrite", false, "rewrite golden files in testdata/")

func sampleHeader() *ParityHeader {
	return &ParityHeader{
		K: 3, M: 3, Index: 1, Padded: 5000,
		Payload: Sum([]byte("payload")),
		Sizes:   []int64{5000, 10, 0},
		Hashes:  []Hash{Sum([]byte("a")), Sum([]byte("b")), Sum(nil)},
	}
}

func TestParityHeaderGolden(t *testing.T) {
	b, err := sampleHeader().Marshal()
	require.NoError(t, err)
	assert.Len(t, b, int(HeaderLen(3, 3)))
	assert.Equal(t, int64(64+120+32+16), HeaderLen(3, 3))
	path := filepath.Join("testdata", "header-k3.golden")
	if *rewrite {
		require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, path, b))
	}
	want, err := vfd.ReadFile(vfd.Sec2{}, path)
	require.NoError(t, err)
	assert.Equal(t, want, b, "wire format changed")
	h, err := ParseParityHeader("p", append(b, 1, 2, 3))
	require.NoError(t, err)
	assert.Equal(t, sampleHeader(), h)
}

// sampleRotated is a rotated-scheme header: k=3 members, m=1, unit 512.
func sampleRotated() *ParityHeader {
	h := sampleHeader()
	h.M, h.Index, h.Unit = 1, 2, 512
	return h
}

// TestParityHeaderRotatedGolden: version 2 carries the stripe unit after
// the fixed fields; the payload is Rows*M*Unit bytes.
func TestParityHeaderRotatedGolden(t *testing.T) {
	b, err := sampleRotated().Marshal()
	require.NoError(t, err)
	assert.Equal(t, int64(72+120+32+16), HeaderLen(3, 1))
	require.Len(t, b, int(HeaderLen(3, 1)))
	assert.Equal(t, uint32(2), binary.LittleEndian.Uint32(b[8:]), "version")
	assert.Equal(t, uint64(512), binary.LittleEndian.Uint64(b[64:]), "unit")
	path := filepath.Join("testdata", "header-k3-m1.golden")
	if *rewrite {
		require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, path, b))
	}
	want, err := vfd.ReadFile(vfd.Sec2{}, path)
	require.NoError(t, err)
	assert.Equal(t, want, b, "wire format changed")
	h, err := ParseParityHeader("p", b)
	require.NoError(t, err)
	assert.Equal(t, sampleRotated(), h)

	// 5000 bytes over 2 data segments of 512-byte units: 5 rows, 5*1*512
	// payload bytes.
	lay, err := h.Layout()
	require.NoError(t, err)
	require.Equal(t, int64(2560), lay.ParitySize())
	f := &memFile{b: append(make([]byte, 2560), b...)}
	got, err := ReadParityHeader(f, int64(len(f.b)), "p")
	require.NoError(t, err)
	assert.Equal(t, sampleRotated(), got)
	f.b = append(make([]byte, 5000), b...)
	_, err = ReadParityHeader(f, int64(len(f.b)), "p")
	require.ErrorIs(t, err, ErrBadHeader)
	assert.Contains(t, err.Error(), "header says 2560")

	mut := func(off int, v byte) []byte { c := bytes.Clone(b); c[off] ^= v; return c }
	for _, tc := range []struct {
		name string
		in   []byte
		off  int64
		msg  string
	}{
		{"version 1 with m < k", mut(8, 3), 16, "no longer supported"},
		{"unit zero", func() []byte { c := bytes.Clone(b); binary.LittleEndian.PutUint64(c[64:], 0); return c }(), 64, "stripe unit 0"},
		{"member index >= k", mut(20, 1), 20, "member index 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseParityHeader("p", tc.in)
			require.ErrorIs(t, err, ErrBadHeader)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.off, ce.Offset)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	v2full := sampleHeader()
	v2full.Unit = 512
	full, err := v2full.Marshal()
	require.NoError(t, err)
	binary.LittleEndian.PutUint32(full[8:], 2)
	_, err = ParseParityHeader("p", full)
	require.ErrorIs(t, err, ErrBadHeader)
	assert.Contains(t, err.Error(), "version 2 (rotated) with m=3 >= k=3")
	bad := sampleRotated()
	bad.Unit = 0
	_, err = bad.Marshal()
	require.ErrorIs(t, err, ErrBadShape)
}

func TestParityHeaderErrors(t *testing.T) {
	good, err := sampleHeader().Marshal()
	require.NoError(t, err)
	mut := func(off int, v byte) []byte { b := bytes.Clone(good); b[off] ^= v; return b }
	tests := []struct {
		name string
		in   []byte
		want error
		off  int64
	}{
		{"short", good[:10], ErrBadHeader, 10},
		{"magic", mut(0, 1), ErrBadHeader, 0},
		{"version", mut(8, 1), ErrBadHeader, 8},
		{"k zero", mut(12, 3), ErrBadHeader, 12},
		{"index >= m", mut(20, 2), ErrBadHeader, 20},
		{"truncated entries", good[:100], ErrBadHeader, 100},
		{"flipped size", mut(70, 1), ErrHashMismatch, 184},
		{"flipped header hash", mut(190, 1), ErrHashMismatch, 184},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseParityHeader("dir/parity", tc.in)
			require.ErrorIs(t, err, tc.want)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "dir/parity", ce.Path)
			assert.Equal(t, tc.off, ce.Offset)
		})
	}
	bad := sampleHeader()
	bad.Sizes[0] = 6000
	_, err = bad.Marshal()
	require.ErrorIs(t, err, ErrBadShape)

	f := &memFile{b: append(make([]byte, 4999), good...)}
	_, err = ReadParityHeader(f, int64(len(f.b)), "p")
	require.ErrorIs(t, err, ErrBadHeader)
	assert.Contains(t, err.Error(), "header says 5000")
	f.b = append(make([]byte, 5000), good...)
	h, err := ReadParityHeader(f, int64(len(f.b)), "p")
	require.NoError(t, err)
	assert.Equal(t, int64(5000), h.Padded)
	f.b[5000+70] ^= 1
	_, err = ReadParityHeader(f, int64(len(f.b)), "p")
	require.ErrorIs(t, err, ErrHashMismatch)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(5000+184), ce.Offset)
	for _, size := range []int{0, 10, 100} {
		_, err = ReadParityHeader(&memFile{b: make([]byte, size)}, int64(size), "p")
		require.ErrorIs(t, err, ErrBadHeader)
	}
}

func FuzzParseParityHeader(f *testing.F) {
	good, _ := sampleHeader().Marshal()
	f.Add(good)
	rot, _ := sampleRotated().Marshal()
	f.Add(rot)
	for _, name := range []string{"header-k3.golden", "header-k3-m1.golden"} {
		if b, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join("testdata", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add(good[:64])
	f.Add([]byte(ParityMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseParityHeader("fuzz", b)
		if err != nil {
			return
		}
		out, err := h.Marshal()
		require.NoError(t, err)
		require.Equal(t, b[:len(out)], out)
	})
}

func FuzzReadParityHeader(f *testing.F) {
	good, _ := sampleHeader().Marshal()
	f.Add(append(make([]byte, 5000), good...))
	f.Add(good)
	rot, _ := sampleRotated().Marshal()
	f.Add(append(make([]byte, 2560), rot...))
	f.Add([]byte(ParityMagic + ParityMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ReadParityHeader(&memFile{b: b}, int64(len(b)), "fuzz")
		if err != nil {
			return
		}
		lay, err := h.Layout()
		require.NoError(t, err)
		require.Equal(t, int64(len(b)), lay.ParitySize()+h.Len())
	})
}
