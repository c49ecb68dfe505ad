package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

func openTemp(t *testing.T) (*os.File, error) {
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err == nil {
		t.Cleanup(func() { f.Close() })
	}
	return f, err
}

// ftigoWithin runs ftigo and fails the test if it has not returned after
// d: a command blocked on a FIFO fails instead of hanging the suite.
func ftigoWithin(t *testing.T, d time.Duration, args ...string) (int, string, string) {
	t.Helper()
	type result struct {
		code     int
		out, err string
	}
	ch := make(chan result, 1)
	go func() {
		c, o, e := ftigo(args...)
		ch <- result{c, o, e}
	}()
	select {
	case r := <-ch:
		return r.code, r.out, r.err
	case <-time.After(d):
		t.Fatalf("ftigo %s did not return within %v (blocked on a FIFO?)", strings.Join(args, " "), d)
		return 0, "", ""
	}
}

// badPaths makes one path of each kind a command must refuse or handle:
// a FIFO without a writer, a character device, an empty regular file, a
// directory and a path that does not exist.
func badPaths(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	sub := filepath.Join(dir, "adir")
	require.NoError(t, os.Mkdir(sub, 0o755))
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skipf("no /dev/zero: %v", err)
	}
	return map[string]string{"fifo": fifo, "device": "/dev/zero", "empty": empty, "dir": sub, "missing": filepath.Join(dir, "missing")}
}

// TestPathArgumentsOfEveryCommand runs every subcommand with each kind of
// path in each of its path arguments and checks the exit code and the
// message; none may block (the vfd layer refuses a FIFO when opening it,
// the commands' own stat-based checks refuse it before anything opens it).
func TestPathArgumentsOfEveryCommand(t *testing.T) {
	p := badPaths(t)
	good := t.TempDir()
	gsdFile := filepath.Join(good, "ok.gsd")
	writeGSD(t, gsdFile, 1)
	container := sionRef("test4.sion")

	// want is what a command says for each kind of path ("{}" stands for
	// the path); code -1 skips a kind the argument accepts and that would
	// start real work.
	type want struct {
		code int
		msg  string
	}
	fileWants := func(role string, emptyOK bool) map[string]want {
		w := map[string]want{
			"fifo":    {1, role + " {}: is a FIFO, not a regular file"},
			"device":  {1, role + " {}: is a character device, not a regular file"},
			"empty":   {1, role + " {}: is an empty file"},
			"dir":     {1, role + " {}: is a directory, not a regular file"},
			"missing": {1, role + " {}: no such file or directory"},
		}
		if emptyOK {
			w["empty"] = want{0, ""}
		}
		return w
	}
	runWants := map[string]want{
		"fifo":    {1, "RUN {}: is a FIFO: want a run directory or an FTI config.fti"},
		"device":  {1, "RUN {}: is a character device: want a run directory or an FTI config.fti"},
		"empty":   {1, "RUN {}: is an empty file: want a run directory or an FTI config.fti"},
		"dir":     {1, "RUN {}: is not a run directory: it has neither meta/ nor config.fti"},
		"missing": {1, "RUN {}: no such file or directory"},
	}
	outFileWants := func(role string) map[string]want {
		return map[string]want{
			"fifo":    {1, role + " {}: exists and is a FIFO, not a regular file"},
			"device":  {1, role + " {}: exists and is a character device, not a regular file"},
			"empty":   {0, ""},
			"dir":     {1, role + " {}: exists and is a directory, not a regular file"},
			"missing": {0, ""},
		}
	}
	cases := []struct {
		name  string
		args  func(path string) []string
		wants map[string]want
	}{
		{"inspect RUN", func(x string) []string { return []string{"inspect", x} }, runWants},
		{"inspect RUN --json", func(x string) []string { return []string{"inspect", x, "--json"} }, runWants},
		{"verify RUN", func(x string) []string { return []string{"verify", x} }, runWants},
		{"rebuild RUN", func(x string) []string { return []string{"rebuild", x} }, runWants},
		{"sion dump FILE", func(x string) []string { return []string{"sion", "dump", x} }, fileWants("FILE", false)},
		{"sion split FILE", func(x string) []string { return []string{"sion", "split", x, filepath.Join(t.TempDir(), "t_")} }, fileWants("FILE", false)},
		{"sion split PREFIX", func(x string) []string { return []string{"sion", "split", container, filepath.Join(x, "t_")} }, map[string]want{
			"fifo":    {1, "PREFIX's directory {}: exists and is a FIFO, not a directory"},
			"device":  {1, "PREFIX's directory {}: exists and is a character device, not a directory"},
			"empty":   {1, "PREFIX's directory {}: exists and is a regular file, not a directory"},
			"dir":     {0, ""},
			"missing": {0, ""},
		}},
		{"sion pack FILE", func(x string) []string {
			return []string{"sion", "pack", "-o", filepath.Join(t.TempDir(), "out.sion"), x}
		}, fileWants("FILE", true)},
		{"sion pack --output", func(x string) []string { return []string{"sion", "pack", "-o", x, gsdFile} }, outFileWants("--output")},
		{"sion defrag IN", func(x string) []string { return []string{"sion", "defrag", x, filepath.Join(t.TempDir(), "o.sion")} }, fileWants("IN", false)},
		{"sion defrag OUT", func(x string) []string { return []string{"sion", "defrag", container, x} }, outFileWants("OUT")},
		{"gsd dump FILE", func(x string) []string { return []string{"gsd", "dump", x} }, fileWants("FILE", false)},
		{"gsd verify FILE", func(x string) []string { return []string{"gsd", "verify", x} }, fileWants("FILE", false)},
		{"gsd verify FILE --json", func(x string) []string { return []string{"gsd", "verify", "--json", x} }, fileWants("FILE", false)},
		{"gsd repair FILE", func(x string) []string { return []string{"gsd", "repair", x} }, fileWants("FILE", false)},
		{"dhdf ls FILE", func(x string) []string { return []string{"dhdf", "ls", x} }, fileWants("FILE", false)},
		{"dhdf verify FILE", func(x string) []string { return []string{"dhdf", "verify", x} }, fileWants("FILE", false)},
		{"bench --dir", func(x string) []string { return []string{"bench", "--dir", x, "--levels", "1", "--size", "64KiB"} }, map[string]want{
			"fifo":    {1, "--dir {}: exists and is a FIFO, not a directory"},
			"device":  {1, "--dir {}: exists and is a character device, not a directory"},
			"empty":   {1, "--dir {}: exists and is a regular file, not a directory"},
			"dir":     {-1, ""},
			"missing": {-1, ""},
		}},
	}
	for _, c := range cases {
		for _, kind := range []string{"fifo", "device", "empty", "dir", "missing"} {
			w := c.wants[kind]
			if w.code < 0 {
				continue
			}
			t.Run(c.name+"/"+kind, func(t *testing.T) {
				// The empty file, directory and missing path are fresh for
				// each run: a command that accepts one writes to it.
				path := p[kind]
				switch kind {
				case "empty":
					path = filepath.Join(t.TempDir(), "empty")
					require.NoError(t, os.WriteFile(path, nil, 0o644))
				case "dir":
					path = t.TempDir()
				case "missing":
					path = filepath.Join(t.TempDir(), "missing")
				}
				code, out, errs := ftigoWithin(t, 20*time.Second, c.args(path)...)
				assert.Equal(t, w.code, code, "stdout %q stderr %q", out, errs)
				if w.code == 0 {
					assert.Empty(t, errs)
					return
				}
				assert.Contains(t, errs, strings.ReplaceAll(w.msg, "{}", path))
				assert.Empty(t, out, "nothing on standard output when the argument is refused")
				assert.NotContains(t, errs, "open :", "an empty path must never reach open")
				assert.NotContains(t, errs, "Usage:", "a bad path is a problem (exit 1), not a usage error")
			})
		}
	}
}

// TestRunDirectoryContents: the paths a run directory or config.fti leads
// to are checked too: a config.fti or meta/ that is a FIFO, a config naming
// no directories or a FIFO as meta_dir, and a FIFO in place of a manifest.
func TestRunDirectoryContents(t *testing.T) {
	mk := func(t *testing.T) string {
		d := t.TempDir()
		return d
	}
	t.Run("config.fti is a FIFO", func(t *testing.T) {
		d := mk(t)
		require.NoError(t, syscall.Mkfifo(filepath.Join(d, "config.fti"), 0o644))
		code, _, errs := ftigoWithin(t, 20*time.Second, "verify", d)
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "config "+filepath.Join(d, "config.fti")+": is a FIFO, not a regular file")
	})
	t.Run("meta is a FIFO", func(t *testing.T) {
		d := mk(t)
		require.NoError(t, syscall.Mkfifo(filepath.Join(d, "meta"), 0o644))
		code, _, errs := ftigoWithin(t, 20*time.Second, "inspect", d)
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "meta directory "+filepath.Join(d, "meta")+": is a FIFO, not a directory")
	})
	t.Run("config names no directories", func(t *testing.T) {
		d := mk(t)
		cfg := filepath.Join(d, "config.fti")
		require.NoError(t, os.WriteFile(cfg, []byte("[basic]\nnode_size = 1\n"), 0o644))
		for _, arg := range []string{d, cfg} {
			code, _, errs := ftigoWithin(t, 20*time.Second, "inspect", arg)
			assert.Equal(t, 1, code)
			assert.Contains(t, errs, "config "+cfg+": names no ckpt_dir")
			assert.NotContains(t, errs, "open :")
		}
	})
	t.Run("config names a FIFO as meta_dir", func(t *testing.T) {
		d := mk(t)
		fifo := filepath.Join(d, "metafifo")
		require.NoError(t, syscall.Mkfifo(fifo, 0o644))
		cfg := filepath.Join(d, "my.fti")
		require.NoError(t, os.WriteFile(cfg, []byte("[basic]\nckpt_dir = "+d+"/l\nglbl_dir = "+d+"/g\nmeta_dir = "+fifo+"\n"), 0o644))
		for _, cmd := range []string{"inspect", "verify", "rebuild"} {
			code, _, errs := ftigoWithin(t, 20*time.Second, cmd, cfg)
			assert.Equal(t, 1, code, cmd)
			assert.Contains(t, errs, "meta_dir of "+cfg+": "+fifo+": is a FIFO, not a directory", cmd)
		}
	})
	t.Run("a FIFO in place of a manifest", func(t *testing.T) {
		d := mk(t)
		require.NoError(t, os.Mkdir(filepath.Join(d, "meta"), 0o755))
		m := filepath.Join(d, "meta", "ckpt00000001.manifest")
		require.NoError(t, syscall.Mkfifo(m, 0o644))
		code, out, _ := ftigoWithin(t, 20*time.Second, "inspect", d)
		assert.Equal(t, 1, code, "inspect shows an error")
		assert.Contains(t, out, "METADATA "+m)
		assert.Contains(t, out, "not a regular file (a FIFO)")
		code, out, _ = ftigoWithin(t, 20*time.Second, "verify", d)
		assert.Equal(t, 1, code)
		assert.Contains(t, out, "no committed checkpoint in "+filepath.Join(d, "meta"))
		code, _, errs := ftigoWithin(t, 20*time.Second, "rebuild", d)
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "ftigo rebuild:")
	})
}

// TestPathErrorsMatch: the path checks' errors match with errors.Is.
func TestPathErrorsMatch(t *testing.T) {
	p := badPaths(t)
	d := vfd.Sec2{}
	assert.ErrorIs(t, inputFile(d, "FILE", p["fifo"], false), vfd.ErrNotRegular)
	assert.ErrorIs(t, inputFile(d, "FILE", p["device"], false), vfd.ErrNotRegular)
	assert.ErrorIs(t, inputFile(d, "FILE", p["dir"], false), vfd.ErrNotRegular)
	assert.ErrorIs(t, inputFile(d, "FILE", p["empty"], false), errEmpty)
	assert.NoError(t, inputFile(d, "FILE", p["empty"], true))
	assert.ErrorIs(t, inputFile(d, "FILE", p["missing"], false), os.ErrNotExist)
	assert.ErrorIs(t, inputDir(d, "DIR", p["fifo"]), errNotDir)
	assert.NoError(t, inputDir(d, "DIR", p["dir"]))
	assert.ErrorIs(t, outputDir(d, "DIR", p["empty"]), errNotDir)
	assert.NoError(t, outputDir(d, "DIR", p["missing"]))
	assert.ErrorIs(t, outputFile(d, "OUT", p["dir"]), vfd.ErrNotRegular)
	assert.NoError(t, outputFile(d, "OUT", p["missing"]))
	_, _, err := loadRun(p["empty"])
	var pe *pathError
	require.True(t, errors.As(err, &pe))
	assert.Equal(t, "RUN", pe.Role)
	assert.ErrorIs(t, err, errEmpty)
}
