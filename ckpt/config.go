package ckpt

import (
	"bufio"
	"bytes"
	"fmt"
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
	// Head requests a dedicated post-processing rank per node ([basic] head);
	// ftigo post-processes inline and warns when it is set.
	Head bool
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
	}
}

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
	}
	for l := 1; l <= 4; l++ {
		if c.Interval[l] < 0 {
			return cfgErr("ckpt_l%d is negative: use 0 to disable", l)
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
	if c.GroupSize < 2 && (c.Interval[2] > 0 || c.Interval[3] > 0) {
		return cfgErr("ckpt_l2/ckpt_l3 need group_size >= 2 (it is %d): raise group_size or set ckpt_l2 = ckpt_l3 = 0", c.GroupSize)
	}
	if c.GroupSize >= 32 && c.Interval[3] > 0 {
		return cfgErr("ckpt_l3 needs group_size < 32 (it is %d): lower group_size", c.GroupSize)
	}
	return nil
}

// known keys per section; values say how to apply them.
type setter func(c *Config, v string) error

func intKey(dst func(c *Config) *int) setter {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", v)
		}
		*dst(c) = n
		return nil
	}
}

func scaledKey(dst func(c *Config) *int, unit int) setter {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", v)
		}
		*dst(c) = n * unit
		return nil
	}
}

func boolKey(dst func(c *Config) *bool) setter {
	return func(c *Config, v string) error {
		switch v {
		case "0", "false":
			*dst(c) = false
		case "1", "true":
			*dst(c) = true
		default:
			return fmt.Errorf("want 0 or 1, got %q", v)
		}
		return nil
	}
}

func strKey(dst func(c *Config) *string) setter {
	return func(c *Config, v string) error { *dst(c) = v; return nil }
}

// intervalKey reads minutes (FTI) or a Go duration ("30s").
func intervalKey(level int) setter {
	return func(c *Config, v string) error {
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			if n != n || n > 1e9 || n < -1e9 {
				return fmt.Errorf("interval %q minutes is out of range", v)
			}
			c.Interval[level] = time.Duration(n * float64(time.Minute))
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("want minutes or a duration such as 30s, got %q", v)
		}
		c.Interval[level] = d
		return nil
	}
}

func ignoreKey(why string) setter {
	return func(c *Config, v string) error {
		if why != "" {
			c.Warnings = append(c.Warnings, why)
		}
		return nil
	}
}

var sections = map[string]map[string]setter{
	"basic": {
		"node_size":      intKey(func(c *Config) *int { return &c.NodeSize }),
		"group_size":     intKey(func(c *Config) *int { return &c.GroupSize }),
		"ckpt_dir":       strKey(func(c *Config) *string { return &c.CkptDir }),
		"glbl_dir":       strKey(func(c *Config) *string { return &c.GlblDir }),
		"meta_dir":       strKey(func(c *Config) *string { return &c.MetaDir }),
		"ckpt_l1":        intervalKey(1),
		"ckpt_l2":        intervalKey(2),
		"ckpt_l3":        intervalKey(3),
		"ckpt_l4":        intervalKey(4),
		"keep_last_ckpt": boolKey(func(c *Config) *bool { return &c.KeepLastCkpt }),
		"keep_l4_ckpt":   boolKey(func(c *Config) *bool { return &c.KeepL4Ckpt }),
		"keep_last_n":    intKey(func(c *Config) *int { return &c.KeepLast }),
		"l3_parity":      intKey(func(c *Config) *int { return &c.L3Parity }),
		"verbosity":      intKey(func(c *Config) *int { return &c.Verbosity }),
		"head":           boolKey(func(c *Config) *bool { return &c.Head }),
		"max_var_id":     intKey(func(c *Config) *int { return &c.MaxVarID }),
		"max_sync_intv":  intKey(func(c *Config) *int { return &c.MaxSyncIntv }),
		// Accepted for compatibility, no effect in ftigo.
		"inline_l2":             ignoreKey(""),
		"inline_l3":             ignoreKey(""),
		"inline_l4":             ignoreKey(""),
		"ckpt_io":               ignoreKey(""),
		"glbl_stash_dir":        ignoreKey(""),
		"dcp_l4":                ignoreKey("dcp_l4 ignored: differential checkpointing is not implemented"),
		"enable_dcp":            ignoreKey(""),
		"dcp_mode":              ignoreKey(""),
		"dcp_block_size":        ignoreKey(""),
		"dcp_stack_size":        ignoreKey(""),
		"enable_staging":        ignoreKey(""),
		"keep_heads_alive":      ignoreKey(""),
		"cacheddcp":             ignoreKey(""),
		"h5_single_file_enable": ignoreKey(""),
		"h5_single_file_dir":    ignoreKey(""),
		"h5_single_file_prefix": ignoreKey(""),
		"h5_single_file_keep":   ignoreKey(""),
		"h5_single_file_inline": ignoreKey(""),
	},
	"advanced": {
		"block_size":            scaledKey(func(c *Config) *int { return &c.BlockSize }, 1<<10),
		"transfer_size":         scaledKey(func(c *Config) *int { return &c.TransferSize }, 1<<20),
		"local_test":            boolKey(func(c *Config) *bool { return &c.LocalTest }),
		"fast_forward":          intKey(func(c *Config) *int { return &c.FastForward }),
		"general_tag":           ignoreKey(""),
		"ckpt_tag":              ignoreKey(""),
		"stage_tag":             ignoreKey(""),
		"final_tag":             ignoreKey(""),
		"mpi_tag":               ignoreKey(""),
		"gpu_host_bufsize":      ignoreKey(""),
		"lustre_stiping_unit":   ignoreKey(""),
		"lustre_stiping_factor": ignoreKey(""),
		"lustre_stiping_offset": ignoreKey(""),
	},
	"restart": {
		"failure": ignoreKey("[restart] failure ignored: ftigo keeps the restart state in meta_dir"),
		"exec_id": ignoreKey(""),
	},
	"injection": {
		"rank": ignoreKey(""), "index": ignoreKey(""), "position": ignoreKey(""),
		"number": ignoreKey(""), "frequency": ignoreKey(""),
	},
}

// LoadConfig reads an FTI config.fti file through d. Keys keep FTI's
// meanings; unknown keys and sections are listed in Config.Warnings, and
// a malformed value is an error naming the file, line and key. The file
// is only read: ftigo never writes restart state into it. The result is
// not validated against a rank count; Init does that.
func LoadConfig(d vfd.Driver, path string) (Config, error) {
	raw, err := vfd.ReadFile(d, path)
	if err != nil {
		return Config{}, fmt.Errorf("ckpt: read config: %w", err)
	}
	return ParseConfig(path, raw)
}

// ParseConfig parses config.fti text; name is used in messages.
func ParseConfig(name string, raw []byte) (Config, error) {
	c := DefaultConfig()
	var unknown []string
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if i := strings.IndexAny(s, ";#"); i >= 0 {
			s = strings.TrimSpace(s[:i])
		}
		if s == "" {
			continue
		}
		if strings.HasPrefix(s, "[") {
			if !strings.HasSuffix(s, "]") {
				return Config{}, cfgErr("%s:%d: malformed section header %q", name, line, s)
			}
			section = strings.ToLower(strings.TrimSpace(s[1 : len(s)-1]))
			if _, ok := sections[section]; !ok {
				unknown = append(unknown, "["+section+"]")
			}
			continue
		}
		key, val, ok := strings.Cut(s, "=")
		if !ok {
			return Config{}, cfgErr("%s:%d: want key = value, got %q", name, line, s)
		}
		key = strings.ToLower(strings.TrimSpace(key))
		val = strings.TrimSpace(val)
		keys, known := sections[section]
		if !known {
			if section == "" {
				unknown = append(unknown, key)
			}
			continue
		}
		set, ok := keys[key]
		if !ok {
			unknown = append(unknown, "["+section+"] "+key)
			continue
		}
		if err := set(&c, val); err != nil {
			return Config{}, cfgErr("%s:%d: [%s] %s: %v", name, line, section, key, err)
		}
	}
	if err := sc.Err(); err != nil {
		return Config{}, cfgErr("%s: %v", name, err)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s: unknown keys ignored: %s", name, strings.Join(unknown, ", ")))
	}
	if c.Head {
		c.Warnings = append(c.Warnings, "head = 1 ignored: ftigo post-processes inline in the application ranks")
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
