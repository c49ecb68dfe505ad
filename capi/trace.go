package main

import (
	"fmt"
	"github.com/ftigo/ftigo/vfd"
	"io"
	"os"
	"runtime/pprof"
	"syscall"
	"time"
)

// Two environment variables let a benchmark see inside libftigo.
// FTIGO_TRACE=1 makes every FTI_Checkpoint print one line to stderr: the
// rank, id, level and time taken, and what comm/mpi's funnel did meanwhile
// (operations, rounds, waits in C, sleeps and time slept), and the
// process's CPU time (user and system) meanwhile. FTIGO_CPUPROFILE=P
// writes a CPU profile of each rank from FTI_Init to FTI_Finalize to
// P.RANK (go tool pprof reads it).

// tracer is the state of those two.
type tracer struct {
	on      bool
	profile vfd.File
	// funnel, when set, reports the funnel's counters (capi_mpi.go).
	funnel func() [5]int64
}

// start reads the environment at FTI_Init.
func (t *tracer) start(rank int) error {
	t.on = os.Getenv("FTIGO_TRACE") != ""
	p := os.Getenv("FTIGO_CPUPROFILE")
	if p == "" {
		return nil
	}
	f, err := vfd.Sec2{}.Open(fmt.Sprintf("%s.%d", p, rank), vfd.ReadWrite|vfd.OCreate|vfd.OTrunc)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(io.NewOffsetWriter(f, 0)); err != nil {
		f.Close()
		return err
	}
	t.profile = f
	return nil
}

// stop ends the profile at FTI_Finalize.
func (t *tracer) stop() {
	if t.profile != nil {
		pprof.StopCPUProfile()
		t.profile.Close()
		t.profile = nil
	}
}

// around times call and prints its trace line when tracing.
func (t *tracer) around(rank, id, level int, call func() int) int {
	if !t.on {
		return call()
	}
	var before, after [5]int64
	if t.funnel != nil {
		before = t.funnel()
	}
	start, cpu := time.Now(), cpuTime()
	rc := call()
	d, cpu := time.Since(start), cpuTime()-cpu
	if t.funnel != nil {
		after = t.funnel()
	}
	fmt.Fprintf(os.Stderr, "ftigo-trace rank=%d id=%d level=%d sec=%.6f cpu=%.6f ops=%d rounds=%d yields=%d sleeps=%d slept=%.6f\n",
		rank, id, level, d.Seconds(), cpu.Seconds(), after[0]-before[0], after[1]-before[1], after[2]-before[2], after[3]-before[3],
		float64(after[4]-before[4])/1e9)
	return rc
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
