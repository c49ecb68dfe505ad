package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goBench builds testdata/gobench (heatdis.c in Go, on ckpt directly)
// for f.
func goBench(tb testing.TB, f flavour) string {
	return cached(tb, f.name+"/gobench", func() (string, error) {
		out := filepath.Join(buildDir, f.name, "gobench")
		return out, run(goTool(), "build", "-tags", f.tags, "-o", out, "./testdata/gobench")
	})
}

var ckptEnd = regexp.MustCompile(`(?m)^EVENT rank=\d+ ckpt-end id=(\d+) level=(\d) rc=1 sec=([0-9.]+)$`)

// ckptTimes returns, per level, the time of each checkpoint: the slowest
// rank's, since a checkpoint ends for everyone when it is committed.
func ckptTimes(tb testing.TB, out string, levels int) map[int][]float64 {
	tb.Helper()
	slowest := map[int]float64{}
	level := map[int]int{}
	for _, m := range ckptEnd.FindAllStringSubmatch(out, -1) {
		id, _ := strconv.Atoi(m[1])
		l, _ := strconv.Atoi(m[2])
		sec, _ := strconv.ParseFloat(m[3], 64)
		slowest[id] = max(slowest[id], sec)
		level[id] = l
	}
	if len(slowest) != levels {
		tb.Fatalf("%d checkpoints in the output, want %d:\n%s", len(slowest), levels, out)
	}
	times := map[int][]float64{}
	for id, sec := range slowest {
		times[level[id]] = append(times[level[id]], sec)
	}
	return times
}

// benchRun runs a heat solver prog once on np ranks in a fresh run
// directory dir and appends its checkpoint times to times, per level.
func benchRun(b *testing.B, f flavour, np int, prog, dir string, times map[int][]float64, nx, rows, iters, every int, levels string) {
	b.Helper()
	require.NoError(b, os.RemoveAll(dir))
	cfg := writeConfig(b, dir, np, "")
	outDir := filepath.Join(dir, "out")
	require.NoError(b, os.MkdirAll(outDir, 0o755))
	out, err := mpirun(b, f, np, prog, cfg, outDir, strconv.Itoa(nx), strconv.Itoa(rows),
		strconv.Itoa(iters), strconv.Itoa(every), levels)
	require.NoError(b, err, "%s: %s", filepath.Base(prog), out)
	for l, ts := range ckptTimes(b, out, (iters-1)/every) {
		times[l] = append(times[l], ts...)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkCheckpointCvsGo measures the C heat solver's checkpoints
// through libftigo against the same checkpoints of the same data taken by
// the same solver written in Go on ckpt (testdata/gobench): 8 MiB of grid
// per rank at 4 ranks (Open MPI), 16 MiB at 2 (MPICH), two checkpoints
// per level L1-L4 per run, each after a 250 ms pause and a barrier. The two programs run alternately, C first in
// even iterations and Go first in odd ones; the reported c/go is the
// ratio of the per-level medians summed over the levels (1.00 = the C
// API adds nothing), c/go-Ln the ratio at level n, and c/go-fastest the
// same ratio over each level's fastest checkpoint (what is left when
// other load on the machine does not intervene). Run it with a fixed
// count, e.g. -bench CheckpointCvsGo -benchtime 10x, on a quiet machine:
// both programs share the cores with MPI's polling, so other load moves
// single checkpoints by a factor of several.
func BenchmarkCheckpointCvsGo(b *testing.B) {
	for _, f := range flavours {
		b.Run(f.name, func(b *testing.B) {
			needTools(b, f, false)
			np := f.np
			nx, rows := 1024, 4096/np
			// Little compute between checkpoints: more alternations per
			// minute, so the medians hold against a busy machine.
			const iters, every, levels = 45, 5, "1234"
			progs := map[string]string{"c": program(b, f, "heatdis.c"), "go": goBench(b, f)}
			// The same idle time before every checkpoint in both programs,
			// whatever their compute speed: the previous checkpoint's
			// writeback does not land on the next one.
			b.Setenv("HEATDIS_PAUSE_MS", "250")
			if f.name == "openmpi" {
				f.runArgs = append(slices.Clone(f.runArgs), "-x", "HEATDIS_PAUSE_MS")
			}
			times := map[string]map[int][]float64{"c": {}, "go": {}}
			root := b.TempDir()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				order := []string{"c", "go"}
				if i%2 == 1 {
					order = []string{"go", "c"}
				}
				for _, lang := range order {
					benchRun(b, f, np, progs[lang], filepath.Join(root, lang), times[lang], nx, rows, iters, every, levels)
				}
			}
			b.StopTimer()
			var sumC, sumGo, minC, minGo float64
			var parts []string
			for l := 1; l <= 4; l++ {
				c, g := median(times["c"][l]), median(times["go"][l])
				fc, fg := slices.Min(times["c"][l]), slices.Min(times["go"][l])
				sumC, sumGo, minC, minGo = sumC+c, sumGo+g, minC+fc, minGo+fg
				b.ReportMetric(c/g, "c/go-L"+strconv.Itoa(l))
				parts = append(parts, fmt.Sprintf("L%d %.1f/%.1f ms (fastest %.1f/%.1f)", l, c*1e3, g*1e3, fc*1e3, fg*1e3))
			}
			b.ReportMetric(sumC/sumGo, "c/go")
			b.ReportMetric(minC/minGo, "c/go-fastest")
			b.ReportMetric(sumC*1e3/4, "ms/ckpt-c")
			b.ReportMetric(sumGo*1e3/4, "ms/ckpt-go")
			b.Logf("%s, %d ranks, %d MiB per rank, %d runs of each: C/Go per level, medians (fastest): %s",
				f.name, np, (rows+2)*nx*8>>20, b.N, strings.Join(parts, ", "))
		})
	}
}
