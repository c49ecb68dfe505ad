package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
)

// TestInspectCompressed: inspect shows a compressed checkpoint's ratio
// from its manifest and each lossy variable's mode and largest error
// over the ranks (a dCP layer's through its chain's image); an
// uncompressed checkpoint shows neither.
func TestInspectCompressed(t *testing.T) {
	dir := t.TempDir()
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, 4, true
	cfg.EnableDCP, cfg.DCPBlockSize = true, 4096
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		rt, err := ckpt.Init(cfg, c)
		if err != nil {
			return err
		}
		field := make([]float64, 20000)
		temp := make([]float64, 4000)
		for i := range field {
			field[i] = float64((i / 1000) % 3)
		}
		for i := range temp {
			temp[i] = math.Sin(float64(i+c.Rank())/50) * float64(1+c.Rank())
		}
		if err := ckpt.Protect(rt, 1, &field, "field"); err != nil {
			return err
		}
		if err := rt.SetCompression(1, ckpt.Compression{Codec: fileformat.CodecZstd}); err != nil {
			return err
		}
		if err := ckpt.ProtectWith(rt, 2, &temp, ckpt.WithName("temp"),
			ckpt.WithCompression(ckpt.Compression{Lossy: fileformat.Lossy{Mode: fileformat.ToFloat32}})); err != nil {
			return err
		}
		if err := rt.Checkpoint(1, 1); err != nil {
			return err
		}
		field[7] = 9
		if err := rt.Checkpoint(2, 5); err != nil { // a dCP layer
			return err
		}
		return rt.Close()
	}))

	code, out, _ := ftigo("inspect", "--json", dir)
	require.Equal(t, 0, code, out)
	var res inspectResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	reps := res.Checkpoints
	require.Len(t, reps, 2)
	for _, r := range reps {
		c := r.Compressed
		require.NotNil(t, c, r.Name)
		assert.Empty(t, c.LossyError)
		require.Len(t, c.Lossy, 1, r.Name)
		l := c.Lossy[0]
		assert.Equal(t, lossyReport{ID: 2, Name: "temp", Mode: "float32", MaxAbs: l.MaxAbs, MaxRel: l.MaxRel, Ranks: 4}, l)
		assert.Greater(t, l.MaxAbs, 0.0)
		assert.Less(t, l.MaxAbs, 4*math.Pow(2, -24), "float32 rounding of values up to 4")
		assert.InDelta(t, float64(c.Logical)/float64(c.Stored), c.Ratio, 1e-12)
	}
	full := reps[0].Compressed
	assert.Equal(t, int64(4*(20000+4000)*8), full.Logical)
	assert.Less(t, full.Stored, int64(4*4000*4+4*20000*8/10), "the field compresses 10x, temp is stored as float32")
	assert.Equal(t, int64(4*4096), reps[1].DCP.Written)
	assert.Equal(t, reps[1].DCP.Written, reps[1].Compressed.Logical)

	code, out, _ = ftigo("inspect", dir)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "    compressed ")
	assert.Regexp(t, `lossy: variable 2 "temp" float32 on 4 ranks, error up to \S+ \(relative \S+\)`, out)

	// An uncompressed run says nothing of compression.
	code, out, _ = ftigo("inspect", "--json", makeRun(t))
	require.Equal(t, 0, code, out)
	res = inspectResult{}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.NotEmpty(t, res.Checkpoints)
	for _, r := range res.Checkpoints {
		assert.Nil(t, r.Compressed, r.Name)
	}
	assert.NotContains(t, out, "compressed")
}

// TestBenchCompression: --compression zstd writes the checkpoints
// compressed; each checkpoint row carries the logical and stored bytes
// (the ranks' files, as StoredInfo reads them) and their ratio, the
// table a "compressed" column; the restart rows carry none. The JSON
// keys are documented in docs/performance.md. A bad codec, or the flag
// with a mode it does not apply to, is a usage error.
func TestBenchCompression(t *testing.T) {
	a, out, errb := testApp(false)
	res := benchJSON(t, a, out, errb, "--levels", "1,3", "--compression", "zstd", "--data", "sparse")
	require.Len(t, res.Rows, 4)
	assert.Contains(t, res.Description, "compressed with zstd")
	assert.Contains(t, res.Description, "(sparse data)")
	assert.Positive(t, res.ZstdCompMBps)
	assert.Positive(t, res.ZstdDecMBps)
	assert.Greater(t, res.ZstdRatio, 2.0, "90% zeros compress")
	for _, row := range res.Rows {
		assert.Equal(t, "sparse", row.Data, row.Case)
		require.NotNil(t, row.Uncompressed, "%s: the same run measures it uncompressed", row.Case)
		assert.Positive(t, row.Uncompressed.Median, row.Case)
		assert.InDelta(t, row.Time.Median/row.Uncompressed.Median, row.RatioUncompressed, 1e-9, row.Case)
		require.NotNil(t, row.UncompressedCPU, row.Case)
		if u := row.UncompressedCPU.User + row.UncompressedCPU.Sys; u > 0 {
			assert.InDelta(t, (row.CPU.User+row.CPU.Sys)/u, row.CPURatioUncompressed, 1e-9, row.Case)
		}
		if row.Kind == "restart" {
			assert.Empty(t, row.Compression, row.Case)
			assert.Zero(t, row.StoredBytes, row.Case)
			continue
		}
		assert.Equal(t, "zstd", row.Compression, row.Case)
		assert.Equal(t, int64(4*256<<10), row.LogicalBytes, row.Case)
		assert.Positive(t, row.StoredBytes, row.Case)
		assert.Less(t, row.StoredBytes, row.LogicalBytes, row.Case)
		assert.InDelta(t, float64(row.LogicalBytes)/float64(row.StoredBytes), row.CompressionRatio, 1e-9, row.Case)
	}
	assert.Contains(t, benchTable(res.Rows), "compressed")
	assert.Contains(t, benchTable(res.Rows), fmt.Sprintf("%.2fx", res.Rows[0].CompressionRatio))
	b, err := json.Marshal(res.Rows[0])
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "performance.md"))
	require.NoError(t, err)
	var top map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &top))
	for _, k := range []string{"zstd_compress_mb_per_s_per_core", "zstd_decompress_mb_per_s_per_core", "zstd_ratio"} {
		assert.Contains(t, top, k)
		assert.True(t, strings.Contains(string(doc), "`"+k+"`"), "docs/performance.md documents `%s`", k)
	}
	assert.Contains(t, benchTable(res.Rows), "vs none")
	assert.Contains(t, benchTable(res.Rows), "cpu vs none")
	for _, k := range []string{"compression", "logical_bytes", "stored_bytes", "compression_ratio", "data", "uncompressed", "ratio_uncompressed",
		"uncompressed_cpu", "cpu_ratio_uncompressed"} {
		assert.Contains(t, string(b), `"`+k+`"`)
		assert.True(t, strings.Contains(string(doc), "`"+k+"`"), "docs/performance.md documents `%s`", k)
	}
	for _, args := range [][]string{{"bench", "--compression", "lz4"}, {"bench", "--compression", "zstd", "--dcp-dirty", "0.1"}, {"bench", "--data", "noise"}} {
		code, _, errs := ftigo(args...)
		assert.Equal(t, 2, code, "%v", args)
		assert.Contains(t, errs, "--"+args[1][2:], "%v", args)
	}
	// Without the flag the rows and the table say nothing of it.
	a, out, errb = testApp(false)
	res = benchJSON(t, a, out, errb, "--levels", "1")
	assert.NotContains(t, out.String(), "compress")
	assert.NotContains(t, benchTable(res.Rows), "compressed")
	assert.Nil(t, res.Rows[0].Uncompressed)
	assert.Zero(t, res.ZstdCompMBps)
}

// TestBenchData checks the kinds of --data: heat is 100 near the heated
// edge's middle, decays down the rows and is exactly 0 beyond the heat's
// reach; sparse is about 90% zeros; random has no zeros; ramp is the
// ramp; every kind differs between ranks.
func TestBenchData(t *testing.T) {
	const n = 4096 * heatColumns
	zeros := func(x []float64) float64 {
		z := 0
		for _, v := range x {
			if v == 0 {
				z++
			}
		}
		return float64(z) / float64(len(x))
	}
	heat := benchData("heat", 0, 1, n)
	assert.InDelta(t, 100, heat[heatColumns/2], 5, "next to the heated edge")
	assert.Less(t, heat[10*heatColumns+heatColumns/2], heat[heatColumns/2])
	assert.Zero(t, heat[4000*heatColumns+heatColumns/2], "beyond the heat's reach")
	assert.Less(t, heat[0], heat[heatColumns/2], "the edge's corners are cooler")
	assert.InDelta(t, 0.55, zeros(heat), 0.1)
	assert.InDelta(t, 0.9, zeros(benchData("sparse", 0, 4, 1<<16)), 0.01)
	assert.Zero(t, zeros(benchData("random", 0, 4, 1<<16)))
	assert.Equal(t, 1+5e-3, benchData("ramp", 1, 4, 8)[5])
	for _, k := range benchDataKinds {
		assert.NotEqual(t, benchData(k, 0, 4, 1<<16), benchData(k, 1, 4, 1<<16), k)
	}
}
