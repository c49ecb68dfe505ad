package partner

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// TestL2RestoreInPlace: when node 1 is lost, the data file rank 1
// restores into memory is received where its image is kept, and rank 0
// re-sends its data file from its image as it is: no byte is copied
// between an image and a transfer block, except the last block when it
// is shorter than a whole one. The image is placed as a restart hands
// its pages over (the FTI-FF data after the header starts a page), holds
// the file's bytes, and both files are restored whole. A flipped byte in
// the copy that restores rank 1 still fails the restore, with no image.
func TestL2RestoreInPlace(t *testing.T) {
	const bs = 512
	for _, tc := range []struct {
		name    string
		size    int
		flipped bool
	}{{"whole blocks", 40 * bs, false}, {"short last block", 40*bs + 77, false}, {"flipped", 40 * bs, true}} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, vfd.NewCore(), 4, 1, 4, func(int) int { return tc.size })
			cl.l2Protect(bs)
			require.NoError(t, cl.d.RemoveAll(cl.nodeDir(1)))
			require.NoError(t, cl.d.MkdirAll(cl.nodeDir(1), 0o755))
			if tc.flipped {
				b := cl.read(cl.copyPath(2))
				b[4321] ^= 0x20
				require.NoError(t, vfd.WriteFileAtomic(cl.d, cl.copyPath(2), b))
			}
			var copied atomic.Int64
			o := Options{BlockSize: bs, ImageLimit: 1 << 20, copied: &copied}
			res := make([]L2Recovery, 4)
			errs := make([]error, 4)
			require.NoError(t, cl.run(func(c comm.Comm) error {
				r := c.Rank()
				own := cl.own(r)
				if r != 1 { // as levels does: checked into memory, sent from there
					own.Image, own.CheckErr = own.CheckImage(r, bs)
					own.Checked = true
				}
				res[r], errs[r] = RecoverPartner(c, cl.topo, o, own, cl.held(r))
				return nil
			}))
			assert.Equal(t, int64(tc.size%bs), copied.Load(), "bytes copied between an image and a block")
			if tc.flipped {
				require.ErrorIs(t, errs[1], ErrHashMismatch)
				assert.Nil(t, res[1].OwnImage)
				_, err := cl.d.Stat(cl.dataPath(1))
				assert.ErrorIs(t, err, fs.ErrNotExist, "nothing published")
				return
			}
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			img := res[1].OwnImage
			require.True(t, bytes.Equal(cl.data[1], img), "the image of the restored file")
			at := uintptr(unsafe.Pointer(&img[imageAlign]))
			assert.Zero(t, at%uintptr(os.Getpagesize()), "the image's byte %d starts a page", imageAlign)
			assert.True(t, res[1].HeldRebuilt)
			cl.assertAllGood()
			assert.True(t, bytes.Equal(cl.data[0], cl.read(cl.copyPath(1))), "the re-sent copy")
		})
	}
}

// TestSinkInPlaceBlocks: a sink receiving in place lends the whole
// blocks of its image and a pool block for a short last one, and takes
// back every block it lent, written or returned unused (as a stream does
// after a block of the wrong size), so that it ends with its pool blocks
// and never recycles a block of the image.
func TestSinkInPlaceBlocks(t *testing.T) {
	const bs = minPooled
	for _, tc := range []struct {
		size    int
		stopAt  int // offset of a block returned unused, ending the stream (-1: none)
		written int
	}{{10 * bs, -1, 10 * bs}, {10*bs + 13, -1, 10*bs + 13}, {bs / 2, -1, bs / 2}, {10 * bs, 4 * bs, 4 * bs}} {
		t.Run(fmt.Sprint(tc.size, tc.stopAt), func(t *testing.T) {
			d := vfd.NewCore()
			dir := t.TempDir()
			pool := &Buffers{}
			s, err := createSink(Ref{d, dir + "/f"}, bs, int64(tc.size), pool, 0)
			require.NoError(t, err)
			img := make([]byte, tc.size)
			s.receiveInPlace(img)
			want := make([]byte, tc.size)
			for i := range want {
				want[i] = byte(i*7 + 1)
			}
			for off := 0; off < tc.size; off += bs {
				b := s.buffer()
				require.Len(t, b, bs)
				assert.Equal(t, off+bs <= tc.size, s.lent(b), "block at %d lent from the image", off)
				if off == tc.stopAt {
					s.release(b)
					break
				}
				s.put(b[:copy(b, want[off:])])
			}
			_, got, err := s.finish()
			require.NoError(t, err)
			require.Equal(t, int64(tc.written), got)
			assert.Equal(t, want[:tc.written], img[:tc.written])
			f, err := vfd.ReadFile(d, dir+"/f")
			require.NoError(t, err)
			assert.Equal(t, want[:tc.written], f)
			assert.Len(t, pool.free[bs], min(3, (tc.size+bs-1)/bs), "the sink's pool blocks, back")
			for _, l := range pool.free {
				for _, b := range l {
					assert.False(t, &b[:cap(b)][cap(b)-1] == &img[len(img)-1], "a block of the image was recycled")
				}
			}
		})
	}
}
