package h5

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// tableType is the compound type used by the sample file's table.
var tableType = Compound(
	Member{Name: "id", Type: Int32},
	Member{Name: "name", Type: String(8)},
	Member{Name: "dims", Type: Array(Int32, 3)},
)

// buildSample writes a small file exercising every feature of the profile.
func buildSample(t testing.TB, f vfd.File) {
	t.Helper()
	w := NewWriter(f)
	root := w.Root()
	require.NoError(t, root.SetAttr(StringAttr("title", "sample")))
	require.NoError(t, root.SetAttr(MustAttr("version", int32(3))))
	ints, err := binary.Append(nil, binary.LittleEndian, []int32{0, 1, 2, 3, 4, 5})
	require.NoError(t, err)
	d, err := root.CreateDataset("ints", Int32, []uint64{2, 3}, ints)
	require.NoError(t, err)
	require.NoError(t, d.SetAttr(MustAttr("scale", 0.5)))
	require.NoError(t, d.SetAttr(MustAttr("origin", []int64{7, 8})))
	g, err := root.CreateGroup("grp")
	require.NoError(t, err)
	fl, err := binary.Append(nil, binary.LittleEndian, []float32{1.5, -2.25})
	require.NoError(t, err)
	_, err = g.CreateDataset("floats", Float32, []uint64{2}, fl)
	require.NoError(t, err)
	_, err = g.CreateDataset("scalar", Float64, nil, binary.LittleEndian.AppendUint64(nil, 0x4045000000000000))
	require.NoError(t, err)
	var rows []byte
	for i, name := range []string{"alpha", "b"} {
		rows = binary.LittleEndian.AppendUint32(rows, uint32(i+1))
		n := make([]byte, 8)
		copy(n, name)
		rows = append(rows, n...)
		for k := 0; k < 3; k++ {
			rows = binary.LittleEndian.AppendUint32(rows, uint32(10*i+k))
		}
	}
	tb, err := root.CreateDataset("table", tableType, []uint64{2}, rows)
	require.NoError(t, err)
	require.NoError(t, tb.SetAttr(StringAttr("CLASS", "TABLE")))
	require.NoError(t, root.CreateExternalLink("ext", "sample.h5", "/grp/floats"))
	_, err = root.CreateVirtual("virt", Int32, []uint64{4, 3}, binary.LittleEndian.AppendUint32(nil, 0xffffffff), []Mapping{
		{File: ".", Dataset: "/ints", Start: []uint64{0, 0}, Count: []uint64{2, 3}},
		{File: ".", Dataset: "/ints", Start: []uint64{2, 0}, Count: []uint64{2, 3}},
	})
	require.NoError(t, err)
	require.NoError(t, w.Close())
}

func writeSampleFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sample.h5")
	f, err := vfd.CreateTrunc(vfd.Sec2{}, p)
	require.NoError(t, err)
	buildSample(t, f)
	require.NoError(t, f.Close())
	return p
}
