package vfd_test

import (
	"io"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

func TestSplitRoutesByMemType(t *testing.T) {
	meta, raw := vfd.NewCore(), vfd.NewCore()
	d := vfd.NewSplit(meta, "", raw, "")
	f, err := vfd.Create(d, "set")
	require.NoError(t, err)
	_, err = vfd.WriteAtType(f, vfd.MemSuper, []byte("SUPER"), 0)
	require.NoError(t, err)
	_, err = vfd.WriteAtType(f, vfd.MemDraw, []byte("rawdata"), 100)
	require.NoError(t, err)
	_, err = vfd.WriteAtType(f, vfd.MemOHdr, []byte("ohdr"), 50)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("dflt"), 200) // no hint: raw
	require.NoError(t, err)

	size, err := f.Size()
	require.NoError(t, err)
	assert.Equal(t, int64(204), size)

	tests := []struct {
		t    vfd.MemType
		off  int64
		n    int
		want string
	}{
		{vfd.MemSuper, 0, 5, "SUPER"},
		{vfd.MemBTree, 50, 4, "ohdr"},
		{vfd.MemDraw, 100, 7, "rawdata"},
		{vfd.MemDefault, 200, 4, "dflt"},
		{vfd.MemDraw, 0, 5, "\x00\x00\x00\x00\x00"},
		{vfd.MemSuper, 150, 10, "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}, // past the meta file, inside the space
	}
	for _, tt := range tests {
		buf := make([]byte, tt.n)
		n, err := vfd.ReadAtType(f, tt.t, buf, tt.off)
		require.NoError(t, err, "%v at %d", tt.t, tt.off)
		assert.Equal(t, tt.n, n)
		assert.Equal(t, tt.want, string(buf), "%v at %d", tt.t, tt.off)
	}
	buf := make([]byte, 10)
	n, err := vfd.ReadAtType(f, vfd.MemSuper, buf, 200)
	assert.Equal(t, 4, n, "zeros up to the end of the space, then EOF")
	assert.ErrorIs(t, err, io.EOF)
	require.NoError(t, f.Close())

	m := readAll(t, meta, "set-m.h5")
	assert.Len(t, m, 54)
	assert.Equal(t, "SUPER", string(m[:5]))
	assert.Equal(t, "ohdr", string(m[50:]))
	r := readAll(t, raw, "set-r.h5")
	assert.Len(t, r, 204)
	assert.Equal(t, make([]byte, 100), r[:100], "the raw file is sparse where metadata lives")
	assert.Equal(t, "rawdata", string(r[100:107]))

	info, err := d.Stat("set")
	require.NoError(t, err)
	assert.Equal(t, int64(204), info.Size())
	require.NoError(t, d.Rename("set", "moved"))
	assert.Equal(t, m, readAll(t, meta, "moved-m.h5"))
	require.NoError(t, d.Remove("moved"))
	assert.Equal(t, vfd.CoreUsage{}, meta.Usage())
	assert.Equal(t, vfd.CoreUsage{}, raw.Usage())
}

func TestSplitOpenFailureLeavesNoHalfFile(t *testing.T) {
	meta, raw := vfd.NewCore(), vfd.NewCore()
	require.NoError(t, vfd.WriteFileAtomic(raw, "x-r.h5", []byte("old raw")))
	_, err := vfd.Create(vfd.NewSplit(meta, "", raw, ""), "x")
	require.ErrorIs(t, err, fs.ErrExist)
	_, err = meta.Stat("x-m.h5")
	assert.ErrorIs(t, err, fs.ErrNotExist, "the meta file this open created is removed")
}
