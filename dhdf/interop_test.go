package dhdf

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
	"github.com/ftigo/ftigo/vfd"
)

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %v:\n%s", name, args, out)
	return string(out)
}

func TestInteropH5dumpH5ls(t *testing.T) {
	t.Parallel()
	h5dump := testutil.NeedTool(t, "h5dump", "check that libhdf5 reads every object of a set")
	h5ls := testutil.NeedTool(t, "h5ls", "list the tree of a set")
	dir := t.TempDir()
	writeSeedSet(t, vfd.Sec2{}, filepath.Join(dir, "seed"))
	for _, f := range []string{"seed.h5", "seed.1.h5", "seed.2.h5"} {
		out := run(t, dir, h5dump, "--enable-error-stack", "-H", f)
		assert.NotContains(t, out, "HDF5-DIAG", f)
		assert.Contains(t, out, `ATTRIBUTE "DHDF_SetId"`, f)
	}
	// Full data dump of the small tiny set, VDS included.
	writeTinySet(t, vfd.Sec2{}, filepath.Join(dir, "tiny"))
	out := run(t, dir, h5dump, "--enable-error-stack", "tiny.h5")
	assert.NotContains(t, out, "HDF5-DIAG")
	assert.Contains(t, out, "(0,0): 0, 1, 2,\n      (1,0): 10, 11, 12,\n      (2,0): 20, 21, 22,\n      (3,0): 30, 31, 32")
	assert.Contains(t, out, "(0): -1, 1.5, 2.5")
	out = run(t, dir, h5dump, "-p", "-H", "-d", "/t", "tiny.h5")
	assert.Contains(t, out, `FILE "tiny.2.h5"`)
	assert.Contains(t, out, `DATASET "/t_2_0"`)

	out = run(t, dir, h5ls, "-r", "seed.h5")
	for _, want := range []string{"/File_Info", "/DHDF_ChunkTables/sds1", "/chunks/sds1/sds1_a", "External Link {seed.1.h5//sds1_a}", "/sds1", "/sds2"} {
		assert.Contains(t, out, want)
	}
}

const pyCheck = `
import sys, json, h5py, numpy as np
f = h5py.File(sys.argv[1], 'r')
out = {'attrs': {k: (v.decode() if isinstance(v, bytes) else v.tolist()) for k, v in f.attrs.items()}}
fi = f['File_Info']
out['file_info'] = [[int(r['DHDF_FileId']), r['FileName'].decode(), r['HostName'].decode()] for r in fi[...]]
out['file_info_class'] = fi.attrs['CLASS'].decode()
sds = {}
for name in ['sds1', 'sds2']:
    d = f[name]
    ct = f['DHDF_ChunkTables/' + name]
    rows = [[int(r['DHDF_FileId']), r['ChunkName'].decode(), r['DimSizes'][:2].tolist(), r['Origins'][:2].tolist()] for r in ct[...]]
    arr = d[...]
    # Stitch from the AHFs through the external links and compare with the VDS.
    st = np.zeros_like(arr)
    for fid, cname, dims, orig in rows:
        c = f['chunks/%s/%s' % (name, cname)][...]
        st[orig[0]:orig[0]+dims[0], orig[1]:orig[1]+dims[1]] = c
    sds[name] = {'virtual': d.is_virtual, 'shape': list(d.shape), 'dtype': str(d.dtype),
                 'sources': sorted([(m.file_name, m.dset_name) for m in d.virtual_sources()]),
                 'attrs': {k: (v.decode() if isinstance(v, bytes) else v.tolist()) for k, v in d.attrs.items()},
                 'table': rows, 'table_class': ct.attrs['CLASS'].decode(), 'stitched_equal': bool((st == arr).all()),
                 'corner': arr[-1, -1].item(), 'sum': float(arr.astype('f8').sum())}
out['sds'] = sds
i = np.arange(500)[:, None]; j = np.arange(200)[None, :]
out['sds1_expected'] = bool((f['sds1'][...] == 1000 * i + j).all())
i = np.arange(1000, dtype='f4')[:, None]; j = np.arange(1000, dtype='f4')[None, :]
out['sds2_expected'] = bool((f['sds2'][...] == i + j / np.float32(1000)).all())
for a in ['seed.1.h5', 'seed.2.h5']:
    g = h5py.File(a, 'r')
    out[a] = {'id': int(g.attrs['DHDF_FileId']), 'set': g.attrs['DHDF_SetId'].decode(),
              'rows': len(g['File_Info']), 'chunks': sorted(k for k in g.keys() if k != 'File_Info'),
              'origin': {k: g[k].attrs['origin'].tolist() for k in g.keys() if k != 'File_Info'}}
print(json.dumps(out))
`

func TestInteropH5py(t *testing.T) {
	t.Parallel()
	py := testutil.NeedPython(t, "h5py", "numpy")
	dir := t.TempDir()
	writeSeedSet(t, vfd.Sec2{}, filepath.Join(dir, "seed"))
	out := run(t, dir, py, "-c", pyCheck, "seed.h5")
	var got struct {
		Attrs         map[string]any `json:"attrs"`
		FileInfo      [][]any        `json:"file_info"`
		FileInfoClass string         `json:"file_info_class"`
		SDS           map[string]struct {
			Virtual       bool           `json:"virtual"`
			Shape         []int          `json:"shape"`
			Dtype         string         `json:"dtype"`
			Sources       [][]string     `json:"sources"`
			Attrs         map[string]any `json:"attrs"`
			Table         [][]any        `json:"table"`
			TableClass    string         `json:"table_class"`
			StitchedEqual bool           `json:"stitched_equal"`
		} `json:"sds"`
		SDS1 bool `json:"sds1_expected"`
		SDS2 bool `json:"sds2_expected"`
		AHF1 struct {
			ID     int                `json:"id"`
			Set    string             `json:"set"`
			Rows   int                `json:"rows"`
			Chunks []string           `json:"chunks"`
			Origin map[string][]int64 `json:"origin"`
		} `json:"seed.1.h5"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &got), out)
	assert.Equal(t, "2026-11-22T04:00:00Z seed.h5 0", got.Attrs["DHDF_SetId"])
	assert.EqualValues(t, 0, got.Attrs["DHDF_FileId"])
	assert.Equal(t, [][]any{{0.0, "seed.h5", "node0"}, {1.0, "seed.1.h5", "node0"}, {2.0, "seed.2.h5", "node0"}}, got.FileInfo)
	assert.Equal(t, FileInfoClass, got.FileInfoClass)
	s1 := got.SDS["sds1"]
	assert.True(t, s1.Virtual)
	assert.Equal(t, []int{500, 200}, s1.Shape)
	assert.Equal(t, "int32", s1.Dtype)
	assert.Equal(t, [][]string{{"seed.1.h5", "/sds1_a"}, {"seed.2.h5", "/sds1_b"}}, s1.Sources)
	assert.Equal(t, "kelvin", s1.Attrs["units"])
	assert.Equal(t, 2.5, s1.Attrs["scale"])
	assert.Equal(t, "int32", s1.Attrs["datatype"])
	assert.EqualValues(t, 2, s1.Attrs["rank"])
	assert.Equal(t, []any{500.0, 200.0}, s1.Attrs["dimension_sizes"])
	assert.Equal(t, [][]any{{1.0, "sds1_a", []any{300.0, 200.0}, []any{0.0, 0.0}}, {2.0, "sds1_b", []any{200.0, 200.0}, []any{300.0, 0.0}}}, s1.Table)
	assert.Equal(t, ChunkTableClass, s1.TableClass)
	assert.True(t, s1.StitchedEqual)
	assert.True(t, got.SDS["sds2"].StitchedEqual)
	assert.Equal(t, "float32", got.SDS["sds2"].Dtype)
	assert.True(t, got.SDS1, "sds1 values through the VDS")
	assert.True(t, got.SDS2, "sds2 values through the VDS")
	assert.Equal(t, 1, got.AHF1.ID)
	assert.Equal(t, "2026-11-22T04:00:00Z seed.h5 0", got.AHF1.Set)
	assert.Equal(t, 2, got.AHF1.Rows)
	assert.Equal(t, []string{"sds1_a", "sds2_all"}, got.AHF1.Chunks)
	assert.Equal(t, []int64{0, 0}, got.AHF1.Origin["sds1_a"])
}

func TestInteropLibhdf5Modifies(t *testing.T) {
	t.Parallel()
	py := testutil.NeedPython(t, "h5py", "numpy")
	dir := t.TempDir()
	writeTinySet(t, vfd.Sec2{}, filepath.Join(dir, "tiny"))
	// libhdf5 opens our MHF r+, adds 20 datasets (compact -> dense links),
	// edits an attribute, and reads everything back.
	out := run(t, dir, py, "-c", `
import h5py, numpy as np
g = h5py.File('tiny.h5', 'r+')
for i in range(20):
    g.create_dataset('extra%02d' % i, data=np.arange(i + 1))
g.attrs['added'] = 'yes'
g.close()
g = h5py.File('tiny.h5', 'r')
print(len(g.keys()), g.attrs['added'], g['extra19'][...].sum(), g['t'][...].sum(), g.attrs['DHDF_FileId'])
`)
	assert.Equal(t, "25 yes 190 192 0", strings.TrimSpace(out))
	// Our reader rejects what libhdf5 turned into dense storage, clearly.
	_, err := Open(filepath.Join(dir, "tiny.h5"), Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tiny.h5")
}

func TestInteropH5dumpRejectsCutFiles(t *testing.T) {
	t.Parallel()
	h5dump := testutil.NeedTool(t, "h5dump", "check that a cut file is refused by libhdf5")
	dir := t.TempDir()
	writeTinySet(t, vfd.Sec2{}, filepath.Join(dir, "tiny"))
	full, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join(dir, "tiny.1.h5"))
	require.NoError(t, err)
	// A sample of lengths (the head, a stride, the tail); our own reader is
	// checked at every length in TestCutMHFEveryLength.
	lengths := []int{0, 8, 47, 48, 200, len(full) / 2, len(full) - 700, len(full) - 1}
	cut := filepath.Join(dir, "cut.h5")
	for _, n := range lengths {
		require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, cut, full[:n]))
		err := exec.Command(h5dump, "-H", cut).Run()
		assert.Error(t, err, "h5dump accepted a file cut at %d of %d bytes", n, len(full))
	}
	require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, cut, full))
	require.NoError(t, exec.Command(h5dump, "-H", cut).Run())
}

// TestInteropH5repackH5diff: libhdf5 copies every file of a set object by
// object (h5repack) and finds no difference to our original (h5diff).
func TestInteropH5repackH5diff(t *testing.T) {
	t.Parallel()
	h5repack := testutil.NeedTool(t, "h5repack", "copy a set with libhdf5")
	h5diff := testutil.NeedTool(t, "h5diff", "compare our files with libhdf5's copies")
	dir := t.TempDir()
	writeTinySet(t, vfd.Sec2{}, filepath.Join(dir, "tiny"))
	for _, f := range []string{"tiny.h5", "tiny.1.h5", "tiny.2.h5"} {
		run(t, dir, h5repack, f, "re-"+f)
		out := run(t, dir, h5diff, "-v", f, "re-"+f)
		assert.Contains(t, out, "0 differences found", f)
		assert.NotContains(t, out, "Not comparable", f)
	}
}
