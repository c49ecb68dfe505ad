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

	// A malformed dCP setting is an error with dCP on.
	for _, tc := range []struct{ line, msg string }{
		{"enable_dcp = 1\ndcp_block_size = 4k", `[basic] dcp_block_size = 4k: want an integer, got "4k"`},
		{"enable_dcp = 1\ndcp_mode = md5", `[basic] dcp_mode = md5: want an integer`},
		{"enable_dcp = 1\ndcp_stack_size = x", `[basic] dcp_stack_size = x: want an integer`},
		{"dcp_l4 = -0.5", "negative"},
		{"enable_dcp = maybe", "want 0 or 1"},
		{"enable_dcp = 2", "want 0 or 1"}, // FTI's getboolean reads it as off
	} {
		_, err := ParseConfig("cfg", []byte("[basic]\n"+tc.line+"\n"))
		require.ErrorIs(t, err, ErrConfig, tc.line)
		assert.Contains(t, err.Error(), tc.msg, tc.line)
	}
	// Out of FTI's ranges with dCP on: FTI's corrections, with a warning.
	for _, tc := range []struct {
		line     string
		on       bool
		mode, bs int
		stack    int
		warn     string
		comment  string
	}{
		{"dcp_block_size = 511", false, 0, 16384, 5, "cfg:3: [basic] dcp_block_size = 511: FTI takes 512..65535 bytes and turns dCP off otherwise; dCP is off", "below 512"},
		{"dcp_block_size = 65536", false, 0, 16384, 5, "dcp_block_size = 65536: FTI takes 512..65535", "above an uint16"},
		{"dcp_block_size = -1", false, 0, 16384, 5, "dcp_block_size = -1: FTI takes", "FTI's code default"},
		{"dcp_mode = 0", false, 0, 16384, 5, "cfg:3: [basic] dcp_mode = 0: FTI takes 1 (MD5) or 2 (CRC32) and turns dCP off otherwise; dCP is off", "0 was MD5 before FTI 1.6's offset"},
		{"dcp_mode = 3", false, 0, 16384, 5, "dcp_mode = 3: FTI takes 1 (MD5) or 2 (CRC32)", ""},
		{"dcp_mode = 1", true, 1, 16384, 5, "", "MD5"},
		{"dcp_mode = 2", true, 2, 16384, 5, "", "CRC32"},
		{"dcp_stack_size = 11", true, 0, 16384, 5, "cfg:3: [basic] dcp_stack_size = 11: outside 1..10, so 5 layers are used (FTI's default)", "FTI's MAX_STACK_SIZE is 10"},
		{"dcp_stack_size = 0", true, 0, 16384, 5, "dcp_stack_size = 0: outside 1..10", "FTI would divide by it"},
		{"dcp_stack_size = 10", true, 0, 16384, 10, "", "the most FTI takes"},
		{"dcp_block_size = 512\ndcp_stack_size = 1", true, 0, 512, 1, "", "the smallest"},
	} {
		c, err := ParseConfig("cfg", []byte("[basic]\nenable_dcp = 1\n"+tc.line+"\n"))
		require.NoError(t, err, tc.line)
		assert.Equal(t, tc.on, c.EnableDCP, "%s: %s", tc.line, tc.comment)
		assert.Equal(t, tc.mode, c.DCPMode, tc.line)
		assert.Equal(t, tc.bs, c.DCPBlockSize, tc.line)
		assert.Equal(t, tc.stack, c.DCPStackSize, tc.line)
		if tc.warn == "" {
			assert.Empty(t, c.Warnings, tc.line)
		} else if assert.Len(t, c.Warnings, 1, tc.line) {
			assert.Contains(t, c.Warnings[0], tc.warn, tc.line)
		}
	}
	// With dCP off FTI reads none of them: any value loads, silently, and
	// the defaults stay.
	for _, line := range []string{"dcp_block_size = -1", "dcp_mode = 0", "dcp_mode = 7", "dcp_stack_size = 99", "dcp_block_size = abc", "enable_dcp = 0\ndcp_block_size = 1"} {
		c, err := ParseConfig("cfg", []byte("[basic]\n"+line+"\n"))
		require.NoError(t, err, line)
		assert.False(t, c.EnableDCP, line)
		assert.Empty(t, c.Warnings, line)
		assert.Equal(t, 0, c.DCPMode, line)
		assert.Equal(t, 16384, c.DCPBlockSize, line)
		assert.Equal(t, 5, c.DCPStackSize, line)
	}
	// Validate checks a Config literal the same way, with dCP on only.
	bad := testConfig("/x", 1)
	bad.DCPStackSize, bad.DCPBlockSize, bad.DCPMode = 20, -1, 9
	require.NoError(t, bad.Validate(1), "dCP is off: its settings do not count")
	bad.EnableDCP = true
	require.ErrorIs(t, bad.Validate(1), ErrConfig)
	bad.DCPBlockSize, bad.DCPStackSize = 4096, 5
	err = bad.Validate(1)
	require.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), "dcp_mode 9: use 1 (MD5) or 2 (CRC32)")
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
		mode := logs.FilterMessageSnippet("dcp_mode = 1 (MD5 in FTI) accepted, but ftigo hashes every dCP block with BLAKE3-256").All()
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
