package ckpt

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ftigo/ftigo/fileformat"
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
// ("30s", an ftigo extension), 0 or empty to disable. A negative whole
// number of minutes disables the level too, as in FTI. A negative fraction
// or duration (ftigo's syntax) is an error. A value that overflows a
// time.Duration (about 292 years) is out of range.
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
			case strings.HasPrefix(v, "-"):
				// FTI reads the integer and checks at levels whose
				// interval is above 0: a negative one is off, as 0.
				n, err = 0, nil
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

// transferKey reads transfer_size in MiB. A value outside 8..64 is kept
// as -1: ParseConfig then warns and uses 16 MiB, as FTI does.
func transferKey(c *Config, v string) error {
	n, err := parseInt(v)
	if err != nil && !errors.Is(err, errRange) {
		return fmt.Errorf("%w: use 8..64 (MiB)", err)
	}
	c.TransferSize = -1
	if err == nil && n >= 8 && n <= 64 {
		c.TransferSize = int(n) << 20
	}
	return nil
}

// inlineKey reads inline_lL as FTI does (iniparser_getint, empty is 0):
// 0 makes level L's post-processing asynchronous.
func inlineKey(l int) setter {
	return func(c *Config, v string) error {
		n, err := flagInt(v)
		c.Async[l] = err == nil && n == 0
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
		"keep_l4_ckpt":   iniBoolKey(func(c *Config) *bool { return &c.KeepL4Ckpt }),
		"keep_last_n":    intKey(func(c *Config) *int { return &c.KeepLast }, 0, math.MaxInt32),
		"compression": func(c *Config, v string) error {
			codec, err := fileformat.ParseCodec(v)
			if err != nil {
				return fmt.Errorf("want none or zstd, got %q", v)
			}
			c.Compression = codec
			return nil
		},
		"ckpt_snapshot": boolKey(func(c *Config) *bool { return &c.Snapshot }),
		"snapshot_budget": func(c *Config, v string) error {
			n, err := parseRange(v, 0, math.MaxInt64)
			c.SnapshotBudget = n
			return err
		},
		"l3_parity":     intKey(func(c *Config) *int { return &c.L3Parity }, 0, math.MaxInt32),
		"verbosity":     intKey(func(c *Config) *int { return &c.Verbosity }, 1, 4),
		"head":          boolKey(func(c *Config) *bool { return &c.Head }),
		"max_var_id":    intKey(func(c *Config) *int { return &c.MaxVarID }, 1, math.MaxInt32),
		"max_sync_intv": intKey(func(c *Config) *int { return &c.MaxSyncIntv }, math.MinInt32, 1<<30),
		"enable_dcp":    iniBoolKey(func(c *Config) *bool { return &c.EnableDCP }),
		// FTI reads the dCP settings only with enable_dcp: ParseConfig
		// reads them once the whole file is known (dcpKeys).
		"dcp_mode":       ignoreKey,
		"dcp_block_size": ignoreKey,
		"dcp_stack_size": ignoreKey,
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
		"enable_staging":        iniBoolKey(func(c *Config) *bool { return &c.EnableStaging }),
		"keep_heads_alive":      iniBoolKey(func(c *Config) *bool { return &c.KeepHeadsAlive }),
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
		"block_size": scaledKey(func(c *Config) *int { return &c.BlockSize }, 1<<10, "KiB", 1, 2048),
		// FTI warns and takes 16 MiB for a transfer_size out of 8..64
		// (ParseConfig does too).
		"transfer_size":         transferKey,
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
		// FTI's documented spelling, which its code never reads.
		"lustre_striping_unit":   ignoreKey,
		"lustre_striping_factor": ignoreKey,
		"lustre_striping_offset": ignoreKey,
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
