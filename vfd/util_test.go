package vfd_test

import (
	"io"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

func TestCopyFileAcrossDrivers(t *testing.T) {
	dir := t.TempDir()
	c := vfd.NewCore()
	want := pattern(300000)
	require.NoError(t, vfd.WriteFileAtomic(c, "src", want))
	n, err := vfd.CopyFile(vfd.Sec2{}, filepath.Join(dir, "dst"), c, "src", 4096)
	require.NoError(t, err)
	assert.Equal(t, int64(len(want)), n)
	assert.Equal(t, want, readAll(t, vfd.Sec2{}, filepath.Join(dir, "dst")))

	_, err = vfd.CopyFile(vfd.NewFault(c, vfd.OnNth(vfd.OpWrite, 3, syscall.ENOSPC)), "dst", c, "src", 4096)
	assert.ErrorIs(t, err, syscall.ENOSPC)
}

func TestVectorFallbacks(t *testing.T) {
	for _, d := range []vfd.Driver{vfd.NewCore(), vfd.NewSplit(vfd.NewCore(), "", vfd.NewCore(), "")} {
		t.Run(d.Name(), func(t *testing.T) {
			f, err := vfd.Create(d, "v")
			require.NoError(t, err)
			defer f.Close()
			require.NoError(t, vfd.WriteV(f, []vfd.IOVec{
				{Type: vfd.MemSuper, Off: 0, Buf: []byte("head")},
				{Type: vfd.MemDraw, Off: 10, Buf: []byte("body")},
			}))
			vecs := []vfd.IOVec{
				{Type: vfd.MemSuper, Off: 0, Buf: make([]byte, 4)},
				{Type: vfd.MemDraw, Off: 10, Buf: make([]byte, 4)},
			}
			require.NoError(t, vfd.ReadV(f, vecs))
			assert.Equal(t, "head", string(vecs[0].Buf))
			assert.Equal(t, "body", string(vecs[1].Buf))
			err = vfd.ReadV(f, []vfd.IOVec{{Off: 12, Buf: make([]byte, 4)}})
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		})
	}
}

func TestSec2PreallocateKeepsSize(t *testing.T) {
	f, err := vfd.Create(vfd.Sec2{}, filepath.Join(t.TempDir(), "p"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, vfd.Preallocate(f, 0, 1<<20))
	size, err := f.Size()
	require.NoError(t, err)
	assert.Equal(t, int64(0), size)
	assert.NotZero(t, f.(vfd.Fder).Fd())
	require.NoError(t, vfd.Preallocate(vfd.File(nil), 0, 0), "a file without the capability is a no-op")
}

func TestStdioFlushFailureKeepsPendingBytes(t *testing.T) {
	c := vfd.NewCore()
	d := vfd.NewStdio(vfd.NewFault(c, vfd.OnNth(vfd.OpWrite, 0, syscall.ENOSPC)), 1024)
	f, err := vfd.Create(d, "s")
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("pending"), 0)
	require.NoError(t, err, "buffered: nothing reaches the driver yet")
	assert.ErrorIs(t, f.Sync(), syscall.ENOSPC)
	require.NoError(t, f.Sync(), "the retry writes the kept bytes")
	assert.Equal(t, []byte("pending"), readAll(t, c, "s"))
	require.NoError(t, f.Close())
}

func TestOpKindAndMemTypeNames(t *testing.T) {
	assert.Equal(t, "syncdir", vfd.OpSyncDir.String())
	assert.Equal(t, "opkind(200)", vfd.OpKind(200).String())
	assert.Equal(t, "draw", vfd.MemDraw.String())
	assert.Equal(t, "memtype(?)", vfd.MemType(99).String())
	assert.True(t, vfd.MemBTree.IsMeta())
	assert.False(t, vfd.MemDefault.IsMeta())
}

// TestSec2VectorIO writes 3000 pieces with Sec2's pwritev grouping (runs
// of contiguous pieces longer than IOV_MAX, gaps, empty pieces) and
// checks every byte of the file against the same pieces written one by
// one into a Core file.
func TestSec2VectorIO(t *testing.T) {
	f, err := vfd.Create(vfd.Sec2{}, filepath.Join(t.TempDir(), "v"))
	require.NoError(t, err)
	defer f.Close()
	ref, err := vfd.Create(vfd.NewCore(), "ref")
	require.NoError(t, err)
	defer ref.Close()
	data := pattern(3000 * 7)
	var vecs []vfd.IOVec
	off := int64(5)
	for i := 0; i < 3000; i++ {
		n := 1 + i%7
		if i%5 == 4 {
			n = 0
		}
		if i%1300 == 1299 {
			off += 100 // a gap
		}
		vecs = append(vecs, vfd.IOVec{Type: vfd.MemDraw, Off: off, Buf: data[i*7 : i*7+n]})
		_, err := ref.WriteAt(data[i*7:i*7+n], off)
		require.NoError(t, err)
		off += int64(n)
	}
	_, ok := f.(vfd.VectorIO)
	require.True(t, ok, "Sec2 files have VectorIO")
	require.NoError(t, vfd.WriteV(f, vecs))
	size, err := f.Size()
	require.NoError(t, err)
	want := make([]byte, off)
	_, err = ref.ReadAt(want, 0)
	require.NoError(t, err)
	require.Equal(t, off, size)
	got := make([]byte, off)
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)

	back := make([]vfd.IOVec, len(vecs))
	for i, v := range vecs {
		back[i] = vfd.IOVec{Off: v.Off, Buf: make([]byte, len(v.Buf))}
	}
	require.NoError(t, vfd.ReadV(f, back))
	for i := range back {
		require.Equal(t, vecs[i].Buf, back[i].Buf, "piece %d", i)
	}
	assert.ErrorIs(t, vfd.ReadV(f, []vfd.IOVec{{Off: off - 2, Buf: make([]byte, 4)}}), io.ErrUnexpectedEOF)
	assert.ErrorIs(t, vfd.WriteV(f, []vfd.IOVec{{Off: -1, Buf: []byte("x")}}), vfd.ErrNegativeOffset)
	require.NoError(t, f.Close())
	assert.ErrorIs(t, vfd.WriteV(f, vecs[:1]), vfd.ErrClosed)
}
