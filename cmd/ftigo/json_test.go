package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/dhdf"
	"github.com/ftigo/ftigo/gsd"
	"github.com/ftigo/ftigo/vfd"
)

// jsonOut runs ftigo, checks the exit code, that the output is one JSON
// document holding no null anywhere, and decodes it into v.
func jsonOut(t *testing.T, code int, v any, args ...string) string {
	t.Helper()
	c, out, errs := ftigo(args...)
	require.Equal(t, code, c, "ftigo %v: %s", args, errs)
	require.NotContains(t, out, "null", "ftigo %v: an empty list is [], never null", args)
	var raw any
	require.NoError(t, json.Unmarshal([]byte(out), &raw), out)
	reflect.ValueOf(v).Elem().SetZero() // decode afresh: nothing left from an earlier call
	require.NoError(t, json.Unmarshal([]byte(out), v), out)
	return out
}

func TestInspectVerifyRebuildJSON(t *testing.T) {
	dir := makeRun(t)

	var ir inspectResult
	jsonOut(t, 0, &ir, "inspect", dir, "--json") // the flag after the argument
	assert.True(t, ir.OK)
	run := runIn(t, dir)
	require.NotEmpty(t, run)
	require.Len(t, ir.Dirs.Runs, 1)
	assert.Equal(t, runInfo{ID: run, Checkpoints: 1, Newest: ir.Checkpoints[0].Time}, ir.Dirs.Runs[0])
	assert.Equal(t, runDirs{Meta: filepath.Join(dir, "meta"), Run: run, MetaRun: run, Global: globalRunDir(t, dir), Replicas: filepath.Join(globalRunDir(t, dir), "manifests"),
		Local: filepath.Join(dir, "local"), Nodes: []string{"node0000", "node0001", "node0002", "node0003"}, Runs: ir.Dirs.Runs}, ir.Dirs)
	assert.Empty(t, ir.Metadata)
	reps := ir.Checkpoints
	require.Len(t, reps, 1)
	r := reps[0]
	assert.Equal(t, "ckpt00000002.manifest", r.Name)
	assert.Equal(t, uint64(2), r.Seq)
	assert.Equal(t, int64(2), r.ID)
	assert.Equal(t, 3, r.Level)
	assert.Equal(t, 4, r.Ranks)
	assert.Equal(t, 4, r.Nodes)
	assert.True(t, r.Committed)
	assert.Equal(t, 8, r.Files)
	assert.Equal(t, 8, r.Present)
	assert.Equal(t, "complete", r.Status)
	_, err := time.Parse(time.RFC3339, r.Time)
	assert.NoError(t, err)
	require.Len(t, r.Checks, 8)
	roles := map[string]int{}
	for _, c := range r.Checks {
		assert.True(t, c.OK, c.Path)
		assert.FileExists(t, c.Path)
		roles[c.Role]++
	}
	assert.Equal(t, map[string]int{"data": 4, "parity": 4}, roles)

	// A manifest a restart moved aside is listed, not committed, with an
	// empty list of checks.
	broken := filepath.Join(dir, "meta", "ckpt00000001.manifest.broken")
	require.NoError(t, os.WriteFile(broken, []byte("x"), 0o644))
	out := jsonOut(t, 0, &ir, "inspect", "--json", dir)
	reps = ir.Checkpoints
	require.Len(t, reps, 2)
	assert.Equal(t, ckptReport{Name: "ckpt00000001.manifest.broken", Status: "not committed", Error: "not committed (broken)", Checks: []fileCheck{}}, reps[0])
	assert.Contains(t, out, `"checks": []`)
	require.NoError(t, os.Remove(broken))

	var vr verifyResult
	jsonOut(t, 0, &vr, "verify", "--json", dir)
	assert.True(t, vr.OK)
	assert.Equal(t, ir.Dirs, vr.Dirs)
	assert.Nil(t, vr.Rebuilt)
	require.Len(t, vr.Checkpoints, 1)
	assert.Equal(t, "verified", vr.Checkpoints[0].Status)
	assert.Equal(t, 8, vr.Checkpoints[0].Present)

	require.NoError(t, os.RemoveAll(filepath.Join(dir, "local", "node0001")))
	jsonOut(t, 1, &vr, "verify", dir, "--json")
	assert.False(t, vr.OK)
	assert.Equal(t, 6, vr.Checkpoints[0].Present)

	vr = verifyResult{}
	jsonOut(t, 0, &vr, "rebuild", dir, "--json")
	assert.True(t, vr.OK)
	assert.Equal(t, &rebuiltCheckpoint{Manifest: "ckpt00000002.manifest", ID: 2, Level: 3}, vr.Rebuilt)
	require.Len(t, vr.Checkpoints, 1)
	assert.Equal(t, "verified", vr.Checkpoints[0].Status)
}

// TestRunJSONEmpty: a run without checkpoints gives [] from inspect and
// an empty checkpoints list from verify (which fails: nothing verified).
func TestRunJSONEmpty(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "meta"), 0o755))
	dirs := fmt.Sprintf(`{"meta_dir": %q, "run": "", "meta_dir_run": "", "glbl_dir": %q, "replicas": %q, "ckpt_dir": %q, "nodes": [], "runs": []}`,
		filepath.Join(dir, "meta"), filepath.Join(dir, "global"), filepath.Join(dir, "global", "manifests"), filepath.Join(dir, "local"))
	code, out, errs := ftigo("inspect", dir, "--json")
	require.Equal(t, 0, code, errs)
	assert.JSONEq(t, `{"ok": true, "dirs": `+dirs+`, "metadata": [], "checkpoints": []}`, out)
	code, out, _ = ftigo("verify", dir, "--json")
	require.Equal(t, 1, code)
	assert.JSONEq(t, `{"ok": false, "dirs": `+dirs+`, "metadata": [], "checkpoints": []}`, out)
	code, out, _ = ftigo("verify", dir)
	require.Equal(t, 1, code)
	assert.Contains(t, out, "no committed checkpoint in "+filepath.Join(dir, "meta")+"\n")
	code, out, errs = ftigo("rebuild", dir, "--json")
	assert.Equal(t, 1, code)
	assert.Empty(t, out, "a failed rebuild prints no JSON")
	assert.Contains(t, errs, "ftigo rebuild:")
}

func TestSionJSON(t *testing.T) {
	var dump sionDumpResult
	jsonOut(t, 0, &dump, "sion", "dump", "--json", sionRef("test4.sion"))
	assert.Equal(t, int32(5), dump.FileFormat)
	assert.Equal(t, int32(1007), dump.Version)
	assert.Equal(t, int32(6), dump.Patch)
	assert.Equal(t, int32(1024), dump.FSBlkSize)
	assert.Equal(t, 4, dump.NTasks)
	assert.Equal(t, "none", dump.KeyVal)
	assert.Equal(t, int64(7500), dump.TotalBytes)
	require.Len(t, dump.Files, 1)
	assert.Equal(t, int64(23552), dump.Files[0].StartOfMeta2)
	require.Len(t, dump.Tasks, 4)
	t3 := dump.Tasks[3]
	assert.Equal(t, sionTask{Task: 3, File: 0, LocalRank: 3, GlobalRank: 103, ChunkSize: 3072, Start: 6144, Bytes: 4000, Blocks: t3.Blocks}, t3)
	require.Len(t, t3.Blocks, 2)
	assert.Equal(t, int64(13312), t3.Blocks[1].Offset)
	assert.Equal(t, int64(1000), t3.Blocks[1].Bytes)
	assert.InDelta(t, 32.55, t3.Blocks[1].Fill, 0.01)
	assert.Equal(t, []sionMapping{}, dump.Mapping)

	jsonOut(t, 0, &dump, "sion", "dump", sionRef("par2.sion"), "--json")
	assert.Equal(t, []sionMapping{{0, 0, 0}, {1, 0, 1}, {2, 1, 0}, {3, 1, 1}}, dump.Mapping)
	assert.Len(t, dump.Files, 2)

	dir := t.TempDir()
	var files []splitFile
	jsonOut(t, 0, &files, "sion", "split", "--json", sionRef("par2.sion"), filepath.Join(dir, "t_"))
	require.Len(t, files, 4)
	for i, n := range []int64{2500, 2000, 0, 4000} {
		assert.Equal(t, splitFile{Path: filepath.Join(dir, "t_0000"+string(rune('0'+i))), Task: i, Bytes: n}, files[i])
	}
	jsonOut(t, 0, &files, "sion", "split", "--json", sionRef("kv.sion"), filepath.Join(dir, "kv_"))
	require.NotEmpty(t, files)
	for _, f := range files {
		require.NotNil(t, f.Key, "a key-value split names the key")
		b, err := os.ReadFile(f.Path)
		require.NoError(t, err)
		assert.Len(t, b, int(f.Bytes))
	}

	in0, in1 := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(in0, make([]byte, 3000), 0o644))
	require.NoError(t, os.WriteFile(in1, nil, 0o644))
	var w sionWritten
	out := filepath.Join(dir, "p.sion")
	jsonOut(t, 0, &w, "sion", "pack", in0, in1, "-o", out, "--json")
	assert.Equal(t, sionWritten{Container: out, Bytes: 3000, Tasks: []writtenTask{{0, 0, in0, 3000}, {1, 1, in1, 0}}}, w)
	jsonOut(t, 0, &w, "sion", "defrag", "--json", sionRef("par2.sion"), filepath.Join(dir, "d.sion"))
	assert.Equal(t, filepath.Join(dir, "d.sion"), w.Container)
	assert.Equal(t, int64(8500), w.Bytes)
	require.Len(t, w.Tasks, 4)
	assert.Equal(t, writtenTask{Task: 3, GlobalRank: 3, Input: sionRef("par2.sion"), Bytes: 4000}, w.Tasks[3])
}

func TestGSDJSON(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gsd")
	writeGSD(t, good, 3)

	var d gsdDumpResult
	jsonOut(t, 0, &d, "gsd", "dump", "--values", "3", good, "--json")
	assert.Equal(t, "2.0", d.GSDVersion)
	assert.Equal(t, "cli-test", d.Application)
	assert.Equal(t, "heat2d", d.Schema)
	assert.Equal(t, "1.0", d.SchemaVersion)
	assert.Equal(t, uint64(3), d.Frames)
	assert.Equal(t, []string{"temperature", "step"}, d.Names, "namelist order")
	require.Len(t, d.Chunks, 6)
	for _, c := range d.Chunks {
		switch c.Name {
		case "temperature":
			assert.Equal(t, "float64", c.Type)
			assert.Equal(t, []any{float64(c.Frame), 0.5, 1.0}, c.Values)
			assert.True(t, c.More)
			assert.Equal(t, uint64(2), c.N)
			assert.Equal(t, uint32(3), c.M)
		case "step":
			assert.Equal(t, []any{float64(100 * c.Frame)}, c.Values)
			assert.False(t, c.More)
		default:
			t.Errorf("unexpected chunk %q", c.Name)
		}
		assert.Positive(t, c.Location)
	}
	jsonOut(t, 0, &d, "gsd", "dump", "--frame", "99", good, "--json")
	assert.Equal(t, []gsdChunk{}, d.Chunks, "no frame 99: an empty list")
	jsonOut(t, 0, &d, "gsd", "dump", "--values", "0", good, "--json")
	assert.Equal(t, []any{}, d.Chunks[0].Values)

	var v gsdVerifyResult
	jsonOut(t, 0, &v, "gsd", "verify", good, "--json")
	assert.Equal(t, gsdVerifyResult{File: good, Valid: true, Problems: []string{}, Version: "2.0", Frames: 3, Chunks: 6, Names: 2}, v)

	cut := filepath.Join(dir, "cut.gsd")
	writeGSD(t, cut, 3)
	st, err := os.Stat(cut)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(cut, st.Size()-1))
	jsonOut(t, 1, &v, "gsd", "verify", "--json", cut)
	assert.False(t, v.Valid)
	require.NotEmpty(t, v.Problems)
	assert.Contains(t, v.Problems[0], "extends past the end of file")

	var r gsdRepairResult
	jsonOut(t, 0, &r, "gsd", "repair", "--json", cut)
	assert.Equal(t, gsdRepairResult{File: cut, Changed: true, Frames: 2, Entries: 4, Dropped: 2, Reason: r.Reason}, r)
	assert.NotEmpty(t, r.Reason)
	jsonOut(t, 0, &r, "gsd", "repair", "--json", cut)
	assert.Equal(t, gsdRepairResult{File: cut, Frames: 2, Entries: 4}, r)

	// Values JSON cannot hold as numbers are strings, in text and JSON alike.
	odd := filepath.Join(dir, "odd.gsd")
	w, err := gsd.Create(vfd.Sec2{}, odd, "cli-test", "heat2d", gsd.MakeVersion(1, 0), gsd.WithSync(false))
	require.NoError(t, err)
	require.NoError(t, gsd.WriteChunk(w, "f", []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 1e300}, 5, 1))
	require.NoError(t, gsd.WriteChunk(w, "g", []float32{float32(math.NaN()), 0.1}, 2, 1))
	require.NoError(t, gsd.WriteChunk(w, "i", []int64{math.MinInt64}, 1, 1))
	require.NoError(t, gsd.WriteChunk(w, "u", []uint64{math.MaxUint64}, 1, 1))
	require.NoError(t, w.EndFrame())
	require.NoError(t, w.Close())
	out := jsonOut(t, 0, &d, "gsd", "dump", "--values", "5", odd, "--json")
	assert.Contains(t, out, `"NaN",`)
	assert.Contains(t, out, `"+Inf",`)
	assert.Contains(t, out, `"-Inf",`)
	assert.Contains(t, out, "1e+300")
	assert.Contains(t, out, "-0,", "negative zero keeps its sign")
	assert.Contains(t, out, "0.1\n", "float32 0.1 printed as float32, not 0.10000000149011612")
	assert.Contains(t, out, "-9223372036854775808")
	assert.Contains(t, out, "18446744073709551615", "uint64 values exactly")
	code, text, _ := ftigo("gsd", "dump", "--values", "5", odd)
	require.Equal(t, 0, code)
	assert.Contains(t, text, "[NaN +Inf -Inf -0 1e+300]")
	assert.Contains(t, text, "[NaN 0.1]")
}

func TestDHDFJSON(t *testing.T) {
	base := writeTestSet(t)
	var l dhdfListResult
	jsonOut(t, 0, &l, "dhdf", "ls", base+".h5", "--json")
	assert.Equal(t, dhdfListResult{
		Set:   "2026-01-02T03:04:05Z sim.h5 0",
		Files: []dhdfFileJSON{{0, "sim.h5", "n0"}, {1, "sim.1.h5", "n0"}, {2, "sim.2.h5", "n0"}},
		SDSs: []dhdfSDSJSON{{Name: "temp", Type: "float32", Dims: []uint64{4, 2}, Attrs: []dhdfAttrJSON{{"units", "K"}},
			Chunks: []dhdfChunkJSON{{1, "temp_1_0", []uint64{0, 0}, []uint64{2, 2}}, {2, "temp_2_0", []uint64{2, 0}, []uint64{2, 2}}}}},
	}, l)
	var v dhdfVerifyResult
	jsonOut(t, 0, &v, "dhdf", "verify", "--json", base+".h5")
	assert.Equal(t, dhdfVerifyResult{OK: true, Files: 3, SDSs: 1, Chunks: 2, Bad: []dhdfBadChunk{}}, v)

	// A set without SDSs: empty lists.
	empty := filepath.Join(t.TempDir(), "none")
	w, err := dhdf.Create(empty, 1, dhdf.Options{HostName: "n0"})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	out := jsonOut(t, 0, &l, "dhdf", "ls", "--json", empty+".h5")
	assert.Equal(t, []dhdfSDSJSON{}, l.SDSs)
	assert.Contains(t, out, `"sds": []`)
	jsonOut(t, 0, &v, "dhdf", "verify", "--json", empty+".h5")
	assert.Equal(t, dhdfVerifyResult{OK: true, Files: 2, SDSs: 0, Chunks: 0, Bad: []dhdfBadChunk{}}, v)
}

func TestDHDFVerifyJSONCorrupt(t *testing.T) {
	base := writeTestSet(t)
	f, err := vfd.Sec2{}.Open(base+".1.h5", vfd.ReadWrite)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, 48)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	var v dhdfVerifyResult
	jsonOut(t, 1, &v, "dhdf", "verify", "--json", base+".h5")
	assert.False(t, v.OK)
	require.Len(t, v.Bad, 1)
	assert.Equal(t, "temp", v.Bad[0].SDS)
	assert.Equal(t, "temp_1_0", v.Bad[0].Chunk)
	assert.Contains(t, v.Bad[0].Error, "checksum mismatch")
}
