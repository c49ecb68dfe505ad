package dhdf

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
	"github.com/ftigo/ftigo/vfd"
)

// TestFamilyDriver writes the tiny set through the family driver with
// 1 KiB members (so every file spans several members), reads it back
// through the same driver, and has h5py open it with driver='family'.
func TestFamilyDriver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fam := vfd.NewFamily(vfd.Sec2{}, 1024)
	base := filepath.Join(dir, "fam-%d")
	writeTinySet(t, fam, base)
	members, err := vfd.Sec2{}.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, m := range members {
		names = append(names, m.Name())
	}
	assert.Contains(t, names, "fam-0.h5")
	assert.Contains(t, names, "fam-1.h5", "the MHF spans more than one member")
	assert.Contains(t, names, "fam-0.1.h5")

	s, err := Open(base+".h5", Options{Driver: fam})
	require.NoError(t, err)
	got, err := s.ReadSDS("t")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	ref := vfd.NewCore()
	writeTinySet(t, ref, "fam-%d")
	rs, err := Open("fam-%d.h5", Options{Driver: ref})
	require.NoError(t, err)
	want, err := rs.ReadSDS("t")
	require.NoError(t, err)
	require.NoError(t, rs.Close())
	assert.Equal(t, want, got)

	h5dump := testutil.NeedTool(t, "h5dump", "read a family-driver set with libhdf5")
	out := run(t, dir, h5dump, "--enable-error-stack", "--filedriver=family", "-d", "/t", "fam-%d.h5")
	assert.Contains(t, out, "(2,0): 20, 21, 22,")

	py := testutil.NeedPython(t, "h5py", "numpy")
	out = run(t, dir, py, "-c", `
import h5py
f = h5py.File('fam-%d.h5', 'r', driver='family', memb_size=1024)
print(f.attrs['DHDF_SetId'].decode(), [r['FileName'].decode() for r in f['File_Info'][...]], f['t'][...].sum(), f['u'][...].tolist())
`)
	assert.Equal(t, "2026-11-22T04:00:00Z fam-%d.h5 0 ['fam-%d.h5', 'fam-%d.1.h5', 'fam-%d.2.h5'] 192 [-1.0, 1.5, 2.5]", strings.TrimSpace(out))
}
