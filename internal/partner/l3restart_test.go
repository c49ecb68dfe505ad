package partner

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
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

// TestL3RebuildDecodesIntoTheImage: a member that rebuilds its data file
// into an image (Options.ImageLimit) decodes the file's units straight
// into the image, which takes no copy of them: at most the piece that
// holds the file's end, cut short, is copied (m = k, where the rebuild
// writes in order). The rotated scheme, which keeps no image, still
// rebuilds the files right, and the images and rebuilt files hold the
// checkpointed bytes.
func TestL3RebuildDecodesIntoTheImage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		m     int
		lost  []int
		image bool
	}{
		{"m=k, nodes 1 and 2", 0, []int{1, 2}, true},
		{"m=k, node 3", 0, []int{3}, true},
		{"m=2, nodes 0 and 2", 2, []int{0, 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const bs = 512
			cl := newCluster(t, vfd.NewCore(), 4, 1, 4, func(r int) int { return 20*bs + 1234 + 333*r })
			par := cl.l3Protect(tc.m, bs)
			for _, r := range tc.lost {
				require.NoError(t, cl.d.Remove(cl.dataPath(r)))
				require.NoError(t, cl.d.Remove(cl.parityPath(r)))
			}
			copied := make([]atomic.Int64, 4)
			res := make([]L3Recovery, 4)
			errs := make([]error, 4)
			require.NoError(t, cl.run(func(c comm.Comm) error {
				r := c.Rank()
				p := par[r]
				pi := FileInfo{Ref: Ref{cl.d, cl.parityPath(r)}, Size: p.Size, Hash: p.Hash}
				o := Options{BlockSize: bs, ImageLimit: 1 << 20, imageCopied: &copied[r]}
				res[r], errs[r] = RebuildGroup(c, cl.topo, o, shapes(4, tc.m, par)[r], cl.own(r), pi)
				return nil
			}))
			require.NoError(t, errors.Join(errs...))
			for _, r := range tc.lost {
				require.True(t, res[r].DataRebuilt, "rank %d", r)
				if tc.image {
					require.Equal(t, cl.data[r], res[r].DataImage, "rank %d's image", r)
					assert.Less(t, copied[r].Load(), int64(bs), "rank %d: bytes copied into its image of %d", r, len(cl.data[r]))
				} else {
					assert.Nil(t, res[r].DataImage, "rank %d: written out of order, no image", r)
				}
				assert.Equal(t, cl.data[r], cl.read(cl.dataPath(r)), "rank %d's rebuilt file", r)
			}
			cl.assertAllGood()
		})
	}
}

// readLog counts, per path, the bytes read through a Fault driver.
type readLog struct {
	mu    sync.Mutex
	bytes map[string]int64
}

func (l *readLog) MaybeError(op vfd.Op) error {
	if op.Kind == vfd.OpRead {
		l.mu.Lock()
		l.bytes[op.Path] += int64(op.Len)
		l.mu.Unlock()
	}
	return nil
}

// TestL3RebuildReadsSurvivorsOnce: when two members lose their files (m =
// k), the surviving members send the same shards to both, and read them
// once: each survivor reads its data file and parity payload for the
// check and once more for the exchange, not once per member it sends to.
func TestL3RebuildReadsSurvivorsOnce(t *testing.T) {
	const bs = 512
	reads := &readLog{bytes: map[string]int64{}}
	cl := newCluster(t, vfd.NewFault(vfd.NewCore(), reads), 4, 1, 4, func(r int) int { return 20*bs + 1234 + 333*r })
	par := cl.l3Protect(0, bs)
	for _, r := range []int{1, 2} {
		require.NoError(t, cl.d.Remove(cl.dataPath(r)))
		require.NoError(t, cl.d.Remove(cl.parityPath(r)))
	}
	// What the check of each survivor's files reads (RebuildGroup checks
	// them the same way first).
	checked := map[string]int64{}
	for _, r := range []int{0, 3} {
		pi := FileInfo{Ref: Ref{cl.d, cl.parityPath(r)}, Size: par[r].Size, Hash: par[r].Hash}
		for _, f := range []FileInfo{cl.own(r), pi} {
			reads.mu.Lock()
			clear(reads.bytes)
			reads.mu.Unlock()
			require.NoError(t, f.Check(r, bs))
			checked[f.Path] = reads.bytes[f.Path]
			require.Positive(t, checked[f.Path])
		}
	}
	reads.mu.Lock()
	clear(reads.bytes)
	reads.mu.Unlock()
	errs := make([]error, 4)
	require.NoError(t, cl.run(func(c comm.Comm) error {
		r := c.Rank()
		p := par[r]
		pi := FileInfo{Ref: Ref{cl.d, cl.parityPath(r)}, Size: p.Size, Hash: p.Hash}
		_, errs[r] = RebuildGroup(c, cl.topo, Options{BlockSize: bs}, shapes(4, 0, par)[r], cl.own(r), pi)
		return nil
	}))
	require.NoError(t, errors.Join(errs...))
	padded := par[0].Header.Padded
	for _, r := range []int{0, 3} {
		// Each unit of the exchange is read once: the data file's bytes,
		// the parity payload (as long as the largest data file)
		assert.Equal(t, int64(len(cl.data[r])), reads.bytes[cl.dataPath(r)]-checked[cl.dataPath(r)], "rank %d's data file: read by the exchange", r)
		// (and its header, read again to decode it: a few hundred bytes)
		got := reads.bytes[cl.parityPath(r)] - checked[cl.parityPath(r)]
		assert.GreaterOrEqual(t, got, padded, "rank %d's parity file: read by the exchange", r)
		assert.Less(t, got, padded+padded/2, "rank %d's parity file: read by the exchange, once", r)
	}
	for _, r := range []int{1, 2} {
		assert.Equal(t, cl.data[r], cl.read(cl.dataPath(r)), "rank %d's rebuilt data", r)
	}
	cl.assertAllGood()
}
