package partner

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// TestL2RestoreAndResendTogether: when node 1 is lost, the data file
// rank 1 restores from its copy and the copy it held, re-sent from rank
// 0's data file, arrive together (one two-way transfer): the copy's tmp
// file is created before the first byte of the restored data file is
// written. Done one after the other, the restore waits for a file that
// is only created after it, and the guard runs out.
func TestL2RestoreAndResendTogether(t *testing.T) {
	gd := &gateDriver{Driver: vfd.NewCore(), holdWrites: true, created: make(chan struct{})}
	cl := newCluster(t, gd, 4, 1, 4, func(int) int { return 5000 })
	cl.l2Protect(512)
	gd.held, gd.awaited = cl.dataPath(1)+TmpSuffix, cl.copyPath(1)+TmpSuffix
	for _, f := range []string{cl.dataPath(1), cl.copyPath(1)} {
		require.NoError(t, cl.d.Remove(f))
	}
	res := make([]L2Recovery, 4)
	errs := make([]error, 4)
	require.NoError(t, cl.run(func(c comm.Comm) error {
		res[c.Rank()], errs[c.Rank()] = RecoverPartner(c, cl.topo, Options{BlockSize: 512}, cl.own(c.Rank()), cl.held(c.Rank()))
		return nil
	}))
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	assert.False(t, gd.timedOut, "the restored data file was written before the re-sent copy was under way")
	assert.True(t, res[1].OwnRebuilt)
	assert.True(t, res[1].HeldRebuilt)
	cl.assertAllGood()
	assert.True(t, bytes.Equal(cl.data[0], cl.read(cl.copyPath(1))))
}

// TestL2ResendChecksAsSent: a data file its owner has not checked yet
// (as levels calls RecoverPartner) and that must be re-sent to the node
// that lost its copy is checked as it is read to be sent: every file is
// read once (rank 0's data file too, where it used to be read by its
// check and again to be sent), its format checker sees it once on each
// side, and into memory its image is the one the restart gets (placed
// for the page handover). Damaged, it is found there: its owner reports
// it unrecoverable (its copy is lost too), the receiver publishes no
// copy, and the restore of rank 1's data file is unaffected.
func TestL2ResendChecksAsSent(t *testing.T) {
	for _, withFormat := range []bool{false, true} {
		for _, image := range []bool{false, true} {
			for _, damaged := range []bool{false, true} {
				t.Run(fmt.Sprintf("format %v image %v damaged %v", withFormat, image, damaged), func(t *testing.T) {
					lg := vfd.NewLog(vfd.Sec2{}, nil)
					cl := newCluster(t, lg, 4, 1, 4, func(r int) int { return 6000 + 512*r })
					cl.l2Protect(512)
					x := &testFormat{}
					require.NoError(t, cl.d.RemoveAll(cl.nodeDir(1))) // rank 1's data file and its copy of rank 0
					require.NoError(t, cl.d.MkdirAll(cl.nodeDir(1), 0o755))
					if damaged {
						b := cl.read(cl.dataPath(0))
						b[3000] ^= 0x20
						require.NoError(t, vfd.WriteFileAtomic(cl.d, cl.dataPath(0), b))
					}
					o := Options{BlockSize: 512}
					if image {
						o.ImageLimit = 1 << 20
					}
					if withFormat {
						o.Format = x
					}
					errs := make([]error, 4)
					res := make([]L2Recovery, 4)
					read0 := lg.Stats().BytesRead
					require.NoError(t, cl.run(func(c comm.Comm) error {
						r := c.Rank()
						own, held := cl.own(r), cl.held(r)
						if withFormat {
							own = formatted(own, x, cl.data[r])
							held = formatted(held, x, cl.data[cl.topo.Left(r)])
						}
						res[r], errs[r] = RecoverPartner(c, cl.topo, o, own, held)
						return nil
					}))
					read := lg.Stats().BytesRead - read0
					// Each byte read once: data files of 0, 2, 3, the copy
					// on rank 2 (sent), the copies on 0 and 3 (checked).
					want := cl.sizes[0] + cl.sizes[2] + cl.sizes[3] + cl.sizes[1] + cl.sizes[3] + cl.sizes[2]
					assert.Equal(t, want, read, "bytes read")
					require.NoError(t, errs[2])
					require.NoError(t, errs[3])
					require.True(t, res[1].OwnRebuilt, "rank 1's data file restored")
					assert.Equal(t, cl.data[1], cl.read(cl.dataPath(1)))
					if damaged {
						require.ErrorIs(t, errs[0], ErrUnrecoverable)
						require.ErrorIs(t, errs[0], ErrHashMismatch)
						assert.Contains(t, errs[0].Error(), "rank 0: its data file")
						assert.Nil(t, res[0].OwnImage)
						require.ErrorIs(t, errs[1], ErrHashMismatch, "its sender's trailer says the bytes were bad")
						require.ErrorIs(t, errs[1], ErrUnrecoverable)
						assert.False(t, res[1].HeldRebuilt)
						for _, p := range []string{cl.copyPath(1), cl.copyPath(1) + TmpSuffix} {
							_, err := cl.d.Stat(p)
							assert.ErrorIs(t, err, fs.ErrNotExist, "%s not published", p)
						}
						return
					}
					for r := range 4 {
						require.NoError(t, errs[r], "rank %d", r)
					}
					require.True(t, res[1].HeldRebuilt)
					assert.Equal(t, cl.data[0], cl.read(cl.copyPath(1)))
					if withFormat {
						// Rank 0's data file as it was sent and as it
						// arrived, rank 1's as it arrived; by Check the
						// copies on 0 and 3, the data files of 2 and 3,
						// and rank 1's missing one (found missing, not
						// read): not rank 0's.
						assert.Equal(t, 2*cl.sizes[0]+cl.sizes[1], x.checked.Load())
						assert.Equal(t, int64(5), x.checks.Load())
					}
					if !image {
						assert.Nil(t, res[0].OwnImage)
						return
					}
					img := res[0].OwnImage
					require.Equal(t, cl.data[0], img, "rank 0's image")
					at := uintptr(unsafe.Pointer(&img[imageAlign]))
					assert.Zero(t, at%uintptr(os.Getpagesize()), "the image's byte %d starts a page", imageAlign)
				})
			}
		}
	}
}
