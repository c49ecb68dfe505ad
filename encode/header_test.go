package encode

import (
	"bytes"
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
	assert.Len(t, b, int(HeaderLen(3)))
	assert.Equal(t, int64(64+120+32+16), HeaderLen(3))
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
	if b, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join("testdata", "header-k3.golden")); err == nil {
		f.Add(b)
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
	f.Add([]byte(ParityMagic + ParityMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ReadParityHeader(&memFile{b: b}, int64(len(b)), "fuzz")
		if err != nil {
			return
		}
		require.Equal(t, int64(len(b)), h.Padded+h.Len())
	})
}
