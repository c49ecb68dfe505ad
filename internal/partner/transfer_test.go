package partner

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

// cluster lays simulated nodes out as directories node%04d under root.
type cluster struct {
	t     *testing.T
	d     vfd.Driver
	root  string
	topo  *Topology
	data  [][]byte
	sizes []int64
}

func newCluster(t *testing.T, d vfd.Driver, nranks, nodeSize, groupSize int, sizeOf func(r int) int) *cluster {
	topo, err := NewTopology(nranks, nodeSize, groupSize, nil)
	require.NoError(t, err)
	cl := &cluster{t: t, d: d, root: t.TempDir(), topo: topo}
	r := rand.New(rand.NewPCG(uint64(nranks), 9))
	for n := 0; n < topo.NumNodes(); n++ {
		require.NoError(t, d.MkdirAll(cl.nodeDir(n), 0o755))
	}
	for rank := 0; rank < nranks; rank++ {
		b := make([]byte, sizeOf(rank))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		cl.data = append(cl.data, b)
		cl.sizes = append(cl.sizes, int64(len(b)))
		require.NoError(t, vfd.WriteFileAtomic(d, cl.dataPath(rank), b))
	}
	return cl
}

func (cl *cluster) nodeDir(n int) string { return path.Join(cl.root, cl.topo.NodeDir(n)) }
func (cl *cluster) dataPath(r int) string {
	return path.Join(cl.nodeDir(cl.topo.NodeOf(r)), fmt.Sprintf("data-%06d", r))
}
func (cl *cluster) copyPath(holder int) string {
	return path.Join(cl.nodeDir(cl.topo.NodeOf(holder)), fmt.Sprintf("copy-%06d", cl.topo.Left(holder)))
}
func (cl *cluster) parityPath(r int) string {
	return path.Join(cl.nodeDir(cl.topo.NodeOf(r)), fmt.Sprintf("parity-%06d", r))
}

func (cl *cluster) own(r int) FileInfo {
	return FileInfo{Ref: Ref{cl.d, cl.dataPath(r)}, Size: cl.sizes[r], Hash: encode.Sum(cl.data[r])}
}

func (cl *cluster) held(r int) FileInfo {
	l := cl.topo.Left(r)
	return FileInfo{Ref: Ref{cl.d, cl.copyPath(r)}, Size: cl.sizes[l], Hash: encode.Sum(cl.data[l])}
}

func (cl *cluster) run(fn func(c comm.Comm) error) error {
	return comm.Run(cl.topo.NumRanks(), fn, comm.WithTimeout(20*time.Second))
}

func (cl *cluster) read(p string) []byte {
	b, err := vfd.ReadFile(cl.d, p)
	require.NoError(cl.t, err)
	return b
}

func (cl *cluster) corrupt(p string) {
	f, err := cl.d.Open(p, vfd.ReadWrite)
	require.NoError(cl.t, err)
	_, err = f.WriteAt([]byte("TextForCorruption"), 0)
	require.NoError(cl.t, err)
	require.NoError(cl.t, f.Close())
}

func (cl *cluster) l2Protect(bs int) {
	err := cl.run(func(c comm.Comm) error {
		r := c.Rank()
		cp, err := CopyToPartner(c, cl.topo, Options{BlockSize: bs}, cl.own(r), Ref{cl.d, cl.copyPath(r)})
		if err != nil {
			return err
		}
		l := cl.topo.Left(r)
		if cp.Of != l || cp.Size != cl.sizes[l] || cp.Hash != encode.Sum(cl.data[l]) {
			return fmt.Errorf("rank %d: copy %+v", r, cp)
		}
		return nil
	})
	require.NoError(cl.t, err)
	for r := range cl.data {
		require.True(cl.t, bytes.Equal(cl.data[cl.topo.Left(r)], cl.read(cl.copyPath(r))), "copy held by %d", r)
	}
}

// l2Recover runs RecoverPartner on every rank and returns each rank's error.
func (cl *cluster) l2Recover(bs int) []error {
	errs := make([]error, cl.topo.NumRanks())
	err := cl.run(func(c comm.Comm) error {
		_, errs[c.Rank()] = RecoverPartner(c, cl.topo, Options{BlockSize: bs}, cl.own(c.Rank()), cl.held(c.Rank()))
		return nil
	})
	require.NoError(cl.t, err)
	return errs
}

// parities reads the parity file of every rank in par.
func (cl *cluster) parities(par map[int]Parity) map[int][]byte {
	out := map[int][]byte{}
	for r := range par {
		out[r] = cl.read(cl.parityPath(r))
	}
	return out
}

// assertRebuilt checks that no rank failed, that every data file holds
// its bytes and every parity file in want its former bytes.
func (cl *cluster) assertRebuilt(errs []error, want map[int][]byte) {
	for r, err := range errs {
		require.NoError(cl.t, err, "rank %d", r)
	}
	cl.assertAllGood()
	for r, b := range want {
		assert.True(cl.t, bytes.Equal(b, cl.read(cl.parityPath(r))), "parity of %d rebuilt", r)
	}
}

func (cl *cluster) assertAllGood() {
	for r := range cl.data {
		assert.True(cl.t, bytes.Equal(cl.data[r], cl.read(cl.dataPath(r))), "data of rank %d bit for bit", r)
	}
}

func TestCopyToPartnerSizes(t *testing.T) {
	tests := []struct {
		name                 string
		nranks, nsize, gsize int
		bs                   int
		size                 func(r int) int
	}{
		{"16 on 4 nodes, 1 group", 16, 4, 4, 1000, func(r int) int { return 5000 + 37*r }},
		{"8 on 8 nodes, 2 groups", 8, 1, 4, 64, func(r int) int { return (r % 3) * 300 }},
		{"empty files", 4, 1, 2, 16, func(int) int { return 0 }},
		{"block larger than files", 4, 1, 4, 1 << 16, func(r int) int { return r + 1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, vfd.Sec2{}, tc.nranks, tc.nsize, tc.gsize, tc.size)
			cl.l2Protect(tc.bs)
		})
	}
}

func TestL2Disruption(t *testing.T) {
	type layout struct {
		name                 string
		nranks, nsize, gsize int
	}
	layouts := []layout{{"16r-4n-1g", 16, 4, 4}, {"8r-8n-2g", 8, 1, 4}}
	tests := []struct {
		name    string
		disrupt func(cl *cluster)
		ok      bool
	}{
		{"nothing", func(*cluster) {}, true},
		{"erase data files on non-consecutive nodes", func(cl *cluster) {
			for _, n := range []int{0, 2} {
				for _, r := range cl.topo.NodeRanks(n) {
					require.NoError(t, cl.d.Remove(cl.dataPath(r)))
				}
			}
		}, true},
		{"corrupt data files on non-consecutive nodes", func(cl *cluster) {
			for _, n := range []int{0, 2} {
				for _, r := range cl.topo.NodeRanks(n) {
					cl.corrupt(cl.dataPath(r))
				}
			}
		}, true},
		{"erase partner files on non-consecutive nodes", func(cl *cluster) {
			for _, n := range []int{0, 2} {
				for _, r := range cl.topo.NodeRanks(n) {
					require.NoError(t, cl.d.Remove(cl.copyPath(r)))
				}
			}
		}, true},
		{"corrupt partner files everywhere", func(cl *cluster) {
			for r := range cl.data {
				cl.corrupt(cl.copyPath(r))
			}
		}, true},
		{"erase node dirs of non-consecutive nodes", func(cl *cluster) {
			for _, n := range []int{0, 2} {
				require.NoError(t, cl.d.RemoveAll(cl.nodeDir(n)))
				require.NoError(t, cl.d.MkdirAll(cl.nodeDir(n), 0o755))
			}
		}, true},
		{"erase node dirs of consecutive nodes", func(cl *cluster) {
			for _, n := range []int{0, 1} {
				require.NoError(t, cl.d.RemoveAll(cl.nodeDir(n)))
				require.NoError(t, cl.d.MkdirAll(cl.nodeDir(n), 0o755))
			}
		}, false},
		{"data and its copy corrupted", func(cl *cluster) {
			cl.corrupt(cl.dataPath(0))
			cl.corrupt(cl.copyPath(cl.topo.Right(0)))
		}, false},
	}
	for _, lay := range layouts {
		for _, tc := range tests {
			t.Run(lay.name+"/"+tc.name, func(t *testing.T) {
				cl := newCluster(t, vfd.Sec2{}, lay.nranks, lay.nsize, lay.gsize, func(r int) int { return 3000 + 101*r })
				cl.l2Protect(512)
				tc.disrupt(cl)
				errs := cl.l2Recover(512)
				if tc.ok {
					for r, err := range errs {
						require.NoError(t, err, "rank %d", r)
					}
					cl.assertAllGood()
					for r := range cl.data {
						assert.True(t, bytes.Equal(cl.data[cl.topo.Left(r)], cl.read(cl.copyPath(r))), "copy held by %d rebuilt", r)
					}
					return
				}
				failed := 0
				for _, err := range errs {
					if err != nil {
						failed++
						require.ErrorIs(t, err, ErrUnrecoverable)
						assert.Contains(t, err.Error(), "are both lost")
					}
				}
				assert.Positive(t, failed)
			})
		}
	}
}

// TestCopyFaultMidTransfer injects a write error into one rank's partner
// copy: that rank fails, the others still return (no hang).
func TestCopyFaultMidTransfer(t *testing.T) {
	cl := newCluster(t, vfd.Sec2{}, 8, 2, 2, func(r int) int { return 4096 })
	fault := vfd.NewFault(vfd.Sec2{}, vfd.OnNth(vfd.OpWrite, 2, nil))
	errs := make([]error, 8)
	err := cl.run(func(c comm.Comm) error {
		r := c.Rank()
		d := vfd.Driver(cl.d)
		if r == 3 {
			d = fault
		}
		_, errs[r] = CopyToPartner(c, cl.topo, Options{BlockSize: 512}, cl.own(r), Ref{d, cl.copyPath(r)})
		return nil
	})
	require.NoError(t, err)
	for r, e := range errs {
		if r == 3 {
			require.ErrorIs(t, e, vfd.ErrInjected)
			_, serr := cl.d.Stat(cl.copyPath(r))
			assert.Error(t, serr, "failed copy removed")
		} else {
			assert.NoError(t, e, "rank %d", r)
		}
	}
	// a corrupted source is refused before it reaches the partner
	cl.corrupt(cl.dataPath(5))
	err = cl.run(func(c comm.Comm) error {
		r := c.Rank()
		_, errs[r] = CopyToPartner(c, cl.topo, Options{BlockSize: 512}, cl.own(r), Ref{cl.d, cl.copyPath(r)})
		return nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, errs[5], ErrHashMismatch)
	require.ErrorIs(t, errs[cl.topo.Right(5)], ErrHashMismatch)
	assert.Contains(t, errs[cl.topo.Right(5)].Error(), "reported a bad source")
}

// l3Protect encodes every group and records the parity files' size and hash.
func (cl *cluster) l3Protect(m, bs int) map[int]Parity {
	got := make([]Parity, cl.topo.NumRanks())
	err := cl.run(func(c comm.Comm) error {
		p, err := EncodeGroup(c, cl.topo, Options{BlockSize: bs}, m, cl.own(c.Rank()), Ref{cl.d, cl.parityPath(c.Rank())})
		got[c.Rank()] = p
		return err
	})
	require.NoError(cl.t, err)
	out := map[int]Parity{}
	for r, p := range got {
		out[r] = p
		b := cl.read(cl.parityPath(r))
		require.Equal(cl.t, p.Size, int64(len(b)))
		require.Equal(cl.t, p.Hash, encode.Sum(b))
	}
	return out
}

// shapes are the shapes recorded for every rank's parity.
func shapes(n, m int, par map[int]Parity) []Shape {
	out := make([]Shape, n)
	for r := range out {
		out[r] = Shape{M: m}
		if p, ok := par[r]; ok {
			out[r].Unit = p.Header.Unit
		}
	}
	return out
}

func (cl *cluster) l3Recover(m, bs int, par map[int]Parity) ([]L3Recovery, []error) {
	errs := make([]error, cl.topo.NumRanks())
	res := make([]L3Recovery, cl.topo.NumRanks())
	err := cl.run(func(c comm.Comm) error {
		r := c.Rank()
		pi := FileInfo{}
		if p, ok := par[r]; ok {
			pi = FileInfo{Ref: Ref{cl.d, cl.parityPath(r)}, Size: p.Size, Hash: p.Hash}
		}
		res[r], errs[r] = RebuildGroup(c, cl.topo, Options{BlockSize: bs}, shapes(len(res), m, par)[r], cl.own(r), pi)
		return nil
	})
	require.NoError(cl.t, err)
	return res, errs
}

// TestL3ParityMatchesCentral checks the distributed parity of every member
// against the central encoding of the same group (encode.Layout.EncodeFiles),
// for FTI's full scheme (m = 0, i.e. k) and rotated schemes (m < k), with
// files of different sizes and units that do and do not divide them.
func TestL3ParityMatchesCentral(t *testing.T) {
	for _, tc := range []struct{ m, bs int }{{0, 300}, {4, 4096}, {1, 300}, {2, 300}, {3, 256}, {2, 1 << 20}} {
		t.Run(fmt.Sprintf("m%d-bs%d", tc.m, tc.bs), func(t *testing.T) {
			cl := newCluster(t, vfd.Sec2{}, 4, 1, 4, func(r int) int { return 1000*r + 7 })
			par := cl.l3Protect(tc.m, tc.bs)
			require.Len(t, par, 4, "every member holds parity")
			mm := ParityCount(4, tc.m)
			padded := encode.PaddedSize(cl.sizes)
			lay, err := encode.NewLayout(4, mm, padded, stripeUnit(4, mm, padded, tc.bs))
			require.NoError(t, err)
			want, err := lay.EncodeFiles(cl.data)
			require.NoError(t, err)
			for r := range 4 {
				b := cl.read(cl.parityPath(r))
				size := lay.ParitySize()
				require.Equal(t, size+encode.HeaderLen(4, mm), int64(len(b)), "parity file of %d", r)
				assert.True(t, bytes.Equal(want[r], b[:size]), "parity of member %d", r)
				h, err := encode.ParseParityHeader("p", b[size:])
				require.NoError(t, err)
				assert.Equal(t, cl.sizes, h.Sizes)
				assert.Equal(t, r, h.Index)
				assert.Equal(t, encode.Sum(want[r]), h.Payload)
				if mm < 4 {
					assert.Equal(t, lay.Unit, h.Unit)
					// overhead m/(k-m), plus less than one row of units
					ideal := float64(padded) * float64(mm) / float64(4-mm)
					assert.InDelta(t, ideal, float64(size), float64(mm*lay.Unit), "parity size of %d", r)
				} else {
					assert.Equal(t, padded, size)
				}
			}
		})
	}
}

// TestL3EveryLossPattern: for a group of k=4 with m=4 (FTI), m=2 and m=1
// (rotated), every pattern of lost or corrupted files (data and parity) is
// rebuilt bit for bit when the layout tolerates it and refused on every
// member with nothing written when it does not. In the rotated schemes
// every loss of m whole members is tolerated and no loss of m+1 is; in
// the full scheme every loss of m files is tolerated and no loss of m+1.
func TestL3EveryLossPattern(t *testing.T) {
	if testing.Short() {
		t.Skip("many in-process worlds")
	}
	for _, m := range []int{4, 2, 1} {
		t.Run(fmt.Sprintf("m%d", m), func(t *testing.T) {
			cl := newCluster(t, vfd.NewCore(), 4, 1, 4, func(r int) int { return 700 + 300*r })
			par := cl.l3Protect(m, 128)
			lay, err := encode.NewLayout(4, m, encode.PaddedSize(cl.sizes), max(par[0].Header.Unit, 128))
			require.NoError(t, err)
			orig := map[string][]byte{}
			files := []string{} // data of member i at 2i, parity at 2i+1
			for r := 0; r < 4; r++ {
				files = append(files, cl.dataPath(r), cl.parityPath(r))
			}
			for _, f := range files {
				orig[f] = cl.read(f)
			}
			tested := map[bool]int{}
			for mask := 1; mask < 1<<len(files); mask++ {
				dmg := encode.Damage{Data: make([]bool, 4), Parity: make([]bool, 4)}
				n := 0
				for i, f := range files {
					if mask&(1<<i) == 0 {
						continue
					}
					n++
					if i%2 == 0 {
						dmg.Data[i/2] = true
					} else {
						dmg.Parity[i/2] = true
					}
					if n%2 == 0 {
						require.NoError(t, cl.d.Remove(f))
					} else {
						cl.corrupt(f)
					}
				}
				_, cerr := lay.Check(dmg)
				ok := cerr == nil
				if m == 4 {
					require.Equal(t, n <= m, ok, "full scheme: any %d files", m)
				}
				if wholeMembers := mask&0x55 == (mask&0xaa)>>1; wholeMembers && m < 4 {
					require.Equal(t, n/2 <= m, ok, "rotated: any %d members, mask %b", m, mask)
				}
				tested[ok]++
				_, errs := cl.l3Recover(m, 128, par)
				for r, err := range errs {
					if ok {
						require.NoError(t, err, "m=%d mask %b rank %d", m, mask, r)
					} else {
						require.ErrorIs(t, err, ErrUnrecoverable, "m=%d mask %b rank %d", m, mask, r)
						require.Equal(t, errs[0].Error(), err.Error())
					}
				}
				for _, f := range files {
					if ok {
						require.True(t, bytes.Equal(orig[f], cl.read(f)), "m=%d mask %b: %s rebuilt", m, mask, f)
					}
					require.NoError(t, vfd.WriteFileAtomic(cl.d, f, orig[f]))
				}
			}
			assert.Positive(t, tested[true])
			assert.Positive(t, tested[false])
			t.Logf("m=%d: %d patterns rebuilt, %d refused", m, tested[true], tested[false])
		})
	}
}

func TestL3Disruption(t *testing.T) {
	type layout struct {
		name                 string
		nranks, nsize, gsize int
	}
	layouts := []layout{{"16r-4n-1g", 16, 4, 4}, {"8r-8n-2g", 8, 1, 4}}
	eraseNodes := func(nodes ...int) func(cl *cluster) {
		return func(cl *cluster) {
			for _, n := range nodes {
				require.NoError(t, cl.d.RemoveAll(cl.nodeDir(n)))
				require.NoError(t, cl.d.MkdirAll(cl.nodeDir(n), 0o755))
			}
		}
	}
	tests := []struct {
		name    string
		disrupt func(cl *cluster)
		ok      bool
	}{
		{"erase data on non-consecutive nodes", func(cl *cluster) {
			for _, n := range []int{0, 2} {
				for _, r := range cl.topo.NodeRanks(n) {
					require.NoError(t, cl.d.Remove(cl.dataPath(r)))
				}
			}
		}, true},
		{"corrupt every data file", func(cl *cluster) {
			for r := range cl.data {
				cl.corrupt(cl.dataPath(r))
			}
		}, true},
		{"corrupt parity on non-consecutive nodes", func(cl *cluster) {
			for _, n := range []int{0, 2} {
				for _, r := range cl.topo.NodeRanks(n) {
					cl.corrupt(cl.parityPath(r))
				}
			}
		}, true},
		{"erase node dirs of consecutive nodes", eraseNodes(0, 1), true},
		{"erase node dirs of non-consecutive nodes", eraseNodes(0, 2), true},
		{"erase three node dirs", eraseNodes(0, 1, 2), false},
	}
	for _, lay := range layouts {
		for _, tc := range tests {
			t.Run(lay.name+"/"+tc.name, func(t *testing.T) {
				cl := newCluster(t, vfd.Sec2{}, lay.nranks, lay.nsize, lay.gsize, func(r int) int { return 2000 + 333*r })
				par := cl.l3Protect(0, 512)
				want := cl.parities(par)
				tc.disrupt(cl)
				_, errs := cl.l3Recover(0, 512, par)
				if tc.ok {
					cl.assertRebuilt(errs, want)
					return
				}
				for _, err := range errs {
					if err != nil {
						require.ErrorIs(t, err, ErrUnrecoverable)
						assert.Contains(t, err.Error(), "data of ranks")
					}
				}
				require.Error(t, errs[0])
			})
		}
	}
}

func TestOfflineRebuild(t *testing.T) {
	eraseNodes := func(cl *cluster, nodes ...int) {
		for _, n := range nodes {
			require.NoError(t, cl.d.RemoveAll(cl.nodeDir(n)))
		}
	}
	t.Run("L2", func(t *testing.T) {
		cl := newCluster(t, vfd.NewCore(), 16, 4, 4, func(r int) int { return 1000 + 17*r })
		cl.l2Protect(256)
		eraseNodes(cl, 0)
		cl.corrupt(cl.copyPath(10))
		own, held := make([]FileInfo, 16), make([]FileInfo, 16)
		for r := range 16 {
			own[r], held[r] = cl.own(r), cl.held(r)
		}
		res, err := RebuildL2Offline(cl.topo, Options{BlockSize: 256}, own, held)
		require.NoError(t, err)
		assert.Len(t, res.Paths, 9) // 4 data + 4 copies on the erased node, 1 corrupted copy
		cl.assertAllGood()
		for r := range cl.data {
			assert.True(t, bytes.Equal(cl.data[cl.topo.Left(r)], cl.read(cl.copyPath(r))))
		}
		eraseNodes(cl, 1, 2)
		_, err = RebuildL2Offline(cl.topo, Options{BlockSize: 256}, own, held)
		require.ErrorIs(t, err, ErrUnrecoverable)
		assert.Contains(t, err.Error(), "rank 4: data file")
	})
	t.Run("L3", func(t *testing.T) {
		cl := newCluster(t, vfd.NewCore(), 8, 1, 4, func(r int) int { return 1000 + 17*r })
		par := cl.l3Protect(0, 256)
		want := map[int][]byte{}
		for r := range par {
			want[r] = cl.read(cl.parityPath(r))
		}
		data, parity := make([]FileInfo, 8), make([]FileInfo, 8)
		for r := range 8 {
			data[r] = cl.own(r)
			if p, ok := par[r]; ok {
				parity[r] = FileInfo{Ref: Ref{cl.d, cl.parityPath(r)}, Size: p.Size, Hash: p.Hash}
			}
		}
		eraseNodes(cl, 0, 1, 6)
		cl.corrupt(cl.dataPath(7))
		res, err := RebuildL3Offline(cl.topo, Options{BlockSize: 256}, shapes(8, 0, par), data, parity)
		require.NoError(t, err)
		assert.Len(t, res.Paths, 7)
		cl.assertAllGood()
		for r, b := range want {
			assert.True(t, bytes.Equal(b, cl.read(cl.parityPath(r))), "parity %d", r)
		}
		eraseNodes(cl, 4, 5, 6)
		_, err = RebuildL3Offline(cl.topo, Options{BlockSize: 256}, shapes(8, 0, par), data, parity)
		require.ErrorIs(t, err, ErrUnrecoverable)
		assert.Contains(t, err.Error(), "group 1 lost 6 of its 8 files")
		assert.Contains(t, err.Error(), "data of ranks [4 5 6]")
	})
}

// TestSkipSourceHashStillCatchesBadSource: without the sender's hash pass,
// the receiver's check against the recorded hash rejects a damaged source.
func TestSkipSourceHashStillCatchesBadSource(t *testing.T) {
	cl := newCluster(t, vfd.NewCore(), 4, 1, 4, func(r int) int { return 2048 })
	cl.corrupt(cl.dataPath(1))
	errs := make([]error, 4)
	require.NoError(t, cl.run(func(c comm.Comm) error {
		r := c.Rank()
		_, errs[r] = CopyToPartner(c, cl.topo, Options{BlockSize: 512, SkipSourceHash: true, Buffers: &Buffers{}}, cl.own(r), Ref{cl.d, cl.copyPath(r)})
		return nil
	}))
	require.NoError(t, errs[1], "the sender did not hash")
	require.ErrorIs(t, errs[2], ErrHashMismatch)
	assert.Contains(t, errs[2].Error(), "after receiving")
	_, err := cl.d.Stat(cl.copyPath(2))
	require.Error(t, err, "rejected copy removed")
	for _, r := range []int{0, 3} {
		require.NoError(t, errs[r])
	}
}

// TestL3RotatedDisruption: whole-node losses with rotated parity (m < k):
// any m nodes of a group are rebuilt bit for bit, data and parity, and
// m+1 nodes of one group are refused naming the stripe and the ranks;
// the offline rebuild does the same from one process.
func TestL3RotatedDisruption(t *testing.T) {
	tests := []struct {
		name                 string
		nranks, nsize, gsize int
		m                    int
		erase                []int
		ok                   bool
		bs                   int
	}{
		{"8r-8n-2g/m1/one node", 8, 1, 4, 1, []int{2}, true, 0},
		{"8r-8n-2g/m1/one node per group", 8, 1, 4, 1, []int{0, 5}, true, 0},
		{"8r-8n-2g/m1/two nodes of a group", 8, 1, 4, 1, []int{4, 6}, false, 0},
		{"8r-8n-2g/m2/two adjacent nodes", 8, 1, 4, 2, []int{0, 1}, true, 0},
		{"8r-8n-2g/m2/two nodes per group", 8, 1, 4, 2, []int{0, 3, 5, 6}, true, 0},
		{"8r-8n-2g/m2/three nodes of a group", 8, 1, 4, 2, []int{4, 5, 7}, false, 0},
		{"16r-4n-1g/m1/one node", 16, 4, 4, 1, []int{3}, true, 0},
		{"16r-4n-1g/m3/three nodes", 16, 4, 4, 3, []int{0, 1, 3}, true, 0},
		{"16r-4n-1g/m2/three nodes", 16, 4, 4, 2, []int{0, 1, 3}, false, 0},
	}
	type run struct {
		offline bool
		bs      int
	}
	for _, tc := range tests {
		// bs 256: every group's unit is 256; bs 1 MiB: the unit is a data
		// segment's length, which differs between groups.
		for _, rn := range []run{{false, 256}, {true, 256}, {false, 1 << 20}, {true, 1 << 20}} {
			name := fmt.Sprintf("%s/bs%d", tc.name, rn.bs)
			if rn.offline {
				name += "/offline"
			}
			t.Run(name, func(t *testing.T) {
				tc, offline := tc, rn.offline
				tc.bs = rn.bs
				cl := newCluster(t, vfd.NewCore(), tc.nranks, tc.nsize, tc.gsize, func(r int) int { return 900 + 211*r })
				par := cl.l3Protect(tc.m, tc.bs)
				want := cl.parities(par)
				for _, n := range tc.erase {
					require.NoError(t, cl.d.RemoveAll(cl.nodeDir(n)))
				}
				var errs []error
				if offline {
					data, parity := make([]FileInfo, tc.nranks), make([]FileInfo, tc.nranks)
					for r := range tc.nranks {
						data[r] = cl.own(r)
						parity[r] = FileInfo{Ref: Ref{cl.d, cl.parityPath(r)}, Size: par[r].Size, Hash: par[r].Hash}
					}
					res, err := RebuildL3Offline(cl.topo, Options{BlockSize: tc.bs}, shapes(tc.nranks, tc.m, par), data, parity)
					errs = []error{err}
					if tc.ok {
						assert.Len(t, res.Paths, 2*len(tc.erase)*tc.nsize, "data and parity of every erased rank")
					}
				} else {
					_, errs = cl.l3Recover(tc.m, tc.bs, par)
				}
				if tc.ok {
					cl.assertRebuilt(errs, want)
					return
				}
				for _, err := range errs {
					if err != nil {
						require.ErrorIs(t, err, ErrUnrecoverable)
						assert.Contains(t, err.Error(), fmt.Sprintf("at most %d may be lost (any %d of the 4 members)", tc.m, tc.m))
						assert.Contains(t, err.Error(), "data of ranks")
					}
				}
				require.Error(t, errs[len(errs)-1])
				t.Log(errs[len(errs)-1])
			})
		}
	}
}

// TestHashUnknown: a checkpoint transfer given a data file whose hash is
// not known yet computes it while reading (L2: Copy.Sent; L3: Parity.Data
// and the parity header), the receivers check against it, and a rebuild
// with those hashes recorded restores the files bit for bit.
func TestHashUnknown(t *testing.T) {
	cl := newCluster(t, vfd.NewCore(), 8, 1, 4, func(r int) int { return 1500 + 97*r })
	unknown := func(r int) FileInfo {
		f := cl.own(r)
		f.Hash, f.HashUnknown = encode.Hash{}, true
		return f
	}
	t.Run("L2", func(t *testing.T) {
		copies := make([]Copy, 8)
		require.NoError(t, cl.run(func(c comm.Comm) error {
			var err error
			copies[c.Rank()], err = CopyToPartner(c, cl.topo, Options{BlockSize: 256}, unknown(c.Rank()), Ref{cl.d, cl.copyPath(c.Rank())})
			return err
		}))
		for r, cp := range copies {
			assert.Equal(t, encode.Sum(cl.data[r]), cp.Sent, "hash learnt by rank %d", r)
			assert.Equal(t, encode.Sum(cl.data[cp.Of]), cp.Hash)
			assert.True(t, bytes.Equal(cl.data[cp.Of], cl.read(cl.copyPath(r))))
		}
	})
	t.Run("L3", func(t *testing.T) {
		for _, m := range []int{0, 1} {
			got := make([]Parity, 8)
			require.NoError(t, cl.run(func(c comm.Comm) error {
				var err error
				got[c.Rank()], err = EncodeGroup(c, cl.topo, Options{BlockSize: 256}, m, unknown(c.Rank()), Ref{cl.d, cl.parityPath(c.Rank())})
				return err
			}))
			par := map[int]Parity{}
			for r, p := range got {
				assert.Equal(t, encode.Sum(cl.data[r]), p.Data, "rank %d", r)
				members := cl.topo.GroupMembers(cl.topo.GroupOf(r))
				for i, x := range members {
					assert.Equal(t, encode.Sum(cl.data[x]), p.Header.Hashes[i], "header of %d lists the hash of %d", r, x)
				}
				b := cl.read(cl.parityPath(r))
				p.Size, p.Hash = int64(len(b)), encode.Sum(b)
				par[r] = p
			}
			for _, n := range []int{1, 6} {
				require.NoError(t, cl.d.RemoveAll(cl.nodeDir(n)))
			}
			_, errs := cl.l3Recover(m, 256, par)
			for r, err := range errs {
				require.NoError(t, err, "m=%d rank %d", m, r)
			}
			cl.assertAllGood()
		}
	})
}

// TestL3RandomShapes: groups of 2 to 8 members with any parity count,
// files of random sizes (empty ones, one group all empty) and random block
// sizes: the distributed parity equals the central encoding, and a random
// tolerated loss of whole members is rebuilt bit for bit.
func TestL3RandomShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 24 {
		k := []int{2, 3, 5, 8}[trial%4]
		m := 1 + rng.IntN(k)
		bs := 1 + rng.IntN(700)
		sizes := make([]int, k)
		for i := range sizes {
			if trial != 5 && rng.IntN(4) > 0 {
				sizes[i] = rng.IntN(3000)
			}
		}
		t.Run(fmt.Sprintf("k%d-m%d-bs%d-%v", k, m, bs, sizes), func(t *testing.T) {
			cl := newCluster(t, vfd.NewCore(), k, 1, k, func(r int) int { return sizes[r] })
			par := cl.l3Protect(m, bs)
			padded := encode.PaddedSize(cl.sizes)
			lay, err := encode.NewLayout(k, m, padded, stripeUnit(k, m, padded, bs))
			require.NoError(t, err)
			want, err := lay.EncodeFiles(cl.data)
			require.NoError(t, err)
			for r := range k {
				assert.True(t, bytes.Equal(want[r], cl.read(cl.parityPath(r))[:lay.ParitySize()]), "parity of %d", r)
			}
			tol := m
			if m == k {
				tol = k / 2
			}
			if tol == 0 {
				return
			}
			lost := rng.Perm(k)[:1+rng.IntN(tol)]
			before := cl.parities(par)
			for _, n := range lost {
				require.NoError(t, cl.d.RemoveAll(cl.nodeDir(n)))
			}
			_, errs := cl.l3Recover(m, bs, par)
			cl.assertRebuilt(errs, before)
		})
	}
}

// TestL3RebuildChecksRecordedHashes: a rebuilt file that does not match
// the size and hash recorded for it (here: a wrong record) is refused with
// ErrHashMismatch and no file, tmp or final, is left in its place; the
// same rebuild with the right records succeeds.
func TestL3RebuildChecksRecordedHashes(t *testing.T) {
	for _, m := range []int{0, 2} {
		for _, what := range []string{"data", "parity"} {
			t.Run(fmt.Sprintf("m%d-%s", m, what), func(t *testing.T) {
				cl := newCluster(t, vfd.NewCore(), 4, 1, 4, func(r int) int { return 1200 + 50*r })
				par := cl.l3Protect(m, 256)
				want := cl.parities(par)
				require.NoError(t, cl.d.RemoveAll(cl.nodeDir(1)))
				errs := make([]error, 4)
				require.NoError(t, cl.run(func(c comm.Comm) error {
					r := c.Rank()
					data := cl.own(r)
					pi := FileInfo{Ref: Ref{cl.d, cl.parityPath(r)}, Size: par[r].Size, Hash: par[r].Hash}
					if r == 1 && what == "data" {
						data.Hash[0] ^= 1
					}
					if r == 1 && what == "parity" {
						pi.Hash[0] ^= 1
					}
					_, errs[r] = RebuildGroup(c, cl.topo, Options{BlockSize: 256}, shapes(4, m, par)[r], data, pi)
					return nil
				}))
				require.ErrorIs(t, errs[1], ErrHashMismatch)
				assert.Contains(t, errs[1].Error(), "rebuilt "+what+" does not match the recorded size and hash")
				p := cl.dataPath(1)
				if what == "parity" {
					p = cl.parityPath(1)
				}
				for _, name := range []string{p, p + TmpSuffix} {
					_, err := cl.d.Stat(name)
					require.ErrorIs(t, err, fs.ErrNotExist, "%s", name)
				}
				_, errs = cl.l3Recover(m, 256, par)
				cl.assertRebuilt(errs, want)
			})
		}
	}
}

// TestEncodePlanRuns: in every layout the units a member sends at a shift
// are consecutive segments (unitsOf slices the row without copying), each
// unit sent reaches exactly the holders of its stripe's parity, and what
// one member sends is what its receiver expects.
func TestEncodePlanRuns(t *testing.T) {
	for k := 1; k <= 9; k++ {
		for m := 1; m <= k; m++ {
			l, err := encode.NewLayout(k, m, 1000, 16)
			require.NoError(t, err)
			plans := make([][]shift, k)
			for g := range k {
				plans[g], _ = encodePlan(l, g)
			}
			for g := range k {
				received := 0
				for s, sh := range plans[g] {
					for i := 1; i < len(sh.send); i++ {
						require.Equal(t, sh.send[i-1]+1, sh.send[i], "k=%d m=%d member %d shift %d: %v", k, m, g, s, sh.send)
					}
					to := (g + s) % k
					require.Len(t, plans[to][s].recv, len(sh.send), "k=%d m=%d: %d -> %d", k, m, g, to)
					for i, seg := range sh.send {
						_, pos := l.Segment(g, seg)
						assert.Equal(t, pos, plans[to][s].recv[i].pos)
					}
					for _, ru := range sh.recv {
						received += len(ru.chunks)
					}
				}
				// every parity chunk of g gets each of its stripe's data units once
				assert.Equal(t, l.Chunks()*l.DataShards(), received, "k=%d m=%d member %d", k, m, g)
			}
		}
	}
}

// TestL3RebuiltImage: a data file rebuilt in order (m = k) is hashed as it
// is written and, under Options.ImageLimit, kept in memory; the bytes are
// the original ones. When they do not hash to the recorded value, the
// rebuild fails with ErrHashMismatch, publishes nothing and keeps no image.
func TestL3RebuiltImage(t *testing.T) {
	for _, wrongHash := range []bool{false, true} {
		t.Run(fmt.Sprintf("wrong hash %v", wrongHash), func(t *testing.T) {
			cl := newCluster(t, vfd.Sec2{}, 4, 1, 4, func(r int) int { return 5000 + 333*r })
			par := cl.l3Protect(0, 512)
			require.NoError(t, cl.d.Remove(cl.dataPath(1)))
			errs := make([]error, 4)
			res := make([]L3Recovery, 4)
			require.NoError(t, cl.run(func(c comm.Comm) error {
				r := c.Rank()
				p := par[r]
				pi := FileInfo{Ref: Ref{cl.d, cl.parityPath(r)}, Size: p.Size, Hash: p.Hash}
				own := cl.own(r)
				if wrongHash && r == 1 {
					own.Hash[0] ^= 1
				}
				res[r], errs[r] = RebuildGroup(c, cl.topo, Options{BlockSize: 512, ImageLimit: 1 << 20}, shapes(4, 0, par)[r], own, pi)
				return nil
			}))
			if !wrongHash {
				for r := range 4 {
					require.NoError(t, errs[r], "rank %d", r)
				}
				require.True(t, res[1].DataRebuilt)
				assert.Equal(t, cl.data[1], res[1].DataImage)
				assert.Equal(t, cl.data[1], cl.read(cl.dataPath(1)))
				return
			}
			require.ErrorIs(t, errs[1], ErrHashMismatch)
			assert.False(t, res[1].DataRebuilt)
			assert.Nil(t, res[1].DataImage)
			_, err := cl.d.Stat(cl.dataPath(1))
			assert.ErrorIs(t, err, fs.ErrNotExist, "nothing published")
			_, err = cl.d.Stat(cl.dataPath(1) + TmpSuffix)
			assert.ErrorIs(t, err, fs.ErrNotExist, "tmp removed")
		})
	}
}

// TestTap: a checkpoint transfer shows every byte of the file it reads to
// the file's tap, in order (L2 with the hash known, unknown, or not
// hashed by the sender; L3), and the transfer's result is unchanged.
func TestTap(t *testing.T) {
	cl := newCluster(t, vfd.NewCore(), 8, 1, 4, func(r int) int { return 1500 + 97*r })
	tapped := func(r int, unknown bool) (FileInfo, *bytes.Buffer) {
		f := cl.own(r)
		if unknown {
			f.Hash, f.HashUnknown = encode.Hash{}, true
		}
		var b bytes.Buffer
		f.Tap = &b
		return f, &b
	}
	for _, tc := range []struct {
		name          string
		unknown, skip bool
	}{{"L2-known", false, false}, {"L2-unknown", true, false}, {"L2-unhashed", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			taps := make([]*bytes.Buffer, 8)
			copies := make([]Copy, 8)
			require.NoError(t, cl.run(func(c comm.Comm) error {
				f, b := tapped(c.Rank(), tc.unknown)
				taps[c.Rank()] = b
				var err error
				copies[c.Rank()], err = CopyToPartner(c, cl.topo, Options{BlockSize: 256, SkipSourceHash: tc.skip}, f, Ref{cl.d, cl.copyPath(c.Rank())})
				return err
			}))
			for r, b := range taps {
				assert.True(t, bytes.Equal(cl.data[r], b.Bytes()), "rank %d's tap saw %d bytes, not its file", r, b.Len())
				assert.True(t, bytes.Equal(cl.data[copies[r].Of], cl.read(cl.copyPath(r))))
			}
		})
	}
	t.Run("L3", func(t *testing.T) {
		taps := make([]*bytes.Buffer, 8)
		require.NoError(t, cl.run(func(c comm.Comm) error {
			f, b := tapped(c.Rank(), true)
			taps[c.Rank()] = b
			_, err := EncodeGroup(c, cl.topo, Options{BlockSize: 256}, 0, f, Ref{cl.d, cl.parityPath(c.Rank())})
			return err
		}))
		for r, b := range taps {
			assert.True(t, bytes.Equal(cl.data[r], b.Bytes()), "rank %d's tap saw %d bytes, not its file", r, b.Len())
		}
	})
}

// TestL2RestoreChecksTheCopyOnce: the copy that restores a lost data file
// is checked only as it arrives (not read beforehand); a flipped byte in
// it fails the restore on the owner with the corruption sentinel, leaves
// nothing published, and its holder reports the data unrecoverable too,
// while the other copies are still checked and a bad one is re-sent.
func TestL2RestoreChecksTheCopyOnce(t *testing.T) {
	flip := func(cl *cluster, p string, off int64) {
		f, err := cl.d.Open(p, vfd.ReadWrite)
		require.NoError(t, err)
		b := make([]byte, 1)
		_, err = f.ReadAt(b, off)
		require.NoError(t, err)
		b[0] ^= 0x20
		_, err = f.WriteAt(b, off)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	for _, flipped := range []bool{false, true} {
		t.Run(fmt.Sprintf("flipped %v", flipped), func(t *testing.T) {
			lg := vfd.NewLog(vfd.Sec2{}, nil)
			cl := newCluster(t, lg, 4, 1, 4, func(r int) int { return 9000 + 77*r })
			cl.l2Protect(512)
			require.NoError(t, cl.d.RemoveAll(cl.nodeDir(1))) // rank 1's data file and its copy of rank 0
			require.NoError(t, cl.d.MkdirAll(cl.nodeDir(1), 0o755))
			cl.corrupt(cl.copyPath(3)) // a copy nobody restores from: found by its check, re-sent
			if flipped {
				flip(cl, cl.copyPath(2), 4321) // the copy that restores rank 1
			}
			errs := make([]error, 4)
			res := make([]L2Recovery, 4)
			read0 := lg.Stats().BytesRead
			require.NoError(t, cl.run(func(c comm.Comm) error {
				r := c.Rank()
				own := cl.own(r)
				if r != 1 { // as levels does: checked into memory, sent from there
					own.Image, own.CheckErr = own.CheckImage(r, 512)
					own.Checked = true
				}
				res[r], errs[r] = RecoverPartner(c, cl.topo, Options{BlockSize: 512, ImageLimit: 1 << 20}, own, cl.held(r))
				return nil
			}))
			if !flipped {
				// Each byte read once: the data files of ranks 0, 2, 3 and
				// the copies held by ranks 0, 2 (sent, not checked first)
				// and 3.
				want := cl.sizes[0] + cl.sizes[2] + cl.sizes[3] + cl.sizes[3] + cl.sizes[1] + cl.sizes[2]
				assert.Equal(t, want, lg.Stats().BytesRead-read0)
				for r := range 4 {
					require.NoError(t, errs[r], "rank %d", r)
				}
				require.True(t, res[1].OwnRebuilt)
				assert.Equal(t, cl.data[1], res[1].OwnImage)
				assert.True(t, res[1].HeldRebuilt)
				assert.True(t, res[3].HeldRebuilt, "the corrupted copy on rank 3 is re-sent")
				assert.False(t, res[2].HeldRebuilt, "the copy that restored rank 1 is sound")
				cl.assertAllGood()
				for r := range 4 {
					assert.Equal(t, cl.data[cl.topo.Left(r)], cl.read(cl.copyPath(r)), "copy held by %d", r)
				}
				return
			}
			require.ErrorIs(t, errs[1], ErrUnrecoverable)
			require.ErrorIs(t, errs[1], ErrHashMismatch)
			var ce *CorruptionError
			require.ErrorAs(t, errs[1], &ce)
			assert.Contains(t, errs[1].Error(), "are both lost")
			require.ErrorIs(t, errs[2], ErrUnrecoverable, "the holder of the bad copy reports it too")
			assert.Contains(t, errs[2].Error(), "rank 1: its data file")
			assert.False(t, res[1].OwnRebuilt)
			assert.Nil(t, res[1].OwnImage)
			_, err := cl.d.Stat(cl.dataPath(1))
			assert.ErrorIs(t, err, fs.ErrNotExist, "nothing published")
			_, err = cl.d.Stat(cl.dataPath(1) + TmpSuffix)
			assert.ErrorIs(t, err, fs.ErrNotExist, "tmp removed")
			assert.True(t, res[3].HeldRebuilt, "the other bad copy is still re-sent")
			assert.Equal(t, cl.data[2], cl.read(cl.copyPath(3)))
		})
	}
}

// TestL3EncodeSendsOnlyData: units wholly beyond a member's data are
// zeros that the encoder neither sends nor multiplies in. In the full
// scheme every member sends each of its units to the k-1 others, so a
// member sends exactly k-1 times its data, rounded up to whole units,
// more payload than a member with no data. In the rotated schemes a member of empty data sends nothing but
// the size exchange either. The parity still matches the central
// encoding.
func TestL3EncodeSendsOnlyData(t *testing.T) {
	sizes := []int{200_000, 0, 3_001, 0, 65_536}
	for _, m := range []int{0, 2, 1} {
		t.Run(fmt.Sprintf("m%d", m), func(t *testing.T) {
			k := len(sizes)
			cl := newCluster(t, vfd.NewCore(), k, 1, k, func(r int) int { return sizes[r] })
			sent := make([]int64, k)
			err := cl.run(func(c comm.Comm) error {
				before := comm.CountsOf(c)
				_, err := EncodeGroup(c, cl.topo, Options{BlockSize: 4096}, m, cl.own(c.Rank()), Ref{cl.d, cl.parityPath(c.Rank())})
				sent[c.Rank()] = comm.CountsOf(c).Sub(before).BytesSent
				return err
			})
			require.NoError(t, err)
			mm := ParityCount(k, m)
			padded := encode.PaddedSize(cl.sizes)
			lay, err := encode.NewLayout(k, mm, padded, stripeUnit(k, mm, padded, 4096))
			require.NoError(t, err)
			want, err := lay.EncodeFiles(cl.data)
			require.NoError(t, err)
			for r := range k {
				assert.True(t, bytes.Equal(want[r], cl.read(cl.parityPath(r))[:lay.ParitySize()]), "parity of %d", r)
			}
			require.Positive(t, sent[1], "the size exchange")
			assert.Equal(t, sent[1], sent[3], "members without data send the same")
			for r, s := range sizes {
				if s == 0 {
					continue
				}
				extra := sent[r] - sent[1]
				units := (int64(s) + int64(lay.Unit) - 1) / int64(lay.Unit)
				if mm == k {
					// whole units (the group's last row may be shorter)
					span := min(units*int64(lay.Unit), padded)
					assert.Equal(t, int64(k-1)*span, extra, "member %d of %d bytes", r, s)
					continue
				}
				// rotated: each data unit goes to its stripe's m parity
				// holders (less the member itself), whole units
				assert.LessOrEqual(t, extra, units*int64(mm*lay.Unit), "member %d", r)
				assert.GreaterOrEqual(t, extra, int64(s)*int64(mm-1), "member %d", r)
			}
		})
	}
}
