package main

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/dhdf"
	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/vfd"
)

func writeTestSet(t *testing.T) string {
	t.Helper()
	base := filepath.Join(t.TempDir(), "sim")
	w, err := dhdf.Create(base, 2, dhdf.Options{Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }, HostName: "n0"})
	require.NoError(t, err)
	require.NoError(t, w.DefineSDS(dhdf.SDS{Name: "temp", Type: h5.Float32, Dims: []uint64{4, 2}, Attrs: []h5.Attribute{h5.StringAttr("units", "K")}}))
	data := make([]byte, 16)
	require.NoError(t, w.WriteChunk("temp", 1, "", []uint64{0, 0}, []uint64{2, 2}, data))
	require.NoError(t, w.WriteChunk("temp", 2, "", []uint64{2, 0}, []uint64{2, 2}, data))
	require.NoError(t, w.Close())
	return base
}

func TestDHDFLs(t *testing.T) {
	base := writeTestSet(t)
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"dhdf", "ls", base + ".h5"}, &out, &errb), errb.String())
	want := `set "2026-01-02T03:04:05Z sim.h5 0"
files:
     0  sim.h5                         n0
     1  sim.1.h5                       n0
     2  sim.2.h5                       n0
sds temp: float32 (4,2), 2 chunks
  attr units = K
  chunk file 1 temp_1_0                 origin (0,0) dims (2,2)
  chunk file 2 temp_2_0                 origin (2,0) dims (2,2)
`
	assert.Equal(t, want, out.String())

	out.Reset()
	require.Equal(t, 0, run([]string{"dhdf", "verify", base + ".h5"}, &out, &errb), errb.String())
	assert.Equal(t, "ok: 3 files, 1 SDSs, 2 chunks\n", out.String())
}

func TestDHDFErrors(t *testing.T) {
	base := writeTestSet(t)
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no args", []string{"dhdf"}, 2, "ftigo dhdf: missing command"},
		{"unknown sub", []string{"dhdf", "cat", "x"}, 2, `unknown command "cat" for "ftigo dhdf"`},
		{"two files", []string{"dhdf", "ls", "a", "b"}, 2, `too many arguments: want FILE, got 2: "a b"`},
		{"no file", []string{"dhdf", "verify"}, 2, "missing FILE"},
		{"missing", []string{"dhdf", "ls", base + ".nope.h5"}, 1, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			assert.Equal(t, tc.code, run(tc.args, &out, &errb))
			assert.Contains(t, errb.String(), tc.err)
		})
	}
	var out, errb bytes.Buffer
	assert.Equal(t, 0, run([]string{"dhdf", "--help"}, &out, &errb))
	assert.Contains(t, out.String(), "ftigo dhdf ls out/sim.h5")
	assert.Contains(t, out.String(), "Examples:")

	// A missing AHF is exit 1 naming the file.
	require.NoError(t, vfd.Sec2{}.Remove(base+".2.h5"))
	out.Reset()
	errb.Reset()
	assert.Equal(t, 1, run([]string{"dhdf", "ls", base + ".h5"}, &out, &errb))
	assert.Contains(t, errb.String(), "sim.2.h5")
	assert.Contains(t, errb.String(), "missing")
}

func TestDHDFVerifyCorruptChunk(t *testing.T) {
	base := writeTestSet(t)
	s, err := dhdf.Open(base+".h5", dhdf.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	// Corrupt the first data byte of AHF 1's chunk: data starts right
	// after the 48-byte superblock.
	f, err := vfd.Sec2{}.Open(base+".1.h5", vfd.ReadWrite)
	require.NoError(t, err)
	_, err = f.WriteAt(binary.LittleEndian.AppendUint32(nil, 0xdeadbeef), 48)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	var out, errb bytes.Buffer
	assert.Equal(t, 1, run([]string{"dhdf", "verify", base + ".h5"}, &out, &errb))
	assert.Contains(t, errb.String(), "checksum mismatch")
	assert.Contains(t, errb.String(), "1 of 2 chunks bad")
}
