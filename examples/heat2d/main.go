// Command heat2d is ftigo's showcase: a 2-D heat-diffusion solver whose
// ranks checkpoint through ftigo, get killed, restart and finish with a
// field bit-identical to an uninterrupted run.
//
// With no flags it runs the whole demonstration in-process and prints a
// report; see README.md and -help for the flags.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ftigo/ftigo/comm"
)

// options are the command-line settings of a run.
type options struct {
	ranks, nodes int
	nx, ny       int
	iters        int
	alpha        float64
	frameEvery   int
	dir          string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("heat2d", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.ranks, "ranks", 4, "number of ranks (goroutines in-process)")
	fs.IntVar(&o.nodes, "nodes", 4, "number of simulated nodes the ranks are spread over")
	fs.IntVar(&o.nx, "nx", 128, "grid columns")
	fs.IntVar(&o.ny, "ny", 128, "grid rows")
	fs.IntVar(&o.iters, "iters", 4000, "solver iterations")
	fs.Float64Var(&o.alpha, "alpha", 0.24, "diffusion number of the explicit scheme (stable up to 0.25)")
	fs.IntVar(&o.frameEvery, "frame-every", 200, "write a trajectory frame every K iterations")
	fs.StringVar(&o.dir, "dir", "", "output directory (default: a fresh temporary directory)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case o.ranks < 1:
		return nil, fmt.Errorf("-ranks must be at least 1")
	case o.nodes < 1 || o.ranks%o.nodes != 0:
		return nil, fmt.Errorf("-ranks (%d) must be a multiple of -nodes (%d)", o.ranks, o.nodes)
	case o.alpha <= 0 || o.alpha > 0.25:
		return nil, fmt.Errorf("-alpha %v is outside (0, 0.25]: the explicit scheme would be unstable", o.alpha)
	case o.iters < 0:
		return nil, fmt.Errorf("-iters must not be negative")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "heat2d:", err)
		os.Exit(2)
	}
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "heat2d:", err)
		os.Exit(1)
	}
}

// run solves the problem uninterrupted and writes the image.
func run(o *options, out io.Writer) error {
	if o.dir == "" {
		d, err := os.MkdirTemp("", "heat2d-")
		if err != nil {
			return err
		}
		o.dir = d
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	start := time.Now()
	field, err := solveInProcess(o)
	if err != nil {
		return err
	}
	pngBytes, err := RenderPNG(field, o.nx, o.ny, BottomTemp, TopTemp)
	if err != nil {
		return err
	}
	pngPath := filepath.Join(o.dir, "heat2d.png")
	if err := os.WriteFile(pngPath, pngBytes, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "heat2d: %d×%d grid, %d iterations on %d ranks in %v\n", o.nx, o.ny, o.iters, o.ranks, time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(out, "image:  %s\n", pngPath)
	return nil
}

// solveInProcess runs the solver on o.ranks goroutine ranks with no
// checkpoints and returns the final field.
func solveInProcess(o *options) ([]float64, error) {
	var mu sync.Mutex
	var field []float64
	err := comm.Run(o.ranks, func(c comm.Comm) error {
		b, err := NewBlock(o.nx, o.ny, c.Rank(), c.Size())
		if err != nil {
			return err
		}
		for it := 0; it < o.iters; it++ {
			if err := b.Exchange(c); err != nil {
				return err
			}
			b.Step(o.alpha)
		}
		f, err := GatherField(c, b)
		if f != nil {
			mu.Lock()
			field = f
			mu.Unlock()
		}
		return err
	})
	return field, err
}
