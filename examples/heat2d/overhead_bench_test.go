package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkSolverOverhead measures issue 15's goal 2: the solver's time
// with a checkpoint every few seconds, against the same run with none.
// Each iteration runs heat2d's job three times in turn, in process (4
// ranks on 4 simulated nodes, a 2048 x 2048 grid: 8 MiB per rank, 4000
// iterations, about 20 s on this machine's cores): without checkpoints,
// with a checkpoint every 600 iterations at L2, L3, L4 in turn
// post-processed in the background (-async), and the same inline. It
// reports async/none and inline/none (goal for async: at most 1.05).
// Run it with a fixed count on a quiet machine:
//
//	go test -run '^$' -bench SolverOverhead -benchtime 3x ./examples/heat2d
func BenchmarkSolverOverhead(b *testing.B) {
	base := []string{"-role=job", "-keep-last=false", "-ranks", "4", "-nodes", "4",
		"-nx", "2048", "-ny", "2048", "-iters", "4000", "-frame-every", "0"}
	modes := []struct {
		name  string
		extra []string
	}{
		{"none", []string{"-ckpt-every", "0", "-levels", "1"}},
		{"async", []string{"-ckpt-every", "600", "-levels", "2,3,4", "-async"}},
		{"inline", []string{"-ckpt-every", "600", "-levels", "2,3,4"}},
	}
	total := map[string]time.Duration{}
	var ckptBytes int64
	for i := 0; i < b.N; i++ {
		for _, m := range modes {
			args := append(append(append([]string{}, base...), m.extra...), "-dir", filepath.Join(b.TempDir(), m.name))
			o, err := parseFlags(args, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			var out bytes.Buffer
			start := time.Now()
			if err := runJobMain(o, &out, io.Discard); err != nil {
				b.Fatalf("%s: %v\n%s", m.name, err, out.String())
			}
			total[m.name] += time.Since(start)
			if !strings.Contains(out.String(), "EVENT done iter=4000") {
				b.Fatalf("%s: the job did not finish:\n%s", m.name, out.String())
			}
			if m.name == "async" && i == 0 {
				ckptBytes = int64(strings.Count(out.String(), "EVENT ckpt-end")) * 2048 * 2048 * 8
			}
		}
	}
	b.SetBytes(ckptBytes)
	none := total["none"].Seconds()
	b.ReportMetric(total["async"].Seconds()/none, "async/none")
	b.ReportMetric(total["inline"].Seconds()/none, "inline/none")
	b.ReportMetric(none/float64(b.N), "s/run-none")
	b.Logf("per run: none %.2f s, async %.2f s, inline %.2f s", none/float64(b.N),
		total["async"].Seconds()/float64(b.N), total["inline"].Seconds()/float64(b.N))
}
