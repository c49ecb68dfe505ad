package fileformat

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZeroFrame checks the hand-built frame of n zero bytes at each edge
// of its header and block layout: zstd's decoder reads it as n zeros, it
// is shorter than n, its hash is the zero block's, and only it (at its
// own length) is recognised.
func TestZeroFrame(t *testing.T) {
	for _, n := range []int{zeroMin, 255, 256, 4096, 16384, 65791, 65792, 131072, 131073, 300000} {
		f := zeroFrame(n)
		require.Len(t, f, zeroFrameLen(n), "n=%d", n)
		require.Less(t, len(f), n)
		dst := bytes.Repeat([]byte{0xff}, n)
		require.NoError(t, decodeFrame(dst, f), "n=%d: zstd reads the frame", n)
		require.Equal(t, make([]byte, n), dst, "n=%d", n)
		assert.True(t, isZeroFrame(f, n))
		assert.False(t, isZeroFrame(f, n+1))
		assert.False(t, isZeroFrame(f, n-1))
		assert.Equal(t, BlockHash(make([]byte, n)), zeroFormOf(n).hash, "n=%d", n)
		bad := append([]byte(nil), f...)
		bad[len(bad)-1] = 1 // the RLE byte
		assert.False(t, isZeroFrame(bad, n))
		dst = bytes.Repeat([]byte{0xff}, n)
		z, err := decodeBlock(dst, bad)
		require.NoError(t, err)
		assert.False(t, z)
		assert.Equal(t, byte(1), dst[n-1], "decoded, not cleared")
	}
	assert.Nil(t, zeroOf(make([]byte, zeroMin-1)), "too short for the fast path")
	b := make([]byte, 1<<17)
	assert.NotNil(t, zeroOf(b))
	for _, at := range []int{0, 1, len(zeros) - 1, len(zeros), len(b) - 2, len(b) - 1} {
		b[at] = 1
		assert.Nil(t, zeroOf(b), "byte %d set", at)
		b[at] = 0
	}
}

// TestZeroBlocksFile writes a compressed variable with zero blocks among
// compressible and random ones, the last one a short zero block: zero
// blocks take the zero frame, every block hash is the hash of its bytes,
// and the file reads back, verifies and copies.
func TestZeroBlocksFile(t *testing.T) {
	const bs = 4096
	kinds := dataKinds(10*bs, 5)
	data := make([]byte, 9*bs+100)
	zero := map[int]bool{0: true, 3: true, 4: true, 9: true}
	for j := 0; j < 10; j++ {
		if zero[j] {
			continue
		}
		src := kinds["smooth"]
		if j%2 == 1 {
			src = kinds["random"]
		}
		copy(data[j*bs:min((j+1)*bs, len(data))], src[j*bs:])
	}
	vars := []Var{{ID: 1, Type: Float64, Data: data[:len(data)/8*8], Codec: CodecZstd}}
	data = vars[0].Data
	m := &memFile{name: "z.fti"}
	_, sum, err := Write(m, Meta{CkptID: 1}, vars, nil, WithBlockSize(bs), WithClock(fixedClock))
	require.NoError(t, err)
	want, err := HashBlocks(data, bs)
	require.NoError(t, err)
	require.Len(t, sum.Chunks, 1)
	c := sum.Chunks[0]
	assert.Equal(t, want, c.BlockHashes)
	for j := range c.Stored {
		n := int(blockLen(c.Size, bs, j))
		if zero[j] {
			assert.Equal(t, uint32(zeroFrameLen(n)), c.Stored[j], "block %d", j)
		} else {
			assert.NotEqual(t, uint32(zeroFrameLen(n)), c.Stored[j], "block %d", j)
		}
	}
	checkFile(t, m.b, vars)

	// A zero frame whose recorded hash is not the zero block's is hashed.
	zt, checked := zeroChecks(&c, bs)
	zt[0], zt[1] = true, true
	assert.True(t, checked(0))
	assert.False(t, checked(1), "block 1 is not zeros: its hash differs")
	c.BlockHashes[0][0] ^= 1
	assert.False(t, checked(0))

	// A damaged zero frame is caught at its block's offset.
	r, err := Open(&memFile{name: "z.fti", b: m.b})
	require.NoError(t, err)
	rc := r.chunk[0]
	soff := storedOffsets(&rc)
	bad := append([]byte(nil), m.b...)
	bad[rc.Fptr+soff[4]+soff[5]-soff[4]-1] = 7
	br, err := Open(&memFile{name: "bad.fti", b: bad})
	require.NoError(t, err)
	for _, check := range []func() error{br.Verify, func() error { return br.ReadVar(1, make([]byte, len(data))) }} {
		err := check()
		var ce *CorruptionError
		require.True(t, errors.As(err, &ce), "%v", err)
		assert.ErrorIs(t, err, ErrHashMismatch)
		assert.Equal(t, rc.Fptr+soff[4], ce.Offset)
	}
}
