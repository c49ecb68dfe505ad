package ckpt

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/internal/levels"
)

// TestSnapshotDCPSchedule: ckpt_l1 = 10 s and dcp_l4 = 20 s (FTI's
// combination): the differential L4 checkpoints fire on their own
// schedule (level 8), build on the previous L4 one, and a full level
// wins over a differential one of the same level (dcp_l1 vs ckpt_l1).
func TestSnapshotDCPSchedule(t *testing.T) {
	const n = 2
	cfg := testConfig(t.TempDir(), 1)
	cfg.EnableDCP, cfg.DCPBlockSize = true, 1024
	cfg.Interval[1] = 10 * time.Second
	cfg.DCPInterval[1] = 10 * time.Second // same instants as ckpt_l1: full wins
	cfg.DCPInterval[4] = 20 * time.Second
	var mu sync.Mutex
	taken := map[int][]string{}
	clocks := []*fakeClock{{t: time.Unix(1000, 0)}, {t: time.Unix(1000, 0)}}
	require.NoError(t, worldClocks(t, n, cfg, clocks, func(r *Runtime, clk *fakeClock) error {
		x := make([]float64, 4096)
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		var mine []string
		for it := 1; it <= 65; it++ {
			x[it%len(x)] = float64(it)
			lvl, err := r.Snapshot()
			if err != nil {
				return err
			}
			if lvl > 0 {
				kind := "full"
				if r.last.DCP != nil {
					kind = "delta"
				}
				mine = append(mine, fmt.Sprintf("it%d:%d:%s", it, lvl, kind))
			}
			clk.Advance(time.Second)
		}
		mu.Lock()
		taken[r.c.Rank()] = mine
		mu.Unlock()
		return nil
	}, WithLevels(global4{})))
	assert.Equal(t, taken[0], taken[1])
	assert.Equal(t, []string{"it11:1:full", "it21:8:full", "it31:1:full", "it41:8:delta", "it51:1:full", "it61:8:delta"}, taken[0])
}

func TestConfigDCPKeys(t *testing.T) {
	c, err := ParseConfig("cfg", []byte("[basic]\nenable_dcp = 1\ndcp_mode = 1\ndcp_block_size = 512\ndcp_stack_size = 10\ndcp_l4 = 3\ndcp_l2 = 30s\n"))
	require.NoError(t, err)
	assert.True(t, c.EnableDCP)
	assert.Equal(t, 1, c.DCPMode)
	assert.Equal(t, 512, c.DCPBlockSize)
	assert.Equal(t, 10, c.DCPStackSize)
	assert.Equal(t, 3*time.Minute, c.DCPInterval[4])
	assert.Equal(t, 30*time.Second, c.DCPInterval[2])
	assert.Empty(t, c.Warnings)

	d := DefaultConfig()
	assert.Equal(t, 16384, d.DCPBlockSize, "FTI's default")
	assert.Equal(t, 5, d.DCPStackSize, "FTI's default")

	for _, tc := range []struct{ line, msg string }{
		{"dcp_block_size = 511", "use 512..65535"},
		{"dcp_block_size = 65536", "use 512..65535"},
		{"dcp_stack_size = 11", "use 1..10"},
		{"dcp_stack_size = 0", "use 1..10"},
		{"dcp_mode = 2", "use 0..1"},
		{"dcp_l4 = -1", "negative"},
		{"enable_dcp = maybe", "want an integer"},
	} {
		_, err := ParseConfig("cfg", []byte("[basic]\n"+tc.line+"\n"))
		require.ErrorIs(t, err, ErrConfig, tc.line)
		assert.Contains(t, err.Error(), tc.msg, tc.line)
	}
	// Validate checks a Config literal the same way.
	bad := testConfig("/x", 1)
	bad.DCPStackSize = 20
	require.ErrorIs(t, bad.Validate(1), ErrConfig)
	bad = testConfig("/x", 1)
	bad.EnableDCP, bad.DCPInterval[3] = true, time.Minute
	require.ErrorIs(t, bad.Validate(2), ErrConfig, "dcp_l3 needs a group of 2")

	// FormatConfig writes the keys back.
	c.CkptDir, c.GlblDir, c.MetaDir = "/l", "/g", "/m"
	b, err := FormatConfig(c)
	require.NoError(t, err)
	c2, err := ParseConfig("round", b)
	require.NoError(t, err)
	assert.Equal(t, c.EnableDCP, c2.EnableDCP)
	assert.Equal(t, c.DCPInterval, c2.DCPInterval)
	assert.Equal(t, c.DCPBlockSize, c2.DCPBlockSize)
	assert.Equal(t, c.DCPStackSize, c2.DCPStackSize)
	assert.Equal(t, c.DCPMode, c2.DCPMode)
}

// TestDCPLogLines: Init says once that dcp_mode is accepted and BLAKE3 is
// used; a differential request without enable_dcp is taken whole with
// FTI's warning.
func TestDCPLogLines(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		cfg := testConfig(t.TempDir(), 1)
		cfg.EnableDCP, cfg.DCPMode = enabled, 1
		core, logs := observer.New(zapcore.InfoLevel)
		require.NoError(t, world(t, 2, cfg, []Option{WithLogger(zap.New(core))}, func(r *Runtime) error {
			x := []int64{1, 2, 3}
			if err := Protect(r, 0, &x); err != nil {
				return err
			}
			if err := r.Checkpoint(1, 5); err != nil {
				return err
			}
			if r.last.Level != levels.L1 {
				return fmt.Errorf("level 5 gave %v", r.last.Level)
			}
			return nil
		}))
		mode := logs.FilterMessageSnippet("dcp_mode = 1 (CRC32 in FTI) accepted, but ftigo hashes every dCP block with BLAKE3-256").All()
		warn := logs.FilterMessageSnippet("L1 dCP requested, but dCP is disabled").All()
		if enabled {
			assert.Len(t, mode, 1)
			assert.Empty(t, warn)
		} else {
			assert.Empty(t, mode)
			assert.Len(t, warn, 1)
		}
	}
}
