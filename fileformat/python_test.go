package fileformat

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
)

// TestPythonReader reads the golden files and a freshly written file with
// testdata/ftiff_read.py, an independent reader written from
// docs/format/ftiff.md alone, and compares what it restores with the Go
// reader's view.
func TestPythonReader(t *testing.T) {
	py := testutil.NeedPython(t, "numpy")
	fresh := filepath.Join(t.TempDir(), "fresh.fti")
	{
		f := newFileAt(t, fresh)
		v := []Var{
			{ID: 1, Name: "x", Type: Float32, Data: asBytes([]float32{0.5, -1})},
			{ID: 2, Name: "n", Type: Int64, Data: asBytes([]int64{-3, 1 << 40})},
			{ID: 3, Name: "z", Type: Complex128, Data: asBytes([]complex128{complex(1, 2)})},
			{ID: 4, Name: "raw", Type: Bytes, Data: []byte{0xde, 0xad}},
		}
		lay, _, err := Write(f, Meta{CkptID: 8, Rank: 1, Level: 4, Timestamp: 99}, v, nil, WithBlockSize(MinBlockSize))
		require.NoError(t, err)
		v[0].Data = asBytes([]float32{0.5, -1, 2.25})
		v[1].Data = asBytes([]int64{7})
		_, _, err = Write(f, Meta{CkptID: 9, Rank: 1, Level: 4, Timestamp: 100}, v, lay, WithBlockSize(MinBlockSize))
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	paths := []string{fresh}
	for _, g := range []string{"single.fti", "grown.fti", "empty.fti", "blocks.fti", "datasets.fti"} {
		paths = append(paths, filepath.Join("testdata", g))
	}
	out, err := exec.Command(py, append([]string{filepath.Join("testdata", "ftiff_read.py")}, paths...)...).CombinedOutput()
	require.NoError(t, err, string(out))
	var want strings.Builder
	for _, path := range paths {
		want.WriteString("file " + filepath.Base(path) + "\n")
		want.WriteString(goView(t, path))
	}
	assert.Equal(t, want.String(), string(out))
}

// goView prints what the Go reader sees in the format of ftiff_read.py.
func goView(t *testing.T, path string) string {
	f := openAt(t, path)
	r, err := Open(f)
	require.NoError(t, err)
	var b bytes.Buffer
	m, s := r.Meta(), r.Summary()
	fmt.Fprintf(&b, "ckpt=%d rank=%d level=%d ts=%d bs=%d fs=%d maxfs=%d ptfs=%d\n",
		m.CkptID, m.Rank, m.Level, m.Timestamp, s.BlockSize, s.FileSize, m.MaxFs, m.PtFs)
	for _, v := range r.Vars() {
		d := make([]byte, v.Size)
		require.NoError(t, r.ReadVar(v.ID, d))
		fmt.Fprintf(&b, "var %d %s type=%d dtype=%s count=%d %s\n", v.ID, v.Name, v.Type, numpyDtype(v.Type, v.ElemSize), v.Count, hex.EncodeToString(d))
	}
	for _, d := range r.Datasets() {
		fmt.Fprintf(&b, "dataset %d %s shape=%s type=%d esize=%d sparse=%d\n", d.ID, d.Name, pyList(d.Shape), d.Type, d.ElemSize, map[bool]int{false: 0, true: 1}[d.Sparse])
	}
	for _, s := range r.Subsets() {
		fmt.Fprintf(&b, "subset var=%d dataset=%d offset=%s count=%s\n", s.VarID, s.Dataset, pyList(s.Offset), pyList(s.Count))
	}
	return b.String()
}

// numpyDtype is the numpy dtype string ftiff_read.py derives for a type.
func numpyDtype(t ElemType, es uint32) string {
	switch t {
	case Bytes, Uint8:
		return "|u1"
	case Int8:
		return "|i1"
	case Struct:
		return fmt.Sprintf("|V%d", es)
	}
	kind := map[ElemType]string{Int16: "i", Int32: "i", Int64: "i", Uint16: "u", Uint32: "u", Uint64: "u",
		Float32: "f", Float64: "f", Complex64: "c", Complex128: "c"}[t]
	return fmt.Sprintf("<%s%d", kind, t.Size())
}

// pyList formats like Python's str of a list of ints: "[2, 0]".
func pyList(x []int64) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(s, ", ") + "]"
}
