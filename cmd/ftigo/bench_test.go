package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// benchJSON runs a small bench with --json through a with extra args and
// decodes the result.
func benchJSON(t *testing.T, a *app, out *bytes.Buffer, errb *bytes.Buffer, extra ...string) *benchResult {
	t.Helper()
	args := append([]string{"bench", "--size", "256KiB", "--repeats", "1", "--ranks", "4", "--dir", t.TempDir(), "--json"}, extra...)
	code := a.run(args)
	require.Equal(t, 0, code, errb.String())
	var res benchResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	assert.NotContains(t, out.String(), "null")
	return &res
}

func TestBenchJSON(t *testing.T) {
	a, out, errb := testApp(false)
	drops := 0
	a.dropCaches = func() error { drops++; return nil }
	res := benchJSON(t, a, out, errb)
	assert.Zero(t, drops, "the page cache is dropped only with --cold")
	require.Len(t, res.Rows, 8, "a checkpoint and a restart row per level")
	wantCases := []string{"L1 checkpoint", "L1 restart", "L2 checkpoint", "L2 restart, node 1 lost",
		"L3 checkpoint", "L3 restart, nodes 1,2 lost", "L4 checkpoint", "L4 restart"}
	for i, row := range res.Rows {
		assert.Equal(t, wantCases[i], row.Case)
		assert.Equal(t, []string{"checkpoint", "restart"}[i%2], row.Kind)
		assert.Equal(t, i/2+1, row.Level)
		assert.Equal(t, 4, row.Ranks)
		assert.Equal(t, int64(256<<10), row.BytesRank)
		for _, s := range []stats{row.Time, row.Raw, row.Strong} {
			assert.Greater(t, s.Median, 0.0, row.Case)
			assert.LessOrEqual(t, s.Min, s.Median, row.Case)
			assert.LessOrEqual(t, s.Median, s.Max, row.Case)
		}
		assert.InDelta(t, row.Time.Median/row.Raw.Median, row.Ratio, 1e-9, row.Case)
		assert.InDelta(t, row.Time.Median/row.Strong.Median, row.RatioStrong, 1e-9, row.Case)
		assert.False(t, row.CacheDropped, row.Case)
		assert.Greater(t, row.CPU.User+row.CPU.Sys, 0.0, row.Case)
		if row.Case != "L4 checkpoint" {
			assert.Nil(t, row.StrongShared, "%s: the shared-file strong writer is measured for the L4 checkpoint only", row.Case)
			assert.Nil(t, row.StrongSharedCPU, row.Case)
			assert.Zero(t, row.RatioStrongShared, row.Case)
			continue
		}
		require.NotNil(t, row.StrongShared, "the L4 checkpoint row carries the shared-file strong writer")
		require.NotNil(t, row.StrongSharedCPU)
		s := *row.StrongShared
		assert.Greater(t, s.Min, 0.0)
		assert.LessOrEqual(t, s.Min, s.Median)
		assert.LessOrEqual(t, s.Median, s.Max)
		assert.InDelta(t, row.Time.Median/s.Median, row.RatioStrongShared, 1e-9)
	}
	assert.Equal(t, int64(4*256<<10), res.Rows[0].Persisted, "L1 persists the data once")
	assert.Equal(t, int64(2*4*256<<10), res.Rows[4].Persisted, "L3 persists data plus parity")
	assert.Equal(t, int64(4*256<<10), res.Rows[6].Persisted, "L4 writes the data once, into the container")
	assert.Equal(t, []int64{0, 0, 0, 2 * 256 << 10, 0, 4 * 256 << 10, 0, 0},
		[]int64{res.Rows[0].Rebuilt, res.Rows[1].Rebuilt, res.Rows[2].Rebuilt, res.Rows[3].Rebuilt, res.Rows[4].Rebuilt, res.Rows[5].Rebuilt, res.Rows[6].Rebuilt, res.Rows[7].Rebuilt},
		"L2 rebuilds node 1's data and the copy it held, L3 data and parity of nodes 1 and 2")
	assert.Greater(t, res.Rows[3].Strong.Median, res.Rows[3].Raw.Median, "the L2 restart reference adds the rebuild write to the read")
	assert.Equal(t, res.Rows[1].Raw, res.Rows[1].Strong, "L1 rebuilds nothing: both restart references are the read")
	assert.Greater(t, res.Blake3MBps, 0.0)
	assert.Greater(t, res.RSEncMBps, 0.0)
	assert.Greater(t, res.RSDecMBps, 0.0)
	assert.Greater(t, res.LoadStart[0]+res.LoadStart[1]+res.LoadStart[2], 0.0, "the load average is read")
	assert.Equal(t, []string{}, res.Skipped)
}

// TestBenchAsync: with --async the checkpoint rows of L2-L4 say so and
// carry the blocked time (the row's time) and the time until durable,
// which is never shorter; L1 has nothing to post-process. Without it
// both equal the time. Restart rows carry neither.
func TestBenchAsync(t *testing.T) {
	for _, async := range []bool{false, true} {
		a, out, errb := testApp(false)
		var extra []string
		if async {
			extra = []string{"--async"}
		}
		res := benchJSON(t, a, out, errb, extra...)
		require.Len(t, res.Rows, 8)
		assert.Equal(t, async, strings.Contains(res.Description, "in the background"), res.Description)
		for _, row := range res.Rows {
			if row.Kind == "restart" {
				assert.False(t, row.Async, row.Case)
				assert.Zero(t, row.BlockedS, row.Case)
				assert.Zero(t, row.TotalS, row.Case)
				continue
			}
			assert.Equal(t, async && row.Level > 1, row.Async, row.Case)
			assert.Equal(t, row.Time.Median, row.BlockedS, row.Case)
			assert.GreaterOrEqual(t, row.TotalS, row.BlockedS, row.Case)
		}
	}
	a, _, errb := testApp(false)
	assert.Equal(t, 2, a.run([]string{"bench", "--async", "--dcp-dirty", "0.1"}), "--async with --dcp-dirty is a usage error")
	assert.Contains(t, errb.String(), "--async")
}

// TestBenchJSONKeys: the names of the JSON fields are those
// docs/performance.md documents; renaming one breaks this test.
func TestBenchJSONKeys(t *testing.T) {
	b, err := json.Marshal(benchResult{Rows: []benchRow{{}}, Skipped: []string{}})
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	var top []string
	for k := range m {
		top = append(top, k)
	}
	assert.ElementsMatch(t, []string{"rows", "blake3_mb_per_s_per_core", "rs_encode_mb_per_s_per_core", "rs_decode_mb_per_s_per_core",
		"memcpy_mb_per_s", "description", "load_start", "load_end", "skipped"}, top)
	var row []string
	for k := range m["rows"].([]any)[0].(map[string]any) {
		row = append(row, k)
	}
	assert.ElementsMatch(t, []string{"case", "kind", "level", "ranks", "bytes_per_rank", "bytes_persisted", "bytes_rebuilt",
		"time", "raw", "ratio_median", "strong_raw", "ratio_strong_median", "cache_dropped", "async", "blocked_s", "total_s",
		"cpu", "raw_cpu", "strong_raw_cpu"}, row)
	// The L4 checkpoint row alone also carries the shared-file strong
	// writer; the other rows omit its fields.
	s, c := stats{Median: 1}, cpuStats{User: 1}
	b, err = json.Marshal(benchRow{StrongShared: &s, RatioStrongShared: 1, StrongSharedCPU: &c})
	require.NoError(t, err)
	var l4 map[string]any
	require.NoError(t, json.Unmarshal(b, &l4))
	var extra []string
	for k := range l4 {
		if !slices.Contains(row, k) {
			extra = append(extra, k)
		}
	}
	assert.ElementsMatch(t, []string{"strong_shared_raw", "ratio_strong_shared_median", "strong_shared_raw_cpu"}, extra)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "performance.md"))
	require.NoError(t, err)
	for _, k := range append(append(top, row...), extra...) {
		assert.True(t, strings.Contains(string(doc), "`"+k+"`"), "docs/performance.md documents `%s`", k)
	}
}

// TestBenchCold: --cold drops the page cache before every restart and
// raw read and says so in the restart rows; when it cannot, the run
// stops with a usage error before measuring anything.
func TestBenchCold(t *testing.T) {
	a, out, errb := testApp(false)
	drops := 0
	a.dropCaches = func() error { drops++; return nil }
	res := benchJSON(t, a, out, errb, "--levels", "1,2", "--repeats", "2", "--cold")
	// one check at the start, then per level and repeat one before the
	// restart and one before the raw read
	assert.Equal(t, 1+2*2*2, drops)
	for _, row := range res.Rows {
		assert.Equal(t, row.Kind == "restart", row.CacheDropped, row.Case)
	}
	table := &bytes.Buffer{}
	printBench(table, res)
	assert.Contains(t, table.String(), "dropped")
	assert.NotContains(t, table.String(), "restarts with the page cache kept")
	for i := range res.Rows {
		res.Rows[i].CacheDropped = false
	}
	table.Reset()
	printBench(table, res)
	assert.Contains(t, table.String(), "restarts with the page cache kept: the raw read copies from memory while a restart hashes every byte")

	a, out, errb = testApp(false)
	a.dropCaches = func() error { return errors.New("open /proc/sys/vm/drop_caches: permission denied") }
	code := a.run([]string{"bench", "--size", "64KiB", "--levels", "1", "--dir", t.TempDir(), "--cold"})
	assert.Equal(t, 2, code)
	assert.Empty(t, out.String())
	assert.Contains(t, errb.String(), "--cold: cannot drop the page cache: open /proc/sys/vm/drop_caches: permission denied")
}

// TestCheckRecovered: every element is compared bit for bit; a mismatch
// anywhere, even in the last element or in the sign of a zero, fails
// with the rank, how many differ and the first.
func TestCheckRecovered(t *testing.T) {
	want := []float64{1, 2, 3, 4, 5}
	assert.NoError(t, checkRecovered(3, []float64{1, 2, 3, 4, 5}, want))
	err := checkRecovered(3, []float64{1, 2, 3, 4, 6}, want)
	require.Error(t, err)
	assert.Equal(t, "rank 3 recovered wrong data: 1 of 5 elements differ, the first at index 4 (got 6, want 5)", err.Error())
	err = checkRecovered(0, []float64{1, 9, 3, 9, 5}, want)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2 of 5 elements differ, the first at index 1")
	assert.Error(t, checkRecovered(1, []float64{0, 2, 3, 4, 5}, []float64{math.Copysign(0, -1), 2, 3, 4, 5}), "-0 is not +0")
	nan := math.NaN()
	assert.NoError(t, checkRecovered(1, []float64{nan}, []float64{nan}), "the same NaN bits are the same data")
	assert.EqualError(t, checkRecovered(2, []float64{1}, want), "rank 2 recovered 1 elements, checkpointed 5")
}

// TestBenchTableAligns: every column of the table starts at the same
// place on every line, whatever the widths of the values, and no cell
// runs into the gap between two columns.
func TestBenchTableAligns(t *testing.T) {
	rows := []benchRow{
		{Case: "L1 checkpoint", Kind: "checkpoint", Level: 1, Ranks: 4, BytesRank: 1 << 20, Persisted: 4 << 20,
			Time: stats{0.001, 0.002, 0.003}, Raw: stats{1, 1, 1}, Strong: stats{0.5, 0.5, 0.5}, Ratio: 0.002, RatioStrong: 0.004},
		{Case: "L3 restart, nodes 1,2 lost", Kind: "restart", Level: 3, Ranks: 16, BytesRank: 256 << 20, Persisted: 4 << 30, Rebuilt: 2 << 30,
			Time: stats{100.5, 123.456, 1234.5}, Raw: stats{0.01, 0.01, 0.01}, Strong: stats{12, 12, 12}, Ratio: 12345.6, RatioStrong: 10.3,
			CacheDropped: true, CPU: cpuStats{User: 123.4, Sys: 56.7}},
		{Case: "L2 restart, node 1 lost", Kind: "restart", Level: 2, Ranks: 8, BytesRank: 64 << 10},
	}
	lines := strings.Split(strings.TrimRight(benchTable(rows), "\n"), "\n")
	require.Len(t, lines, 4)
	header := lines[0]
	labels := []string{"case", "ranks", "per rank", "persisted", "ftigo s (min-max)", "raw s", "strong s", "vs raw", "vs strong", "cpu s ftigo/raw/strong", "cache"}
	// Every column but the first and the last is right-aligned: its
	// cells end where its header label ends, and two spaces follow; the
	// last (left-aligned) starts two spaces after the one before it.
	var ends []int
	for _, l := range labels {
		i := strings.Index(header, l)
		require.GreaterOrEqual(t, i, 0, l)
		ends = append(ends, i+len(l))
	}
	last := len(labels) - 1
	for n, line := range lines {
		for c := 1; c < last; c++ {
			assert.NotEqual(t, byte(' '), line[ends[c]-1], "line %d: column %q ends at %d: %q", n, labels[c], ends[c], line)
			assert.Equal(t, "  ", line[ends[c]:ends[c]+2], "line %d: the gap after column %q: %q", n, labels[c], line)
		}
		assert.NotEqual(t, byte(' '), line[ends[last-1]+2], "line %d: the last column starts after the gap: %q", n, line)
		assert.Equal(t, byte(' '), line[ends[1]-len(labels[1])-1], "line %d: the case column ends before the ranks column: %q", n, line)
	}
	assert.Contains(t, lines[2], "123.456 (100.500-1234.500)")
	assert.Contains(t, lines[2], "12345.60x")
	assert.Contains(t, lines[2], "180.10/0.00/0.00")
	assert.True(t, strings.HasSuffix(lines[2], "dropped"))
	assert.True(t, strings.HasSuffix(lines[3], "kept"))
	assert.True(t, strings.HasSuffix(lines[1], "-"))
}

// TestBenchPlot: --plot draws the per-level chart of one run as SVG and
// PNG, and --from merges saved results of two rank counts into the
// scaling curves; the SVG parses as XML and names every series, the PNG
// decodes and holds the colors of every series.
func TestBenchPlot(t *testing.T) {
	dir := t.TempDir()
	var saved []string
	for _, ranks := range []string{"2", "3"} {
		svg := filepath.Join(dir, "levels"+ranks+".svg")
		code, out, errs := ftigo("bench", "--size", "128KiB", "--repeats", "1", "--ranks", ranks, "--levels", "1,2", "--dir", t.TempDir(), "--plot", svg, "--json")
		require.Equal(t, 0, code, errs)
		j := filepath.Join(dir, "r"+ranks+".json")
		require.NoError(t, os.WriteFile(j, []byte(out), 0o644))
		saved = append(saved, j)
		classes, texts := parseSVG(t, svg)
		for _, s := range []string{"ftigo", "raw", "strong", "legend"} {
			assert.GreaterOrEqual(t, classes[s], 1, "series %s in %s", s, svg)
		}
		assert.Equal(t, 4, classes["ftigo"], "a bar per row")
		assert.Contains(t, texts, "L1 ckpt")
		assert.Contains(t, texts, "L2 restart")
		assert.Contains(t, texts, "cache kept")
	}
	png1 := filepath.Join(dir, "levels.png")
	code, out, errs := ftigo("bench", "--from", saved[0], "--plot", png1)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "L2 restart, node 1 lost", "--from prints the saved table")
	assertColors(t, png1, colFtigo, colRaw, colStrong)

	for _, ext := range []string{".svg", ".png"} {
		name := filepath.Join(dir, "scaling"+ext)
		code, _, errs := ftigo("bench", "--from", strings.Join(saved, ","), "--plot", name)
		require.Equal(t, 0, code, errs)
		if ext == ".png" {
			assertColors(t, name, rankColors[0], rankColors[1])
			continue
		}
		classes, texts := parseSVG(t, name)
		for _, s := range []string{"2-ranks-ftigo", "2-ranks-strong", "3-ranks-ftigo", "3-ranks-strong", "3-ranks-checkpoint-ratio", "2-ranks-restart-ratio"} {
			assert.GreaterOrEqual(t, classes[s], 1, "series %s", s)
		}
		assert.Contains(t, texts, "L1 checkpoint, seconds")
		assert.Contains(t, texts, "L2 restart, seconds")
		assert.Contains(t, texts, "3 ranks")
		assert.Contains(t, texts, "128KiB")
	}
}

// parseSVG decodes an SVG file as XML and counts the elements per class
// and lists the texts.
func parseSVG(t *testing.T, name string) (map[string]int, []string) {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	d := xml.NewDecoder(bytes.NewReader(b))
	classes := map[string]int{}
	var texts []string
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "%s is well-formed XML", name)
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
				assert.Equal(t, "http://www.w3.org/2000/svg", el.Name.Space)
			}
			for _, a := range el.Attr {
				if a.Name.Local == "class" {
					classes[a.Value]++
				}
			}
			if el.Name.Local == "text" {
				var s string
				require.NoError(t, d.DecodeElement(&s, &el))
				texts = append(texts, s)
			}
		}
	}
	assert.Equal(t, "svg", root)
	return classes, texts
}

// assertColors decodes a PNG file and checks that each color covers a
// few pixels at least.
func assertColors(t *testing.T, name string, colors ...interface{ RGBA() (r, g, b, a uint32) }) {
	t.Helper()
	f, err := os.Open(name)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err, "%s decodes as PNG", name)
	count := make([]int, len(colors))
	bounds := img.Bounds()
	assert.Greater(t, bounds.Dx(), 500)
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			for i, c := range colors {
				cr, cg, cb, _ := c.RGBA()
				if r == cr && g == cg && b == cb {
					count[i]++
				}
			}
		}
	}
	for i := range colors {
		assert.Greater(t, count[i], 50, "%s: color %v", name, colors[i])
	}
}

// TestBenchSweepSkipsWhatDoesNotFit: a sweep leaves out the points that
// need more memory than it may take and lists them.
func TestBenchSweepSkipsWhatDoesNotFit(t *testing.T) {
	code, out, errs := ftigo("bench", "--sweep", "--sweep-sizes", "64KiB,128KiB", "--sweep-ranks", "2", "--levels", "1",
		"--repeats", "1", "--dir", t.TempDir(), "--max-mem", "0", "--json")
	require.Equal(t, 0, code, errs)
	var res benchResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Empty(t, res.Rows)
	require.Len(t, res.Skipped, 2)
	assert.Contains(t, res.Skipped[0], "2 ranks x 64 KiB: needs 256 KiB of memory")

	code, out, errs = ftigo("bench", "--sweep", "--sweep-sizes", "64KiB,128KiB", "--sweep-ranks", "2,3", "--levels", "1",
		"--repeats", "1", "--dir", t.TempDir(), "--json")
	require.Equal(t, 0, code, errs)
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Len(t, res.Rows, 8, "two rows for each of the four points")
	assert.Equal(t, []point{{2, 64 << 10}, {2, 128 << 10}, {3, 64 << 10}, {3, 128 << 10}}, points(res.Rows))
}

// TestBenchDCPJSON: --dcp-dirty measures, per level, a full and a
// differential checkpoint and reports the dCP share and the bytes written.
func TestBenchDCPJSON(t *testing.T) {
	code, out, errs := ftigo("bench", "--size", "1MiB", "--repeats", "1", "--ranks", "4", "--dir", t.TempDir(),
		"--dcp-dirty", "0.25", "--dcp-block-size", "4096", "--json")
	require.Equal(t, 0, code, errs)
	var res dcpBenchResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Rows, 4)
	for i, row := range res.Rows {
		assert.Equal(t, i+1, row.Level)
		assert.Equal(t, 0.25, row.Dirty)
		assert.InDelta(t, 0.25, row.DCPShare, 0.01, "64 of 256 blocks per rank")
		assert.Greater(t, row.Full.Median, 0.0)
		assert.Greater(t, row.DCP.Median, 0.0)
		assert.InDelta(t, row.DCP.Median/row.Full.Median, row.Ratio, 1e-9)
		assert.Greater(t, row.FullBytesWritten, int64(4<<20-1), "the full checkpoint writes the data")
		assert.Less(t, row.BytesWritten, row.FullBytesWritten/2, "the differential one a quarter of it and metadata")
		assert.Greater(t, row.BytesWritten, int64(4*(1<<20)/4))
	}
	assert.NotContains(t, out, "null")
	code, _, errs = ftigo("bench", "--dcp-dirty", "1.5")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "--dcp-dirty 1.5: a fraction of the dCP blocks, 0..1")
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bench", "--size", "lots"}, `invalid argument "lots" for "--size" flag`},
		{[]string{"bench", "--size", "4"}, "--size 4: at least 8 bytes"},
		{[]string{"bench", "--levels", "1,7"}, `bad level "7"`},
		{[]string{"bench", "--ranks", "1", "--levels", "2"}, "L2 and L3 need at least 2 ranks"},
		{[]string{"bench", "--repeats", "0"}, "--ranks and --repeats must be at least 1"},
		{[]string{"bench", "--ranks", "many"}, `invalid argument "many" for "--ranks" flag`},
		{[]string{"bench", "-size", "1MiB"}, "long flags take two dashes: --size"},
		{[]string{"bench", "extra"}, `takes no arguments, got "extra"`},
		{[]string{"bench", "--plot", "x.jpg"}, "--plot x.jpg: the file name must end in .png or .svg"},
		{[]string{"bench", "--sweep", "--size", "1MiB"}, "--sweep measures --sweep-sizes and --sweep-ranks: drop --size and --ranks"},
		{[]string{"bench", "--sweep", "--sweep-ranks", "1,4", "--levels", "3"}, "L2 and L3 need at least 2 ranks"},
		{[]string{"bench", "--sweep-sizes", "1MiB,4"}, `size "4": at least 8 bytes`},
		{[]string{"bench", "--sweep-ranks", "0"}, `bad count "0"`},
		{[]string{"bench", "--from", "r.json", "--sweep"}, "--from reads saved results: it takes no measurement flags"},
	} {
		code, out, errs := ftigo(tc.args...)
		assert.Equal(t, 2, code, "%v", tc.args)
		assert.Empty(t, out, "%v", tc.args)
		assert.Contains(t, errs, tc.msg, "%v", tc.args)
		assert.Contains(t, errs, "Usage: ftigo bench [flags]", "%v", tc.args)
	}
}

// TestBenchFromRejectsOtherFiles: --from names the file and why it is
// not a saved result.
func TestBenchFromRejectsOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ content, msg string }{
		{"not json", "not a result of ftigo bench --json"},
		{`{"rows": []}`, "no rows"},
		{`{"rows": [{"case": "x", "kind": "lunch", "level": 1, "ranks": 1, "bytes_per_rank": 8}]}`, `row 0 ("x") is not a bench row`},
	} {
		name := filepath.Join(dir, "r.json")
		require.NoError(t, os.WriteFile(name, []byte(tc.content), 0o644))
		code, _, errs := ftigo("bench", "--from", name)
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "--from "+name+": "+tc.msg)
	}
}

// TestSizeFlagRoundTrips: the default --size shown in the help parses back.
func TestSizeFlagRoundTrips(t *testing.T) {
	for _, n := range []int64{8, 1000, 64 << 10, 256 << 20, 3 << 30} {
		s := sizeFlag(n)
		var back sizeFlag
		require.NoError(t, back.Set(s.String()), s.String())
		assert.Equal(t, s, back)
	}
	code, out, _ := ftigo("bench", "--help")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "(default 256MiB)")
	assert.Contains(t, out, "--sweep-sizes sizes")
	assert.Contains(t, out, "(default 1MiB,16MiB,64MiB,256MiB)")
	assert.Contains(t, out, "(default 4,8,16)")
	assert.NotRegexp(t, `--cold.*\(default true\)`, out, "--cold is off by default")
	assert.Regexp(t, `--cold\s+drop the machine's page cache`, out)
}
