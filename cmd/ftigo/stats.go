package main

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/internal/policy"
	"github.com/ftigo/ftigo/vfd"
)

// statsLevel is one level's line of ftigo stats.
type statsLevel struct {
	Level       int     `json:"level"`
	Checkpoints int64   `json:"checkpoints"`
	Blocked     float64 `json:"blocked_s"`
	Total       float64 `json:"total_s"`
	Bytes       int64   `json:"bytes"`
	// DCPShare is the bytes written over the bytes protected by the
	// level's checkpoints under dCP, full bases included (FTI's "dCP
	// share"); 0 when the level took no differential checkpoint.
	DCPShare float64 `json:"dcp_share,omitempty"`
	Restarts int64   `json:"restarts"`
	Recover  float64 `json:"recover_s"`
	LostWork float64 `json:"lost_work_s"`
}

// statsResult is ftigo stats' result (--json).
type statsResult struct {
	History  string       `json:"history"`
	Run      string       `json:"run,omitempty"`
	Launches int64        `json:"launches"`
	Failures [4]int64     `json:"failures"` // per level
	Levels   []statsLevel `json:"levels"`
	// Wall is the running time of every launch; Blocked, Recover and
	// LostWork its parts lost to checkpoints, restarts and re-execution.
	Wall     float64 `json:"wall_s"`
	Blocked  float64 `json:"blocked_s"`
	Recover  float64 `json:"recover_s"`
	LostWork float64 `json:"lost_work_s"`
	// ETTR is the effective time-to-result ratio: the share of Wall
	// spent on work that was kept.
	ETTR float64 `json:"ettr"`
	// Current is the interval the newest launch kept (nil with fewer
	// than two checkpoints), Optimum the model's plan; Waste their
	// expected waste under the estimated costs and rates.
	Current *statsPlan `json:"current"`
	Optimum *statsPlan `json:"optimum"`
}

// statsPlan is a plan: the work between checkpoints at each level or
// above, and its expected waste.
type statsPlan struct {
	Levels  []int     `json:"levels"`
	Periods []float64 `json:"periods_s"`
	Waste   float64   `json:"expected_waste"`
}

func (a *app) statsCmd() *cobra.Command {
	var jsonOut bool
	var plot string
	c := &cobra.Command{
		Use:   "stats RUN",
		Short: "goodput of a run from its history: checkpoints per level, restarts, lost work, waste, ETTR",
		Long: `Reads the run history ftigo keeps in meta_dir (` + policy.HistoryName + `) across
launches and reports: per level, the checkpoints, the time they blocked
the solver and their total time (background work included), their bytes
and, at a level that took differential checkpoints, the dCP share (the
bytes written over the bytes protected, full bases included); the restarts from that
level, their recovery time and the work the failures before them lost;
the failures seen per level; the wall time of every launch and the
effective time-to-result ratio (ETTR: the share of it spent on work that
was kept). Then the expected waste at the interval the newest launch kept
beside the optimum that ckpt_interval = auto would choose
(docs/protocol/interval.md), from the same costs and failure rates (and
the mtbf keys of a config.fti). --plot draws the timeline into a .png or
.svg file: the launches, their recovery and the work failures lost, and a
row per level of its checkpoints (blocked and background time).

Exit codes: 0 success, 1 no history or an unreadable one, 2 usage error.

` + runArgHelp,
		Example: "  ftigo stats run\n  ftigo stats config.fti --json\n  ftigo stats run --plot timeline.svg",
		Args:    argNames(false, "RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if plot != "" {
				if _, err := plotFormat(plot); err != nil {
					return usagef("--plot %s: %v", plot, err)
				}
			}
			cfg, _, err := loadRun(args[0])
			if err != nil {
				return err
			}
			name := filepath.Join(cfg.MetaDir, policy.HistoryName)
			raw, err := vfd.ReadFileLimit(vfd.Sec2{}, name, 16<<20)
			if err != nil {
				return fmt.Errorf("run history: %w (a run of this ftigo writes it in meta_dir)", err)
			}
			h, err := policy.UnmarshalHistory(raw)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			res := runStats(h, cfg.Policy)
			res.History = name
			if plot != "" {
				if err := writeStatsPlot(plot, h); err != nil {
					return fmt.Errorf("--plot %s: %w", plot, err)
				}
			}
			if jsonOut {
				return writeJSON(a.stdout, res)
			}
			a.printStats(res)
			if plot != "" {
				fmt.Fprintf(a.stdout, "plot: %s\n", plot)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	c.Flags().StringVar(&plot, "plot", "", "draw the run's timeline into this .png or .svg file")
	return c
}

// runStats sums history h; p gives the configured MTBFs.
func runStats(h *policy.History, p ckpt.PolicyConfig) statsResult {
	sec := func(ns int64) float64 { return float64(ns) / 1e9 }
	res := statsResult{Run: h.Run, Launches: h.DroppedLaunches + int64(len(h.Launches)), Failures: h.DroppedFailures, Levels: []statsLevel{}}
	wall, lost := h.DroppedExposure, int64(0)
	for _, l := range h.Launches {
		wall += l.Exposure()
		if l.Failure >= 1 && l.Failure <= policy.MaxLevels {
			res.Failures[l.Failure-1]++
		}
		if l.Restart == nil {
			lost += l.LostWork // a failure whose relaunch started fresh
		}
	}
	var avail []int
	for i, t := range h.Totals {
		lost += t.LostWork
		res.Blocked += sec(t.Blocked)
		res.Recover += sec(t.Recover)
		if t.Checkpoints == 0 && t.Restarts == 0 {
			continue
		}
		sl := statsLevel{Level: i + 1, Checkpoints: t.Checkpoints, Blocked: sec(t.Blocked), Total: sec(t.Total), Bytes: t.Bytes,
			Restarts: t.Restarts, Recover: sec(t.Recover), LostWork: sec(t.LostWork)}
		if t.Differential > 0 && t.Protected > 0 {
			sl.DCPShare = float64(t.Written) / float64(t.Protected)
		}
		res.Levels = append(res.Levels, sl)
		if t.Checkpoints > 0 {
			avail = append(avail, i+1)
		}
	}
	res.Wall, res.LostWork = sec(wall), sec(lost)
	if res.Wall > 0 {
		res.ETTR = max(res.Wall-res.Blocked-res.Recover-res.LostWork, 0) / res.Wall
	}
	nodes := 1
	if l := h.Current(); l != nil && l.Nodes > 0 {
		nodes = l.Nodes
	}
	pr := policy.Priors{Job: p.MTBF[0].Seconds(), Node: p.MTBFNode.Seconds()}
	for l := 1; l <= 4; l++ {
		pr.Level[l-1] = p.MTBF[l].Seconds()
	}
	if len(avail) == 0 {
		return res
	}
	pl := &policy.Planner{Avail: avail, Nodes: nodes, Priors: pr, Hist: h}
	opt := pl.Replan()
	res.Optimum = toStatsPlan(opt, policy.Evaluate(opt, pl.Inputs.Levels))
	if cur, ok := keptPlan(h); ok {
		res.Current = toStatsPlan(cur, policy.Evaluate(cur, pl.Inputs.Levels))
	}
	return res
}

// keptPlan is the pattern the newest launch's checkpoints followed: the
// levels it used, each level's count of checkpoints at it or above per
// top-level one, and the work between them (the time between their
// starts less the earlier one's blocked time).
func keptPlan(h *policy.History) (policy.Plan, bool) {
	l := h.Current()
	if l == nil {
		return policy.Plan{}, false
	}
	var cs []policy.Checkpoint
	for _, c := range h.Checkpoints {
		if c.Time >= l.Start && !c.Final && c.Level >= 1 && c.Level <= policy.MaxLevels {
			cs = append(cs, c)
		}
	}
	if len(cs) < 2 {
		return policy.Plan{}, false
	}
	var work int64
	for i := 1; i < len(cs); i++ {
		work += cs[i].Time - cs[i-1].Time - cs[i-1].Blocked
	}
	var lv []int
	for _, c := range cs[1:] {
		if !slices.Contains(lv, c.Level) {
			lv = append(lv, c.Level)
		}
	}
	slices.Sort(lv)
	top := 0
	for _, c := range cs[1:] {
		if c.Level == lv[len(lv)-1] {
			top++
		}
	}
	p := policy.Plan{Levels: lv, Work: float64(work) / 1e9 / float64(top)}
	for _, id := range lv {
		n := 0
		for _, c := range cs[1:] {
			if c.Level >= id {
				n++
			}
		}
		p.Counts = append(p.Counts, max(int(math.Round(float64(n)/float64(top))), 1))
	}
	return p, true
}

func toStatsPlan(p policy.Plan, overhead float64) *statsPlan {
	sp := &statsPlan{Levels: append([]int{}, p.Levels...), Periods: []float64{}, Waste: overhead / (1 + overhead)}
	for j := range p.Levels {
		sp.Periods = append(sp.Periods, p.Work/float64(p.Counts[j]))
	}
	if math.IsInf(overhead, 1) {
		sp.Waste = 1
	}
	return sp
}

func (a *app) printStats(r statsResult) {
	d := func(s float64) time.Duration { return time.Duration(s * 1e9).Round(time.Millisecond) }
	fmt.Fprintf(a.stdout, "history: %s", r.History)
	if r.Run != "" {
		fmt.Fprintf(a.stdout, " (run %s)", r.Run)
	}
	fmt.Fprintf(a.stdout, "\nlaunches: %d, failures by level: L1 %d, L2 %d, L3 %d, L4 %d\n", r.Launches, r.Failures[0], r.Failures[1], r.Failures[2], r.Failures[3])
	tw := tabwriter.NewWriter(a.stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "level\tcheckpoints\tblocked\ttotal\tbytes\tdCP share\trestarts\trecovery\tlost work")
	for _, l := range r.Levels {
		share := "-"
		if l.DCPShare > 0 {
			share = fmt.Sprintf("%.1f%%", 100*l.DCPShare)
		}
		fmt.Fprintf(tw, "L%d\t%d\t%v\t%v\t%d\t%s\t%d\t%v\t%v\n", l.Level, l.Checkpoints, d(l.Blocked), d(l.Total), l.Bytes, share, l.Restarts, d(l.Recover), d(l.LostWork))
	}
	tw.Flush()
	fmt.Fprintf(a.stdout, "wall %v: checkpoints blocked %v, recovery %v, lost work %v; ETTR %.2f%%\n", d(r.Wall), d(r.Blocked), d(r.Recover), d(r.LostWork), 100*r.ETTR)
	plan := func(name string, p *statsPlan) {
		if p == nil {
			fmt.Fprintf(a.stdout, "%s: not known (fewer than two checkpoints in the newest launch)\n", name)
			return
		}
		parts := []string{}
		for j, l := range p.Levels {
			parts = append(parts, fmt.Sprintf("L%d every %v", l, d(p.Periods[j])))
		}
		if len(parts) == 0 {
			parts = append(parts, "no checkpoint (no failure expected)")
		}
		fmt.Fprintf(a.stdout, "%s: %s, expected waste %.2f%%\n", name, strings.Join(parts, ", "), 100*p.Waste)
	}
	plan("current interval", r.Current)
	plan("optimum (ckpt_interval = auto)", r.Optimum)
}
