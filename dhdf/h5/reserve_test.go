package h5

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
	"github.com/ftigo/ftigo/vfd"
)

// writeReserved writes a file with two reserved datasets (one aligned to
// 4 KiB) filled through a second handle, as another rank would, and
// returns its path and the values of /grid/a (uint32, 7 x 9 x 5, element
// i = i*3+1).
func writeReserved(t *testing.T) (string, []uint32) {
	p := filepath.Join(t.TempDir(), "res.h5")
	f, err := vfd.CreateTrunc(vfd.Sec2{}, p)
	require.NoError(t, err)
	defer f.Close()
	w := NewWriter(f)
	g, err := w.Root().CreateGroup("grid")
	require.NoError(t, err)
	got, ok := w.Root().Group("grid")
	require.True(t, ok)
	require.Same(t, g, got)
	_, ok = w.Root().Group("nope")
	assert.False(t, ok)
	a, err := g.ReserveDataset("a", Uint32, []uint64{7, 9, 5}, 4096)
	require.NoError(t, err)
	b, err := w.Root().ReserveDataset("b", Float64, []uint64{3}, 0)
	require.NoError(t, err)
	empty, err := w.Root().ReserveDataset("empty", Float64, []uint64{0}, 0)
	require.NoError(t, err)
	_, ok = empty.Addr()
	assert.False(t, ok)
	addrA, ok := a.Addr()
	require.True(t, ok)
	assert.Zero(t, addrA%4096)
	assert.Equal(t, int64(7*9*5*4), a.DataSize())
	addrB, _ := b.Addr()
	assert.Equal(t, addrA+a.DataSize(), addrB)

	vals := make([]uint32, 7*9*5)
	raw := make([]byte, 4*len(vals))
	for i := range vals {
		vals[i] = uint32(i*3 + 1)
		binary.LittleEndian.PutUint32(raw[4*i:], vals[i])
	}
	other, err := vfd.Sec2{}.Open(p, vfd.ReadWrite)
	require.NoError(t, err)
	_, err = other.WriteAt(raw, addrA)
	require.NoError(t, err)
	_, err = other.WriteAt(binary.LittleEndian.AppendUint64(nil, 0x4000000000000000), addrB+8) // b[1] = 2.0; b[0], b[2] stay holes
	require.NoError(t, err)
	require.NoError(t, other.Sync())
	require.NoError(t, other.Close())
	require.NoError(t, w.Close())
	return p, vals
}

func TestReserveAndHyperslab(t *testing.T) {
	p, vals := writeReserved(t)
	data, err := vfd.ReadFile(vfd.Sec2{}, p)
	require.NoError(t, err)
	f, err := Open(bytes.NewReader(data), int64(len(data)), p)
	require.NoError(t, err)
	o, err := f.Lookup("/grid/a")
	require.NoError(t, err)
	all, err := f.ReadData(o)
	require.NoError(t, err)
	for i, v := range vals {
		require.Equal(t, v, binary.LittleEndian.Uint32(all[4*i:]))
	}
	dims := []uint64{7, 9, 5}
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 300; trial++ {
		start, count := make([]uint64, 3), make([]uint64, 3)
		n := uint64(1)
		for k := range dims {
			start[k] = rng.Uint64N(dims[k] + 1)
			count[k] = rng.Uint64N(dims[k] - start[k] + 1)
			if trial%3 == 0 && k > 0 {
				start[k], count[k] = 0, dims[k] // whole inner dimensions: one read
			}
			n *= count[k]
		}
		dst := make([]byte, 4*n)
		require.NoError(t, f.ReadHyperslab(o, start, count, dst))
		var i uint64
		for x := start[0]; x < start[0]+count[0]; x++ {
			for y := start[1]; y < start[1]+count[1]; y++ {
				for z := start[2]; z < start[2]+count[2]; z++ {
					want := vals[(x*9+y)*5+z]
					require.Equal(t, want, binary.LittleEndian.Uint32(dst[4*i:]), "start %v count %v at %d", start, count, i)
					i++
				}
			}
		}
	}
	assert.ErrorIs(t, f.ReadHyperslab(o, []uint64{6, 0, 0}, []uint64{2, 1, 1}, make([]byte, 8)), ErrInvalid)
	assert.ErrorIs(t, f.ReadHyperslab(o, []uint64{0, 0, 0}, []uint64{1, 1, 1}, make([]byte, 8)), ErrInvalid)
	assert.ErrorIs(t, f.ReadHyperslab(o, []uint64{0, 0}, []uint64{1, 1}, make([]byte, 4)), ErrInvalid)
	ob, err := f.Lookup("/b")
	require.NoError(t, err)
	bb := make([]byte, 24)
	require.NoError(t, f.ReadHyperslab(ob, []uint64{0}, []uint64{3}, bb))
	assert.Equal(t, append(append(make([]byte, 8), binary.LittleEndian.AppendUint64(nil, 0x4000000000000000)...), make([]byte, 8)...), bb)
}

// TestReserveH5py checks that libhdf5 reads the reserved datasets (holes
// as zeros) and that the aligned layout does not bother it.
func TestReserveH5py(t *testing.T) {
	py := testutil.NeedPython(t, "h5py", "numpy")
	p, _ := writeReserved(t)
	out, err := exec.Command(py, "-c", `
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], 'r')
a = f['grid/a'][...]
assert a.shape == (7, 9, 5) and a.dtype == np.uint32, (a.shape, a.dtype)
assert (a.ravel() == np.arange(7*9*5, dtype=np.uint32)*3 + 1).all()
assert list(f['b'][...]) == [0.0, 2.0, 0.0]
assert f['empty'].shape == (0,)
print('ok')
`, p).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "ok\n", string(out))
}
