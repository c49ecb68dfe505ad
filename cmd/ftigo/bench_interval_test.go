package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ftigo/ftigo/internal/policy"
)

// BenchmarkIntervalWaste compares the waste of ckpt_interval = auto with
// fixed intervals on a simulated long run (internal/policy's simulator:
// a fake clock, failures drawn at a configured MTBF). The costs are
// measured here first: each level's checkpoint and restart of 4 ranks
// with 8 MiB each (ftigo bench's measurement, medians of 3). Two cases:
// L4 alone, with every failure at L4; and four levels, the job's
// failures split 50/30/15/5% over L1..L4. Each schedule runs the same 6
// jobs of 1,000 h of work (seeds 1..6). The goal: auto within 5% of the
// model optimum's waste and of the best fixed intervals a grid search
// found; FTI's template intervals (3, 5, 7, 11 minutes) beside them.
// FTIGO_INTERVAL_MTBF sets the job's MTBF (a Go duration, 1h if unset).
// The table goes to standard output (b.Log's is cut at ten lines).
//
//	go test -run '^$' -bench IntervalWaste -benchtime 1x ./cmd/ftigo/
func BenchmarkIntervalWaste(b *testing.B) {
	mtbf := time.Hour
	if v := os.Getenv("FTIGO_INTERVAL_MTBF"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("FTIGO_INTERVAL_MTBF=%q: want a positive Go duration", v)
		}
		mtbf = d
	}
	res, err := bench(benchConfig{ranks: 4, size: 8 << 20, levels: []int{1, 2, 3, 4}, repeats: 3, dir: b.TempDir()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var cost, recov [policy.MaxLevels + 1]float64
	for _, row := range res.Rows {
		switch row.Kind {
		case "checkpoint":
			cost[row.Level] = row.Time.Median
		case "restart":
			recov[row.Level] = row.Time.Median
		}
	}
	m := mtbf.Seconds()
	share := [policy.MaxLevels]float64{0.5, 0.3, 0.15, 0.05}
	var multi []policy.Level
	for l := 1; l <= policy.MaxLevels; l++ {
		if cost[l] <= 0 || recov[l] <= 0 {
			b.Fatalf("L%d: no checkpoint or restart measured", l)
		}
		multi = append(multi, policy.Level{ID: l, Cost: cost[l], Recovery: recov[l], Rate: share[l-1] / m})
		fmt.Printf("L%d: checkpoint %.4f s, restart %.4f s, failures every %.0f s\n", l, cost[l], recov[l], m/share[l-1])
	}
	cases := []struct {
		name   string
		levels []policy.Level
	}{
		{"L4", []policy.Level{{ID: 4, Cost: cost[4], Recovery: recov[4], Rate: 1 / m}}},
		{"L1-L4", multi},
	}
	for range b.N {
		for _, c := range cases {
			r := policy.Compare(policy.CompareConfig{Levels: c.levels, Work: 1000 * 3600, Seeds: 6, Nodes: 4, Downtime: 5})
			for _, row := range r.Rows() {
				b.ReportMetric(100*row.Waste, "waste%-"+c.name+"-"+strings.ReplaceAll(strings.ReplaceAll(row.Name, ",", ""), " ", "-"))
				fmt.Printf("%s, MTBF %v: %-16s waste %.4f%%  (%s)\n", c.name, mtbf, row.Name, 100*row.Waste, row.Schedule)
			}
			vsOpt, vsGrid := r.AutoMTBF.Waste/r.Optimum.Waste, r.AutoMTBF.Waste/r.Grid.Waste
			verdict := "PASS"
			if vsOpt > 1.05 || vsGrid > 1.05 {
				verdict = "FAIL"
				b.Errorf("%s: auto (mtbf keys) is %.3fx the optimum's waste and %.3fx the grid's, want <= 1.05", c.name, vsOpt, vsGrid)
			}
			fmt.Printf("%s: goal auto within 5%%: %.3fx the model optimum, %.3fx the best of %d fixed intervals (learning the rates: %.3fx, %.3fx); FTI's template %.2fx: %s\n",
				c.name, vsOpt, vsGrid, r.GridSize, r.Auto.Waste/r.Optimum.Waste, r.Auto.Waste/r.Grid.Waste, r.FTI.Waste/r.AutoMTBF.Waste, verdict)
		}
	}
}
