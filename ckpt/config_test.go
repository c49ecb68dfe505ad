package ckpt

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

func TestLoadConfigSamples(t *testing.T) {
	tests := []struct {
		file     string
		ranks    int
		check    func(t *testing.T, c Config)
		warnings []string
	}{
		{
			file: "fti_heatdis.fti", ranks: 8,
			check: func(t *testing.T, c Config) {
				assert.Equal(t, 2, c.NodeSize)
				assert.Equal(t, 4, c.GroupSize)
				assert.Equal(t, "/tmp/ftigo-test/local", c.CkptDir)
				assert.Equal(t, "/tmp/ftigo-test/global", c.GlblDir)
				assert.Equal(t, "/tmp/ftigo-test/meta", c.MetaDir)
				assert.Equal(t, [5]time.Duration{0, 3 * time.Minute, 5 * time.Minute, 7 * time.Minute, 11 * time.Minute}, c.Interval)
				assert.Equal(t, 1024<<10, c.BlockSize)
				assert.Equal(t, 16<<20, c.TransferSize)
				assert.True(t, c.LocalTest)
				assert.False(t, c.KeepLastCkpt)
				assert.Equal(t, 2, c.Verbosity)
				assert.Equal(t, 512, c.MaxSyncIntv, "0 means FTI's default 512")
			},
			warnings: []string{"[restart] failure ignored"},
		},
		{
			file: "itf_template.fti", ranks: 16,
			check: func(t *testing.T, c Config) {
				assert.Equal(t, 4, c.NodeSize)
				assert.Equal(t, 4, c.GroupSize)
				assert.True(t, c.KeepLastCkpt)
				assert.True(t, c.KeepL4Ckpt)
				assert.True(t, c.Head)
				assert.Equal(t, 1000, c.MaxVarID)
				assert.Equal(t, 2048<<10, c.BlockSize)
				assert.Equal(t, 8<<20, c.TransferSize)
				assert.Equal(t, 5, c.FastForward)
				assert.Equal(t, 8*time.Minute, c.Interval[4])
			},
			warnings: []string{"head = 1 ignored"},
		},
		{
			file: "ftigo_seconds.fti", ranks: 4,
			check: func(t *testing.T, c Config) {
				assert.Equal(t, 30*time.Second, c.Interval[1])
				assert.Equal(t, 90*time.Second, c.Interval[2])
				assert.Equal(t, time.Duration(0), c.Interval[3])
				assert.Equal(t, 30*time.Second, c.Interval[4], "0.5 minutes")
				assert.Equal(t, 3, c.KeepLast)
				assert.Equal(t, 3, c.Verbosity)
			},
			warnings: []string{"unknown keys ignored: [advanced] cuda_stream, [basic] colour, [mystery]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, err := LoadConfig(vfd.Sec2{}, filepath.Join("testdata", "config", tt.file))
			require.NoError(t, err)
			tt.check(t, c)
			require.NoError(t, c.Validate(tt.ranks))
			all := strings.Join(c.Warnings, "\n")
			for _, w := range tt.warnings {
				assert.Contains(t, all, w)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.CkptDir, c.GlblDir, c.MetaDir = "/l", "/g", "/m"
		c.NodeSize, c.GroupSize = 2, 2
		return c
	}
	tests := []struct {
		name  string
		ranks int
		edit  func(c *Config)
		want  string
	}{
		{"ranks not a multiple of node_size", 6, func(c *Config) { c.NodeSize = 4 }, "6 ranks is not a multiple of node_size 4"},
		{"nodes not a multiple of group_size", 6, func(c *Config) {}, "3 nodes is not a multiple of group_size 2"},
		{"group too small for L2", 4, func(c *Config) { c.GroupSize = 1; c.Interval[2] = time.Minute }, "raise group_size"},
		{"group too small for L3", 4, func(c *Config) { c.GroupSize = 1; c.Interval[3] = time.Minute }, "need group_size >= 2"},
		{"group too big for L3", 64, func(c *Config) { c.NodeSize = 1; c.GroupSize = 32; c.Interval[3] = time.Minute }, "group_size < 32"},
		{"no ckpt_dir", 4, func(c *Config) { c.CkptDir = "" }, "ckpt_dir is empty"},
		{"no glbl_dir", 4, func(c *Config) { c.GlblDir = "" }, "glbl_dir is empty"},
		{"no meta_dir", 4, func(c *Config) { c.MetaDir = "" }, "meta_dir is empty"},
		{"verbosity", 4, func(c *Config) { c.Verbosity = 7 }, "verbosity 7"},
		{"block_size", 4, func(c *Config) { c.BlockSize = 4096 << 10 }, "block_size 4096 KiB: use 1..2048"},
		{"transfer_size", 4, func(c *Config) { c.TransferSize = 1 << 20 }, "transfer_size 1 MiB: use 8..64"},
		{"fast_forward", 4, func(c *Config) { c.FastForward = 11 }, "fast_forward 11"},
		{"negative interval", 4, func(c *Config) { c.Interval[1] = -time.Second }, "ckpt_l1 is negative"},
		{"l3_parity above group_size", 4, func(c *Config) { c.L3Parity = 3 }, "l3_parity 3 is larger than group_size 2: use 0 (= group_size) or 1..2"},
		{"negative l3_parity", 4, func(c *Config) { c.L3Parity = -1 }, "l3_parity -1: use 0"},
		{"negative node size", 4, func(c *Config) { c.NodeSize = -1 }, "node_size -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.edit(&c)
			err := c.Validate(tt.ranks)
			require.ErrorIs(t, err, ErrConfig)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	require.NoError(t, base().Validate(4))
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct{ text, want string }{
		{"[basic]\nnode_size = four\n", "cfg:2: [basic] node_size: want an integer"},
		{"[basic]\nkeep_last_ckpt = yes\n", "want 0 or 1"},
		{"[basic\n", "malformed section header"},
		{"[basic]\nnode_size\n", "want key = value"},
		{"[basic]\nckpt_l1 = soon\n", "want minutes or a duration"},
		{"[advanced]\nblock_size = 1k\n", "[advanced] block_size"},
		{"[basic]\nl3_parity = two\n", "cfg:2: [basic] l3_parity: want an integer"},
	}
	for _, tt := range tests {
		_, err := ParseConfig("cfg", []byte(tt.text))
		require.ErrorIs(t, err, ErrConfig, tt.text)
		assert.Contains(t, err.Error(), tt.want)
	}
	_, err := LoadConfig(vfd.Sec2{}, filepath.Join(t.TempDir(), "missing.fti"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.fti")
}

func TestInitRejectsBadConfigEverywhere(t *testing.T) {
	cfg := testConfig(t.TempDir(), 3)
	errs := initErrors(t, 4, cfg)
	for _, err := range errs {
		require.ErrorIs(t, err, ErrConfig)
		assert.Equal(t, errs[0].Error(), err.Error())
		assert.Contains(t, err.Error(), "not a multiple of node_size 3")
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"fti_heatdis.fti", "itf_template.fti", "ftigo_seconds.fti"} {
		b, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join("testdata", "config", name))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte("[basic]\nckpt_l1 = 1e300\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig("fuzz", b)
		if err != nil {
			return
		}
		_ = c.Validate(4)
	})
}
