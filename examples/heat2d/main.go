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
// its last checkpoint at L4 when it finishes (keep_last_ckpt = 1;
// -keep-last=false leaves that to the configuration), and the report ends
// with the ftigo inspect and verify command lines that show it. The run
// directory is marked as the demonstration's: a later demonstration in it
// empties it first; another non-empty directory is refused.
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
	heads                        bool
	keepLast                     bool
	globalLatency                time.Duration
	ioLatency                    time.Duration
	role                         string
	seed                         uint64
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
	fs.StringVar(&o.levelsFlag, "levels", "auto", `checkpoint levels taken in turn, e.g. "1,2,3,4"; auto: every available level`)
	fs.StringVar(&o.config, "config", "", "FTI-style config.fti file (default: node_size = ranks/nodes, one group, dirs under -dir)")
	fs.StringVar(&o.dir, "dir", "", "run directory (default: a fresh temporary directory)")
	fs.StringVar(&o.kill, "kill", "auto", "when to SIGKILL the job: auto (during the first checkpoint at the highest level), ckpt:N (during checkpoint N), after:N (after checkpoint N), random, none")
	fs.IntVar(&o.loseNode, "lose-node", -2, "simulated node whose local storage is deleted after the kill (-1: none; default: node 2 when L2 or L3 is used)")
	fs.BoolVar(&o.noKill, "no-kill", false, "run the job once without killing it")
	fs.BoolVar(&o.async, "async", false, "post-process L2-L4 checkpoints in the background (inline_l2/l3/l4 = 0): each commits at L1, then at its level")
	fs.BoolVar(&o.heads, "heads", false, "one head per simulated node (head = 1, inline_l2/l3/l4 = 0): node-local rank 0 post-processes the node's L2-L4 checkpoints; -ranks counts the heads too (default: 2 per node, a head and an application rank) and the solver runs on the others")
	fs.BoolVar(&o.keepLast, "keep-last", true, "keep the last checkpoint at L4 when the job finishes (keep_last_ckpt = 1), for ftigo inspect/verify; false: as the configuration says (FTI's default deletes them all)")
	fs.DurationVar(&o.globalLatency, "global-latency", 0, "added latency per write to global storage (a slow parallel file system); the demonstration sets it so the L4 kill lands mid-write")
	fs.DurationVar(&o.ioLatency, "io-latency", 0, "added latency per write and sync on every storage area (slow disks; widens the window a kill lands in)")
	fs.StringVar(&o.role, "role", "", "internal: job runs one launch of the solver")
	fs.Uint64Var(&o.seed, "seed", 0, "seed for -kill random (0: from the clock)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	ranksSet := false
	fs.Visit(func(f *flag.Flag) { ranksSet = ranksSet || f.Name == "ranks" })
	if o.heads && !ranksSet {
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
	case o.heads && o.ranks/o.nodes < 2:
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
	case o.heads && o.relaunchRanks/o.relaunchNodes < 2:
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
	if o.heads {
		return ranks - nodes
	}
	return ranks
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
		if err != nil || n < 1 || n > 4 {
			return nil, fmt.Errorf("-levels: %q is not a level 1-4", f)
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
