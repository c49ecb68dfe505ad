package vfd_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
	"github.com/ftigo/ftigo/vfd"
)

func TestFamilyMembersArePlainSlices(t *testing.T) {
	c := vfd.NewCore()
	d := vfd.NewFamily(c, 100)
	f, err := vfd.Create(d, "data-%05d.bin")
	require.NoError(t, err)
	space := pattern(250)
	_, err = f.WriteAt(space, 0)
	require.NoError(t, err)
	ff := f.(*vfd.FamilyFile)
	assert.Equal(t, 3, ff.Members())
	assert.Equal(t, int64(100), ff.MemberSize())
	require.NoError(t, f.Close())
	assert.Equal(t, space[0:100], readAll(t, c, "data-00000.bin"))
	assert.Equal(t, space[100:200], readAll(t, c, "data-00001.bin"))
	assert.Equal(t, space[200:250], readAll(t, c, "data-00002.bin"))
	info, err := d.Stat("data-%05d.bin")
	require.NoError(t, err)
	assert.Equal(t, int64(250), info.Size())
}

func TestFamilySparseWriteFillsEarlierMembers(t *testing.T) {
	c := vfd.NewCore()
	d := vfd.NewFamily(c, 64)
	f, err := vfd.Create(d, "s-%d")
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("x"), 64*3+1)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	for i, want := range []int64{64, 64, 64, 2} {
		info, err := c.Stat(fmt.Sprintf("s-%d", i))
		require.NoError(t, err)
		assert.Equal(t, want, info.Size(), "member %d", i)
	}
	// Reopen with another configured size: the member size is discovered.
	g, err := vfd.OpenRead(vfd.NewFamily(c, 4096), "s-%d")
	require.NoError(t, err)
	defer g.Close()
	assert.Equal(t, int64(64), g.(*vfd.FamilyFile).MemberSize())
	buf := make([]byte, 194)
	require.NoError(t, vfd.ReadFull(g, buf, 0))
	assert.Equal(t, append(make([]byte, 193), 'x'), buf)
}

func TestFamilyTruncateRemovesMembers(t *testing.T) {
	c := vfd.NewCore()
	f, err := vfd.Create(vfd.NewFamily(c, 10), "t%02d")
	require.NoError(t, err)
	_, err = f.WriteAt(pattern(35), 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(15))
	require.NoError(t, f.Close())
	_, err = c.Stat("t02")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Equal(t, pattern(35)[10:15], readAll(t, c, "t01"))
}

func TestFamilyOpenErrors(t *testing.T) {
	tests := []struct {
		name    string
		members []int // sizes of members written directly
		pattern string
		want    error
		msg     string
	}{
		{"non-last member of another size", []int{100, 80, 100, 5}, "m-%d", vfd.ErrFamilyMismatch, "member m-1 has 80 bytes, member 0 has 100"},
		{"last member larger", []int{100, 120}, "m-%d", vfd.ErrFamilyMismatch, "last member m-1 has 120 bytes"},
		{"no verb", []int{1}, "m-0", fs.ErrInvalid, "integer verb"},
		{"missing", nil, "m-%d", fs.ErrNotExist, "m-%d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := vfd.NewCore()
			for i, n := range tt.members {
				require.NoError(t, vfd.WriteFileAtomic(c, fmt.Sprintf("m-%d", i), make([]byte, n)))
			}
			_, err := vfd.OpenRead(vfd.NewFamily(c, 100), tt.pattern)
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

func TestFamilyRenameAndRemove(t *testing.T) {
	c := vfd.NewCore()
	d := vfd.NewFamily(c, 10)
	for _, p := range []struct {
		name string
		n    int
	}{{"a%d", 25}, {"b%d", 45}} {
		f, err := vfd.Create(d, p.name)
		require.NoError(t, err)
		_, err = f.WriteAt(pattern(p.n), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	require.NoError(t, d.Rename("a%d", "b%d"))
	got, err := vfd.ReadFile(d, "b%d")
	require.NoError(t, err)
	assert.Equal(t, pattern(25), got)
	_, err = c.Stat("b3")
	assert.ErrorIs(t, err, fs.ErrNotExist, "extra members of the replaced family are removed")
	_, err = c.Stat("a0")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, d.Remove("b%d"))
	assert.Equal(t, vfd.CoreUsage{}, c.Usage())
}

// TestFamilyInteropH5py proves byte compatibility with libhdf5's family
// driver in both directions.
func TestFamilyInteropH5py(t *testing.T) {
	py := testutil.NeedPython(t, "h5py", "numpy")
	dir := t.TempDir()
	// libhdf5 writes a family (which we discover) and a single file (which
	// we write as a family for libhdf5 to read), in one interpreter start.
	script := `import h5py, numpy as np, sys
with h5py.File(sys.argv[1], 'w', driver='family', memb_size=2048) as f:
    f['x'] = np.arange(2000, dtype='<i4')
with h5py.File(sys.argv[2], 'w') as f:
    f['y'] = np.arange(3000, dtype='<f8')
`
	single := filepath.Join(dir, "single.h5")
	out, err := exec.Command(py, "-c", script, filepath.Join(dir, "h5fam-%d.h5"), single).CombinedOutput()
	require.NoError(t, err, string(out))
	f, err := vfd.OpenRead(vfd.NewFamily(vfd.Sec2{}, 0), filepath.Join(dir, "h5fam-%d.h5"))
	require.NoError(t, err)
	defer f.Close()
	ff := f.(*vfd.FamilyFile)
	assert.Equal(t, int64(2048), ff.MemberSize())
	assert.Equal(t, 5, ff.Members())
	size, err := f.Size()
	require.NoError(t, err)
	space := make([]byte, size)
	require.NoError(t, vfd.ReadFull(f, space, 0))
	assert.Equal(t, []byte("\x89HDF\r\n\x1a\n"), space[:8])
	raw := make([]byte, 8000)
	for i := range 2000 {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(i))
	}
	assert.True(t, bytes.Contains(space, raw), "the dataset's bytes are contiguous in the address space")

	img := readAll(t, vfd.Sec2{}, single)
	g, err := vfd.Create(vfd.NewFamily(vfd.Sec2{}, 1024), filepath.Join(dir, "ours-%03d.h5"))
	require.NoError(t, err)
	_, err = g.WriteAt(img, 0)
	require.NoError(t, err)
	require.NoError(t, g.Sync())
	require.NoError(t, g.Close())
	script = `import h5py, sys
with h5py.File(sys.argv[1], 'r', driver='family', memb_size=1024) as f:
    print(int(f['y'][:].sum()))
`
	out, err = exec.Command(py, "-c", script, filepath.Join(dir, "ours-%03d.h5")).CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Equal(t, "4498500", strings.TrimSpace(string(out)))
}
