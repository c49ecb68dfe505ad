package gsd

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestWriterNameRules: chunk names and the header's application and
// schema must be what python3-gsd can read: valid UTF-8 without NUL.
// Long application names are cut at a character boundary.
func TestWriterNameRules(t *testing.T) {
	core := vfd.NewCore()
	for _, app := range []string{"bad\xff", "a\x00b"} {
		_, err := Create(core, "x.gsd", app, "s", MakeVersion(1, 0))
		require.ErrorIs(t, err, ErrName, "application %q", app)
		_, err = Create(core, "x.gsd", "a", app, MakeVersion(1, 0))
		require.ErrorIs(t, err, ErrName, "schema %q", app)
	}
	_, err := core.Stat("x.gsd")
	require.Error(t, err, "a refused Create leaves no file")
	long := strings.Repeat("ü", 40) // 80 bytes: 63 would cut the 32nd ü in half
	w, err := Create(core, "x.gsd", long, "schema", MakeVersion(1, 0))
	require.NoError(t, err)
	for _, name := range []string{"", "a\x00b", "temp\xff", "\xc3", "ok\xed\xa0\x80"} {
		require.ErrorIs(t, WriteChunk(w, name, []int8{1}, 1, 1), ErrName, "name %q", name)
	}
	require.NoError(t, WriteChunk(w, "température/ü", []int8{1}, 1, 1))
	require.NoError(t, w.EndFrame())
	require.NoError(t, w.Close())
	require.NoError(t, Verify(core, "x.gsd"))
	r, err := Open(core, "x.gsd")
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, strings.Repeat("ü", 31), r.Application())
	assert.True(t, utf8.ValidString(r.Application()))
	assert.Equal(t, []string{"température/ü"}, r.ChunkNames(""))
}

// nameDamage is one way a file's names can break python3-gsd.
type nameDamage struct {
	name   string
	mod    func(b []byte)
	part   string // the Part Verify reports
	reason string
	// pyFails: python3-gsd cannot open or list the file; otherwise it
	// reads the application, schema or names differently from us.
	pyFails bool
}

func nameDamages() []nameDamage {
	const names = 4352 // three.gsd's namelist
	return []nameDamage{
		{"chunk name not UTF-8", func(b []byte) { b[names+1] = 0xff }, "namelist", "not valid UTF-8", true},
		{"chunk name cut UTF-8", func(b []byte) { b[names+3] = 0xc3 }, "namelist", "not valid UTF-8", true},
		{"application not UTF-8", func(b []byte) { b[offApp+2] = 0xfe }, "header", "not valid UTF-8", true},
		{"schema not UTF-8", func(b []byte) { b[offSchema] = 0x80 }, "header", "not valid UTF-8", true},
		{"bytes after application's NUL", func(b []byte) { b[offApp+40] = 'Z' }, "header", "after the application's NUL", false},
		{"bytes after schema's NUL", func(b []byte) { b[offSchema+63] = 'Q' }, "header", "after the schema's NUL", false},
		{"bytes after the name list", func(b []byte) { copy(b[names+100:], "ghost") }, "namelist", "after the end of the name list", false}, // gsd.fl and pygsd both list "ghost"
	}
}

// TestVerifyRefusesNamesPythonCannotRead damages three.gsd's names and
// header strings: python3-gsd (gsd.fl and pygsd) fails on each file or
// reads it differently from this package, and Verify reports
// each problem. Repair then makes a file Verify accepts and python3-gsd
// reads exactly as this package does.
func TestVerifyRefusesNamesPythonCannotRead(t *testing.T) {
	py := needGSD(t)
	base, err := os.ReadFile("testdata/three.gsd")
	require.NoError(t, err)
	dir := t.TempDir()
	var files []string
	for i, dm := range nameDamages() {
		b := bytes.Clone(base)
		dm.mod(b)
		name := dir + "/" + string(rune('a'+i)) + ".gsd"
		require.NoError(t, os.WriteFile(name, b, 0o644))
		files = append(files, name)
	}
	before := pyCheck(t, py, files...)
	for i, dm := range nameDamages() {
		t.Run(dm.name, func(t *testing.T) {
			name := files[i]
			res := before[name]
			differs := false
			if dm.pyFails {
				assert.Contains(t, res.Error, "UnicodeDecodeError", "python3-gsd read the file: %+v", res)
			} else {
				require.Empty(t, res.Error)
				r, err := Open(sec2, name)
				require.NoError(t, err)
				ours := pyDump{Application: r.Application(), Names: r.ChunkNames("")}
				ours.Schema, _ = r.Schema()
				require.NoError(t, r.Close())
				for lib, d := range map[string]pyDump{"fl": res.FL, "pygsd": res.PyGSD} {
					if d.Application != ours.Application || d.Schema != ours.Schema || strings.Join(d.Names, "\x00") != strings.Join(ours.Names, "\x00") {
						t.Logf("%s reads %q %q %q, this package %q %q %q", lib, d.Application, d.Schema, d.Names, ours.Application, ours.Schema, ours.Names)
						differs = true
					}
				}
				assert.True(t, differs, "python3-gsd reads the file as this package does")
			}
			err := Verify(sec2, name)
			require.ErrorIs(t, err, ErrCorrupt)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, dm.part, ce.Part)
			assert.Contains(t, ce.Reason, dm.reason)
			assert.Equal(t, name, ce.Path)

			res2, err := Repair(sec2, name)
			require.NoError(t, err)
			assert.True(t, res2.Changed)
			assert.Equal(t, uint64(3), res2.Frames, "no frame is lost to a bad name")
			require.NoError(t, Verify(sec2, name))
		})
	}
	after := pyCheck(t, py, files...)
	for i, dm := range nameDamages() {
		t.Run(dm.name+"/repaired", func(t *testing.T) {
			n := samePy(t, after[files[i]], files[i])
			assert.Equal(t, 7, n, "every chunk of the three frames")
		})
	}
}

// TestVerifyNamesOffline is the part of the above that needs no python:
// each damage is reported, and an undamaged file passes.
func TestVerifyNamesOffline(t *testing.T) {
	base, err := os.ReadFile("testdata/three.gsd")
	require.NoError(t, err)
	require.NoError(t, VerifyReaderAt(bytes.NewReader(base), int64(len(base)), "three.gsd"))
	for _, dm := range nameDamages() {
		b := bytes.Clone(base)
		dm.mod(b)
		err := VerifyReaderAt(bytes.NewReader(b), int64(len(b)), "x.gsd")
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce, dm.name)
		assert.Equal(t, dm.part, ce.Part, dm.name)
		assert.Contains(t, ce.Reason, dm.reason, dm.name)
	}
}
