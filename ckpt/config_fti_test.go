package ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// FTI 1.6's own configuration files (their keys and values, in
// testdata/config/fti16_*), and the settings its test suites put on its
// template, load with FTI's meanings.

// itfSet is FTI's test-suite fti_config_set: every line naming key
// becomes "key = value".
func itfSet(text, key, value string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.Contains(l, key) {
			lines[i] = key + " = " + value
		}
	}
	return strings.Join(lines, "\n")
}

// itfTemplate is the template with the suite's settings applied in turn
// (key, value, key, value, ...).
func itfTemplate(t *testing.T, kv ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "config", "fti16_itf_template.cfg"))
	require.NoError(t, err)
	text := string(b)
	for i := 0; i+1 < len(kv); i += 2 {
		text = itfSet(text, kv[i], kv[i+1])
	}
	return []byte(text)
}

// ftiMeaning is what a config must mean once loaded.
type ftiMeaning struct {
	node, group          int
	dirs                 [3]string
	interval             [5]time.Duration
	async                [5]bool
	keepLast, keepL4     bool
	head                 bool
	verbosity            int
	syncIntv             int
	ckptIO               int
	dcp                  bool
	dcpMode, dcpBlock    int
	dcpStack             int
	blockSize, transfer  int
	localTest, staging   bool
	fastForward, maxVar  int
	dcpInterval          [5]time.Duration
	h5Enable, h5Keep     bool
	h5Dir, h5Prefix      string
	keepHeads            bool
	l3Parity, keepLastN  int
	warnings             []string
	ranks                int // FTI's rank count for this file
	validateErrorSnippet string
}

func (w ftiMeaning) check(t *testing.T, c Config) {
	t.Helper()
	assert.Equal(t, w.node, c.NodeSize, "node_size")
	assert.Equal(t, w.group, c.GroupSize, "group_size")
	assert.Equal(t, w.dirs, [3]string{c.CkptDir, c.GlblDir, c.MetaDir}, "ckpt_dir, glbl_dir, meta_dir")
	assert.Equal(t, w.interval, c.Interval, "ckpt_l1..ckpt_l4")
	assert.Equal(t, w.dcpInterval, c.DCPInterval, "dcp_l4")
	assert.Equal(t, w.async, c.Async, "inline_l2..inline_l4")
	assert.Equal(t, w.keepLast, c.KeepLastCkpt, "keep_last_ckpt")
	assert.Equal(t, w.keepL4, c.KeepL4Ckpt, "keep_l4_ckpt")
	assert.Equal(t, w.head, c.Head, "head")
	assert.Equal(t, w.keepHeads, c.KeepHeadsAlive, "keep_heads_alive")
	assert.Equal(t, w.verbosity, c.Verbosity, "verbosity")
	assert.Equal(t, w.syncIntv, c.MaxSyncIntv, "max_sync_intv")
	assert.Equal(t, w.ckptIO, c.CkptIO, "ckpt_io")
	assert.Equal(t, w.dcp, c.EnableDCP, "enable_dcp")
	assert.Equal(t, w.dcpMode, c.DCPMode, "dcp_mode")
	assert.Equal(t, w.dcpBlock, c.DCPBlockSize, "dcp_block_size")
	assert.Equal(t, w.dcpStack, c.DCPStackSize, "dcp_stack_size")
	assert.Equal(t, w.blockSize, c.BlockSize, "block_size")
	assert.Equal(t, w.transfer, c.TransferSize, "transfer_size")
	assert.Equal(t, w.localTest, c.LocalTest, "local_test")
	assert.Equal(t, w.staging, c.EnableStaging, "enable_staging")
	assert.Equal(t, w.fastForward, c.FastForward, "fast_forward")
	assert.Equal(t, w.maxVar, c.MaxVarID, "max_var_id")
	assert.Equal(t, w.h5Enable, c.H5SingleFileEnable, "h5_single_file_enable")
	assert.Equal(t, w.h5Keep, c.H5SingleFileKeep, "h5_single_file_keep")
	assert.Equal(t, w.h5Dir, c.H5SingleFileDir, "h5_single_file_dir")
	assert.Equal(t, w.h5Prefix, c.H5SingleFilePrefix, "h5_single_file_prefix")
	assert.Equal(t, w.l3Parity, c.L3Parity)
	assert.Equal(t, w.keepLastN, c.KeepLast)
	assert.Equal(t, len(w.warnings), len(c.Warnings), "%q", c.Warnings)
	all := strings.Join(c.Warnings, "\n")
	for _, s := range w.warnings {
		assert.Contains(t, all, s)
	}
	err := c.Validate(w.ranks)
	if w.validateErrorSnippet == "" {
		assert.NoError(t, err, "%d ranks, as FTI runs it", w.ranks)
	} else if assert.ErrorIs(t, err, ErrConfig) {
		assert.Contains(t, err.Error(), w.validateErrorSnippet)
	}
}

// templateMeaning is what FTI's test-suite template means: 16 ranks on 4
// nodes of 4, one group, nothing scheduled, dCP off (its dcp_block_size
// of -1 is not read), POSIX I/O.
func templateMeaning() ftiMeaning {
	return ftiMeaning{
		node: 4, group: 4, dirs: [3]string{"Local", "Global", "Meta"},
		verbosity: 2, syncIntv: 512, ckptIO: 1,
		dcpBlock: 16384, dcpStack: 5,
		blockSize: 1024 << 10, transfer: 16 << 20, localTest: true, fastForward: 1, maxVar: 102400,
		ranks: 16,
	}
}

func TestFTIConfigFiles(t *testing.T) {
	examples := ftiMeaning{
		node: 2, group: 4, dirs: [3]string{"./Local", "./Global", "./Meta"},
		interval:  [5]time.Duration{0, 3 * time.Minute, 5 * time.Minute, 7 * time.Minute, 11 * time.Minute},
		verbosity: 2, syncIntv: 512, ckptIO: 1,
		dcpBlock: 16384, dcpStack: 5, // dCP_Mode = 0 with dCP off: not read
		blockSize: 1024 << 10, transfer: 16 << 20, localTest: true, fastForward: 1, maxVar: 102400,
		ranks: 8,
	}
	jacobi := func(io int) ftiMeaning {
		return ftiMeaning{
			node: 2, group: 2, dirs: [3]string{"Local", "Global", "Meta"},
			interval:  [5]time.Duration{1: 2 * time.Minute},
			verbosity: 2, syncIntv: 512, ckptIO: io,
			dcp: true, dcpMode: dcpModeMD5, dcpBlock: 4096, dcpStack: 10,
			blockSize: 1024 << 10, transfer: 16 << 20, localTest: true, fastForward: 1, maxVar: 102400,
			ranks: 4,
		}
	}
	for _, tc := range []struct {
		file string
		want ftiMeaning
	}{
		{"fti16_itf_template.cfg", templateMeaning()},
		{"fti16_examples_config.fti", examples},
		{"fti16_jacobi_posix_dcp.fti", jacobi(1)},
		{"fti16_jacobi_ftiff_dcp.fti", jacobi(3)},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c, err := LoadConfig(vfd.Sec2{}, filepath.Join("testdata", "config", tc.file))
			require.NoError(t, err)
			tc.want.check(t, c)
		})
	}
}

// TestFTISuiteSettings: the template with the keys each of FTI's suites
// sets on it (fti_config_set) means what FTI makes of it.
func TestFTISuiteSettings(t *testing.T) {
	// dCP standard: 8 ranks, node_size 2, MD5, 4 KiB blocks, 10 layers,
	// ckpt_io 1 or 3, head 0 or 1.
	for _, io := range []string{"1", "3"} {
		for _, head := range []string{"0", "1"} {
			t.Run("dCP/ckpt_io="+io+"/head="+head, func(t *testing.T) {
				c, err := ParseConfig("cfg", itfTemplate(t, dcpSuite(io, head)...))
				require.NoError(t, err)
				w := templateMeaning()
				w.node, w.ranks = 2, 8
				w.interval[1] = 2 * time.Minute
				w.dcp, w.dcpMode, w.dcpBlock, w.dcpStack = true, dcpModeMD5, 4096, 10
				w.ckptIO, w.head = int(io[0]-'0'), head == "1"
				w.check(t, c)
			})
		}
	}
	// The same with CRC32, and with FTI's other ranges.
	for _, tc := range []struct {
		name  string
		kv    []string
		extra string // lines the template lacks
		edit  func(w *ftiMeaning)
	}{
		{"CRC32", []string{"enable_dcp", "1", "dcp_mode", "2", "dcp_block_size", "512"}, "", func(w *ftiMeaning) {
			w.dcp, w.dcpMode, w.dcpBlock = true, dcpModeCRC32, 512
		}},
		{"dCP on with the template's block size", []string{"enable_dcp", "1"}, "", func(w *ftiMeaning) {
			w.dcpMode = dcpModeMD5 // read, then dCP turned off by dcp_block_size = -1
			w.warnings = []string{"[basic] dcp_block_size = -1: FTI takes 512..65535 bytes and turns dCP off otherwise; dCP is off"}
		}},
		{"negative intervals are off", []string{"ckpt_l1", "-1", "ckpt_l4", "-30"}, "", func(w *ftiMeaning) {}},
		{"inline 0 (ftigo needs no head)", []string{"inline_l4", "0", "inline_l2", "7"}, "", func(w *ftiMeaning) {
			w.async[4] = true // 7 is neither 0 nor 1: inline, as FTI resets it to 1
		}},
		{"transfer size outside 8..64", []string{"transfer_size", "128"}, "", func(w *ftiMeaning) {
			w.warnings = []string{"[advanced] transfer_size = 128: outside 8..64 MiB, so 16 MiB is used (as FTI does)"}
		}},
		{"max_sync_intv not a power of 2", []string{"max_sync_intv", "100"}, "", func(w *ftiMeaning) {
			w.syncIntv = 64
			w.warnings = []string{"[basic] max_sync_intv = 100: not a power of 2, so 64 iterations are used"}
		}},
		{"max_sync_intv negative", []string{"max_sync_intv", "-1"}, "", func(w *ftiMeaning) {
			w.warnings = []string{"[basic] max_sync_intv = -1: negative, so 512 iterations are used"}
		}},
		{"keep_l4_ckpt as a boolean", []string{"keep_l4_ckpt", "yes", "keep_last_ckpt", "1"}, "", func(w *ftiMeaning) {
			w.keepL4, w.keepLast = true, true
		}},
		{"keep_heads_alive without a head", nil, "[basic]\nkeep_heads_alive = 1\n", func(w *ftiMeaning) {
			w.keepHeads = true
			w.validateErrorSnippet = "keep_heads_alive = 1 with head = 0"
		}},
		{"verbosity 3", []string{"verbosity", "3"}, "", func(w *ftiMeaning) { w.verbosity = 3 }},
		{"L2 and L3 on a group of 4", []string{"ckpt_l2", "2", "ckpt_l3", "4"}, "", func(w *ftiMeaning) {
			w.interval[2], w.interval[3] = 2*time.Minute, 4*time.Minute
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := append(itfTemplate(t, tc.kv...), "\n"+tc.extra...)
			c, err := ParseConfig("cfg", text)
			require.NoError(t, err)
			w := templateMeaning()
			tc.edit(&w)
			w.check(t, c)
		})
	}
}

// dcpSuite is what FTI's dCP suite sets on the template (its setup, then
// the case's ckpt_io and head).
func dcpSuite(io, head string) []string {
	return []string{"inline_l2", "1", "inline_l3", "1", "inline_l4", "1", "node_size", "2",
		"enable_dcp", "1", "dcp_mode", "1", "ckpt_l1", "2", "dcp_block_size", "4096", "dcp_stack_size", "10",
		"ckpt_io", io, "head", head}
}

// rebase puts c's relative directories under root, as FTI's suites run
// from their own directory.
func rebase(c Config, root string) Config {
	c.CkptDir, c.GlblDir, c.MetaDir = filepath.Join(root, c.CkptDir), filepath.Join(root, c.GlblDir), filepath.Join(root, c.MetaDir)
	return c
}

// TestFTITemplateRuns: FTI's test-suite template starts 16 ranks on 4
// simulated nodes, takes a checkpoint at every level, and Finalize
// (keep_last_ckpt = 0) deletes them all, as FTI's does: the next run is
// fresh.
func TestFTITemplateRuns(t *testing.T) {
	c, err := ParseConfig("fti_template.cfg", itfTemplate(t))
	require.NoError(t, err)
	cfg := rebase(c, t.TempDir())
	run := func(fn func(r *Runtime) error) error {
		return comm.Run(16, func(cm comm.Comm) error {
			r, err := Init(cfg, cm, WithLogger(zap.NewNop()))
			if err != nil {
				return err
			}
			defer r.Close()
			return fn(r)
		}, comm.WithTimeout(60*time.Second))
	}
	require.NoError(t, run(func(r *Runtime) error {
		if r.Status() != Fresh {
			return fmt.Errorf("rank %d: status %v", r.c.Rank(), r.Status())
		}
		x := make([]float64, 2000)
		for i := range x {
			x[i] = float64(r.c.Rank()*10000 + i)
		}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		for l := 1; l <= 4; l++ {
			if err := r.Checkpoint(int64(l), l); err != nil {
				return err
			}
			if r.last.Level != levels.ID(l) || r.last.NodeSize != 4 || r.last.NumNodes() != 4 {
				return fmt.Errorf("checkpoint %d: %v on %d nodes of %d", l, r.last.Level, r.last.NumNodes(), r.last.NodeSize)
			}
		}
		return r.Finalize()
	}))
	require.NoError(t, run(func(r *Runtime) error {
		if r.Status() != Fresh {
			return fmt.Errorf("rank %d: status %v after a Finalize without keep_last_ckpt", r.c.Rank(), r.Status())
		}
		return nil
	}))
}

// TestFTIDCPSuiteRuns is FTI's dCP "standard" case on its template with
// the suite's settings (8 ranks, node_size 2, dcp_mode 1, 4 KiB blocks,
// 10 layers) for ckpt_io 1 and 3 and head 0 and 1: the second FTI_L4_DCP
// checkpoint writes the changed blocks only, Init names MD5 as FTI's
// choice, and the restart gives the data bit for bit.
func TestFTIDCPSuiteRuns(t *testing.T) {
	for _, io := range []string{"1", "3"} {
		for _, head := range []string{"0", "1"} {
			t.Run("ckpt_io="+io+"/head="+head, func(t *testing.T) {
				c, err := ParseConfig("cfg", itfTemplate(t, dcpSuite(io, head)...))
				require.NoError(t, err)
				cfg := rebase(c, t.TempDir()) // 4 nodes of 2 ranks, one group
				obs, logs := observer.New(zapcore.InfoLevel)
				final := make([][][]byte, 8)
				share := make([]float64, 8)
				opts := []Option{WithLogger(zap.New(obs))}
				require.NoError(t, dcpRun(8, cfg, 4<<20, opts, func(r *Runtime, me int, bufs [][]byte) error {
					if err := r.Checkpoint(1, 8); err != nil {
						return err
					}
					touch(bufs, 0.1, 4096, rand.New(rand.NewPCG(uint64(me), 3))) // FTI's xor_data on a tenth
					if err := r.Checkpoint(2, 8); err != nil {
						return err
					}
					if r.last.DCP == nil || r.last.Level != levels.L4 {
						return fmt.Errorf("rank %d: checkpoint 2 is not a differential L4 one: %v %+v", me, r.last.Level, r.last.DCP)
					}
					share[me] = r.last.DCP.Share()
					final[me] = bufs
					return nil
				}))
				apps := 8
				if head == "1" {
					apps = 4
				}
				for me := range apps {
					// FTI's suite accepts 2 points above the share changed.
					assert.InDelta(t, 0.11, share[me], 0.01+1e-9, "rank %d: the delta holds the tenth changed, up to partial blocks", me)
				}
				assert.Len(t, logs.FilterMessageSnippet("dcp_mode = 1 (MD5 in FTI) accepted").All(), 1, "once, by rank 0")
				require.NoError(t, dcpRun(8, cfg, 4<<20, opts, func(r *Runtime, me int, bufs [][]byte) error {
					if r.Recovered() == nil || r.Recovered().ID != 2 {
						return fmt.Errorf("rank %d: restarted from %v, want checkpoint 2", me, r.Recovered())
					}
					return recoverBuffers(r, me, bufs, final[me])
				}))
			})
		}
	}
}

// TestFTIExamplesConfigRuns: FTI's example configuration (node_size 2,
// group_size 4) runs 8 ranks; its dCP_Mode = 0 is not read with dCP off,
// and an FTI_L4_DCP request is taken whole with FTI's warning. With
// Enable_dCP = 1 the same dCP_Mode = 0 turns dCP off as FTI 1.6 does
// (it reads 1 as MD5 and 2 as CRC32): the load warns once and the
// request is still taken whole.
func TestFTIExamplesConfigRuns(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "config", "fti16_examples_config.fti"))
	require.NoError(t, err)
	on := regexp.MustCompile(`(?m)^Enable_dCP\s*=\s*0`).ReplaceAll(raw, []byte("Enable_dCP = 1"))
	require.NotEqual(t, raw, on)
	for _, text := range [][]byte{raw, on} {
		c, err := ParseConfig("config.fti", text)
		require.NoError(t, err)
		assert.False(t, c.EnableDCP)
		if bytes.Equal(text, on) {
			require.Len(t, c.Warnings, 1)
			assert.Contains(t, c.Warnings[0], "config.fti:26: [basic] dcp_mode = 0: FTI takes 1 (MD5) or 2 (CRC32) and turns dCP off otherwise; dCP is off")
		} else {
			assert.Empty(t, c.Warnings)
		}
		cfg := rebase(c, t.TempDir())
		obs, logs := observer.New(zapcore.InfoLevel)
		require.NoError(t, comm.Run(8, func(cm comm.Comm) error {
			r, err := Init(cfg, cm, WithLogger(zap.New(obs)))
			if err != nil {
				return err
			}
			defer r.Close()
			x := []int64{int64(cm.Rank()), 2, 3}
			if err := errors.Join(Protect(r, 0, &x), r.Checkpoint(1, 3), r.Checkpoint(2, 8)); err != nil {
				return err
			}
			if r.last.Level != levels.L4 || r.last.DCP != nil {
				return fmt.Errorf("FTI_L4_DCP without dCP: %v %+v", r.last.Level, r.last.DCP)
			}
			return r.Finalize()
		}, comm.WithTimeout(60*time.Second)))
		assert.Len(t, logs.FilterMessageSnippet("L4 dCP requested, but dCP is disabled").All(), 1)
	}
}
