package vfd_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
	"github.com/ftigo/ftigo/vfd/vfdtest"
)

func newDirect(t *testing.T) *vfd.Direct {
	d, err := vfd.NewDirect(0, 16384)
	require.NoError(t, err)
	return d
}

// directDir returns a temporary directory where O_DIRECT works, or skips.
func directDir(t *testing.T) string {
	dir := t.TempDir()
	f, err := vfd.Create(newDirect(t), filepath.Join(dir, "probe"))
	if errors.Is(err, vfd.ErrUnsupported) {
		t.Skipf("skipping: the file system of %s refuses O_DIRECT: %v", dir, err)
	}
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, vfd.Sec2{}.Remove(filepath.Join(dir, "probe")))
	return dir
}

func TestConformanceDirect(t *testing.T) {
	vfdtest.TestDriver(t, func(t *testing.T) (vfd.Driver, string) { return newDirect(t), directDir(t) })
}

func TestDirectUnalignedAndAligned(t *testing.T) {
	dir := directDir(t)
	d := newDirect(t)
	name := filepath.Join(dir, "d")
	f, err := vfd.Create(d, name)
	require.NoError(t, err)
	want := pattern(50000)
	// Unaligned pieces of odd sizes, crossing the 16 KiB bounce buffer.
	for _, cut := range [][2]int{{0, 1}, {1, 4095}, {4095, 4097}, {4097, 30001}, {30001, 50000}} {
		_, err := f.WriteAt(want[cut[0]:cut[1]], int64(cut[0]))
		require.NoError(t, err)
		size, err := f.Size()
		require.NoError(t, err)
		assert.Equal(t, int64(cut[1]), size, "size after writing up to %d", cut[1])
	}
	got := make([]byte, 50000)
	require.NoError(t, vfd.ReadFull(f, got, 0))
	assert.Equal(t, want, got)
	got = make([]byte, 123)
	require.NoError(t, vfd.ReadFull(f, got, 4000))
	assert.Equal(t, want[4000:4123], got)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	assert.Equal(t, want, readAll(t, vfd.Sec2{}, name), "the bytes on disk, read back without O_DIRECT")
}

func TestDirectRefusedIsErrUnsupported(t *testing.T) {
	dir := t.TempDir()
	d := newDirect(t)
	vfd.RefuseODirect(d)
	name := filepath.Join(dir, "x")
	_, err := vfd.Create(d, name)
	require.ErrorIs(t, err, vfd.ErrUnsupported)
	assert.ErrorIs(t, err, syscall.EINVAL)
	assert.Contains(t, err.Error(), name)
	_, err = vfd.Sec2{}.Stat(name)
	assert.ErrorIs(t, err, fs.ErrNotExist, "a file created by the refused open is removed")
}

func TestDirectBadAlignment(t *testing.T) {
	_, err := vfd.NewDirect(3000, 0)
	assert.ErrorIs(t, err, fs.ErrInvalid)
}

func TestDirectAlignedFastPath(t *testing.T) {
	dir := directDir(t)
	d := newDirect(t)
	name := filepath.Join(dir, "a")
	f, err := vfd.Create(d, name)
	require.NoError(t, err)
	buf := vfd.AlignedBuffer(8192, 4096)
	copy(buf, pattern(8192))
	_, err = f.WriteAt(buf, 4096)
	require.NoError(t, err)
	back := vfd.AlignedBuffer(8192, 4096)
	require.NoError(t, vfd.ReadFull(f, back, 4096))
	assert.Equal(t, pattern(8192), back)
	size, err := f.Size()
	require.NoError(t, err)
	assert.Equal(t, int64(12288), size)
	require.NoError(t, f.Close())
	assert.Equal(t, append(make([]byte, 4096), pattern(8192)...), readAll(t, vfd.Sec2{}, name))
}
