package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

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
	cfg, err := jobConfig(o)
	if err != nil {
		return err
	}
	early := catchEarly(cfg.Policy.StopSignals)
	defer early.stop()
	err = runWorld(o.ranks, func(c comm.Comm) error {
		res, err := runJob(c, o, ev, early, logger) // the runtime adds the rank fields
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
	if final == nil || final.Stopped {
		return nil // not the solver's rank 0 of an MPI job, or stopped early
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

// stopSignalNames are the signals the configuration's stop_signals may
// name (the runtime's list); nil names means SIGTERM and SIGUSR1.
var stopSignalNames = map[string]syscall.Signal{
	"SIGTERM": syscall.SIGTERM, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2,
	"SIGINT": syscall.SIGINT, "SIGHUP": syscall.SIGHUP, "SIGXCPU": syscall.SIGXCPU,
}

// earlySignals holds the stop signals that arrive before the runtime
// catches them (the end of ckpt.Init), so that a job stopped while it
// starts is not killed: release hands them to the runtime.
type earlySignals struct {
	ch   chan os.Signal
	once sync.Once
	err  error
}

// catchEarly starts holding the stop signals names says (nil: SIGTERM
// and SIGUSR1, as the runtime).
func catchEarly(names []string) *earlySignals {
	if names == nil {
		names = []string{"SIGTERM", "SIGUSR1"}
	}
	var sigs []os.Signal
	for _, n := range names {
		if s, ok := stopSignalNames[n]; ok {
			sigs = append(sigs, s)
		}
	}
	e := &earlySignals{ch: make(chan os.Signal, len(sigs)+1)}
	if len(sigs) > 0 {
		signal.Notify(e.ch, sigs...)
	}
	return e
}

// release is called by every solver rank once its Init returned: after
// a barrier (every rank of this process catches the signals), the
// first rank here stops holding them and raises again, to this
// process, each one held. Collective.
//
// A signal landing between Init's catch and the release reaches both:
// the runtime then sees it twice before its first check, which it
// counts once.
func (e *earlySignals) release(c comm.Comm) error {
	if err := c.Barrier(); err != nil {
		return err
	}
	e.once.Do(func() {
		signal.Stop(e.ch)
		for {
			select {
			case s := <-e.ch:
				if ss, ok := s.(syscall.Signal); ok {
					e.err = errors.Join(e.err, syscall.Kill(os.Getpid(), ss))
				}
			default:
				return
			}
		}
	})
	return e.err
}

// stop stops holding the signals (release not called: Init failed).
func (e *earlySignals) stop() { signal.Stop(e.ch) }

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
