package h5

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
	"github.com/ftigo/ftigo/vfd"
)

func TestH5dumpSample(t *testing.T) {
	t.Parallel()
	h5dump := testutil.NeedTool(t, "h5dump", "check that libhdf5 reads our files")
	p := writeSampleFile(t)
	out, err := exec.Command(h5dump, "--enable-error-stack", p).CombinedOutput()
	t.Logf("%s", out)
	require.NoError(t, err, "%s", out)
	// libhdf5 must see the values we wrote, not just open the file.
	dump := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{
		`ATTRIBUTE "title" {`, `(0): "sample"`,
		`ATTRIBUTE "version" { DATATYPE H5T_STD_I32LE DATASPACE SCALAR DATA { (0): 3 }`,
		`TARGETFILE "sample.h5" TARGETPATH "/grp/floats"`,
		`DATASET "floats" { DATATYPE H5T_IEEE_F32LE DATASPACE SIMPLE { ( 2 ) / ( 2 ) } DATA { (0): 1.5, -2.25 }`,
		`DATASET "scalar" { DATATYPE H5T_IEEE_F64LE DATASPACE SCALAR DATA { (0): 42 }`,
		`DATASET "ints" { DATATYPE H5T_STD_I32LE DATASPACE SIMPLE { ( 2, 3 ) / ( 2, 3 ) } DATA { (0,0): 0, 1, 2, (1,0): 3, 4, 5 }`,
		`ATTRIBUTE "origin" { DATATYPE H5T_STD_I64LE DATASPACE SIMPLE { ( 2 ) / ( 2 ) } DATA { (0): 7, 8 }`,
		`ATTRIBUTE "scale" { DATATYPE H5T_IEEE_F64LE DATASPACE SCALAR DATA { (0): 0.5 }`,
		`"alpha\000\000\000", [ 0, 1, 2 ]`, `[ 10, 11, 12 ]`, `(0): "TABLE"`,
		`DATASET "virt" { DATATYPE H5T_STD_I32LE DATASPACE SIMPLE { ( 4, 3 ) / ( 4, 3 ) } DATA { (0,0): 0, 1, 2, (1,0): 3, 4, 5, (2,0): 0, 1, 2, (3,0): 3, 4, 5 }`,
	} {
		assert.Contains(t, dump, want)
	}
}

// TestForeignFilesRejected has libhdf5 write files of other profiles; our
// reader must refuse each with ErrUnsupported and the file name, not
// misread it.
func TestForeignFilesRejected(t *testing.T) {
	t.Parallel()
	py := testutil.NeedPython(t, "h5py", "numpy")
	dir := t.TempDir()
	cmd := exec.Command(py, "-c", `
import h5py, numpy as np
for name, lv in [('earliest.h5', 'earliest'), ('latest.h5', 'latest'), ('v108.h5', ('v108', 'v108'))]:
    with h5py.File(name, 'w', libver=lv) as f:
        f.create_dataset('d', data=np.arange(4, dtype='<i4'))
with h5py.File('chunked.h5', 'w', libver=('v108', 'v108')) as f:
    f.create_dataset('d', data=np.arange(4, dtype='<i4'), chunks=(2,), track_times=False)
`)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, name := range []string{"earliest.h5", "latest.h5", "v108.h5", "chunked.h5"} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			b, err := vfd.ReadFile(vfd.Sec2{}, p)
			require.NoError(t, err)
			_, err = Open(bytes.NewReader(b), int64(len(b)), p)
			require.ErrorIs(t, err, ErrUnsupported)
			assert.Contains(t, err.Error(), name)
		})
	}
}
