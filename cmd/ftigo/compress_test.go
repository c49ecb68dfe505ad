package main

import (
	"encoding/json"
	"math"
	"path/filepath"
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
