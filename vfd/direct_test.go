package vfd_test

import (
	"errors"
	"io"
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

// TestDirectUnalignedReadReadsCoveringBlocks counts what an unaligned
// read asks of the device: only the aligned blocks that cover it, in one
// pread per 16 KiB bounce buffer; a read spanning more than that whose
// buffer address lines up with the blocks takes three (head block, the
// whole blocks straight into the buffer, tail block).
func TestDirectUnalignedReadReadsCoveringBlocks(t *testing.T) {
	dir := directDir(t)
	d := newDirect(t)
	calls, bytes := vfd.CountDirectPreads(d)
	name := filepath.Join(dir, "r")
	want := pattern(50000)
	require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, name, want))
	f, err := vfd.OpenRead(d, name)
	require.NoError(t, err)
	defer f.Close()
	tests := []struct {
		name    string
		off     int64
		n       int
		lineUp  bool // the buffer's address lines up with the file's blocks
		bytes   int64
		preads  int64
		eof     bool
		wantLen int
	}{
		{"inside one block", 100, 100, false, 4096, 1, false, 100},
		{"across two blocks", 4000, 123, true, 8192, 1, false, 123},
		{"aligned address, unaligned ends", 4000, 20000, true, 24576, 3, false, 20000},
		{"aligned start, unaligned length", 8192, 10000, true, 12288, 1, false, 10000},
		{"misaligned address", 4000, 20000, false, 24576, 2, false, 20000},
		{"long lined up", 100, 40000, true, 40960, 3, false, 40000},
		{"long misaligned", 100, 40000, false, 40960, 3, false, 40000},
		{"long lined up to the end of file", 4000, 60000, true, 53248, 3, true, 46000},
		{"to the end of file", 45000, 8000, true, 12288, 1, true, 5000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shift := int(tt.off % 4096)
			if !tt.lineUp {
				shift = (shift + 8) % 4096
			}
			buf := vfd.AlignedBuffer(tt.n+4096, 4096)[shift : shift+tt.n]
			calls.Store(0)
			bytes.Store(0)
			n, err := f.ReadAt(buf, tt.off)
			if tt.eof {
				assert.ErrorIs(t, err, io.EOF)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tt.wantLen, n)
			assert.Equal(t, want[tt.off:tt.off+int64(n)], buf[:n])
			assert.Equal(t, tt.bytes, bytes.Load(), "bytes asked of the device")
			assert.Equal(t, tt.preads, calls.Load(), "preads")
		})
	}
}
