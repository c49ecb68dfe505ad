//go:build mpi

// gobench is heatdis.c in Go: the same solver, the same protected data
// (an int32 iteration counter and the float64 grid with its halo rows)
// and the same checkpoints, taken through ckpt directly. The capi
// benchmark compares its checkpoint times with the C program's, which go
// through libftigo.
//
//	gobench CONFIG OUTDIR NX ROWS ITERS CKPT_EVERY LEVELS
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm/mpi"
	"github.com/ftigo/ftigo/vfd"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gobench:", err)
		os.Exit(1)
	}
}

func bytesOf(x []float64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 8*len(x))
}

func run(args []string) error {
	if len(args) != 7 {
		return fmt.Errorf("usage: gobench CONFIG OUTDIR NX ROWS ITERS CKPT_EVERY LEVELS")
	}
	var n [4]int
	for i := range n {
		v, err := strconv.Atoi(args[2+i])
		if err != nil {
			return err
		}
		n[i] = v
	}
	nx, rows, iters, every, levels := n[0], n[1], n[2], n[3], args[6]
	var pause time.Duration // HEATDIS_PAUSE_MS, as heatdis.c
	if v := os.Getenv("HEATDIS_PAUSE_MS"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("HEATDIS_PAUSE_MS: %w", err)
		}
		pause = time.Duration(ms) * time.Millisecond
	}
	trace := os.Getenv("FTIGO_TRACE") != "" // as libftigo's
	world, err := mpi.Init()
	if err != nil {
		return err
	}
	fail := func(err error) error { world.Abort(1); return err }
	cfg, err := ckpt.LoadConfig(vfd.Sec2{}, args[0])
	if err != nil {
		return fail(err)
	}
	// The same one-line-per-checkpoint log on rank 0 as libftigo prints.
	log := zap.NewNop()
	if world.Rank() == 0 {
		enc := zapcore.NewConsoleEncoder(zapcore.EncoderConfig{MessageKey: "msg"})
		log = zap.New(zapcore.NewCore(enc, zapcore.Lock(os.Stdout), zapcore.InfoLevel))
	}
	rt, err := ckpt.Init(cfg, world, ckpt.WithLogger(log))
	if err != nil {
		return fail(err)
	}
	rank, size := world.Rank(), world.Size()
	h := make([]float64, (rows+2)*nx)
	g := make([]float64, (rows+2)*nx)
	iter := make([]int32, 1)
	if rank == 0 {
		for x := 0; x < nx; x++ {
			h[nx+x] = 100
		}
	}
	if err := ckpt.Protect(rt, 0, &iter); err != nil {
		return fail(err)
	}
	if err := ckpt.Protect(rt, 1, &h); err != nil {
		return fail(err)
	}
	restart := int32(-1)
	if rt.Status() != ckpt.Fresh {
		if err := rt.Recover(); err != nil {
			return fail(err)
		}
		restart = iter[0]
	}
	fmt.Printf("EVENT rank=%d start status=%d iter=%d\n", rank, rt.Status(), iter[0])
	up, down := rank-1, rank+1
	for i := &iter[0]; int(*i) < iters; *i++ {
		if every > 0 && *i > 0 && int(*i)%every == 0 && *i != restart && levels != "0" {
			id := int(*i) / every
			level := int(levels[(id-1)%len(levels)] - '0')
			fmt.Printf("EVENT rank=%d ckpt-begin id=%d level=%d iter=%d\n", rank, id, level, *i)
			time.Sleep(pause)
			if err := world.Barrier(); err != nil { // as heatdis.c: time the checkpoint only
				return fail(err)
			}
			start, cpu := time.Now(), cpuTime()
			if err := rt.Checkpoint(int64(id), level); err != nil {
				return fail(err)
			}
			sec := time.Since(start).Seconds()
			if trace {
				// As libftigo's FTIGO_TRACE line (capi/trace.go).
				fmt.Fprintf(os.Stderr, "ftigo-trace rank=%d id=%d level=%d sec=%.6f cpu=%.6f\n", rank, id, level, sec, (cpuTime() - cpu).Seconds())
			}
			fmt.Printf("EVENT rank=%d ckpt-end id=%d level=%d rc=1 sec=%.6f\n", rank, id, level, sec)
		}
		first, last := bytesOf(h[nx:2*nx]), bytesOf(h[rows*nx:(rows+1)*nx])
		haloUp, haloDown := bytesOf(h[:nx]), bytesOf(h[(rows+1)*nx:])
		if err := exchange(world, first, up, haloDown, down, 1, size); err != nil {
			return fail(err)
		}
		if err := exchange(world, last, down, haloUp, up, 2, size); err != nil {
			return fail(err)
		}
		for r := 1; r <= rows; r++ {
			grow := rank*rows + r - 1
			for x := 0; x < nx; x++ {
				k := r*nx + x
				switch {
				case grow == 0:
					g[k] = 100
				case grow == size*rows-1 || x == 0 || x == nx-1:
					g[k] = 0
				default:
					g[k] = 0.25 * (h[k-nx] + h[k+nx] + h[k-1] + h[k+1])
				}
			}
		}
		copy(h[nx:(rows+1)*nx], g[nx:(rows+1)*nx])
	}
	out := filepath.Join(args[1], fmt.Sprintf("final-%04d.bin", rank))
	if err := vfd.WriteFileAtomic(vfd.Sec2{}, out, bytesOf(h[nx:(rows+1)*nx])); err != nil {
		return fail(err)
	}
	fmt.Printf("EVENT rank=%d done iter=%d\n", rank, iter[0])
	if err := rt.Finalize(); err != nil {
		return fail(err)
	}
	return world.Finalize()
}

// exchange sends send to dst and receives recv from src (MPI_PROC_NULL
// when out of range), as heatdis.c's MPI_Sendrecv.
func exchange(c *mpi.Comm, send []byte, dst int, recv []byte, src, tag, size int) error {
	switch okDst, okSrc := dst >= 0 && dst < size, src >= 0 && src < size; {
	case okDst && okSrc:
		_, err := c.Sendrecv(send, dst, tag, recv, src, tag)
		return err
	case okDst:
		return c.Send(dst, tag, send)
	case okSrc:
		_, err := c.Recv(src, tag, recv)
		return err
	}
	return nil
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
