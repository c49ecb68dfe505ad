package ckpt

import (
	"fmt"
	"strings"
	"syscall"
	"time"
)

// PolicyConfig holds ftigo's keys for when to checkpoint and when to
// stop ([basic], ftigo extensions; docs/protocol/interval.md).
type PolicyConfig struct {
	// Auto makes Snapshot choose its own interval and levels from the
	// measured costs and failures ([basic] ckpt_interval = auto). The
	// ckpt_lN and dcp_lN intervals are then not used.
	Auto bool
	// MTBF[l], l = 1..4, is the mean time between failures that need
	// level l ([basic] mtbf_l1 .. mtbf_l4); MTBF[0] is the job's, every
	// failure counted at the highest level ([basic] mtbf). 0: not set.
	MTBF [5]time.Duration
	// MTBFNode is one node's mean time between failures, scaled by the
	// node count ([basic] mtbf_node).
	MTBFNode time.Duration
	// StopSignals are the signals that ask the job to stop ([basic]
	// stop_signals, names such as SIGTERM, comma-separated, or none).
	// nil means SIGTERM and SIGUSR1; an empty list means none. A signal
	// no Checkpoint or Snapshot call takes within stop_grace gets its
	// default action back, and so does the next one after a call took
	// it.
	StopSignals []string
	// Walltime is how long a launch may run, from Init ([basic]
	// walltime; 0: no limit). Slurm's SLURM_JOB_END_TIME is used too.
	Walltime time.Duration
	// StopGrace is the time a stop signal leaves for the final
	// checkpoint ([basic] stop_grace; 0: 30 s, Slurm's KillWait).
	StopGrace time.Duration
}

// defaultStopGrace is StopGrace's default: Slurm's default KillWait.
const defaultStopGrace = 30 * time.Second

// defaultStopSignals are the signals a job stops on by default. Slurm
// sends SIGTERM at preemption and at the time limit, KillWait (30 s)
// before SIGKILL; SIGUSR1 is its early warning (sbatch
// --signal=USR1@T). A launcher tearing a failed job down sends SIGTERM
// too: a rank that makes no Checkpoint or Snapshot call within
// stop_grace (blocked in a collective, say) then gets SIGTERM's default
// action back and dies, and so does a rank sent it a second time.
var defaultStopSignals = []string{"SIGTERM", "SIGUSR1"}

// stopSignalNames are the signals stop_signals accepts.
var stopSignalNames = map[string]syscall.Signal{
	"SIGTERM": syscall.SIGTERM, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2,
	"SIGINT": syscall.SIGINT, "SIGHUP": syscall.SIGHUP, "SIGXCPU": syscall.SIGXCPU,
}

// signals returns the stop signals, defaults applied.
func (p PolicyConfig) signals() []syscall.Signal {
	names := p.StopSignals
	if names == nil {
		names = defaultStopSignals
	}
	var out []syscall.Signal
	for _, n := range names {
		if s, ok := stopSignalNames[n]; ok {
			out = append(out, s)
		}
	}
	return out
}

// grace returns StopGrace, default applied.
func (p PolicyConfig) grace() time.Duration {
	if p.StopGrace > 0 {
		return p.StopGrace
	}
	return defaultStopGrace
}

// check refuses values no key can set.
func (p PolicyConfig) check() error {
	for l, m := range p.MTBF {
		if m < 0 {
			name := "mtbf"
			if l > 0 {
				name = fmt.Sprintf("mtbf_l%d", l)
			}
			return cfgErr("%s is negative: use 0 for unknown", name)
		}
	}
	switch {
	case p.MTBFNode < 0:
		return cfgErr("mtbf_node is negative: use 0 for unknown")
	case p.Walltime < 0:
		return cfgErr("walltime is negative: use 0 for no limit")
	case p.StopGrace < 0:
		return cfgErr("stop_grace is negative: use 0 for the default (30 s)")
	}
	for _, n := range p.StopSignals {
		if _, ok := stopSignalNames[n]; !ok {
			return cfgErr("stop_signals: unknown signal %q: use %s or none", n, signalList())
		}
	}
	return nil
}

func signalList() string {
	return "SIGTERM, SIGUSR1, SIGUSR2, SIGINT, SIGHUP, SIGXCPU"
}

// policyKeys are the [basic] keys of PolicyConfig.
var policyKeys = map[string]setter{
	"ckpt_interval": func(c *Config, v string) error {
		switch strings.ToLower(v) {
		case "auto":
			c.Policy.Auto = true
		case "", "fti", "fixed":
			c.Policy.Auto = false
		default:
			return fmt.Errorf("want auto (ftigo chooses the interval) or fti (the ckpt_lN intervals), got %q", v)
		}
		return nil
	},
	"mtbf":      durationKey(func(c *Config) *time.Duration { return &c.Policy.MTBF[0] }),
	"mtbf_l1":   durationKey(func(c *Config) *time.Duration { return &c.Policy.MTBF[1] }),
	"mtbf_l2":   durationKey(func(c *Config) *time.Duration { return &c.Policy.MTBF[2] }),
	"mtbf_l3":   durationKey(func(c *Config) *time.Duration { return &c.Policy.MTBF[3] }),
	"mtbf_l4":   durationKey(func(c *Config) *time.Duration { return &c.Policy.MTBF[4] }),
	"mtbf_node": durationKey(func(c *Config) *time.Duration { return &c.Policy.MTBFNode }),
	"walltime":  durationKey(func(c *Config) *time.Duration { return &c.Policy.Walltime }),
	"stop_grace": durationKey(func(c *Config) *time.Duration {
		return &c.Policy.StopGrace
	}),
	"stop_signals": func(c *Config, v string) error {
		list := []string{}
		if l := strings.ToLower(strings.TrimSpace(v)); l != "none" && l != "" {
			for _, f := range strings.Split(v, ",") {
				n := strings.ToUpper(strings.TrimSpace(f))
				if !strings.HasPrefix(n, "SIG") {
					n = "SIG" + n
				}
				if _, ok := stopSignalNames[n]; !ok {
					return fmt.Errorf("unknown signal %q: use %s, or none", strings.TrimSpace(f), signalList())
				}
				list = append(list, n)
			}
		}
		c.Policy.StopSignals = list
		return nil
	},
}

// The policy keys join [basic]: they are ftigo's, so they live here
// beside the code that reads them rather than in FTI's table.
func init() {
	for k, set := range policyKeys {
		sections["basic"][k] = set
	}
}

// formatPolicy writes the policy keys that differ from the defaults.
func formatPolicy(kv func(k string, v any), p PolicyConfig) {
	if p.Auto {
		kv("ckpt_interval", "auto")
	}
	dur := func(k string, d time.Duration) {
		if d > 0 {
			kv(k, d)
		}
	}
	dur("mtbf", p.MTBF[0])
	for l := 1; l <= 4; l++ {
		dur(fmt.Sprintf("mtbf_l%d", l), p.MTBF[l])
	}
	dur("mtbf_node", p.MTBFNode)
	dur("walltime", p.Walltime)
	dur("stop_grace", p.StopGrace)
	if p.StopSignals != nil {
		v := strings.Join(p.StopSignals, ",")
		if v == "" {
			v = "none"
		}
		kv("stop_signals", v)
	}
}
