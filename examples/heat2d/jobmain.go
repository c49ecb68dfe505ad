package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// jobMain runs one launch of the job in this process: every rank of the
// world (goroutines by default, MPI processes under the mpi build tag)
// runs runJob; rank 0 then writes the final field and the image.
//
// A failure is written to the job log. Under MPI the failing rank also
// prints it on standard error ("heat2d: rank R: ...") before the job is
// aborted, since MPI_Abort never returns to let the caller print it.
func jobMain(o *options, out io.Writer) error {
	return runJobMain(o, out, os.Stderr)
}

func runJobMain(o *options, out, stderr io.Writer) error {
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	logger, err := jobLogger(o.dir)
	if err != nil {
		return err
	}
	defer logger.Sync()
	ev := &events{w: out}
	var mu sync.Mutex
	var final *jobResult
	failed := func(rank int, err error) {
		fmt.Fprintf(stderr, "heat2d: rank %d: %v\n", rank, err)
		logger.Error("job failed", zap.Int("rank", rank), zap.Error(err))
		_ = logger.Sync()
	}
	err = runWorld(o.ranks, func(c comm.Comm) error {
		res, err := runJob(c, o, ev, logger) // the runtime adds the rank fields
		if err != nil {
			return err
		}
		if res != nil && res.Root {
			mu.Lock()
			final = res
			mu.Unlock()
		}
		return nil
	}, failed)
	if err != nil {
		if !underMPI {
			logger.Error("job failed", zap.Error(err))
		}
		return err
	}
	if final == nil {
		return nil // not the solver's rank 0 of an MPI job
	}
	if err := vfd.WriteFileAtomic(vfd.Sec2{}, filepath.Join(o.dir, "final.f64"), fieldBytes(final.Field)); err != nil {
		return err
	}
	img, err := RenderPNG(final.Field, o.nx, o.ny, BottomTemp, TopTemp)
	if err != nil {
		return err
	}
	return vfd.WriteFileAtomic(vfd.Sec2{}, filepath.Join(o.dir, "heat2d.png"), img)
}

// jobLogger logs the runtime's lines as JSON to DIR/job.log.
func jobLogger(dir string) (*zap.Logger, error) {
	cfg := zap.NewProductionConfig()
	cfg.OutputPaths = []string{filepath.Join(dir, "job.log")}
	cfg.ErrorOutputPaths = []string{"stderr"}
	cfg.Sampling = nil
	l, err := cfg.Build()
	if err != nil {
		return nil, fmt.Errorf("job log: %w", err)
	}
	return l, nil
}
