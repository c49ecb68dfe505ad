package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/policy"
)

// statsHistory is a run of two launches. The first takes L1, L1, L1, L4
// (100 s of work apart) and dies 1,000 s after its start. The second
// restarts from that L4 after 5 s, takes L4 then twice L1, L1, L1, L4
// (its L1s differential, a quarter written), and closes at 1,000 s.
func statsHistory(t *testing.T, meta string) {
	t.Helper()
	const s = int64(time.Second)
	t0 := int64(1_700_000_000) * s
	h := &policy.History{Run: "r1"}
	h.AddLaunch(policy.Launch{Start: t0, Seen: t0 + 1000*s, Ranks: 4, Nodes: 2})
	add := func(at int64, levels []int, dcp bool) {
		for i, l := range levels {
			c := policy.Checkpoint{Seq: uint64(len(h.Checkpoints) + 1), ID: int64(i), Level: l, Time: at, Blocked: 2 * s, Total: 2 * s, Bytes: 1000}
			if l == 4 {
				c.Blocked, c.Total, c.Bytes = 10*s, 15*s, 5000
			} else if dcp {
				c.DCP, c.Written, c.Protected = true, 250, 1000
			}
			h.AddCheckpoint(c)
			at += c.Blocked + 100*s
		}
	}
	add(t0+100*s, []int{1, 1, 1, 4}, false)
	h.AddLaunch(policy.Launch{Start: t0 + 1100*s, Seen: t0 + 2100*s, End: t0 + 2100*s, Ending: policy.EndClose, Ranks: 4, Nodes: 2,
		Restart: &policy.Restart{Level: 4, ID: 3, Seq: 4, Written: t0 + 406*s, Recover: 5 * s}, Failure: 1, LostWork: 594 * s})
	add(t0+1200*s, []int{4, 1, 1, 1, 4, 1, 1, 1, 4}, true)
	raw, err := h.Marshal()
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(meta, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(meta, policy.HistoryName), raw, 0o644))
}

func TestStats(t *testing.T) {
	dir := t.TempDir()
	statsHistory(t, filepath.Join(dir, "meta"))
	code, out, errOut := ftigo("stats", dir, "--json")
	require.Equal(t, 0, code, errOut)
	var r statsResult
	require.NoError(t, json.Unmarshal([]byte(out), &r))

	assert.Equal(t, "r1", r.Run)
	assert.Equal(t, int64(2), r.Launches)
	assert.Equal(t, [4]int64{1, 0, 0, 0}, r.Failures)
	assert.Equal(t, []statsLevel{
		{Level: 1, Checkpoints: 9, Blocked: 18, Total: 18, Bytes: 9000, DCPShare: 0.25},
		{Level: 4, Checkpoints: 4, Blocked: 40, Total: 60, Bytes: 20000, Restarts: 1, Recover: 5, LostWork: 594},
	}, r.Levels)
	assert.Equal(t, 2000.0, r.Wall)
	assert.Equal(t, 58.0, r.Blocked)
	assert.Equal(t, 5.0, r.Recover)
	assert.Equal(t, 594.0, r.LostWork)
	assert.InDelta(t, (2000.0-58-5-594)/2000, r.ETTR, 1e-12)

	// The estimates: C1 = 2 s, C4 = 10 s, R1 = 2 s (no restart: its
	// cost), R4 = 5 s (the restart's), one L1 failure in 2,000 s. L4
	// has seen none and has no mtbf key: its rate is one pseudo-failure
	// over the exposure plus DefaultJobMTBF.
	r1, r4, c1, c4, rec1, rec4 := 1/2000.0, 1/(2000+policy.DefaultJobMTBF), 2.0, 10.0, 2.0, 5.0
	// The overhead of L1 every w/n and L4 every w seconds of work: per
	// pattern n C1-sized checkpoints and one L4 band (C4 - C1); a failure
	// loses half its level's period and restarts in its recovery.
	h := func(w float64, n int) float64 {
		return (float64(n)*c1+(c4-c1))/w + r1*(w/(2*float64(n))+rec1) + r4*(w/2+rec4)
	}
	// The newest launch kept L1 every 100 s and L4 every 400 s of work.
	curH := h(400, 4)
	require.NotNil(t, r.Current)
	assert.Equal(t, []int{1, 4}, r.Current.Levels)
	assert.InDeltaSlice(t, []float64{100, 400}, r.Current.Periods, 1e-9)
	assert.InDelta(t, curH/(1+curH), r.Current.Waste, 1e-12)
	// The optimum: the best n, each with its best w (dH/dw = 0).
	optH, optW, optN := math.Inf(1), 0.0, 0
	for n := 1; n <= 1000; n++ {
		w := math.Sqrt((float64(n)*c1 + c4 - c1) / (r1/(2*float64(n)) + r4/2))
		if v := h(w, n); v < optH {
			optH, optW, optN = v, w, n
		}
	}
	require.NotNil(t, r.Optimum)
	assert.Equal(t, []int{1, 4}, r.Optimum.Levels)
	assert.InDeltaSlice(t, []float64{optW / float64(optN), optW}, r.Optimum.Periods, 1e-6)
	assert.InDelta(t, optH/(1+optH), r.Optimum.Waste, 1e-12)
	assert.Less(t, r.Optimum.Waste, r.Current.Waste)

	code, out, errOut = ftigo("stats", dir)
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{"launches: 2, failures by level: L1 1, L2 0, L3 0, L4 0", "L4     4            40s      1m0s   20000  -          1         5s        9m54s",
		"ETTR 67.15%", "current interval: L1 every 1m40s, L4 every 6m40s, expected waste 6.40%", "optimum (ckpt_interval = auto): L1 every 1m29.911s, L4 every 19m28.838s, expected waste 5.59%"} {
		assert.Contains(t, out, want)
	}
}

// A run without a history is an error naming the file.
func TestStatsNoHistory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "meta"), 0o755))
	code, _, errOut := ftigo("stats", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, filepath.Join(dir, "meta", policy.HistoryName))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "meta", policy.HistoryName), []byte("{garbage"), 0o644))
	code, _, errOut = ftigo("stats", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, policy.HistoryName)
}

// --plot draws the timeline: a bar per checkpoint in its level's row
// (and the background time of the L4 ones), both launches, the second's
// recovery, the work the failure lost and the failure's mark.
func TestStatsPlot(t *testing.T) {
	dir := t.TempDir()
	statsHistory(t, filepath.Join(dir, "meta"))
	svg := filepath.Join(dir, "timeline.svg")
	code, out, errOut := ftigo("stats", dir, "--plot", svg)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "plot: "+svg)
	classes, texts := parseSVG(t, svg)
	assert.Equal(t, 9, classes["L1"], "a bar per L1 checkpoint")
	assert.Equal(t, 4, classes["L4"], "a bar per L4 checkpoint")
	assert.Equal(t, 4, classes["L4-background"], "L4's total exceeds its blocked time")
	assert.Zero(t, classes["L1-background"])
	assert.Zero(t, classes["L2"]+classes["L3"])
	assert.Equal(t, 2, classes["launch"])
	assert.Equal(t, 1, classes["recovery"])
	assert.Equal(t, 1, classes["lost"])
	assert.Equal(t, 2, classes["failure"], "an X: two strokes")
	assert.Zero(t, classes["final"])
	for _, s := range []string{"launches", "L1", "L4", "ftigo stats: the run's timeline (run r1)", "2000"} {
		assert.Contains(t, texts, s)
	}
	png := filepath.Join(dir, "timeline.png")
	code, _, errOut = ftigo("stats", dir, "--plot", png, "--json")
	require.Equal(t, 0, code, errOut)
	assertColors(t, png, levelColor(1), levelColor(4), colLost, colRecover, colRun, colTotal)

	code, _, errOut = ftigo("stats", dir, "--plot", filepath.Join(dir, "x.jpg"))
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--plot "+filepath.Join(dir, "x.jpg")+": the file name must end in .png or .svg")
}
