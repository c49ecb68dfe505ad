package h5ckpt

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
	"github.com/ftigo/ftigo/vfd"
)

// writeInterop writes a 4-rank checkpoint and, beside it, each global
// dataset's expected bytes (stitched by the test from its own reference).
func writeInterop(t *testing.T) (string, *job) {
	dir := t.TempDir()
	j := blockJob(4, testDatasets(), 21)
	name := Name(dir, "VPR-h5", 12)
	require.NoError(t, j.write(t, vfd.Sec2{}, name, 12))
	for id, g := range j.globals {
		require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, filepath.Join(dir, fmt.Sprintf("want%d.bin", id)), g))
	}
	return name, j
}

// TestH5pyReadsDatasets: h5py reads every global dataset under its name
// with its global shape and type, equal to the stitched ranks' data, and
// the variables outside datasets and the tables.
func TestH5pyReadsDatasets(t *testing.T) {
	py := testutil.NeedPython(t, "h5py", "numpy")
	name, _ := writeInterop(t)
	out, err := exec.Command(py, "-c", `
import sys, os, h5py, numpy as np
path = sys.argv[1]
d = os.path.dirname(path)
f = h5py.File(path, 'r')
assert f.attrs['ftigo_format'] == b'ftigo-h5ckpt', f.attrs['ftigo_format']
assert f.attrs['ftigo_ranks'] == 4 and f.attrs['ftigo_ckpt_id'] == 12
want = {
  'field/temperature': ((37, 29), np.dtype('<f8'), 1),
  'ids': ((101,), np.dtype('<i4'), 2),
  'vol': ((7, 5, 9), np.dtype('<c8'), 3),
  'field/rec': ((13, 12), np.dtype('u1'), 4),
}
for name, (shape, dt, i) in want.items():
    x = f[name][...]
    assert x.shape == shape, (name, x.shape)
    assert x.dtype == dt, (name, x.dtype)
    assert f[name].attrs['ftigo_dataset_id'] == i
    raw = open(os.path.join(d, 'want%d.bin' % i), 'rb').read()
    assert x.tobytes() == raw, name
    print(name, 'ok')
assert f['ftigo/rank2/1'][...].tolist() == [1002]
assert f['ftigo/rank3/2'][...].shape == (4, 24)
v = f['ftigo/variables'][...]
assert list(v.dtype.names) == ['rank', 'var_id', 'dataset_id', 'elem_type', 'elem_size', 'size', 'name_off', 'name_len', 'first_hash', 'offset', 'count'], v.dtype.names
assert len(v) == 24 and v['rank'].tolist() == sorted(v['rank'].tolist())
print('tables ok')
`, name).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "tables ok")
}

// TestH5dumpParses: h5dump reads the whole file without an error stack.
func TestH5dumpParses(t *testing.T) {
	h5dump := testutil.NeedTool(t, "h5dump", "check that libhdf5 reads the HDF5 checkpoint")
	name, _ := writeInterop(t)
	out, err := exec.Command(h5dump, "--enable-error-stack", name).CombinedOutput()
	require.NoError(t, err, "%s", out)
	dump := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{
		`DATASET "temperature" { DATATYPE H5T_IEEE_F64LE DATASPACE SIMPLE { ( 37, 29 ) / ( 37, 29 ) }`,
		`DATASET "ids" { DATATYPE H5T_STD_I32LE DATASPACE SIMPLE { ( 101 ) / ( 101 ) }`,
		`ATTRIBUTE "ftigo_format" {`, `"ftigo-h5ckpt"`,
		`GROUP "rank3" {`,
	} {
		assert.Contains(t, dump, want)
	}
}

// TestLibhdf5ReadWrite: libhdf5 opens the checkpoint read-write (h5py
// 'r+'), changes data and adds objects, and the file stays readable by
// libhdf5.
func TestLibhdf5ReadWrite(t *testing.T) {
	py := testutil.NeedPython(t, "h5py", "numpy")
	name, _ := writeInterop(t)
	out, err := exec.Command(py, "-c", `
import sys, h5py, numpy as np
path = sys.argv[1]
with h5py.File(path, 'r+') as f:
    f['ids'][0:3] = [-1, -2, -3]
    f.attrs['note'] = 'edited by h5py'
    for i in range(20):
        f.create_dataset('extra%02d' % i, data=np.arange(i + 1))
    del f['field/rec']
with h5py.File(path, 'r') as f:
    assert f['ids'][0:3].tolist() == [-1, -2, -3]
    assert f.attrs['note'] == 'edited by h5py'
    assert 'rec' not in f['field'] and len([k for k in f if k.startswith('extra')]) == 20
    assert f['field/temperature'].shape == (37, 29)
print('r+ ok')
`, name).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "r+ ok")
}
