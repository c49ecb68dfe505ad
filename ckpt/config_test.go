package ckpt

import (
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

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
			warnings: nil, // failure = 0, head = 0, inline_lN = 1, ckpt_io = 3: all harmless
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
			warnings: nil, // head = 1 is implemented
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
			require.Len(t, c.Warnings, len(tt.warnings), "%q", c.Warnings)
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
		{"[basic]\nnode_size = four\n", `cfg:2: [basic] node_size = four: want an integer, got "four": use 1..2147483647`},
		{"[basic]\nkeep_last_ckpt = yes\n", "want 0 or 1"},
		{"[basic\n", "malformed section header"},
		{"[basic]\nnode_size\n", "want key = value"},
		{"[basic]\nckpt_l1 = soon\n", "want minutes or a duration"},
		{"[advanced]\nblock_size = 1k\n", "[advanced] block_size"},
		{"[basic]\nl3_parity = two\n", `cfg:2: [basic] l3_parity = two: want an integer`},
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

// TestParseConfigINISyntax: values, quotes, comments, case and line
// continuation as FTI's INI parser (iniparser 3.x, bundled with FTI)
// reads them.
func TestParseConfigINISyntax(t *testing.T) {
	tests := []struct {
		name, text string
		dir        string // ckpt_dir
		nodeSize   int
	}{
		{"double quotes keep spaces", `ckpt_dir = "/tmp/a b"`, "/tmp/a b", 1},
		{"; and # inside double quotes", `ckpt_dir = "/tmp/a;b#c" ; comment`, "/tmp/a;b#c", 1},
		{"single quotes", `ckpt_dir = '/tmp/x;y#z'`, "/tmp/x;y#z", 1},
		{"double quotes inside single", `ckpt_dir = '/tmp/"q"'`, `/tmp/"q"`, 1},
		{"single quote inside double", `ckpt_dir = "/tmp/it's"`, "/tmp/it's", 1},
		{"comment ends a bare value", `ckpt_dir = /tmp/a ; comment`, "/tmp/a", 1},
		{"# ends a bare value", `ckpt_dir = /tmp/a#b`, "/tmp/a", 1},
		{"spaces inside a bare value", `ckpt_dir =   /tmp/a b   `, "/tmp/a b", 1},
		{"empty quotes", `ckpt_dir = ""`, "", 1},
		{"empty single quotes", `ckpt_dir = ''`, "", 1},
		{"empty value", `ckpt_dir =`, "", 1},
		{"empty value before a comment", `ckpt_dir = ; nothing`, "", 1},
		{"quoted value is stripped", `ckpt_dir = "  /tmp/pad  "`, "/tmp/pad", 1},
		{"unclosed quote runs to the end", `ckpt_dir = "/tmp/open`, "/tmp/open", 1},
		{"text after the closing quote is ignored", `ckpt_dir = "/tmp/q" trailing`, "/tmp/q", 1},
		{"two quotes then text is a bare value", `ckpt_dir = ""x`, `""x`, 1},
		{"'=' inside a value", `ckpt_dir = /tmp/a=b`, "/tmp/a=b", 1},
		{"keys are case-insensitive", `CKPT_DIR = /tmp/up`, "/tmp/up", 1},
		{"tabs", "ckpt_dir\t=\t/tmp/t\t", "/tmp/t", 1},
		{"quoted integer", `node_size = "4"`, "", 4},
		{"last setting wins", "node_size = 2\nnode_size = 3", "", 3},
		{"continuation line", "ckpt_dir = /tmp/long\\\n/path", "/tmp/long/path", 1},
		{"continued comment swallows the next line", "; note \\\nnode_size = 5\nckpt_dir = /c", "/c", 1},
		{"CRLF", "ckpt_dir = /tmp/crlf\r\nnode_size = 2\r\n", "/tmp/crlf", 2},
		{"hex integer", "node_size = 0x10", "", 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, head := range []string{"[basic]\n", "[BASIC]\n", "[ Basic ] ; the main section\n", "# comment\n;comment\n   [basic]\n"} {
				c, err := ParseConfig("cfg", []byte(head+tt.text+"\n"))
				require.NoError(t, err, "%q", head+tt.text)
				assert.Equal(t, tt.dir, c.CkptDir, "%q", head+tt.text)
				assert.Equal(t, tt.nodeSize, c.NodeSize, "%q", head+tt.text)
				assert.Empty(t, c.Warnings)
			}
		})
	}
}

// TestParseConfigRejects: text that holds no FTI setting, or is not INI,
// is an error at load, naming the file and saying why.
func TestParseConfigRejects(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"empty", "", "cfg: no FTI configuration key found: is it a config.fti?"},
		{"white space", "  \n\t\n", "no FTI configuration key found"},
		{"comments only", "; FTI\n# config\n", "no FTI configuration key found"},
		{"section only", "[basic]\n", "no FTI configuration key found"},
		{"unknown keys only", "[basic]\ncolour = blue\n[mystery]\nx = 1\n", "no FTI configuration key found"},
		{"no section", "ckpt_dir = /tmp/a\nnode_size = 2\n", "come before any section header, where FTI ignores them: put them under [basic]"},
		{"NUL bytes", "\x00\x00\x00\x00", "cfg:1: NUL byte"},
		{"NUL in a value", "[basic]\nckpt_dir = /a\x00b\n", "cfg:2: NUL byte"},
		{"empty section name", "[]\nnode_size = 1\n", "cfg:1: empty section name"},
		{"text after a section", "[basic] node_size = 2\n", "malformed section header"},
		{"no key", "[basic]\n= 4\n", "cfg:2: no key before '='"},
		{"binary", "\x7fELF\x02\x01\x01", "want key = value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("cfg", []byte(tt.text))
			require.ErrorIs(t, err, ErrConfig)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	// A config with one known key and orphans loads, naming the orphans.
	c, err := ParseConfig("cfg", []byte("stray = 1\n[basic]\nnode_size = 2\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"cfg: unknown keys ignored: stray"}, c.Warnings)
}

// TestConfigRangeErrors: every interval, integer and scaled key refuses a
// value that overflows or is out of its range, naming key, value and the
// allowed range (ckpt_l1 = 200000000 once overflowed into "negative").
func TestConfigRangeErrors(t *testing.T) {
	tests := []struct{ line, want string }{
		{"ckpt_l1 = 200000000", "[basic] ckpt_l1 = 200000000: out of range: use 0 (off) to 153722867 minutes, or a duration such as 30s up to 2562047h47m16.854775807s"},
		{"ckpt_l2 = 153722868", "[basic] ckpt_l2 = 153722868: out of range: use 0 (off) to 153722867 minutes"},
		{"ckpt_l3 = 99999999999999999999", "[basic] ckpt_l3 = 99999999999999999999: out of range"},
		{"ckpt_l4 = 1e300", "[basic] ckpt_l4 = 1e300: out of range"},
		{"ckpt_l4 = 1e400", "[basic] ckpt_l4 = 1e400: out of range"},
		{"ckpt_l1 = 153722867.5", "out of range"},
		{"ckpt_l1 = 2562048h", "[basic] ckpt_l1 = 2562048h: out of range"},
		{"ckpt_l1 = 99999999999999999999s", "[basic] ckpt_l1 = 99999999999999999999s: out of range"},
		{"ckpt_l1 = -0.5", "[basic] ckpt_l1 = -0.5: negative"},
		{"ckpt_l1 = -30s", "[basic] ckpt_l1 = -30s: negative"},
		{"ckpt_l1 = NaN", `[basic] ckpt_l1 = NaN: want minutes or a duration such as 30s, got "NaN"`},
		{"ckpt_l1 = Inf", "want minutes or a duration"},
		{"ckpt_l1 = 1e-30", "less than a nanosecond"},
		{"ckpt_l1 = 010", "leading 0, which FTI reads as octal"},
		{"node_size = 99999999999999999999", "[basic] node_size = 99999999999999999999: 99999999999999999999 does not fit in 64 bits: use 1..2147483647"},
		{"node_size = 4294967297", "[basic] node_size = 4294967297: out of range: use 1..2147483647"},
		{"node_size = 0", "[basic] node_size = 0: out of range: use 1..2147483647"},
		{"node_size = 08", "leading 0"},
		{"node_size = 0x8000000000000000", "does not fit in 64 bits"},
		{"group_size = -1", "[basic] group_size = -1: out of range: use 1..2147483647"},
		{"keep_last_n = -1", "[basic] keep_last_n = -1: out of range: use 0..2147483647"},
		{"l3_parity = 9223372036854775808", "[basic] l3_parity = 9223372036854775808: 9223372036854775808 does not fit in 64 bits: use 0..2147483647"},
		{"verbosity = 0", "[basic] verbosity = 0: out of range: use 1..4"},
		{"max_var_id = 2147483648", "[basic] max_var_id = 2147483648: out of range: use 1..2147483647"},
		{"max_sync_intv = 2147483648", "[basic] max_sync_intv = 2147483648: out of range: use -2147483648..1073741824"},
		{"[advanced]\nblock_size = 9007199254740993", "[advanced] block_size = 9007199254740993: out of range: use 1..2048 (KiB)"},
		{"[advanced]\nblock_size = 0", "[advanced] block_size = 0: out of range: use 1..2048 (KiB)"},
		{"[advanced]\nblock_size = 99999999999999999999", "does not fit in 64 bits: use 1..2048 (KiB)"},
		{"[advanced]\ntransfer_size = 16M", `[advanced] transfer_size = 16M: want an integer, got "16M": use 8..64 (MiB)`},
		{"[advanced]\nfast_forward = 11", "[advanced] fast_forward = 11: out of range: use 1..10"},
		{"[advanced]\nfast_forward = 0", "[advanced] fast_forward = 0: out of range: use 1..10"},
	}
	for _, tt := range tests {
		_, err := ParseConfig("cfg", []byte("[basic]\n"+tt.line+"\n"))
		if assert.ErrorIs(t, err, ErrConfig, tt.line) {
			assert.Contains(t, err.Error(), tt.want, tt.line)
		}
	}
	// The edges of the ranges load.
	c, err := ParseConfig("cfg", []byte("[basic]\nckpt_l1 = 153722867\nckpt_l2 = 2562047h\nckpt_l3 = 0.5\nckpt_l4 = -0\n"+
		"node_size = 2147483647\n[advanced]\nblock_size = 2048\ntransfer_size = 64\nfast_forward = 10\n"))
	require.NoError(t, err)
	assert.Equal(t, [5]time.Duration{0, 153722867 * time.Minute, 2562047 * time.Hour, 30 * time.Second, 0}, c.Interval)
	assert.Positive(t, c.Interval[1])
	assert.Equal(t, math.MaxInt32, c.NodeSize)
	assert.Equal(t, 2048<<10, c.BlockSize)
	assert.Equal(t, 64<<20, c.TransferSize)
}

// TestConfigInline: inline_lL = 0 (or empty, 0 in FTI) makes level L's
// post-processing asynchronous; 1 and a missing key keep it inline.
func TestConfigInline(t *testing.T) {
	tests := []struct {
		text string
		want [5]bool
	}{
		{"", [5]bool{}},
		{"inline_l2 = 0", [5]bool{2: true}},
		{"inline_l3 = 0\ninline_l4 = false", [5]bool{3: true, 4: true}},
		{"inline_l2 =\ninline_l3 = 1\ninline_l4 = 0", [5]bool{2: true, 4: true}},
		{"inline_l2 = 0\ninline_l2 = 1", [5]bool{}},
	}
	for _, tc := range tests {
		cfg, err := ParseConfig("cfg", []byte("[basic]\nckpt_dir = /l\nglbl_dir = /g\nmeta_dir = /m\n"+tc.text+"\n"))
		require.NoError(t, err, tc.text)
		assert.Equal(t, tc.want, cfg.Async, tc.text)
		assert.Empty(t, cfg.Warnings, tc.text)
		// Written back and read again, the setting survives.
		b, err := FormatConfig(cfg)
		require.NoError(t, err)
		again, err := ParseConfig("again", b)
		require.NoError(t, err)
		assert.Equal(t, tc.want, again.Async, tc.text)
	}
	_, err := ParseConfig("cfg", []byte("[basic]\ninline_l2 = maybe\n"))
	require.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), "inline_l2")
}

// TestConfigFeatureKeys: a value asking for an FTI feature ftigo lacks
// warns, naming file, line, key and value; harmless values do not.
func TestConfigFeatureKeys(t *testing.T) {
	tests := []struct{ line, warn string }{
		{"ckpt_io = 2", "cfg:2: [basic] ckpt_io = 2 ignored: MPI-IO"},
		{"ckpt_io = 6", "cfg:2: [basic] ckpt_io = 6 ignored: IME is not implemented"},
		{"ckpt_io = 7", "[basic] ckpt_io = 7 ignored: is not an FTI I/O mode"},
		{"ckpt_io = 0", "[basic] ckpt_io = 0 ignored: is not an FTI I/O mode"},
		{"dcp_l4 = 5", "cfg:2: [basic] dcp_l4 = 5: enable_dcp is off, so Snapshot takes these checkpoints whole"},
		{"dcp_l1 = 30s", "[basic] dcp_l1 = 30s: enable_dcp is off"},
		{"enable_dcp = 0\ndcp_l4 = 5", "[basic] dcp_l4 = 5: enable_dcp is off"},
		{"h5_single_file_inline = 0", "[basic] h5_single_file_inline = 0 ignored: the level-9 HDF5 file is written inline by the application ranks"},
		{"h5_single_file_inline = no", "[basic] h5_single_file_inline = no ignored"},
		{"head = 1", ""}, // implemented: head ranks
		{"keep_heads_alive = 1", ""},
		{"[restart]\nfailure = 3", "cfg:3: [restart] failure = 3 ignored: ftigo needs no request for a variate processor restart"},
		{"[restart]\nfailure = 1", "[restart] failure = 1 ignored: ftigo keeps the restart state in meta_dir"},
		{"[restart]\nfailure = 2", "[restart] failure = 2 ignored"},
		{"head = true", ""},
		{"enable_dcp = 1\nenable_dcp = 0", ""}, // the last setting counts
		{"enable_dcp =\nh5_single_file_enable =\ndcp_l4 =\n[restart]\nfailure =", ""},
		{"ckpt_l3 =", ""}, // empty interval: off, as FTI reads it
		{"ckpt_io = 1", ""},
		{"ckpt_io = 3", ""},
		{"ckpt_io = 4", ""},
		{"ckpt_io = 5", ""}, // L4 as one HDF5 file
		{"h5_single_file_enable = 1", ""},
		{"h5_single_file_enable = yes", ""},
		{"h5_single_file_enable = True", ""},
		{"h5_single_file_inline =", ""},
		{"enable_dcp = 0", ""},
		{"enable_dcp = 1", ""},   // implemented
		{"enable_dcp = yes", ""}, // FTI's iniparser_getboolean
		{"enable_dcp = 10", ""},  // the first character decides, as in iniparser
		{"enable_dcp = 1\ndcp_l4 = 5\ndcp_l2 = 0.5", ""},
		{"dcp_l4 = 0", ""},
		{"dcp_mode = 1\ndcp_block_size = 512\ndcp_stack_size = 5\ncacheddcp = 1", ""},
		{"enable_staging = 0", ""},
		{"enable_staging = 1", ""}, // implemented
		{"inline_l2 = 1\ninline_l3 = 1\ninline_l4 = 1", ""},
		{"inline_l2 = 0\ninline_l3 = 0\ninline_l4 = 0", ""}, // implemented: background post-processing
		{"inline_l2 =", ""},                                 // empty is 0 in FTI: background too
		{"h5_single_file_enable = 0", ""},
		{"h5_single_file_enable = no", ""},
		{"h5_single_file_dir = /x\nh5_single_file_prefix = p\nh5_single_file_keep = 1\nh5_single_file_inline = 1", ""},
		{"head = 0", ""},
		{"keep_heads_alive = 0", ""},
		{"glbl_stash_dir = /s", ""},
		{"[restart]\nfailure = 0\nexec_id = 2017-03-14_11-08-52", ""},
		{"[injection]\nrank = 0\nnumber = 0\nposition = 0\nfrequency = 0", ""},
		{"[advanced]\ngeneral_tag = 2612\nlustre_stiping_unit = 4194304", ""},
	}
	for _, tt := range tests {
		c, err := ParseConfig("cfg", []byte("[basic]\n"+tt.line+"\n"))
		require.NoError(t, err, tt.line)
		if tt.warn == "" {
			assert.Empty(t, c.Warnings, tt.line)
			continue
		}
		if assert.Len(t, c.Warnings, 1, tt.line) {
			assert.Contains(t, c.Warnings[0], tt.warn, tt.line)
		}
	}
	// Malformed values of these keys are errors, not silently off.
	for _, line := range []string{"enable_dcp = 2", "enable_staging = 2", "keep_l4_ckpt = maybe", "ckpt_io = posix", "inline_l2 = no", "h5_single_file_enable = maybe", "[restart]\nfailure = x"} {
		_, err := ParseConfig("cfg", []byte("[basic]\n"+line+"\n"))
		assert.ErrorIs(t, err, ErrConfig, line)
	}
	// Every row names a key of its section that the loader knows.
	for _, f := range featureKeys {
		_, ok := sections[f.section][f.key]
		assert.True(t, ok, "[%s] %s", f.section, f.key)
	}
}

// TestConfigH5Keys: ckpt_io and the h5_single_file_* keys are read as
// FTI reads them (iniparser_getint, iniparser_getboolean, strings).
func TestConfigH5Keys(t *testing.T) {
	c, err := ParseConfig("cfg", []byte("[basic]\nckpt_io = 5\nh5_single_file_enable = yes\nh5_single_file_dir = /pfs/vpr\n"+
		"h5_single_file_prefix = run7\nh5_single_file_keep = true\nh5_single_file_inline = 1\n"))
	require.NoError(t, err)
	assert.Equal(t, 5, c.CkptIO)
	assert.True(t, c.H5SingleFileEnable)
	assert.True(t, c.H5SingleFileKeep)
	assert.False(t, c.H5SingleFileNotInline)
	dir, prefix := c.vprDirOf()
	assert.Equal(t, "/pfs/vpr", dir)
	assert.Equal(t, "run7", prefix)

	c, err = ParseConfig("cfg", []byte("[basic]\nglbl_dir = /g\nckpt_io = 9\nh5_single_file_enable = 0\nh5_single_file_inline = 0\n"))
	require.NoError(t, err)
	assert.Equal(t, 0, c.CkptIO, "a mode FTI does not have keeps FTI-FF")
	assert.False(t, c.H5SingleFileEnable)
	assert.True(t, c.H5SingleFileNotInline)
	dir, prefix = c.vprDirOf()
	assert.Equal(t, "/g", dir, "FTI's default: glbl_dir")
	assert.Equal(t, "VPR-h5", prefix, "FTI's default prefix")
	for _, bad := range []string{"h5_single_file_keep = maybe", "h5_single_file_inline = 2x"} {
		_, err := ParseConfig("cfg", []byte("[basic]\n"+bad+"\n"))
		assert.ErrorIs(t, err, ErrConfig, bad)
	}
}

// TestLoadConfigRefusesSpecialFiles: a FIFO, /dev/zero, a directory and a
// 20 GiB sparse file given as the config are refused at once with a clear
// error, without blocking or reading them.
func TestLoadConfigRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "config.fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	huge := filepath.Join(dir, "huge.fti")
	f, err := vfd.Sec2{}.Open(huge, vfd.ReadWrite|vfd.OCreate)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(20<<30))
	_, err = f.WriteAt([]byte("[basic]\nnode_size = 1\n"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	tests := []struct {
		path     string
		sentinel error
		want     string
	}{
		{fifo, vfd.ErrNotRegular, "config.fifo is not a regular file, so not a config.fti"},
		{"/dev/zero", vfd.ErrNotRegular, "/dev/zero is not a regular file"},
		{dir, vfd.ErrNotRegular, "is not a regular file"},
		{huge, vfd.ErrTooLarge, "huge.fti is larger than 1024 KiB, too large for a config.fti"},
	}
	for _, tt := range tests {
		done := make(chan error, 1)
		go func() {
			_, err := LoadConfig(vfd.Sec2{}, tt.path)
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, ErrConfig, tt.path)
			require.ErrorIs(t, err, tt.sentinel, tt.path)
			assert.Contains(t, err.Error(), tt.want)
		case <-time.After(10 * time.Second):
			t.Fatalf("LoadConfig(%s) blocks", tt.path)
		}
	}
	// An empty regular file is refused too, at load.
	empty := filepath.Join(dir, "empty.fti")
	require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, empty, nil))
	_, err = LoadConfig(vfd.Sec2{}, empty)
	require.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), "empty.fti: no FTI configuration key found")
}

// TestFormatConfigRoundTrip: FormatConfig writes every setting so that
// ParseConfig reads it back, with directories quoted as iniparser needs.
func TestFormatConfigRoundTrip(t *testing.T) {
	for _, dir := range []string{"/tmp/plain", "/tmp/a b", "/tmp/a;b", "/tmp/#x", `/tmp/"q"`, "/tmp/it's", `"lead`, `'lead`, `C:\dir\`,
		`""`, `/a"b'c`, "", "/tmp/ü", "/tmp/cr\rmid", "/tmp/tab\tmid"} {
		c := DefaultConfig()
		c.CkptDir, c.GlblDir, c.MetaDir = dir, dir+"/g", "/m"
		c.NodeSize, c.GroupSize, c.KeepLast, c.L3Parity, c.Verbosity = 4, 2, 3, 1, 3
		c.Interval = [5]time.Duration{0, 3 * time.Minute, 90 * time.Second, 0, 2562047 * time.Hour}
		c.KeepLastCkpt, c.LocalTest, c.Head = true, true, true
		c.BlockSize, c.TransferSize, c.FastForward, c.MaxSyncIntv = 64<<10, 32<<20, 3, 64
		c.CkptIO, c.H5SingleFileEnable, c.H5SingleFileKeep, c.H5SingleFileNotInline = 5, true, true, true
		c.H5SingleFileDir, c.H5SingleFilePrefix = dir+"/h5", "pre"
		b, err := FormatConfig(c)
		require.NoError(t, err, dir)
		back, err := ParseConfig("fmt", b)
		require.NoError(t, err, "%s", b)
		back.Warnings = nil
		assert.Equal(t, c, back, "%s", b)
	}
	for _, dir := range []string{" /lead", "/trail ", "/a\nb", "/nul\x00", `/a"b';c`} {
		c := DefaultConfig()
		c.CkptDir, c.GlblDir, c.MetaDir = dir, "/g", "/m"
		_, err := FormatConfig(c)
		assert.ErrorIs(t, err, ErrConfig, "%q", dir)
	}
}

// FuzzParseConfig: ParseConfig never panics, and whatever it accepts is
// written by FormatConfig and read back to the same settings, directories
// included.
func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"fti_heatdis.fti", "itf_template.fti", "ftigo_seconds.fti"} {
		b, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join("testdata", "config", name))
		require.NoError(f, err)
		f.Add(b)
	}
	for _, s := range []string{
		"[basic]\nckpt_l1 = 1e300\n",
		"[basic]\nckpt_l1 = 200000000\n",
		"[basic]\nckpt_dir = \"/tmp/a b;c#d\"\nglbl_dir = '/g\"h'\nmeta_dir = \"\"x\n",
		"[basic]\nckpt_dir = /a\\\n/b\\\n",
		"[basic]\nckpt_dir = '\"\n",
		"[basic]\nnode_size = 0x7fffffff\n[advanced]\nblock_size = 2048\n",
		"[basic]\nckpt_l2 = 1.5\nckpt_l3 = 2562047h47m16.854775807s\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig("fuzz", b)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error without ErrConfig: %v", err)
			}
			return
		}
		_ = c.Validate(4)
		out, err := FormatConfig(c)
		if err != nil {
			t.Fatalf("accepted config does not format: %v", err)
		}
		back, err := ParseConfig("again", out)
		if err != nil {
			t.Fatalf("formatted config does not parse: %v\n%s", err, out)
		}
		if back.CkptDir != c.CkptDir || back.GlblDir != c.GlblDir || back.MetaDir != c.MetaDir {
			t.Fatalf("directories %q %q %q came back as %q %q %q", c.CkptDir, c.GlblDir, c.MetaDir, back.CkptDir, back.GlblDir, back.MetaDir)
		}
		c.Warnings, back.Warnings = nil, nil
		if !reflect.DeepEqual(c, back) {
			t.Fatalf("settings changed:\n%+v\n%+v", c, back)
		}
	})
}

// TestInitRefusesHugeNodeTable: a 20 GiB sparse file in place of the node
// table in meta_dir is refused by Init on every rank, before it is read.
func TestInitRefusesHugeNodeTable(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	require.NoError(t, vfd.Sec2{}.MkdirAll(cfg.MetaDir, 0o755))
	f, err := vfd.Sec2{}.Open(filepath.Join(cfg.MetaDir, topologyFile), vfd.ReadWrite|vfd.OCreate)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(20<<30))
	require.NoError(t, f.Close())
	errs := initErrors(t, 2, cfg)
	require.ErrorIs(t, errs[0], vfd.ErrTooLarge, "rank 0 read it")
	for _, err := range errs {
		require.Error(t, err)
		assert.Contains(t, err.Error(), "read node table failed on rank 0")
		assert.Contains(t, err.Error(), "meta/topology: vfd: file larger than allowed: 21474836480 bytes")
	}
}
