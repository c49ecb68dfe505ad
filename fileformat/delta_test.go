package fileformat

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/vfd"
)

const testBS = 1024

// chainState is what a test chain keeps of its last image.
type chainState struct {
	files  []vfd.File // base, then deltas
	parent Parent
	opts   []Option // more options of the next delta and its reference file
}

// o returns the options every file of a test chain is written with.
func (cs *chainState) o(more ...Option) []Option {
	return append(append([]Option{WithBlockSize(testBS), WithClock(fixedClock)}, cs.opts...), more...)
}

// writeFull starts a chain with a full file.
func writeFull(t *testing.T, meta Meta, vars []Var) *chainState {
	t.Helper()
	m := &memFile{name: "base.fti"}
	lay, sum, err := Write(m, meta, vars, nil, WithBlockSize(testBS), WithClock(fixedClock))
	require.NoError(t, err)
	return &chainState{files: []vfd.File{m}, parent: Parent{Layout: lay, Summary: sum}}
}

// addDelta writes a delta for vars, checks that its image is byte for
// byte the file Write gives for the same state after the parent's
// layout, and returns the stats.
func (cs *chainState) addDelta(t *testing.T, meta Meta, vars []Var) DeltaStats {
	t.Helper()
	d := &memFile{name: fmt.Sprintf("delta%d.fti", len(cs.files))}
	plan, err := PlanDelta(meta, vars, cs.parent, cs.o()...)
	require.NoError(t, err)
	lay, sum, st, err := WriteDelta(d, meta, vars, cs.parent, cs.o()...)
	require.NoError(t, err)
	// Without the file digest: the same bytes, no digest.
	nd := &memFile{name: "nodigest"}
	_, _, ndst, err := WriteDelta(nd, meta, vars, cs.parent, cs.o(WithoutFileDigest())...)
	require.NoError(t, err)
	assert.Zero(t, ndst.Digest)
	assert.True(t, bytes.Equal(d.b, nd.b))
	// The plan sizes the file exactly and writes the same bytes.
	assert.Equal(t, st.FileSize, plan.Size())
	pd := &memFile{name: "planned"}
	pst, err := plan.Write(pd)
	require.NoError(t, err)
	assert.Equal(t, st, pst)
	assert.True(t, bytes.Equal(d.b, pd.b), "planned delta differs from the written one")
	play, psum := plan.Image()
	assert.Equal(t, lay, play)
	assert.Equal(t, sum.Checksum, psum.Checksum)
	assert.Equal(t, [HashSize]byte(blake3.Sum256(d.b)), st.Digest, "digest of the whole delta file")
	assert.Equal(t, int64(len(d.b)), st.FileSize)

	full := &memFile{name: "full.fti"}
	flay, fsum, err := Write(full, meta, vars, cs.parent.Layout, cs.o()...)
	require.NoError(t, err)
	assert.Equal(t, flay, lay, "layout")
	assert.Equal(t, fsum.Checksum, sum.Checksum, "image checksum")
	assert.Equal(t, fsum.FileSize, sum.FileSize)

	cs.files = append(cs.files, d)
	img, err := OpenImage(append([]vfd.File(nil), cs.files...))
	require.NoError(t, err)
	got := make([]byte, sum.FileSize)
	require.NoError(t, vfd.ReadFull(img, got, 0))
	require.True(t, bytes.Equal(full.b, got), "image of the chain differs from the full file")
	assert.Equal(t, fsum.Checksum, img.Checksum())

	// Restore through an ordinary reader, every block checked.
	r, err := Open(img)
	require.NoError(t, err)
	require.NoError(t, r.Verify())
	cp := &memFile{name: "copy.fti", b: []byte("stale bytes, truncated by CopyTo")}
	n, err := r.CopyTo(cp)
	require.NoError(t, err)
	assert.Equal(t, int64(len(full.b)), n)
	require.True(t, bytes.Equal(full.b, cp.b), "CopyTo of the chain differs from the full file")
	for _, v := range vars {
		dst := make([]byte, len(v.Data))
		require.NoError(t, r.ReadVar(v.ID, dst))
		require.True(t, bytes.Equal(v.Data, dst), "var %d", v.ID)
	}
	dd, err := OpenDelta(d)
	require.NoError(t, err)
	require.NoError(t, dd.Verify())
	assert.Equal(t, st.Written, dd.Written())
	assert.Len(t, dd.Runs(), st.Runs)
	cs.parent = Parent{Layout: lay, Summary: sum}
	return st
}

func TestDeltaWritesOnlyChangedBlocks(t *testing.T) {
	const nb = 100
	data := pattern(nb*testBS, 1)
	vars := []Var{{ID: 1, Name: "x", Type: Uint8, Data: data}}
	cs := writeFull(t, Meta{CkptID: 1, Level: 1}, vars)

	st := cs.addDelta(t, Meta{CkptID: 2, Level: 1}, vars)
	assert.Zero(t, st.Written, "nothing changed")
	assert.Zero(t, st.Runs)

	r := rand.New(rand.NewPCG(1, 2))
	for _, share := range []float64{0.1, 0.37, 1} {
		want := int(share * nb)
		for _, j := range r.Perm(nb)[:want] {
			data[j*testBS+r.IntN(testBS)] ^= byte(1 + r.IntN(255))
		}
		st := cs.addDelta(t, Meta{CkptID: 3, Level: 1}, vars)
		assert.Equal(t, int64(want*testBS), st.Written, "share %.2f", share)
		assert.Equal(t, want, st.Blocks)
	}
	// Adjacent dirty blocks form one run, across the hashing segments too.
	big := pattern(3*deltaSegment+5*testBS, 2)
	vars = []Var{{ID: 1, Data: big}}
	cs = writeFull(t, Meta{CkptID: 1}, vars)
	for i := deltaSegment - 2*testBS; i < deltaSegment+3*testBS; i += testBS {
		big[i] ^= 1
	}
	big[len(big)-1] ^= 1
	st = cs.addDelta(t, Meta{CkptID: 2}, vars)
	assert.Equal(t, 2, st.Runs)
	assert.Equal(t, 6, st.Blocks)
}

// TestDeltaVariablesChange chains deltas over variables that grow, shrink,
// change type, appear and disappear; every image equals the full file.
func TestDeltaVariablesChange(t *testing.T) {
	a := pattern(10*testBS+17, 1)
	b := asBytes([]float64{1, 2, 3, 4})
	vars := []Var{{ID: 1, Name: "a", Type: Uint8, Data: a}, {ID: 2, Name: "b", Type: Float64, Data: b}}
	cs := writeFull(t, Meta{CkptID: 1, Rank: 3, Level: 2}, vars)

	// a grows by 3 blocks: only the new container (the old one keeps its
	// size, so its short last block is unchanged).
	a = append(a, pattern(3*testBS, 9)...)
	vars[0].Data = a
	st := cs.addDelta(t, Meta{CkptID: 2, Rank: 3, Level: 2}, vars)
	assert.Equal(t, int64(3*testBS), st.Written)

	// b changes type (same bytes): nothing written.
	vars[1].Type = Int64
	st = cs.addDelta(t, Meta{CkptID: 3, Rank: 3, Level: 2}, vars)
	assert.Zero(t, st.Written)

	// a shrinks to 4.5 blocks: only the new last block.
	vars[0].Data = a[:4*testBS+512]
	st = cs.addDelta(t, Meta{CkptID: 4, Rank: 3, Level: 2}, vars)
	assert.Equal(t, int64(512), st.Written)

	// c appears, b disappears.
	c := pattern(2*testBS, 5)
	vars = []Var{vars[0], {ID: 7, Name: "c", Type: Bytes, Data: c}}
	st = cs.addDelta(t, Meta{CkptID: 5, Rank: 3, Level: 2}, vars)
	assert.Equal(t, int64(2*testBS), st.Written)

	// a regrows with its old bytes: the blocks it forgot are written again.
	vars[0].Data = a
	st = cs.addDelta(t, Meta{CkptID: 6, Rank: 3, Level: 2}, vars)
	assert.Equal(t, int64(len(a)-4*testBS), st.Written)

	// b comes back: new again.
	vars = append(vars, Var{ID: 2, Type: Float64, Data: b})
	st = cs.addDelta(t, Meta{CkptID: 7, Rank: 3, Level: 2}, vars)
	assert.Equal(t, int64(len(b)), st.Written)

	// Empty variables and no variables at all.
	vars = []Var{{ID: 9, Data: nil}}
	st = cs.addDelta(t, Meta{CkptID: 8, Rank: 3, Level: 2}, vars)
	assert.Zero(t, st.Written)
	st = cs.addDelta(t, Meta{CkptID: 9, Rank: 3, Level: 2}, nil)
	assert.Zero(t, st.Written)
}

func TestDeltaInvalid(t *testing.T) {
	vars := []Var{{ID: 1, Data: pattern(3000, 1)}}
	cs := writeFull(t, Meta{}, vars)
	_, _, _, err := WriteDelta(&memFile{}, Meta{}, vars, cs.parent, WithBlockSize(2048))
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "the parent's is 1024")
	_, _, _, err = WriteDelta(&memFile{}, Meta{}, vars, cs.parent, WithBlockSize(testBS), WithoutHash())
	require.ErrorIs(t, err, ErrInvalid)
	_, _, _, err = WriteDelta(&memFile{}, Meta{Rank: -1}, vars, cs.parent, WithBlockSize(testBS))
	require.ErrorIs(t, err, ErrInvalid)
	_, _, _, err = WriteDelta(&memFile{}, Meta{}, []Var{{ID: 1}, {ID: 1}}, cs.parent, WithBlockSize(testBS))
	require.ErrorIs(t, err, ErrInvalid)
	_, err = OpenImage(nil)
	require.ErrorIs(t, err, ErrInvalid)
}

// deltaChain builds base + one delta with some changed blocks.
func deltaChain(t *testing.T) (base, delta *memFile, data []byte) {
	t.Helper()
	data = pattern(20*testBS+100, 3)
	vars := []Var{{ID: 4, Name: "v", Type: Uint8, Data: data}}
	cs := writeFull(t, Meta{CkptID: 1, Rank: 2, Level: 1}, vars)
	data[5*testBS] ^= 1
	data[6*testBS+9] ^= 1
	data[19*testBS] ^= 1
	cs.addDelta(t, Meta{CkptID: 2, Rank: 2, Level: 1}, vars)
	return cs.files[0].(*memFile), cs.files[1].(*memFile), data
}

func clone(m *memFile) *memFile { return &memFile{name: m.name, b: bytes.Clone(m.b)} }

func TestDeltaCorruption(t *testing.T) {
	base, delta, data := deltaChain(t)
	d0, err := OpenDelta(delta)
	require.NoError(t, err)
	runs := d0.Runs()
	require.Len(t, runs, 2)
	dataOff := int64(DeltaHeaderSize)
	trOff := int64(len(delta.b)) - DeltaTrailerSize

	readVar := func(b, d *memFile) error {
		img, err := OpenImage([]vfd.File{b, d})
		if err != nil {
			return err
		}
		r, err := Open(img)
		if err != nil {
			return err
		}
		dst := make([]byte, len(data))
		if err := r.ReadVar(4, dst); err != nil {
			assert.Equal(t, make([]byte, len(data)), dst, "a failed read leaves zeros")
			return err
		}
		assert.Equal(t, data, dst)
		return nil
	}
	require.NoError(t, readVar(base, delta))

	t.Run("byte in a delta block", func(t *testing.T) {
		d := clone(delta)
		d.b[dataOff+testBS+3] ^= 0x40 // second dirty block (run 0, block 6)
		dd, err := OpenDelta(d)
		require.NoError(t, err, "the metadata is intact")
		err = dd.Verify()
		require.ErrorIs(t, err, ErrHashMismatch)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, dataOff+testBS, ce.Offset)
		assert.Equal(t, 2, ce.Rank)
		assert.EqualValues(t, 4, ce.VarID)
		err = readVar(base, d)
		require.ErrorIs(t, err, ErrHashMismatch)
		img, err := OpenImage([]vfd.File{base, d})
		require.NoError(t, err)
		r, err := Open(img)
		require.NoError(t, err)
		_, err = r.CopyTo(&memFile{})
		require.ErrorIs(t, err, ErrHashMismatch, "compaction refuses a bad block")
		assert.ErrorAs(t, err, &ce)
		assert.EqualValues(t, 4, ce.VarID)
	})
	t.Run("byte in the base under a clean block", func(t *testing.T) {
		b := clone(base)
		b.b[HeaderSize+2*testBS+7] ^= 1
		require.ErrorIs(t, readVar(b, delta), ErrHashMismatch)
	})
	t.Run("byte in the base under a rewritten block", func(t *testing.T) {
		b := clone(base)
		b.b[HeaderSize+5*testBS+7] ^= 1
		require.NoError(t, readVar(b, delta), "the delta holds that block")
	})
	for _, at := range []struct {
		name string
		off  int64
		want error
	}{
		{"header magic", 0, ErrCorrupt},
		{"parent checksum", 40, ErrHashMismatch},
		{"delta metadata", d0.tr.dmOff + 100, ErrHashMismatch},
		{"run table", trOff - 10, ErrHashMismatch},
		{"trailer field", trOff + 20, ErrHashMismatch},
		{"trailer magic", trOff + 1, ErrTruncated},
	} {
		t.Run(at.name, func(t *testing.T) {
			d := clone(delta)
			d.b[at.off] ^= 0x10
			_, err := OpenDelta(d)
			require.ErrorIs(t, err, at.want)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "delta1.fti", ce.Path)
		})
	}
	t.Run("truncated at every length", func(t *testing.T) {
		for n := 0; n < len(delta.b); n += 7 {
			_, err := OpenDelta(&memFile{name: "cut", b: delta.b[:n]})
			require.Error(t, err, "cut at %d", n)
			if n >= 8 {
				require.ErrorIs(t, err, ErrTruncated, "cut at %d", n)
			}
		}
	})
	t.Run("wrong parent", func(t *testing.T) {
		other := writeFull(t, Meta{CkptID: 1, Rank: 2, Level: 1}, []Var{{ID: 4, Data: pattern(len(data), 8)}})
		_, err := OpenImage([]vfd.File{other.files[0], delta})
		require.ErrorIs(t, err, ErrCorrupt)
		assert.Contains(t, err.Error(), "applies to an image with checksum")
	})
	t.Run("a delta as the base, a full file as a delta", func(t *testing.T) {
		_, err := OpenImage([]vfd.File{delta})
		require.ErrorIs(t, err, ErrNotFTIFF)
		_, err = OpenImage([]vfd.File{base, base})
		require.ErrorIs(t, err, ErrNotFTIFF)
	})
}

// TestDeltaForgedParentLink: a delta resealed to claim the parent of
// another image is refused when a block it does not store differs.
func TestDeltaForgedParentLink(t *testing.T) {
	_, delta, data := deltaChain(t)
	// Another parent differing in block 1, which the delta does not store.
	d2 := bytes.Clone(data)
	d2[testBS] ^= 1
	d2[5*testBS] ^= 1
	d2[6*testBS+9] ^= 1
	d2[19*testBS] ^= 1
	ob := &memFile{name: "other.fti"}
	_, osum, err := Write(ob, Meta{CkptID: 1, Rank: 2, Level: 1}, []Var{{ID: 4, Name: "v", Type: Uint8, Data: d2}}, nil, WithBlockSize(testBS), WithClock(fixedClock))
	require.NoError(t, err)
	forged := clone(delta)
	copy(forged.b[32:64], osum.Checksum[:])
	trOff := len(forged.b) - DeltaTrailerSize
	h := deltaHash(forged.b[:DeltaHeaderSize], forged.b[trOff:])
	copy(forged.b[trOff+dtHashOff:], h[:])
	_, err = OpenDelta(forged)
	require.NoError(t, err)
	_, err = OpenImage([]vfd.File{ob, forged})
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "delta does not match its parent")
}

// TestDeltaLostWrite drops each write of a delta in turn (a page a crash
// lost): the file fails OpenDelta or Verify, never reads back wrong data.
func TestDeltaLostWrite(t *testing.T) {
	data := pattern(30*testBS, 4)
	vars := []Var{{ID: 1, Data: data}}
	cs := writeFull(t, Meta{}, vars)
	for i := 0; i < 30; i += 3 {
		data[i*testBS] ^= 1
	}
	for k := 0; ; k++ {
		f := &dropFile{memFile: memFile{name: "d"}, drop: k}
		_, _, _, err := WriteDelta(f, Meta{}, vars, cs.parent, WithBlockSize(testBS))
		require.NoError(t, err)
		if f.n <= k {
			break
		}
		d, err := OpenDelta(&f.memFile)
		if err == nil {
			err = d.Verify()
		}
		require.Error(t, err, "write %d dropped", k)
	}
}

// dropFile loses its drop-th write.
type dropFile struct {
	memFile
	drop, n int
}

func (f *dropFile) WriteAt(p []byte, off int64) (int, error) {
	f.n++
	if f.n-1 == f.drop {
		if end := off + int64(len(p)); end > int64(len(f.b)) {
			_ = f.Truncate(end)
		}
		return len(p), nil
	}
	return f.memFile.WriteAt(p, off)
}

// TestDeltaDatasets: the image of a delta carries the datasets' extension
// area (FTI-FF version 2) byte for byte as Write does, whether the parent
// had one or not, and loses it when the datasets go.
func TestDeltaDatasets(t *testing.T) {
	vars, ds, subs := datasetCase()
	meta := Meta{CkptID: 1, Rank: 1, Level: 1}
	cs := writeFull(t, meta, vars) // version 1
	cs.opts = []Option{WithDatasets(ds, subs)}
	meta.CkptID = 2
	st := cs.addDelta(t, meta, vars) // version 2, nothing changed
	assert.Zero(t, st.Written)
	vars[0].Data[3] ^= 1
	meta.CkptID = 3
	st = cs.addDelta(t, meta, vars)
	assert.Equal(t, int64(len(vars[0].Data)), st.Written, "the one block of u")
	img, err := OpenImage(append([]vfd.File(nil), cs.files...))
	require.NoError(t, err)
	r, err := Open(img)
	require.NoError(t, err)
	assert.Equal(t, VersionExt, r.Version())
	assert.Len(t, r.Datasets(), len(ds))
	sub, ok := r.SubsetOf(1)
	require.True(t, ok)
	assert.Equal(t, subs[1], sub)
	cs.opts = nil
	meta.CkptID = 4
	cs.addDelta(t, meta, vars) // version 1 again
	img, err = OpenImage(append([]vfd.File(nil), cs.files...))
	require.NoError(t, err)
	r, err = Open(img)
	require.NoError(t, err)
	assert.Equal(t, uint16(Version), uint16(r.Version()))
	assert.Empty(t, r.Datasets())
}
