package fileformat

import (
	"bytes"
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestMoveOut: a Reader of a verified in-memory image opened WithMoveOut
// restores each variable once, bit for bit, taking the image's pages
// (swapped with the destination's, which held zeros: the image reads as zeros there afterwards, so nothing was copied); a second
// read of the variable fails with ErrMovedOut and zeroes the
// destination, while the other variables are still restored. Without
// WithVerifiedData, or from a file that does not lend its bytes, the
// image is left as it was.
func TestMoveOut(t *testing.T) {
	big := Var{ID: 1, Name: "big", Type: Float64, Data: pattern(8*(600_000), 5)}
	small := Var{ID: 2, Name: "small", Type: Bytes, Data: pattern(3000, 6)}
	m := &memFile{name: "img.fti"}
	_, _, err := Write(m, Meta{CkptID: 1, Rank: 0}, []Var{big, small}, nil, WithClock(fixedClock))
	require.NoError(t, err)
	load := func() []byte {
		l := vfd.LoadAligned(&memFile{name: "img.fti", b: m.b}, int64(len(m.b)), 0, 0, HeaderSize)
		img, err := l.Bytes()
		require.NoError(t, err)
		require.NoError(t, l.Close())
		return img
	}
	// A destination as a large Go slice is: at the start of a page.
	dstFor := func(n int) []byte {
		ps := os.Getpagesize()
		raw := make([]byte, n+ps)
		off := (ps - int(uintptr(unsafe.Pointer(&raw[0]))%uintptr(ps))) % ps
		return raw[off : off+n]
	}

	img := load()
	r, err := Open(vfd.BytesFile("img.fti", img), WithVerifiedData(), WithMoveOut())
	require.NoError(t, err)
	c := r.Summary().Chunks[0]
	require.Equal(t, int32(1), c.VarID)
	dst := dstFor(len(big.Data))
	require.NoError(t, r.ReadVar(1, dst))
	assert.True(t, bytes.Equal(big.Data, dst), "big restored")
	assert.True(t, bytes.Equal(make([]byte, 1<<20), img[c.Fptr:c.Fptr+1<<20]), "the image's pages were taken over")
	again := dstFor(len(big.Data))
	again[0] = 1
	assert.ErrorIs(t, r.ReadVar(1, again), ErrMovedOut)
	assert.Zero(t, again[0], "the destination of a failed read is zeroed")
	assert.ErrorIs(t, r.ReadVarAt(1, make([]byte, 10), 8), ErrMovedOut)
	got := make([]byte, len(small.Data))
	require.NoError(t, r.ReadVar(2, got))
	assert.Equal(t, small.Data, got)

	for name, opts := range map[string][]Option{"unverified": {WithMoveOut()}, "verified only": {WithVerifiedData()}} {
		img := load()
		r, err := Open(vfd.BytesFile("img.fti", img), opts...)
		require.NoError(t, err, name)
		for range 2 {
			dst := dstFor(len(big.Data))
			require.NoError(t, r.ReadVar(1, dst), name)
			assert.True(t, bytes.Equal(big.Data, dst), name)
		}
		assert.Equal(t, m.b, img, "%s: the image is left as it was", name)
	}
	r, err = Open(&memFile{name: "img.fti", b: m.b}, WithVerifiedData(), WithMoveOut())
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, r.ReadVar(1, dstFor(len(big.Data))), "a file that does not lend its bytes")
	}
}
