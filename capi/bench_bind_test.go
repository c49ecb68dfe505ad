package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bindLangs are the programs BenchmarkCheckpointBindings compares: the
// same heat solver and checkpoints in Go on ckpt (the reference), and in
// C, Fortran and Python through libftigo.
var bindLangs = []string{"go", "c", "fortran", "python"}

// BenchmarkCheckpointBindings measures one checkpoint taken from each
// language against the same checkpoint taken from Go. The four heat
// solvers (testdata/gobench, heatdis.c, fheat.f90, python/tests/heat.py)
// protect the same data, 64 MiB of grid per rank at 4 ranks under Open
// MPI (Debian's mpi4py is built for it), and checkpoint it at L1, L2, L3
// and L4, twice each per run. Each checkpoint follows a 250 ms pause and
// a barrier. It is timed on every rank and the slowest rank's time
// counts. Every language is called as its users call it: Go, and Python
// through mpi4py, at MPI_THREAD_MULTIPLE; C and Fortran after plain
// MPI_Init, so libftigo's MPI calls go through comm/mpi's funnel.
//
// One iteration runs each program once. The order rotates every
// iteration, so each language runs in each position equally often. The
// reported LANG/go is the ratio of LANG's per-level medians, summed over
// the levels, to Go's (1.00: the binding adds nothing), LANG/go-Ln the
// ratio at level n, and ms/ckpt-LANG the mean of LANG's per-level
// medians. The log shows every median and the machine's load average
// before and after.
//
// Run it with a fixed count on a machine as quiet as can be had, under
// nice when the machine is shared, e.g.
//
//	nice go test ./capi -run '^$' -bench CheckpointBindings -benchtime 8x -timeout 2h
//
// FTIGO_BENCH_MIB sets the grid per rank (default 64) for a quick try.
// FTIGO_BENCH_DIR puts the runs' directories there (say /dev/shm: with
// the disk out of the way, what differs is the binding's own cost).
func BenchmarkCheckpointBindings(b *testing.B) {
	f := flavours[0]
	needTools(b, f, false)
	needFortran(b, f)
	needPython(b, true)
	const np = 4
	mib := 64
	if v := os.Getenv("FTIGO_BENCH_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err, "FTIGO_BENCH_MIB")
		mib = n
	}
	nx := 1024
	rows := mib<<20/(8*nx) - 2 // with the two halo rows: mib MiB of float64
	const iters, every, levels = 9, 1, "1234"
	progs := map[string]string{
		"go":      goBench(b, f),
		"c":       program(b, f, "heatdis.c"),
		"fortran": fprogram(b, f, "fheat.f90"),
		"python":  pythonHeat(b),
	}
	b.Setenv("HEATDIS_PAUSE_MS", "250")
	f.runArgs = append(slices.Clone(f.runArgs), "-x", "HEATDIS_PAUSE_MS", "-x", "PYTHONPATH")
	times := map[string]map[int][]float64{}
	for _, l := range bindLangs {
		times[l] = map[int][]float64{}
	}
	loadBefore := loadAvg()
	root := b.TempDir()
	if v := os.Getenv("FTIGO_BENCH_DIR"); v != "" {
		var err error
		root, err = os.MkdirTemp(v, "bindings")
		require.NoError(b, err, "FTIGO_BENCH_DIR")
		b.Cleanup(func() { _ = os.RemoveAll(root) })
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % len(bindLangs)
		for _, lang := range append(slices.Clone(bindLangs[k:]), bindLangs[:k]...) {
			benchRun(b, f, np, progs[lang], filepath.Join(root, lang), times[lang], nx, rows, iters, every, levels)
		}
	}
	b.StopTimer()
	sums := map[string]float64{}
	var lines []string
	for _, lang := range bindLangs {
		var parts []string
		for l := 1; l <= 4; l++ {
			m := median(times[lang][l])
			sums[lang] += m
			parts = append(parts, fmt.Sprintf("L%d %.1f", l, m*1e3))
			if lang != "go" {
				b.ReportMetric(m/median(times["go"][l]), lang+"/go-L"+strconv.Itoa(l))
			}
		}
		b.ReportMetric(sums[lang]*1e3/4, "ms/ckpt-"+lang)
		lines = append(lines, fmt.Sprintf("%-7s %s ms", lang, strings.Join(parts, ", ")))
	}
	for _, lang := range bindLangs[1:] {
		b.ReportMetric(sums[lang]/sums["go"], lang+"/go")
	}
	b.Logf("Open MPI, %d ranks, %d MiB per rank, %d runs of each, %d checkpoints per level per language; medians of the slowest rank's time:\n%s\nload average before: %s; after: %s",
		np, (rows+2)*nx*8>>20, b.N, 2*b.N, strings.Join(lines, "\n"), loadBefore, loadAvg())
}

// pythonHeat installs the Python package for Open MPI, sets PYTHONPATH
// to it and returns a launcher script for python/tests/heat.py.
func pythonHeat(b *testing.B) string {
	dir := pyInstall(b, "openmpi")
	b.Setenv("PYTHONPATH", dir)
	heatPy, err := filepath.Abs("../python/tests/heat.py")
	require.NoError(b, err)
	script := filepath.Join(b.TempDir(), "pyheat")
	require.NoError(b, os.WriteFile(script, []byte("#!/bin/sh\nexec "+python+" "+heatPy+" \"$@\"\n"), 0o755))
	return script
}

// loadAvg is the machine's 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
