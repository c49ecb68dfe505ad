package ckpt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

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
	// [restart] failure = 1 or 2 with exec_id: FTI restarts that run.
	run := ""
	if id, ok := final[[2]string{"restart", "exec_id"}]; ok && id.value != "" {
		if f, ok := final[[2]string{"restart", "failure"}]; ok {
			if n, err := flagInt(f.value); err == nil && (n == 1 || n == 2) {
				if err := levels.ValidRunID(id.value); err != nil {
					return Config{}, cfgErr("%s:%d: [restart] exec_id = %s: %w", name, id.line, id.value, err)
				}
				run = id.value
			}
		}
	}
	c.Run = run
	for _, f := range featureKeys {
		st, ok := final[[2]string{f.section, f.key}]
		if !ok || (run != "" && f.section == "restart") {
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
	if err := ftiChecks(&c, name, final); err != nil {
		return Config{}, err
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
	return c, nil
}

// setting is the last value a key was given in a file, and its line.
type setting struct {
	value string
	line  int
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
	if c.Compression != fileformat.CodecNone {
		kv("compression", c.Compression.String())
	}
	if c.Snapshot || c.SnapshotBudget != 0 {
		kv("ckpt_snapshot", b01(c.Snapshot))
		kv("snapshot_budget", c.SnapshotBudget)
	}
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
	if c.DCPMode != 0 {
		kv("dcp_mode", c.DCPMode)
	}
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
	formatPolicy(kv, c.Policy)
	b.WriteString("\n[advanced]\n")
	if c.BlockSize%(1<<10) != 0 || c.TransferSize%(1<<20) != 0 {
		return nil, cfgErr("block_size %d bytes or transfer_size %d bytes is not a whole number of KiB or MiB", c.BlockSize, c.TransferSize)
	}
	kv("block_size", c.BlockSize>>10)
	kv("transfer_size", c.TransferSize>>20)
	kv("local_test", b01(c.LocalTest))
	kv("fast_forward", c.FastForward)
	if c.Run != "" {
		b.WriteString("\n[restart]\n")
		kv("failure", 1)
		kv("exec_id", c.Run)
	}
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
