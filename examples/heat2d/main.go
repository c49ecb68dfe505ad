// Command heat2d is ftigo's showcase: a 2-D heat-diffusion solver whose
// ranks checkpoint through ftigo, get killed, restart and finish with a
// field bit-identical to an uninterrupted run.
//
// With no flags it runs the whole demonstration and prints a report:
//
//	go run ./examples/heat2d
//
// The demonstration runs the solver as a child process (the job) with 4
// ranks on 4 simulated nodes, checkpointing at each available level in
// turn; kills the child with SIGKILL during a checkpoint; deletes one
// simulated node's local storage; relaunches the job, which restarts from
// the newest recoverable checkpoint; and compares the final field with an
// uninterrupted run. It exits 0 only if everything held. The job keeps
// its last checkpoint at L4 when it finishes (keep_last_ckpt = 1, unless
// -config says otherwise or -keep-last=false), and the report ends with
// the ftigo inspect and verify command lines that show it. The run
// directory is marked as the demonstration's: a later demonstration in it
// empties it first; another non-empty directory is refused, and so is one
// another demonstration is running in (it holds a lock there, and the
// refusal names it).
//
// With -config (an FTI config.fti) the run takes its shape from the file:
// node_size ranks per node and, by default, group_size nodes; the lost
// node's directory is under the file's ckpt_dir (relative paths are
// relative to the working directory, as for FTI).
//
// -snapshot takes every checkpoint in snapshot mode (ckpt_snapshot = 1):
// Checkpoint blocks only for a copy of the field into staging memory,
// and the checkpoint is written, protected and committed at its level in
// the background. The job prints the copy, blocked, background and
// durable times of each checkpoint ("EVENT ckpt-copied", "EVENT
// ckpt-durable").
//
// -async post-processes the L2-L4 checkpoints in the background
// (inline_l2/l3/l4 = 0): each commits at L1 when Checkpoint returns, then
// at its level. -heads does it with FTI's heads (head = 1, inline_lN = 0):
// the first rank of each simulated node is a head that raises the node's
// checkpoints to L2, L3 or L4 while the solver runs on the other ranks
// (the runtime's communicator without the heads, FTI's FTI_COMM_WORLD;
// the grid is split among them only). -ranks then counts the heads too
// (node_size = ranks/nodes, head included; by default 2 per node, a head
// and an application rank); a head's Init returns ckpt.ErrHead once the
// application ranks finalized, and the head prints "EVENT head done" and
// ends quietly. It works in-process (goroutine heads) and under MPI
// (mpirun -np 8 ... -heads -ranks 8 -nodes 4; comm/mpi asks for
// MPI_THREAD_MULTIPLE, which heads need).
//
// Stopping: a stop signal (SIGTERM or SIGUSR1, stop_signals), the halt
// file (ftigo halt DIR) or the time left (-walltime, walltime in
// -config, or Slurm's SLURM_JOB_END_TIME) makes the job take a final
// checkpoint at its next check (at most a second away), at the highest
// level whose measured cost fits the time left. It prints "final
// checkpoint N at Lk (iteration I), exiting" and why (the runtime's
// StopReason), closes the runtime
// (keeping the checkpoints) and exits 0; its next launch resumes from
// that checkpoint, bit-identical. The demonstration passes SIGTERM and
// SIGUSR1 on to the job, reports the stop and exits 0 too. With -heads
// a stop is not supported: the heads wait for Finalize.
//
// -role=job runs one launch of the job itself (what the demonstration
// starts, and what mpirun starts under the mpi build tag).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/vfd"
)

// options are the command-line settings of a run.
type options struct {
	ranks, nodes int
	// relaunchRanks, relaunchNodes: the shape of the relaunch after the
	// kill (0: the first launch's).
	relaunchRanks, relaunchNodes int
	nx, ny                       int
	iters                        int
	alpha                        float64
	frameEvery                   int
	ckptEvery                    int
	levelsFlag                   string
	levels                       []int
	config                       string
	dir                          string
	kill                         string
	loseNode                     int
	noKill                       bool
	async                        bool
	snapshot                     bool
	heads                        bool
	keepLast                     bool
	// keepLastSet says -keep-last was given; otherwise keepLast is the
	// configuration's keep_last_ckpt (1 for the demonstration's own).
	keepLastSet bool
	// From -config: its node_size, group_size, head and ckpt_dir (made
	// absolute: the jobs run in this directory too).
	cfgNodeSize, cfgGroupSize int
	cfgHead                   bool
	cfgLocal                  string
	globalLatency             time.Duration
	ioLatency                 time.Duration
	// walltime and stopGrace set the configuration's walltime and
	// stop_grace (0: as the configuration says).
	walltime, stopGrace time.Duration
	role                string
	seed                uint64
}

const usageText = `heat2d: a 2-D heat solver that checkpoints with ftigo, is killed, restarts
and must end bit-identical to an uninterrupted run.

Examples:
  go run ./examples/heat2d                         # the whole demonstration, report on stdout
  go run ./examples/heat2d -dir run1 -kill random  # kill at a random moment, keep outputs in run1
  go run ./examples/heat2d -no-kill -iters 1000    # just solve, with checkpoints
  go run ./examples/heat2d -config config.fti      # FTI-style configuration file
  go run ./examples/heat2d -relaunch-ranks 3       # restart on 3 ranks (3 nodes) instead of 4

Flags:
`

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("heat2d", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	fs.IntVar(&o.ranks, "ranks", 4, "number of ranks (goroutines in-process)")
	fs.IntVar(&o.nodes, "nodes", 4, "number of simulated nodes the ranks are spread over (all in one group)")
	fs.IntVar(&o.relaunchRanks, "relaunch-ranks", 0, "ranks of the relaunch after the kill (0: as -ranks); the field is a global dataset, redistributed onto the new bands")
	fs.IntVar(&o.relaunchNodes, "relaunch-nodes", 0, "simulated nodes of the relaunch (0: as many as keep -ranks/-nodes ranks per node, else one rank per node)")
	fs.IntVar(&o.nx, "nx", 256, "grid columns")
	fs.IntVar(&o.ny, "ny", 256, "grid rows")
	fs.IntVar(&o.iters, "iters", 4000, "solver iterations")
	fs.Float64Var(&o.alpha, "alpha", 0.24, "diffusion number of the explicit scheme (stable up to 0.25)")
	fs.IntVar(&o.frameEvery, "frame-every", 200, "write a trajectory frame every K iterations (0: none)")
	fs.IntVar(&o.ckptEvery, "ckpt-every", 500, "checkpoint every N iterations (0: none)")
	fs.StringVar(&o.levelsFlag, "levels", "auto", `checkpoint levels taken in turn, e.g. "1,2,3,4" (5-8: FTI's differential L1-L4, with enable_dcp = 1 in -config); auto: every available level`)
	fs.StringVar(&o.config, "config", "", "FTI-style config.fti file (default: node_size = ranks/nodes, one group, dirs under -dir)")
	fs.StringVar(&o.dir, "dir", "", "run directory (default: a fresh temporary directory)")
	fs.StringVar(&o.kill, "kill", "auto", "when to SIGKILL the job: auto (during the first checkpoint at the highest level), ckpt:N (during checkpoint N), after:N (after checkpoint N), random, none")
	fs.IntVar(&o.loseNode, "lose-node", -2, "simulated node whose local storage is deleted after the kill (-1: none; default: node 2 when L2 or L3 is used)")
	fs.BoolVar(&o.noKill, "no-kill", false, "run the job once without killing it")
	fs.BoolVar(&o.snapshot, "snapshot", false, "snapshot mode (ckpt_snapshot = 1): Checkpoint blocks only for a copy into memory, every level is written and committed in the background; prints the copy, background and durable times")
	fs.BoolVar(&o.async, "async", false, "post-process L2-L4 checkpoints in the background (inline_l2/l3/l4 = 0): each commits at L1, then at its level")
	fs.BoolVar(&o.heads, "heads", false, "one head per simulated node (head = 1, inline_l2/l3/l4 = 0): node-local rank 0 post-processes the node's L2-L4 checkpoints; -ranks counts the heads too (default: 2 per node, a head and an application rank) and the solver runs on the others")
	fs.BoolVar(&o.keepLast, "keep-last", true, "keep the last checkpoint at L4 when the job finishes (keep_last_ckpt = 1), for ftigo inspect/verify; false: delete them all (FTI's default); not given: what -config says, else true")
	fs.DurationVar(&o.globalLatency, "global-latency", 0, "added latency per write to global storage (a slow parallel file system); the demonstration sets it so the L4 kill lands mid-write")
	fs.DurationVar(&o.ioLatency, "io-latency", 0, "added latency per write and sync on every storage area (slow disks; widens the window a kill lands in)")
	fs.DurationVar(&o.walltime, "walltime", 0, "time limit of each launch (walltime): the job takes a final checkpoint at the highest level that fits the time left and exits 0 (0: as -config says; SLURM_JOB_END_TIME counts too)")
	fs.DurationVar(&o.stopGrace, "stop-grace", 0, "time a stop signal leaves for the final checkpoint (stop_grace; 0: as -config says, default 30s)")
	fs.StringVar(&o.role, "role", "", "internal: job runs one launch of the solver")
	fs.Uint64Var(&o.seed, "seed", 0, "seed for -kill random (0: from the clock)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.keepLastSet = set["keep-last"]
	if o.config != "" {
		if err := o.applyConfig(set); err != nil {
			return nil, err
		}
	} else if o.heads && !set["ranks"] {
		o.ranks = 2 * o.nodes // a head and an application rank per node
	}
	switch {
	case o.ranks < 1:
		return nil, fmt.Errorf("-ranks must be at least 1")
	case o.nodes < 1 || o.ranks%o.nodes != 0:
		return nil, fmt.Errorf("-ranks (%d) must be a multiple of -nodes (%d)", o.ranks, o.nodes)
	case o.alpha <= 0 || o.alpha > 0.25:
		return nil, fmt.Errorf("-alpha %v is outside (0, 0.25]: the explicit scheme would be unstable", o.alpha)
	case o.iters < 0 || o.ckptEvery < 0 || o.frameEvery < 0:
		return nil, fmt.Errorf("-iters, -ckpt-every and -frame-every must not be negative")
	case o.walltime < 0 || o.stopGrace < 0:
		return nil, fmt.Errorf("-walltime and -stop-grace must not be negative")
	case (o.heads || o.cfgHead) && o.ranks/o.nodes < 2:
		return nil, fmt.Errorf("-heads: -ranks (%d) on -nodes (%d) leaves no application rank beside each node's head; give at least 2 ranks per node", o.ranks, o.nodes)
	case o.appRanks(o.ranks, o.nodes) > o.ny:
		return nil, fmt.Errorf("-ranks (%d) exceeds the grid rows (%d)", o.appRanks(o.ranks, o.nodes), o.ny)
	case o.relaunchRanks < 0 || o.relaunchNodes < 0:
		return nil, fmt.Errorf("-relaunch-ranks and -relaunch-nodes must not be negative")
	}
	if o.relaunchRanks == 0 {
		o.relaunchRanks = o.ranks
		if o.relaunchNodes == 0 {
			o.relaunchNodes = o.nodes
		}
	}
	if o.relaunchNodes == 0 {
		o.relaunchNodes = o.relaunchRanks
		if per := o.ranks / o.nodes; o.relaunchRanks%per == 0 {
			o.relaunchNodes = o.relaunchRanks / per
		}
	}
	switch {
	case o.relaunchRanks%o.relaunchNodes != 0:
		return nil, fmt.Errorf("-relaunch-ranks (%d) must be a multiple of -relaunch-nodes (%d)", o.relaunchRanks, o.relaunchNodes)
	case o.config != "" && o.relaunchRanks != o.relaunchNodes*o.cfgNodeSize:
		return nil, fmt.Errorf("-relaunch-ranks (%d) on -relaunch-nodes (%d) does not give node_size %d ranks per node, as -config %s says", o.relaunchRanks, o.relaunchNodes, o.cfgNodeSize, o.config)
	case (o.heads || o.cfgHead) && o.relaunchRanks/o.relaunchNodes < 2:
		return nil, fmt.Errorf("-heads: -relaunch-ranks (%d) on -relaunch-nodes (%d) leaves no application rank beside each node's head", o.relaunchRanks, o.relaunchNodes)
	case o.appRanks(o.relaunchRanks, o.relaunchNodes) > o.ny:
		return nil, fmt.Errorf("-relaunch-ranks (%d) exceeds the grid rows (%d)", o.appRanks(o.relaunchRanks, o.relaunchNodes), o.ny)
	}
	lv, err := parseLevels(o.levelsFlag)
	if err != nil {
		return nil, err
	}
	o.levels = lv
	if o.loseNode == -2 {
		o.loseNode = -1
		if (slices.Contains(o.levels, 2) || slices.Contains(o.levels, 3)) && o.nodes > 2 {
			o.loseNode = 2
		}
	}
	if o.loseNode >= o.nodes {
		return nil, fmt.Errorf("-lose-node %d: there are only %d nodes", o.loseNode, o.nodes)
	}
	return o, nil
}

// appRanks is the number of application (solver) ranks of a launch of
// ranks processes on nodes nodes: all of them, or with -heads all but one
// per node.
func (o *options) appRanks(ranks, nodes int) int {
	if o.heads || o.cfgHead {
		return ranks - nodes
	}
	return ranks
}

// applyConfig takes the shape of the run from -config: node_size ranks
// per node (a head included), and by default group_size nodes (one
// group). -ranks and -nodes may pick another multiple, not another
// node_size. Without -keep-last, keep_last_ckpt is the configuration's.
func (o *options) applyConfig(set map[string]bool) error {
	cfg, err := ckpt.LoadConfig(vfd.Sec2{}, o.config)
	if err != nil {
		return fmt.Errorf("-config: %w", err)
	}
	ns := cfg.NodeSize
	o.cfgNodeSize, o.cfgGroupSize, o.cfgHead = ns, cfg.GroupSize, cfg.Head
	switch {
	case !set["ranks"] && !set["nodes"]:
		o.nodes = max(cfg.GroupSize, 1)
		o.ranks = ns * o.nodes
	case set["ranks"] && !set["nodes"]:
		if o.ranks%ns != 0 {
			return fmt.Errorf("-ranks %d is not a multiple of node_size %d (-config %s)", o.ranks, ns, o.config)
		}
		o.nodes = o.ranks / ns
	case !set["ranks"]:
		o.ranks = ns * o.nodes
	case o.ranks != ns*o.nodes:
		return fmt.Errorf("-ranks %d on -nodes %d is not node_size %d ranks per node (-config %s)", o.ranks, o.nodes, ns, o.config)
	}
	if cfg.CkptDir != "" {
		if o.cfgLocal, err = filepath.Abs(cfg.CkptDir); err != nil {
			return fmt.Errorf("-config %s: ckpt_dir %s: %w", o.config, cfg.CkptDir, err)
		}
	}
	if !o.keepLastSet {
		o.keepLast = cfg.KeepLastCkpt
	}
	return nil
}

// localArea is the node-local directory of the run: the configuration's
// ckpt_dir, or -dir/local.
func (o *options) localArea() string {
	if o.cfgLocal != "" {
		return o.cfgLocal
	}
	local, _, _ := areas(o.dir)
	return local
}

// keepLastSource says where the run's keep_last_ckpt comes from.
func (o *options) keepLastSource() string {
	switch {
	case o.keepLastSet:
		return "set by -keep-last"
	case o.config != "":
		return "in " + o.config
	}
	return "the demonstration's default"
}

// parseLevels reads the -levels list; "auto" is L1 plus every level
// implementation the job registers.
func parseLevels(s string) ([]int, error) {
	if s == "auto" {
		out := []int{1}
		for _, l := range availableLevels() {
			out = append(out, int(l))
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 8 {
			return nil, fmt.Errorf("-levels: %q is not a level 1-8 (5-8: differential at L1-L4, with enable_dcp in -config)", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-levels: no level given")
	}
	return out, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "heat2d:", err)
		os.Exit(2)
	}
	if o.dir == "" {
		d, err := os.MkdirTemp("", "heat2d-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "heat2d:", err)
			os.Exit(1)
		}
		o.dir = d
	}
	if abs, err := filepath.Abs(o.dir); err == nil {
		o.dir = abs
	}
	if o.seed == 0 {
		o.seed = rand.Uint64()
	}
	if o.role == "job" {
		err = jobMain(o, os.Stdout)
	} else {
		err = demo(o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "heat2d:", err)
		os.Exit(1)
	}
}
