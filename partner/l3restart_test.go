package partner

import (
	"errors"
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// TestL3RebuildStartsWriteback: the data and parity files an L3 rebuild
// writes (two nodes lost) start their writeback every piece as they are
// written, in order, before their one sync; the rebuilt files hold the
// checkpointed bytes and every member's files check out afterwards.
func TestL3RebuildStartsWriteback(t *testing.T) {
	log := &opLog{ops: map[string][]vfd.Op{}}
	d := vfd.NewFault(vfd.NewCore(), log)
	const size = 10*testPiece + 1234
	cl := newCluster(t, d, 4, 1, 4, func(r int) int { return size + 100*r })
	par := cl.l3Protect(0, testBlock)
	for _, r := range []int{1, 2} {
		require.NoError(t, cl.d.Remove(cl.dataPath(r)))
		require.NoError(t, cl.d.Remove(cl.parityPath(r)))
	}
	log.reset()
	errs := make([]error, 4)
	res := make([]L3Recovery, 4)
	o := Options{BlockSize: testBlock, dropPiece: testPiece}
	require.NoError(t, cl.run(func(c comm.Comm) error {
		r := c.Rank()
		p := par[r]
		pi := FileInfo{Ref: Ref{cl.d, cl.parityPath(r)}, Size: p.Size, Hash: p.Hash}
		res[r], errs[r] = RebuildGroup(c, cl.topo, o, shapes(4, 0, par)[r], cl.own(r), pi)
		return nil
	}))
	for r := range 4 {
		require.NoError(t, errs[r], "rank %d", r)
	}
	for _, r := range []int{1, 2} {
		require.True(t, res[r].DataRebuilt && res[r].ParityRebuilt, "rank %d: %+v", r, res[r])
		for _, f := range []struct {
			path string
			size int64
		}{{cl.dataPath(r), int64(len(cl.data[r]))}, {cl.parityPath(r), par[r].Size}} {
			ops := log.of(f.path + TmpSuffix)
			var hinted, written int64
			synced := false
			for i, op := range ops {
				switch op.Kind {
				case vfd.OpWrite:
					require.False(t, synced, "%s: op %d: a write after the sync", f.path, i)
					written = max(written, op.Off+int64(op.Len))
				case vfd.OpWriteback:
					require.False(t, synced, "%s: op %d: a hint after the sync", f.path, i)
					assert.Equal(t, hinted, op.Off, "%s: op %d: hints follow one another", f.path, i)
					assert.GreaterOrEqual(t, int64(op.Len), int64(testPiece), "%s: op %d", f.path, i)
					assert.Equal(t, written, op.Off+int64(op.Len), "%s: op %d: the hint covers what was written", f.path, i)
					hinted = op.Off + int64(op.Len)
				case vfd.OpSync:
					require.False(t, synced, "%s: one sync", f.path)
					synced = true
				}
			}
			assert.True(t, synced, "%s synced", f.path)
			assert.Greater(t, hinted, f.size-testPiece-testBlock, "%s: writeback started up to the last piece (%d of %d bytes)", f.path, hinted, f.size)
		}
		assert.Equal(t, cl.data[r], cl.read(cl.dataPath(r)), "rank %d's data", r)
	}
	cl.assertAllGood()
	assert.Equal(t, par[1].Size, int64(len(cl.read(cl.parityPath(1)))))
}

// TestImagesStartTheDataOnAPage: the images a restart keeps (a data file
// checked into memory, a data file rebuilt by L3) have the byte after
// the FTI-FF header at the start of a memory page, so that the restart
// can hand their pages over to the variables; the images hold the files.
func TestImagesStartTheDataOnAPage(t *testing.T) {
	require.Equal(t, int64(fileformat.HeaderSize), int64(imageAlign))
	ps := uintptr(os.Getpagesize())
	cl := newCluster(t, vfd.Sec2{}, 4, 1, 4, func(r int) int { return 9000 + 333*r })
	par := cl.l3Protect(0, 512)
	require.NoError(t, cl.d.Remove(cl.dataPath(1)))
	res := make([]L3Recovery, 4)
	errs := make([]error, 4)
	require.NoError(t, cl.run(func(c comm.Comm) error {
		r := c.Rank()
		p := par[r]
		pi := FileInfo{Ref: Ref{cl.d, cl.parityPath(r)}, Size: p.Size, Hash: p.Hash}
		res[r], errs[r] = RebuildGroup(c, cl.topo, Options{BlockSize: 512, ImageLimit: 1 << 20}, shapes(4, 0, par)[r], cl.own(r), pi)
		return nil
	}))
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, cl.data[1], res[1].DataImage)
	assert.Zero(t, uintptr(unsafe.Pointer(&res[1].DataImage[imageAlign]))%ps, "rebuilt image")
	own := cl.own(0)
	img, err := own.CheckImage(0, 512)
	require.NoError(t, err)
	require.Equal(t, cl.data[0], img)
	assert.Zero(t, uintptr(unsafe.Pointer(&img[imageAlign]))%ps, "checked image")
}
