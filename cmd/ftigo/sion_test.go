package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sionRef(name string) string { return filepath.Join("..", "..", "sion", "testdata", name) }

func sha16(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])[:16]
}

func TestSionUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
		err  string
	}{
		{[]string{"sion", "--help"}, 0, "ftigo sion split l4.sion out/task_", ""},
		{[]string{"sion", "dump", "--help"}, 0, "Usage:\n  ftigo sion dump FILE [flags]", ""},
		{[]string{"help", "sion", "dump"}, 0, "Usage:\n  ftigo sion dump FILE [flags]", ""},
		{[]string{"sion"}, 2, "", "ftigo sion: missing command"},
		{[]string{"sion", "frobnicate"}, 2, "", `unknown command "frobnicate" for "ftigo sion"`},
		{[]string{"sion", "dupm", "x"}, 2, "", "did you mean dump?"},
		{[]string{"sion", "dump"}, 2, "", "missing FILE (want FILE)"},
		{[]string{"sion", "split", "x"}, 2, "", "missing PREFIX (want FILE PREFIX)"},
		{[]string{"sion", "defrag", "a", "b", "c"}, 2, "", "too many arguments: want IN OUT"},
		{[]string{"sion", "pack"}, 2, "", "missing FILE (want FILE...)"},
		{[]string{"sion", "pack", "a"}, 2, "", "pack needs --output (-o) OUT"},
		{[]string{"sion", "pack", "-o", "x", "--fsblksize", "-1", "a"}, 2, "", "bad --fsblksize -1"},
		{[]string{"sion", "pack", "-o", "x", "-fsblksize", "512", "a"}, 2, "", "long flags take two dashes: --fsblksize"},
		{[]string{"sion", "defrag", "--fsblksize", "x", "a", "b"}, 2, "", `invalid argument "x" for "--fsblksize" flag`},
		{[]string{"sion", "pack", "-nosuchflag"}, 2, "", "unknown shorthand flag: 'n' in -nosuchflag"},
		{[]string{"sion", "pack", "--nosuchflag"}, 2, "", "unknown flag: --nosuchflag"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			var out, errb bytes.Buffer
			assert.Equal(t, tc.code, run(tc.args, &out, &errb))
			assert.Contains(t, out.String(), tc.out)
			assert.Contains(t, errb.String(), tc.err)
		})
	}
}

func TestSionDump(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"sion", "dump", sionRef("test4.sion")}, &out, &errb), errb.String())
	s := out.String()
	for _, want := range []string{
		"fileformat:  5 (library version 1007, patch 6)",
		"fsblksize:   1024",
		"ntasks:      4",
		"start_of_varheader 23552",
		"total bytes: 7500",
	} {
		assert.Contains(t, s, want)
	}
	// Task 3's row and its second block.
	assert.Regexp(t, `(?m)^\s+3\s+0\s+3\s+103\s+3072\s+6144\s+2\s+4000\s*$`, s)
	assert.Regexp(t, `(?m)^\s+3\s+1\s+13312\s+1000\s+32\.6\s*$`, s)

	out.Reset()
	require.Equal(t, 0, run([]string{"sion", "dump", sionRef("par2.sion")}, &out, &errb))
	assert.Contains(t, out.String(), "mapping (global rank: file, local rank):\n  0: 0, 0\n  1: 0, 1\n  2: 1, 0\n  3: 1, 1\n")

	for _, bad := range []struct{ file, msg string }{
		{"badmagic.sion", "bad magic"}, {"trunc.sion", "truncated"}, {"unclosed.sion", "never closed"},
	} {
		var o, e bytes.Buffer
		assert.Equal(t, 1, run([]string{"sion", "dump", sionRef(bad.file)}, &o, &e), bad.file)
		assert.Contains(t, e.String(), bad.msg)
		assert.Contains(t, e.String(), bad.file)
	}
}

func TestSionSplit(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"sion", "split", sionRef("par2.sion"), filepath.Join(dir, "t_")}, &out, &errb), errb.String())
	want := []struct {
		size int
		sha  string
	}{{2500, "40a8d9b953c2402c"}, {2000, "d4c6e5ac27e3c25d"}, {0, "e3b0c44298fc1c14"}, {4000, "25d3295edc3d0d15"}}
	for i, w := range want {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("t_%05d", i)))
		require.NoError(t, err)
		assert.Len(t, b, w.size)
		assert.Equal(t, w.sha, sha16(b))
	}
	// Key-value: one file per task and key.
	out.Reset()
	require.Equal(t, 0, run([]string{"sion", "split", sionRef("kv.sion"), filepath.Join(dir, "kv_")}, &out, &errb), errb.String())
	b, err := os.ReadFile(filepath.Join(dir, "kv_00003_000000000010"))
	require.NoError(t, err)
	assert.Equal(t, bytes.Repeat([]byte{'d'}, 1000), b)
	assert.Contains(t, out.String(), "kv_00000_000000000011 500")
}

func TestSionPackSplitDefrag(t *testing.T) {
	dir := t.TempDir()
	var inputs []string
	var datas [][]byte
	for i, n := range []int{5000, 0, 1, 70000} {
		b := bytes.Repeat([]byte{byte('p' + i)}, n)
		p := filepath.Join(dir, fmt.Sprintf("in%d", i))
		require.NoError(t, os.WriteFile(p, b, 0o644))
		inputs, datas = append(inputs, p), append(datas, b)
	}
	packed := filepath.Join(dir, "packed.sion")
	var out, errb bytes.Buffer
	args := append([]string{"sion", "pack", "-o", packed, "--fsblksize", "512"}, inputs...)
	require.Equal(t, 0, run(args, &out, &errb), errb.String())
	assert.Contains(t, out.String(), "4 tasks")

	defr := filepath.Join(dir, "defrag.sion")
	require.Equal(t, 0, run([]string{"sion", "defrag", "--fsblksize", "64", sionRef("par2.sion"), defr}, &out, &errb), errb.String())

	for _, c := range []struct {
		file string
		want [][]byte
	}{{packed, datas}, {defr, nil}} {
		split := filepath.Join(dir, "s", filepath.Base(c.file)+"_")
		require.Equal(t, 0, run([]string{"sion", "split", c.file, split}, &out, &errb), errb.String())
		for i := range 4 {
			b, err := os.ReadFile(fmt.Sprintf("%s%05d", split, i))
			require.NoError(t, err)
			if c.want != nil {
				assert.Equal(t, c.want[i], b)
			} else {
				assert.Equal(t, []string{"40a8d9b953c2402c", "d4c6e5ac27e3c25d", "e3b0c44298fc1c14", "25d3295edc3d0d15"}[i], sha16(b))
			}
		}
	}
	out.Reset()
	require.Equal(t, 0, run([]string{"sion", "dump", defr}, &out, &errb))
	assert.Contains(t, out.String(), "fsblksize:   64")
	assert.Contains(t, out.String(), "nfiles:      1")

	// A missing input is a problem, not a usage error.
	assert.Equal(t, 1, run([]string{"sion", "pack", "-o", filepath.Join(dir, "x.sion"), filepath.Join(dir, "missing")}, &out, &errb))
}
