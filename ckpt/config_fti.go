package ckpt

import (
	"fmt"
)

// FTI 1.6's corrections of the values it reads (conf.c, FTI_TestConfig),
// applied to what ParseConfig read. FTI replaces some values with a
// default and warns. It reads the dCP settings only with dCP on: with
// dCP off any value of dcp_mode, dcp_block_size or dcp_stack_size loads
// (FTI's test-suite template has dcp_block_size = -1).

// ftiChecks applies FTI's corrections to c and adds their warnings. A
// dCP setting that is not an integer, with dCP on, is an error.
func ftiChecks(c *Config, name string, final map[[2]string]setting) error {
	warn := func(st setting, section, key, format string, a ...any) {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s:%d: [%s] %s = %s: ", name, st.line, section, key, shown(st.value))+fmt.Sprintf(format, a...))
	}
	if st, ok := final[[2]string{"advanced", "transfer_size"}]; ok && (c.TransferSize < 8<<20 || c.TransferSize > 64<<20) {
		warn(st, "advanced", "transfer_size", "outside 8..64 MiB, so 16 MiB is used (as FTI does)")
		c.TransferSize = DefaultConfig().TransferSize
	}
	st := final[[2]string{"basic", "max_sync_intv"}]
	switch n := c.MaxSyncIntv; {
	case n < 0:
		warn(st, "basic", "max_sync_intv", "negative, so 512 iterations are used (as FTI does)")
		c.MaxSyncIntv = DefaultConfig().MaxSyncIntv
	case n == 0:
		c.MaxSyncIntv = DefaultConfig().MaxSyncIntv // FTI: 0 means 512
	case n&(n-1) != 0:
		p := 1
		for p*2 <= n {
			p *= 2
		}
		warn(st, "basic", "max_sync_intv", "not a power of 2, so %d iterations are used (the power of 2 below, as FTI does)", p)
		c.MaxSyncIntv = p
	}
	return dcpKeys(c, name, final, warn)
}

// dcpKeys reads dcp_mode, dcp_block_size and dcp_stack_size as FTI does,
// and only with dCP on. dcp_mode is 1 (MD5) or 2 (CRC32). Another mode,
// or a block size outside 512..65535 bytes, turns dCP off with a warning
// (FTI-FF's check). A stack size outside 1..10 is replaced by 5 with a
// warning (POSIX dCP's check; FTI has no lower bound and divides by it).
func dcpKeys(c *Config, name string, final map[[2]string]setting, warn func(setting, string, string, string, ...any)) error {
	if !c.EnableDCP {
		return nil
	}
	read := func(key string) (int64, setting, bool, error) {
		st, ok := final[[2]string{"basic", key}]
		if !ok {
			return 0, st, false, nil
		}
		n, err := flagInt(st.value)
		if err != nil {
			return 0, st, true, cfgErr("%s:%d: [basic] %s = %s: %v", name, st.line, key, shown(st.value), err)
		}
		return n, st, true, nil
	}
	n, st, ok, err := read("dcp_mode")
	switch {
	case err != nil:
		return err
	case ok && n != dcpModeMD5 && n != dcpModeCRC32:
		warn(st, "basic", "dcp_mode", "FTI takes 1 (MD5) or 2 (CRC32) and turns dCP off otherwise; dCP is off")
		c.EnableDCP = false
		return nil
	case ok:
		c.DCPMode = int(n)
	}
	n, st, ok, err = read("dcp_block_size")
	switch {
	case err != nil:
		return err
	case ok && (n < minDCPBlockSize || n > maxDCPBlockSize):
		warn(st, "basic", "dcp_block_size", "FTI takes %d..%d bytes and turns dCP off otherwise; dCP is off", minDCPBlockSize, maxDCPBlockSize)
		c.EnableDCP = false
		return nil
	case ok:
		c.DCPBlockSize = int(n)
	}
	n, st, ok, err = read("dcp_stack_size")
	switch {
	case err != nil:
		return err
	case ok && (n < 1 || n > maxDCPStackSize):
		warn(st, "basic", "dcp_stack_size", "outside 1..%d, so %d layers are used (FTI's default)", maxDCPStackSize, defaultDCPStackSize)
		c.DCPStackSize = defaultDCPStackSize
	case ok:
		c.DCPStackSize = int(n)
	}
	return nil
}
