package ckpt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ftigo/ftigo/vfd"
)

// Config is the runtime configuration, with the meanings of FTI's
// config.fti keys. [LoadConfig] reads one from a file; a Config literal
// works as well (zero fields take the defaults of [DefaultConfig]).
type Config struct {
	// NodeSize is the number of ranks per node; the rank count must be a multiple ([basic] node_size).
	NodeSize int
	// GroupSize is the number of nodes per group for L2/L3; the node count
	// must be a multiple ([basic] group_size).
	GroupSize int
	// CkptDir is the node-local directory ([basic] ckpt_dir).
	CkptDir string
	// GlblDir is the global directory on the parallel file system ([basic] glbl_dir).
	GlblDir string
	// MetaDir is the metadata directory that must survive node loss
	// ([basic] meta_dir). The restart state lives here.
	MetaDir string
	// Interval[L] is the Snapshot interval of level L (1..4); 0 disables
	// it ([basic] ckpt_l1..ckpt_l4: minutes as in FTI, or a Go duration such
	// as "30s" as an ftigo extension). Index 0 is unused.
	Interval [5]time.Duration
	// L3Parity is the Reed-Solomon parity count m of L3 groups ([basic]
	// l3_parity, an ftigo extension). 0 means group_size, FTI's scheme (a
	// group of k nodes survives the loss of any k of its 2k files);
	// 1..group_size-1 rotates the parity over stripes as SCR does (parity
	// overhead m/(k-m); any m nodes of a group may be lost).
	L3Parity int
	// KeepLastCkpt flushes the last checkpoint to L4 at Finalize (unless
	// it is an L4 one) and keeps it, so the next run restarts from it even
	// without node-local storage ([basic] keep_last_ckpt).
	KeepLastCkpt bool
	// KeepL4Ckpt keeps every L4 checkpoint instead of superseding it ([basic] keep_l4_ckpt).
	KeepL4Ckpt bool
	// KeepLast, when > 1, keeps the newest KeepLast checkpoints in addition
	// to FTI's rule ([basic] keep_last_n, an ftigo extension).
	KeepLast int
	// Verbosity is 1 debug, 2 info, 3 warnings, 4 errors only ([basic] verbosity).
	Verbosity int
	// Head makes node-local rank 0 of the communicator passed to Init a
	// dedicated post-processing rank ([basic] head = 1, FTI's heads; needs
	// NodeSize >= 2): the application gets NodeSize-1 ranks per node
	// ([Runtime.Comm]), Init on a head returns [ErrHead] once the
	// application has finalized, and the levels with Async set are
	// post-processed by the heads (see the package documentation).
	Head bool
	// KeepHeadsAlive is [basic] keep_heads_alive: accepted for FTI's
	// sake; a head's Init returns [ErrHead] whatever its value.
	KeepHeadsAlive bool
	// Async[L], for L = 2, 3, 4, moves level L's post-processing off the
	// solver's path ([basic] inline_lL = 0): Checkpoint commits the
	// checkpoint at L1 and returns, and a background goroutine of the rank
	// makes the partner copy, the parity or the L4 container and commits
	// it at L (see the package documentation). FTI needs head = 1 for
	// this; ftigo does not. Indexes 0 and 1 are unused.
	Async [5]bool
	// EnableStaging enables the staging calls ([basic] enable_staging):
	// [Runtime.SendFile] copies node-local files to global storage in the
	// background.
	EnableStaging bool
	// MaxVarID is the largest protectable id ([basic] max_var_id).
	MaxVarID int
	// BlockSize is the message size for L2/L3 transfers, in bytes
	// ([advanced] block_size, in KiB in the file, 1..2048).
	BlockSize int
	// TransferSize is the copy piece for local<->global transfers, in bytes
	// ([advanced] transfer_size, in MiB in the file, 8..64).
	TransferSize int
	// LocalTest simulates nodes on one machine: rank r is on node
	// r/NodeSize whatever the host ([advanced] local_test).
	LocalTest bool
	// FastForward divides every interval, for tests ([advanced] fast_forward, 1..10).
	FastForward int
	// MaxSyncIntv is the largest number of Snapshot calls between two
	// agreements on the clock; rounded down to a power of two ([basic] max_sync_intv).
	MaxSyncIntv int
	// EnableDCP enables differential checkpoints ([basic] enable_dcp):
	// checkpoints at levels 5-8 (and Snapshot's DCPInterval) store only
	// the dCP blocks that changed (docs/format/dcp.md). Without it those
	// requests are taken whole, with a warning, as in FTI.
	EnableDCP bool
	// DCPMode is FTI's block hash choice ([basic] dcp_mode: 0 MD5, 1
	// CRC32). It is accepted and logged: ftigo hashes dCP blocks with
	// BLAKE3-256 whatever it says.
	DCPMode int
	// DCPBlockSize is the dCP block size in bytes ([basic] dcp_block_size,
	// 512..65535, default 16384). With EnableDCP every checkpoint file is
	// hashed in blocks of this size, so that the next one can be
	// differential.
	DCPBlockSize int
	// DCPStackSize is the most layers a chain of differential checkpoints
	// has, its full base included ([basic] dcp_stack_size, 1..10, default
	// 5): the checkpoint that would exceed it is written full.
	DCPStackSize int
	// DCPInterval[L] is Snapshot's interval of differential checkpoints at
	// level L ([basic] dcp_l4 as in FTI; dcp_l1..dcp_l3 are ftigo
	// extensions), in the units of Interval; 0 disables it.
	DCPInterval [5]time.Duration
	// CkptIO is FTI's I/O mode ([basic] ckpt_io). 5 (HDF5) writes L4
	// checkpoints as one HDF5 file (package h5ckpt) instead of a SIONlib
	// container; every other value keeps FTI-FF files and the container
	// (1 POSIX, 3 FTI-FF and 4 SIONlib need nothing else; 2 and 6 are
	// warned about).
	CkptIO int
	// H5SingleFileEnable enables level 9 (FTI_L4_H5_SINGLE): a checkpoint
	// written as one HDF5 file holding every global dataset, from which a
	// restart on any number of ranks recovers ([basic]
	// h5_single_file_enable).
	H5SingleFileEnable bool
	// H5SingleFileDir is where level-9 files go; empty means GlblDir
	// ([basic] h5_single_file_dir).
	H5SingleFileDir string
	// H5SingleFilePrefix starts the level-9 file names,
	// "<prefix>-ID<id, 8 digits>.h5"; empty means "VPR-h5", FTI's
	// ([basic] h5_single_file_prefix).
	H5SingleFilePrefix string
	// H5SingleFileKeep keeps every level-9 file; without it a new one
	// replaces the previous one ([basic] h5_single_file_keep).
	H5SingleFileKeep bool
	// H5SingleFileNotInline asks for the level-9 file to be written by
	// head ranks ([basic] h5_single_file_inline = 0); ftigo writes it
	// inline in the application ranks, with a warning.
	H5SingleFileNotInline bool
	// Warnings lists what the loader ignored (unknown keys, unsupported
	// options); Init logs them.
	Warnings []string
}

// DefaultConfig returns the defaults FTI documents: one rank per node, one
// node per group, block_size 1024 KiB, transfer_size 16 MiB, verbosity 2,
// max_var_id 102400, fast_forward 1, max_sync_intv 512. The directories
// have no default.
func DefaultConfig() Config {
	return Config{
		NodeSize: 1, GroupSize: 1, Verbosity: 2, MaxVarID: 102400,
		BlockSize: 1024 << 10, TransferSize: 16 << 20, FastForward: 1, MaxSyncIntv: 512,
		DCPBlockSize: defaultDCPBlockSize, DCPStackSize: defaultDCPStackSize,
	}
}

// FTI's dCP defaults.
const (
	defaultDCPBlockSize = 16384
	defaultDCPStackSize = 5
	minDCPBlockSize     = 512
	maxDCPBlockSize     = 65535
	maxDCPStackSize     = 10
)

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.NodeSize == 0 {
		c.NodeSize = d.NodeSize
	}
	if c.GroupSize == 0 {
		c.GroupSize = d.GroupSize
	}
	if c.Verbosity == 0 {
		c.Verbosity = d.Verbosity
	}
	if c.MaxVarID == 0 {
		c.MaxVarID = d.MaxVarID
	}
	if c.BlockSize == 0 {
		c.BlockSize = d.BlockSize
	}
	if c.TransferSize == 0 {
		c.TransferSize = d.TransferSize
	}
	if c.FastForward == 0 {
		c.FastForward = d.FastForward
	}
	if c.MaxSyncIntv == 0 {
		c.MaxSyncIntv = d.MaxSyncIntv
	}
	if c.DCPBlockSize == 0 {
		c.DCPBlockSize = d.DCPBlockSize
	}
	if c.DCPStackSize == 0 {
		c.DCPStackSize = d.DCPStackSize
	}
	return c
}

func cfgErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
}

// Validate checks the configuration for a run of ranks ranks and says what
// to change when it is wrong.
func (c Config) Validate(ranks int) error {
	c = c.withDefaults()
	switch {
	case c.CkptDir == "":
		return cfgErr("ckpt_dir is empty: set it to a node-local directory")
	case c.GlblDir == "":
		return cfgErr("glbl_dir is empty: set it to a directory on global storage")
	case c.MetaDir == "":
		return cfgErr("meta_dir is empty: set it to a directory that survives node loss")
	case c.NodeSize < 1:
		return cfgErr("node_size %d: set it to the number of ranks per node (>= 1)", c.NodeSize)
	case c.Head && c.NodeSize < 2:
		return cfgErr("head = 1 with node_size %d: a head takes node-local rank 0 of each node, so node_size must be at least 2 (one head and one application rank)", c.NodeSize)
	case c.GroupSize < 1:
		return cfgErr("group_size %d: set it to the number of nodes per group (>= 1)", c.GroupSize)
	case c.Verbosity < 1 || c.Verbosity > 4:
		return cfgErr("verbosity %d: use 1 (debug), 2 (info), 3 (warnings) or 4 (errors)", c.Verbosity)
	case c.BlockSize < 1<<10 || c.BlockSize > 2048<<10:
		return cfgErr("block_size %d KiB: use 1..2048", c.BlockSize>>10)
	case c.TransferSize < 8<<20 || c.TransferSize > 64<<20:
		return cfgErr("transfer_size %d MiB: use 8..64", c.TransferSize>>20)
	case c.FastForward < 1 || c.FastForward > 10:
		return cfgErr("fast_forward %d: use 1..10", c.FastForward)
	case c.MaxVarID < 0:
		return cfgErr("max_var_id %d: must not be negative", c.MaxVarID)
	case c.KeepLast < 0:
		return cfgErr("keep_last_n %d: must not be negative", c.KeepLast)
	case c.L3Parity < 0:
		return cfgErr("l3_parity %d: use 0 (= group_size) or 1..group_size", c.L3Parity)
	case c.L3Parity > c.GroupSize:
		return cfgErr("l3_parity %d is larger than group_size %d: use 0 (= group_size) or 1..%d",
			c.L3Parity, c.GroupSize, c.GroupSize)
	case c.DCPBlockSize < minDCPBlockSize || c.DCPBlockSize > maxDCPBlockSize:
		return cfgErr("dcp_block_size %d: use %d..%d bytes", c.DCPBlockSize, minDCPBlockSize, maxDCPBlockSize)
	case c.DCPStackSize < 1 || c.DCPStackSize > maxDCPStackSize:
		return cfgErr("dcp_stack_size %d: use 1..%d", c.DCPStackSize, maxDCPStackSize)
	case c.DCPMode < 0 || c.DCPMode > 1:
		return cfgErr("dcp_mode %d: use 0 (MD5) or 1 (CRC32); ftigo hashes with BLAKE3 either way", c.DCPMode)
	}
	for l := 1; l <= 4; l++ {
		if c.Interval[l] < 0 {
			return cfgErr("ckpt_l%d is negative: use 0 to disable", l)
		}
		if c.DCPInterval[l] < 0 {
			return cfgErr("dcp_l%d is negative: use 0 to disable", l)
		}
	}
	if ranks < 1 {
		return cfgErr("%d ranks", ranks)
	}
	if ranks%c.NodeSize != 0 {
		return cfgErr("%d ranks is not a multiple of node_size %d: change node_size to a divisor of %d or run a multiple of %d ranks",
			ranks, c.NodeSize, ranks, c.NodeSize)
	}
	nodes := ranks / c.NodeSize
	if nodes%c.GroupSize != 0 {
		return cfgErr("%d nodes is not a multiple of group_size %d: change group_size to a divisor of %d",
			nodes, c.GroupSize, nodes)
	}
	if c.GroupSize < 2 && (c.Interval[2] > 0 || c.Interval[3] > 0 || (c.EnableDCP && (c.DCPInterval[2] > 0 || c.DCPInterval[3] > 0))) {
		return cfgErr("ckpt_l2/ckpt_l3 need group_size >= 2 (it is %d): raise group_size or set ckpt_l2 = ckpt_l3 = 0", c.GroupSize)
	}
	if c.GroupSize >= 32 && (c.Interval[3] > 0 || (c.EnableDCP && c.DCPInterval[3] > 0)) {
		return cfgErr("ckpt_l3 needs group_size < 32 (it is %d): lower group_size", c.GroupSize)
	}
	return nil
}

// Limits on the files ftigo reads whole. A larger file is refused before
// anything is allocated (vfd.ReadFileLimit), so a wrong path (a disk
// image, a sparse file) gives an error, not an out-of-memory crash.
const (
	// MaxConfigSize is the largest config.fti LoadConfig reads: 1 MiB,
	// hundreds of times FTI's full set of keys.
	MaxConfigSize = 1 << 20
	// maxTopologySize bounds the node table in meta_dir: a line of index
	// and host name per node, for up to a million nodes.
	maxTopologySize = 64 << 20
)

// maxMinutes is the largest interval in minutes that a time.Duration
// holds (about 292 years).
const maxMinutes = int64(math.MaxInt64 / time.Minute)

// A setter applies one key's value to a Config.
type setter func(c *Config, v string) error

// errRange is an integer beyond 64 bits.
var errRange = errors.New("does not fit in 64 bits")

// parseInt reads an integer as FTI does (strtol), decimal or 0x hex, but
// refuses what strtol would read differently from what it looks like: a
// leading 0 (octal in FTI), trailing text, or a value beyond 64 bits.
func parseInt(v string) (int64, error) {
	digits := strings.TrimLeft(v, "+-")
	if len(v)-len(digits) > 1 {
		return 0, fmt.Errorf("want an integer, got %q", v)
	}
	neg := strings.HasPrefix(v, "-")
	if l := strings.ToLower(digits); strings.HasPrefix(l, "0x") && len(l) > 2 {
		n, err := strconv.ParseUint(l[2:], 16, 63)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return 0, fmt.Errorf("%s %w", v, errRange)
		case err != nil:
			return 0, fmt.Errorf("want an integer, got %q", v)
		case neg:
			return -int64(n), nil
		}
		return int64(n), nil
	}
	if len(digits) > 1 && digits[0] == '0' && strings.Trim(digits, "0123456789") == "" {
		return 0, fmt.Errorf("%q has a leading 0, which FTI reads as octal: write the number without it", v)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("%s %w", v, errRange)
	case err != nil:
		return 0, fmt.Errorf("want an integer, got %q", v)
	}
	return n, nil
}

// parseRange reads an integer in lo..hi.
func parseRange(v string, lo, hi int64) (int64, error) {
	n, err := parseInt(v)
	if err != nil {
		return 0, fmt.Errorf("%w: use %d..%d", err, lo, hi)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("out of range: use %d..%d", lo, hi)
	}
	return n, nil
}

// intKey reads an integer in lo..hi.
func intKey(dst func(c *Config) *int, lo, hi int64) setter {
	return func(c *Config, v string) error {
		n, err := parseRange(v, lo, hi)
		if err != nil {
			return err
		}
		*dst(c) = int(n)
		return nil
	}
}

// scaledKey reads an integer in lo..hi units (KiB, MiB) and stores bytes.
func scaledKey(dst func(c *Config) *int, unit int, name string, lo, hi int64) setter {
	return func(c *Config, v string) error {
		n, err := parseInt(v)
		if err == nil && (n < lo || n > hi) {
			err = errors.New("out of range")
		}
		if err != nil {
			return fmt.Errorf("%w: use %d..%d (%s)", err, lo, hi, name)
		}
		*dst(c) = int(n) * unit
		return nil
	}
}

func boolKey(dst func(c *Config) *bool) setter {
	return func(c *Config, v string) error {
		b, err := parseBool(v)
		*dst(c) = b
		return err
	}
}

// parseBool reads 0 or 1 (FTI's integers), or false and true.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, fmt.Errorf("want 0 or 1, got %q", v)
}

func strKey(dst func(c *Config) *string) setter {
	return func(c *Config, v string) error { *dst(c) = v; return nil }
}

// durationSyntax matches a well-formed Go duration (time.ParseDuration
// refuses one that overflows with the same error as a malformed one).
var durationSyntax = regexp.MustCompile(`^\+?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

// intervalKey reads whole or fractional minutes (FTI) or a Go duration
// ("30s", an ftigo extension), 0 or empty to disable; a value that overflows a
// time.Duration (about 292 years) is out of range, not negative.
func intervalKey(level int) setter {
	return durationKey(func(c *Config) *time.Duration { return &c.Interval[level] })
}

// dcpIntervalKey reads a dcp_lN interval as intervalKey reads ckpt_lN.
func dcpIntervalKey(level int) setter {
	return durationKey(func(c *Config) *time.Duration { return &c.DCPInterval[level] })
}

// durationKey reads an interval into dst, as intervalKey describes.
func durationKey(dst func(c *Config) *time.Duration) setter {
	return func(c *Config, v string) error {
		rangeErr := fmt.Errorf("out of range: use 0 (off) to %d minutes, or a duration such as 30s up to %v", maxMinutes, time.Duration(math.MaxInt64))
		negErr := errors.New("negative: use 0 to disable the level, or a positive interval")
		wantErr := fmt.Errorf("want minutes or a duration such as 30s, got %q", v)
		var d time.Duration
		switch {
		case v == "": // FTI reads an empty value as 0: off
		case strings.Trim(v, "+-0123456789") == "": // whole minutes, as in FTI
			n, err := parseInt(v)
			switch {
			case err != nil && !errors.Is(err, errRange):
				return err
			case strings.HasPrefix(v, "-") && (n != 0 || err != nil):
				return negErr
			case err != nil || n > maxMinutes:
				return rangeErr
			}
			d = time.Duration(n) * time.Minute
		case strings.Trim(v, "+-0123456789.eE") == "": // fractional minutes
			n, err := strconv.ParseFloat(v, 64)
			switch {
			case err != nil && !errors.Is(err, strconv.ErrRange):
				return wantErr
			case n < 0:
				return negErr
			case err != nil || n > float64(maxMinutes):
				return rangeErr
			}
			d = time.Duration(n * float64(time.Minute))
			if d == 0 && n != 0 {
				return fmt.Errorf("%s minutes is less than a nanosecond: use 0 to disable the level", v)
			}
		default:
			if strings.HasPrefix(v, "-") {
				return negErr
			}
			var err error
			if d, err = time.ParseDuration(v); err != nil {
				if durationSyntax.MatchString(v) {
					return rangeErr
				}
				return wantErr
			}
		}
		*dst(c) = d
		return nil
	}
}

func ignoreKey(c *Config, v string) error { return nil }

// inlineKey reads inline_lL as FTI does (iniparser_getint, empty is 0):
// 0 makes level L's post-processing asynchronous.
func inlineKey(l int) setter {
	return func(c *Config, v string) error {
		n, err := flagInt(v)
		c.Async[l] = err == nil && n == 0
		return err
	}
}

// flagKey reads an FTI switch as FTI does (iniparser_getint tested as a
// boolean): an integer, non-zero meaning on, empty meaning off; true and
// false are accepted too.
func flagKey(dst func(c *Config) *bool) setter {
	return func(c *Config, v string) error {
		n, err := flagInt(v)
		*dst(c) = n != 0
		return err
	}
}

// iniBoolKey reads a boolean as FTI's iniparser_getboolean does (y, t, 1
// or n, f, 0 first; empty is false).
func iniBoolKey(dst func(c *Config) *bool) setter {
	return func(c *Config, v string) error {
		b, err := iniBoolean(v)
		*dst(c) = b
		return err
	}
}

// ckptIOKey reads ckpt_io as FTI does (iniparser_getint; empty is 0).
// Values outside FTI's modes are kept and warned about (featureKeys);
// only 5 changes what ftigo writes.
func ckptIOKey(c *Config, v string) error {
	n, err := flagInt(v)
	if err != nil {
		return err
	}
	if n >= 1 && n <= 6 {
		c.CkptIO = int(n)
	} else {
		c.CkptIO = 0
	}
	return nil
}

// sections lists the keys ftigo reads, per section, and how to apply each.
// Keys set to ignoreKey are FTI keys with no effect in ftigo; the values
// of some of them ask for a feature ftigo lacks (featureKeys).
var sections = map[string]map[string]setter{
	"basic": {
		"node_size":      intKey(func(c *Config) *int { return &c.NodeSize }, 1, math.MaxInt32),
		"group_size":     intKey(func(c *Config) *int { return &c.GroupSize }, 1, math.MaxInt32),
		"ckpt_dir":       strKey(func(c *Config) *string { return &c.CkptDir }),
		"glbl_dir":       strKey(func(c *Config) *string { return &c.GlblDir }),
		"meta_dir":       strKey(func(c *Config) *string { return &c.MetaDir }),
		"ckpt_l1":        intervalKey(1),
		"ckpt_l2":        intervalKey(2),
		"ckpt_l3":        intervalKey(3),
		"ckpt_l4":        intervalKey(4),
		"keep_last_ckpt": boolKey(func(c *Config) *bool { return &c.KeepLastCkpt }),
		"keep_l4_ckpt":   boolKey(func(c *Config) *bool { return &c.KeepL4Ckpt }),
		"keep_last_n":    intKey(func(c *Config) *int { return &c.KeepLast }, 0, math.MaxInt32),
		"l3_parity":      intKey(func(c *Config) *int { return &c.L3Parity }, 0, math.MaxInt32),
		"verbosity":      intKey(func(c *Config) *int { return &c.Verbosity }, 1, 4),
		"head":           boolKey(func(c *Config) *bool { return &c.Head }),
		"max_var_id":     intKey(func(c *Config) *int { return &c.MaxVarID }, 1, math.MaxInt32),
		"max_sync_intv":  intKey(func(c *Config) *int { return &c.MaxSyncIntv }, 0, 1<<30),
		"enable_dcp":     flagKey(func(c *Config) *bool { return &c.EnableDCP }),
		"dcp_mode":       intKey(func(c *Config) *int { return &c.DCPMode }, 0, 1),
		"dcp_block_size": intKey(func(c *Config) *int { return &c.DCPBlockSize }, minDCPBlockSize, maxDCPBlockSize),
		"dcp_stack_size": intKey(func(c *Config) *int { return &c.DCPStackSize }, 1, maxDCPStackSize),
		"dcp_l1":         dcpIntervalKey(1),
		"dcp_l2":         dcpIntervalKey(2),
		"dcp_l3":         dcpIntervalKey(3),
		"dcp_l4":         dcpIntervalKey(4),
		// FTI keys without effect in ftigo (featureKeys warns about
		// values asking for something ftigo does not do).
		"inline_l2":             inlineKey(2),
		"inline_l3":             inlineKey(3),
		"inline_l4":             inlineKey(4),
		"ckpt_io":               ckptIOKey,
		"glbl_stash_dir":        ignoreKey,
		"enable_staging":        flagKey(func(c *Config) *bool { return &c.EnableStaging }),
		"keep_heads_alive":      boolKey(func(c *Config) *bool { return &c.KeepHeadsAlive }),
		"cacheddcp":             ignoreKey,
		"h5_single_file_enable": iniBoolKey(func(c *Config) *bool { return &c.H5SingleFileEnable }),
		"h5_single_file_dir":    strKey(func(c *Config) *string { return &c.H5SingleFileDir }),
		"h5_single_file_prefix": strKey(func(c *Config) *string { return &c.H5SingleFilePrefix }),
		"h5_single_file_keep":   iniBoolKey(func(c *Config) *bool { return &c.H5SingleFileKeep }),
		"h5_single_file_inline": func(c *Config, v string) error {
			on, err := iniBoolean(v)
			c.H5SingleFileNotInline = err == nil && v != "" && !on
			return err
		},
	},
	"advanced": {
		"block_size":            scaledKey(func(c *Config) *int { return &c.BlockSize }, 1<<10, "KiB", 1, 2048),
		"transfer_size":         scaledKey(func(c *Config) *int { return &c.TransferSize }, 1<<20, "MiB", 8, 64),
		"local_test":            boolKey(func(c *Config) *bool { return &c.LocalTest }),
		"fast_forward":          intKey(func(c *Config) *int { return &c.FastForward }, 1, 10),
		"general_tag":           ignoreKey,
		"ckpt_tag":              ignoreKey,
		"stage_tag":             ignoreKey,
		"final_tag":             ignoreKey,
		"mpi_tag":               ignoreKey,
		"gpu_host_bufsize":      ignoreKey,
		"lustre_stiping_unit":   ignoreKey,
		"lustre_stiping_factor": ignoreKey,
		"lustre_stiping_offset": ignoreKey,
	},
	"restart": {
		"failure": ignoreKey,
		"exec_id": ignoreKey,
	},
	"injection": {
		"rank": ignoreKey, "index": ignoreKey, "position": ignoreKey,
		"number": ignoreKey, "frequency": ignoreKey,
	},
}

// A featureKey is a config value asking for something ftigo does not do
// (yet): loading it adds a warning naming the key and the value. When a
// feature is implemented, its row goes.
type featureKey struct {
	section, key string
	// requests reports whether the value asks for the feature; an error
	// is a malformed value.
	requests func(v string) (bool, error)
	warning  string
}

// featureKeys lists, in the order warnings are given, the values that ask
// for a missing feature. Other values of these keys (failure = 0,
// head = 0, h5_single_file_* settings without their
// enable key) are harmless and accepted silently; so are ckpt_io = 1
// (POSIX), 3 (FTI-FF) and 4 (SIONlib), since ftigo writes FTI-FF files at
// L1-L3 and one SIONlib container at L4, and ckpt_io = 5 (HDF5), which
// writes L4 as one HDF5 file.
var featureKeys = []featureKey{
	{"basic", "ckpt_io", intIn(2), "MPI-IO (one shared file per checkpoint) is not implemented: ftigo writes one FTI-FF file per rank, and L4 as a SIONlib container"},
	{"basic", "ckpt_io", intIn(6), "IME is not implemented: ftigo writes FTI-FF files through its POSIX driver"},
	{"basic", "ckpt_io", intOutside(1, 6), "is not an FTI I/O mode (1..6); FTI falls back to POSIX, ftigo writes FTI-FF as always"},
	{"basic", "h5_single_file_inline", iniFalse, "the level-9 HDF5 file is written inline by the application ranks, with or without head ranks"},
	{"restart", "failure", intIn(3), "ftigo needs no request for a variate processor restart: a restart on another number of ranks recovers the global datasets from any checkpoint (or level-9 HDF5 file) by itself"},
	{"restart", "failure", intIn(1, 2), "ftigo keeps the restart state in meta_dir and decides from it whether this is a restart"},
}

// flagInt reads a feature key's value as FTI does (iniparser_getint):
// an integer, with an empty value as 0; true and false are accepted as 1
// and 0, as for ftigo's own boolean keys.
func flagInt(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	if b, err := parseBool(v); err == nil {
		if b {
			return 1, nil
		}
		return 0, nil
	}
	return parseInt(v)
}

// intIn requests the feature for the integers listed.
func intIn(vals ...int64) func(string) (bool, error) {
	return func(v string) (bool, error) {
		n, err := flagInt(v)
		return err == nil && slices.Contains(vals, n), err
	}
}

// intOutside requests it for integers outside lo..hi.
func intOutside(lo, hi int64) func(string) (bool, error) {
	return func(v string) (bool, error) {
		n, err := flagInt(v)
		return err == nil && (n < lo || n > hi), err
	}
}

// iniFalse requests the feature for a value iniparser_getboolean reads
// as false, not for an empty one.
func iniFalse(v string) (bool, error) {
	on, err := iniBoolean(v)
	return err == nil && v != "" && !on, err
}

// iniBoolean reads a value as iniparser_getboolean does: y, t or 1 first
// is true, n, f or 0 first is false, empty is false.
func iniBoolean(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	switch v[0] {
	case 'y', 'Y', 't', 'T', '1':
		return true, nil
	case 'n', 'N', 'f', 'F', '0':
		return false, nil
	}
	return false, fmt.Errorf("want 0 or 1, got %q", v)
}

// LoadConfig reads an FTI config.fti file through d. Keys keep FTI's
// meanings; unknown keys and sections, and values asking for features
// ftigo lacks, are listed in Config.Warnings; a malformed or out-of-range
// value is an error naming the file, line, key and value, and so is a
// file without any known key. The file must be a regular file of at most
// [MaxConfigSize] bytes: a directory, FIFO or device (/dev/zero) is
// refused without being read. The file is only read: ftigo never writes
// restart state into it. The result is not validated against a rank
// count; Init does that.
func LoadConfig(d vfd.Driver, path string) (Config, error) {
	raw, err := vfd.ReadFileLimit(d, path, MaxConfigSize)
	switch {
	case errors.Is(err, vfd.ErrTooLarge):
		return Config{}, fmt.Errorf("%w: %s is larger than %d KiB, too large for a config.fti: %w", ErrConfig, path, MaxConfigSize>>10, err)
	case errors.Is(err, vfd.ErrNotRegular):
		return Config{}, fmt.Errorf("%w: %s is not a regular file, so not a config.fti: %w", ErrConfig, path, err)
	case err != nil:
		return Config{}, fmt.Errorf("ckpt: read config: %w", err)
	}
	return ParseConfig(path, raw)
}

// cSpace is the white space iniparser strips (C's isspace).
const cSpace = " \t\n\v\f\r"

// iniValue extracts a value as FTI's iniparser does from what follows the
// '=' (leading white space removed): "..." or '...' is the text up to the
// closing quote (comment characters included, the rest of the line
// ignored); otherwise the value ends at the first ';' or '#'. Either way
// surrounding white space is stripped, and "" or ” is empty.
func iniValue(rest string) string {
	for _, q := range []byte{'"', '\''} {
		if len(rest) >= 2 && rest[0] == q && rest[1] != q {
			v := rest[1:]
			if j := strings.IndexByte(v, q); j >= 0 {
				v = v[:j]
			}
			return strings.Trim(v, cSpace)
		}
	}
	if j := strings.IndexAny(rest, ";#"); j >= 0 {
		rest = rest[:j]
	}
	v := strings.Trim(rest, cSpace)
	if v == `""` || v == `''` {
		return ""
	}
	return v
}

// ParseConfig parses config.fti text; name is used in messages.
//
// The syntax is that of FTI's INI parser (iniparser): a line is a
// [section], a key = value pair or a comment (first character ; or #);
// sections and keys are case-insensitive; a value is quoted with "..." or
// '...' (then ; and # are part of it) or ends at the first ; or #; white
// space around keys and values is stripped; a line ending with a
// backslash continues on the next. Keys before any section are not FTI
// settings. A line that is none of these, an empty section name, a NUL
// byte or a file without any known key is an error.
func ParseConfig(name string, raw []byte) (Config, error) {
	c := DefaultConfig()
	type setting struct {
		value string
		line  int
	}
	final := map[[2]string]setting{}
	var unknown []string
	known, orphans := 0, 0
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 4096), MaxConfigSize)
	line, start := 0, 0
	pending := ""
	handle := func(s string, at int) error {
		s = strings.Trim(s, cSpace)
		switch {
		case s == "" || s[0] == '#' || s[0] == ';':
			return nil
		case strings.IndexByte(s, 0) >= 0:
			return cfgErr("%s:%d: NUL byte: this is not a text file", name, at)
		case s[0] == '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return cfgErr("%s:%d: malformed section header %q", name, at, s)
			}
			if rest := strings.TrimLeft(s[end+1:], cSpace); rest != "" && rest[0] != ';' && rest[0] != '#' {
				return cfgErr("%s:%d: malformed section header %q", name, at, s)
			}
			section = strings.ToLower(strings.Trim(s[1:end], cSpace))
			if section == "" {
				return cfgErr("%s:%d: empty section name", name, at)
			}
			if _, ok := sections[section]; !ok {
				unknown = append(unknown, "["+section+"]")
			}
			return nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return cfgErr("%s:%d: want key = value, got %q", name, at, s)
		}
		key := strings.ToLower(strings.Trim(s[:eq], cSpace))
		if key == "" {
			return cfgErr("%s:%d: no key before '=' in %q", name, at, s)
		}
		val := iniValue(strings.TrimLeft(s[eq+1:], cSpace))
		keys, ok := sections[section]
		switch {
		case section == "":
			orphans++
			unknown = append(unknown, key)
			return nil
		case !ok:
			return nil // the section is reported
		}
		set, ok := keys[key]
		if !ok {
			unknown = append(unknown, "["+section+"] "+key)
			return nil
		}
		if err := set(&c, val); err != nil {
			return cfgErr("%s:%d: [%s] %s = %s: %v", name, at, section, key, shown(val), err)
		}
		known++
		final[[2]string{section, key}] = setting{val, at}
		return nil
	}
	for sc.Scan() {
		line++
		if pending == "" {
			start = line
		}
		s := strings.TrimRight(pending+sc.Text(), cSpace)
		if strings.HasSuffix(s, `\`) {
			pending = s[:len(s)-1]
			continue
		}
		pending = ""
		if err := handle(s, start); err != nil {
			return Config{}, err
		}
	}
	if err := sc.Err(); err != nil {
		return Config{}, cfgErr("%s:%d: %v", name, line+1, err)
	}
	if pending != "" {
		if err := handle(pending, start); err != nil {
			return Config{}, err
		}
	}
	if known == 0 {
		hint := "is it a config.fti? FTI's settings are in [basic] (node_size, ckpt_dir, ...) and [advanced]"
		if orphans > 0 {
			hint = "its keys come before any section header, where FTI ignores them: put them under [basic]"
		}
		return Config{}, cfgErr("%s: no FTI configuration key found: %s", name, hint)
	}
	for _, f := range featureKeys {
		st, ok := final[[2]string{f.section, f.key}]
		if !ok {
			continue
		}
		on, err := f.requests(st.value)
		if err != nil {
			return Config{}, cfgErr("%s:%d: [%s] %s = %s: %v", name, st.line, f.section, f.key, shown(st.value), err)
		}
		if on {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s:%d: [%s] %s = %s ignored: %s", name, st.line, f.section, f.key, shown(st.value), f.warning))
		}
	}
	if !c.EnableDCP {
		for l := 1; l <= 4; l++ {
			if st, ok := final[[2]string{"basic", fmt.Sprintf("dcp_l%d", l)}]; ok && c.DCPInterval[l] > 0 {
				c.Warnings = append(c.Warnings, fmt.Sprintf("%s:%d: [basic] dcp_l%d = %s: enable_dcp is off, so Snapshot takes these checkpoints whole (as FTI does: \"dCP requested, but dCP is disabled\")",
					name, st.line, l, shown(st.value)))
			}
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		unknown = slices.Compact(unknown)
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s: unknown keys ignored: %s", name, strings.Join(unknown, ", ")))
	}
	if c.MaxSyncIntv <= 0 {
		c.MaxSyncIntv = DefaultConfig().MaxSyncIntv
	} else {
		p := 1
		for p*2 <= c.MaxSyncIntv {
			p *= 2
		}
		c.MaxSyncIntv = p
	}
	return c, nil
}

// shown is a value as messages show it: "" when empty.
func shown(v string) string {
	if v == "" {
		return `""`
	}
	return v
}

// FormatConfig writes c as config.fti text that [ParseConfig] reads back
// to the same settings (Warnings aside): every key ftigo reads, intervals
// in whole minutes where they are (FTI's unit) and as Go durations
// otherwise, each directory quoted as iniparser needs (for ; # or a
// leading quote). It fails for a value no config.fti can hold (a line
// feed, a NUL byte, white space at either end, both kinds of quote with
// a comment character) and for sizes that are not whole KiB or MiB.
func FormatConfig(c Config) ([]byte, error) {
	c = c.withDefaults()
	var b strings.Builder
	b.WriteString("; written by ftigo (ckpt.FormatConfig)\n[basic]\n")
	kv := func(k string, v any) { fmt.Fprintf(&b, "%-14s = %v\n", k, v) }
	for _, d := range []struct{ key, dir string }{{"ckpt_dir", c.CkptDir}, {"glbl_dir", c.GlblDir}, {"meta_dir", c.MetaDir}} {
		q, err := quoteValue(d.dir)
		if err != nil {
			return nil, cfgErr("%s %q: %v", d.key, d.dir, err)
		}
		kv(d.key, q)
	}
	kv("node_size", c.NodeSize)
	kv("group_size", c.GroupSize)
	for l := 1; l <= 4; l++ {
		iv := c.Interval[l]
		switch {
		case iv < 0:
			return nil, cfgErr("ckpt_l%d is negative: use 0 to disable", l)
		case iv%time.Minute == 0:
			kv(fmt.Sprintf("ckpt_l%d", l), int64(iv/time.Minute))
		default:
			kv(fmt.Sprintf("ckpt_l%d", l), iv)
		}
	}
	b01 := func(x bool) int {
		if x {
			return 1
		}
		return 0
	}
	kv("keep_last_ckpt", b01(c.KeepLastCkpt))
	kv("keep_l4_ckpt", b01(c.KeepL4Ckpt))
	kv("keep_last_n", c.KeepLast)
	kv("l3_parity", c.L3Parity)
	kv("verbosity", c.Verbosity)
	kv("head", b01(c.Head))
	if c.KeepHeadsAlive {
		kv("keep_heads_alive", "1")
	}
	kv("enable_staging", b01(c.EnableStaging))
	for l := 2; l <= 4; l++ {
		kv(fmt.Sprintf("inline_l%d", l), b01(!c.Async[l]))
	}
	kv("max_var_id", c.MaxVarID)
	kv("max_sync_intv", c.MaxSyncIntv)
	kv("enable_dcp", b01(c.EnableDCP))
	kv("dcp_mode", c.DCPMode)
	kv("dcp_block_size", c.DCPBlockSize)
	kv("dcp_stack_size", c.DCPStackSize)
	for l := 1; l <= 4; l++ {
		iv := c.DCPInterval[l]
		switch {
		case iv < 0:
			return nil, cfgErr("dcp_l%d is negative: use 0 to disable", l)
		case iv%time.Minute == 0:
			kv(fmt.Sprintf("dcp_l%d", l), int64(iv/time.Minute))
		default:
			kv(fmt.Sprintf("dcp_l%d", l), iv)
		}
	}
	if c.CkptIO != 0 {
		kv("ckpt_io", c.CkptIO)
	}
	kv("h5_single_file_enable", b01(c.H5SingleFileEnable))
	for _, d := range []struct{ key, v string }{{"h5_single_file_dir", c.H5SingleFileDir}, {"h5_single_file_prefix", c.H5SingleFilePrefix}} {
		if d.v == "" {
			continue
		}
		q, err := quoteValue(d.v)
		if err != nil {
			return nil, cfgErr("%s %q: %v", d.key, d.v, err)
		}
		kv(d.key, q)
	}
	kv("h5_single_file_keep", b01(c.H5SingleFileKeep))
	kv("h5_single_file_inline", b01(!c.H5SingleFileNotInline))
	b.WriteString("\n[advanced]\n")
	if c.BlockSize%(1<<10) != 0 || c.TransferSize%(1<<20) != 0 {
		return nil, cfgErr("block_size %d bytes or transfer_size %d bytes is not a whole number of KiB or MiB", c.BlockSize, c.TransferSize)
	}
	kv("block_size", c.BlockSize>>10)
	kv("transfer_size", c.TransferSize>>20)
	kv("local_test", b01(c.LocalTest))
	kv("fast_forward", c.FastForward)
	return []byte(b.String()), nil
}

// quoteValue returns v written so that iniValue reads it back: bare when
// that works, else in double or single quotes.
func quoteValue(v string) (string, error) {
	if strings.ContainsAny(v, "\n\x00") || strings.Trim(v, cSpace) != v {
		return "", errors.New("a config value cannot hold a line feed, a NUL byte or white space at either end")
	}
	for _, q := range []string{v, `"` + v + `"`, `'` + v + `'`} {
		if iniValue(q) == v && !strings.HasSuffix(q, `\`) {
			return q, nil
		}
	}
	return "", errors.New(`a config value cannot hold both kinds of quote together with ';' or '#'`)
}
