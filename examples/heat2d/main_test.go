package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ftigo/ftigo/dhdf"
	"github.com/ftigo/ftigo/gsd"
	"github.com/ftigo/ftigo/vfd"
)

// TestMain lets the test binary act as the job when the demonstration
// re-executes it (os.Executable is the test binary under go test).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		return
	}
	code := m.Run()
	if code == 0 {
		// The in-process world's rank goroutines must all have ended.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func smallOptions(t *testing.T, extra ...string) *options {
	t.Helper()
	args := append([]string{"-dir", t.TempDir(), "-nx", "40", "-ny", "32", "-iters", "300", "-ckpt-every", "50", "-frame-every", "25"}, extra...)
	o, err := parseFlags(args, &bytes.Buffer{})
	require.NoError(t, err)
	o.seed = 1
	return o
}

func TestDemoKillRestartIsBitIdentical(t *testing.T) {
	// Slow storage makes each checkpoint take long enough that the kill
	// always lands inside checkpoint 2, whatever the machine's load.
	o := smallOptions(t, "-io-latency", "30ms")
	var out bytes.Buffer
	err := demo(o, &out)
	require.NoError(t, err, out.String())
	report := out.String()
	// Levels L1, L2, L3, L4 in turn; killed inside the L4 checkpoint; node 2
	// lost; the restart comes from L3 and Reed-Solomon rebuilds node 2.
	assert.Contains(t, report, "levels [1 2 3 4]")
	assert.Contains(t, report, "killed with SIGKILL during checkpoint 4 (L4) at iteration 200\n")
	assert.Contains(t, report, "lost node: deleted node0002's local storage")
	assert.Contains(t, report, "restarted (restart) from checkpoint 3 (L3) at iteration 150")
	assert.Contains(t, report, "rebuilt 2 files onto node0002's empty storage from the L3 redundancy")
	assert.Contains(t, report, "restarted (restart) from checkpoint")
	assert.Contains(t, report, "bit-identical to the uninterrupted run (1280 values)")
	assert.Contains(t, report, "\nOK\n", "the demonstration held")

	// The trajectory holds every 25th step exactly once, in order, even
	// though the killed launch wrote frames past the restart point.
	r, err := gsd.Open(vfd.Sec2{}, filepath.Join(o.dir, "heat2d.gsd"))
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, uint64(12), r.NFrames())
	for f := uint64(0); f < r.NFrames(); f++ {
		steps, err := gsd.ReadRows[uint64](r, f, "step", 0, 1)
		require.NoError(t, err)
		assert.Equal(t, 25*(f+1), steps[0], "frame %d", f)
	}
	// The HDF set stitches to the final field.
	s, err := dhdf.Open(dhdf.MHFName(filepath.Join(o.dir, "field")), dhdf.Options{})
	require.NoError(t, err)
	defer s.Close()
	stitched, err := s.ReadSDS("temperature")
	require.NoError(t, err)
	final, err := os.ReadFile(filepath.Join(o.dir, "final.f64"))
	require.NoError(t, err)
	assert.Equal(t, final, stitched)
	assert.Len(t, s.Files(), 5)
}

// TestDemoRelaunchOnOtherRanks: the relaunch after the kill runs on
// another number of ranks and nodes; the field, one global dataset, is
// redistributed onto the new bands and the run still ends bit-identical
// to the uninterrupted one. 4 -> 3 (node 2 rebuilt from L3 parity, then
// redistributed) and 4 -> 8 on 2 nodes.
func TestDemoRelaunchOnOtherRanks(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		shape string
	}{
		{[]string{"-relaunch-ranks", "3"}, "launch 2 (restart on 3 ranks, 3 nodes; launch 1 had 4 ranks, 4 nodes)"},
		{[]string{"-relaunch-ranks", "8", "-relaunch-nodes", "2"}, "launch 2 (restart on 8 ranks, 2 nodes; launch 1 had 4 ranks, 4 nodes)"},
	} {
		t.Run(tc.args[1], func(t *testing.T) {
			o := smallOptions(t, append([]string{"-io-latency", "30ms"}, tc.args...)...)
			var out bytes.Buffer
			require.NoError(t, demo(o, &out), out.String())
			report := out.String()
			assert.Contains(t, report, tc.shape)
			assert.Contains(t, report, "restarted (restart) from checkpoint 3 (L3) at iteration 150")
			assert.Contains(t, report, "redistributed the checkpoint written by 4 ranks onto "+tc.args[1])
			assert.Contains(t, report, "bit-identical to the uninterrupted run on 4 ranks (1280 values)")
			assert.Contains(t, report, "\nOK\n", "the demonstration held")
		})
	}
}

func TestDemoL1OnlyRestartsFromOlderCheckpoint(t *testing.T) {
	o := smallOptions(t, "-io-latency", "30ms", "-levels", "1")
	var out bytes.Buffer
	require.NoError(t, demo(o, &out), out.String())
	report := out.String()
	assert.Contains(t, report, "killed with SIGKILL during checkpoint 2 (L1) at iteration 100\n")
	assert.NotContains(t, report, "lost node", "L1 cannot survive a lost node, so none is lost")
	assert.Contains(t, report, "restarted (restart) from checkpoint 1 (L1) at iteration 50")
	assert.Contains(t, report, "bit-identical")
}

func TestParseFlagsRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"-ranks", "3", "-nodes", "2"},
		{"-alpha", "0.3"},
		{"-levels", "1,9"},
		{"-levels", ""},
		{"-lose-node", "9"},
		{"-ranks", "64", "-nodes", "4", "-ny", "32"},
		{"-relaunch-ranks", "6", "-relaunch-nodes", "4"},
		{"-relaunch-ranks", "64", "-ny", "32"},
		{"-relaunch-ranks", "-1"},
		{"-heads", "-ranks", "4", "-nodes", "4"},                         // no application rank beside the heads
		{"-heads", "-ranks", "8", "-nodes", "4", "-relaunch-ranks", "3"}, // relaunch: 1 rank per node
		{"-heads", "-ranks", "80", "-nodes", "4", "-ny", "64"},           // 76 solver ranks > 64 rows
		{"extra"},
	} {
		_, err := parseFlags(args, &bytes.Buffer{})
		assert.Error(t, err, "%v", args)
	}
	o, err := parseFlags([]string{"-levels", "1,2,3,4"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3, 4}, o.levels)
	assert.Equal(t, 2, o.loseNode, "a node is lost by default when L2/L3 protect it")
	assert.Equal(t, [2]int{4, 4}, [2]int{o.relaunchRanks, o.relaunchNodes}, "the relaunch has the first launch's shape by default")
	o, err = parseFlags([]string{"-ranks", "8", "-nodes", "4", "-relaunch-ranks", "6"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 3, o.relaunchNodes, "two ranks per node, as in the first launch")
	o, err = parseFlags([]string{"-ranks", "8", "-nodes", "4", "-relaunch-ranks", "5"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 5, o.relaunchNodes, "one rank per node when the first launch's per-node count does not divide")
	o, err = parseFlags([]string{"-heads"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, [2]int{8, 4}, [2]int{o.ranks, o.nodes}, "-heads: a head and an application rank per node by default")
	assert.Equal(t, 4, o.appRanks(o.ranks, o.nodes))
	o, err = parseFlags([]string{"-heads", "-ranks", "12", "-nodes", "4"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, 8, o.appRanks(o.ranks, o.nodes), "a head and two application ranks per node")
	assert.Contains(t, jobArgs(o), "-heads")
}

func TestPlanKill(t *testing.T) {
	o := smallOptions(t, "-levels", "1,2,3,4,1")
	p, err := planKill(o)
	require.NoError(t, err)
	assert.Equal(t, killPlan{mode: "ckpt", n: 4}, p)
	o = smallOptions(t, "-levels", "1")
	p, err = planKill(o)
	require.NoError(t, err)
	assert.Equal(t, killPlan{mode: "ckpt", n: 2}, p, "never the first checkpoint")
	o.kill = "after:3"
	p, err = planKill(o)
	require.NoError(t, err)
	assert.Equal(t, killPlan{mode: "after", n: 3}, p)
	o.kill = "ckpt:0"
	_, err = planKill(o)
	assert.Error(t, err)
	o.kill = "random"
	p, err = planKill(o)
	require.NoError(t, err)
	assert.Equal(t, "random", p.mode)
	assert.True(t, p.frac >= 0 && p.frac < 0.75, "frac %v", p.frac)
	again, err := planKill(o)
	require.NoError(t, err)
	assert.Equal(t, p, again, "the same seed gives the same moment")
	o.noKill = true
	p, err = planKill(o)
	require.NoError(t, err)
	assert.Equal(t, "none", p.mode)
}

// TestDemoAsync runs the demonstration with the L2-L4 post-processing in
// the background (-async). The kill lands inside checkpoint 4, whose
// Checkpoint first waits for checkpoint 3's post-processing (one in
// flight at most): checkpoint 3 is at L3 when that finished before the
// kill, else still at L1 only and lost with node 2, and the restart then
// comes from checkpoint 2 at L2 — never from anything older, and the run
// ends bit-identical either way.
func TestDemoAsync(t *testing.T) {
	o := smallOptions(t, "-io-latency", "30ms", "-async")
	var out bytes.Buffer
	require.NoError(t, demo(o, &out), out.String())
	report := out.String()
	assert.Contains(t, report, "killed with SIGKILL during checkpoint 4 (L4) at iteration 200\n")
	assert.Regexp(t, `restarted \(restart\) from checkpoint (3 \(L3\) at iteration 150|2 \(L2\) at iteration 100)`, report)
	assert.Contains(t, report, "bit-identical to the uninterrupted run (1280 values)")
	assert.Contains(t, report, "\nOK\n", "the demonstration held")
	log, err := os.ReadFile(filepath.Join(o.dir, "job.log"))
	require.NoError(t, err)
	assert.Regexp(t, `committed at L1, L[234] in the background`, string(log))
	assert.Regexp(t, `\(L1 -> L[234]\) post-processed in the background`, string(log))
}

// TestDemoAsyncKillInBackground SIGKILLs the job right after checkpoint 3
// (L3) returned, while its parity is being encoded in the background, and
// deletes node 2: the restart is checkpoint 3 at L3 if its raise
// committed before the kill, else checkpoint 2 at L2 (checkpoint 3 at L1
// only, lost with node 2) — never a mix — and the run ends bit-identical.
func TestDemoAsyncKillInBackground(t *testing.T) {
	o := smallOptions(t, "-io-latency", "30ms", "-async", "-kill", "after:3")
	var out bytes.Buffer
	require.NoError(t, demo(o, &out), out.String())
	report := out.String()
	assert.Contains(t, report, "lost node: deleted node0002's local storage")
	assert.Regexp(t, `restarted \(restart\) from checkpoint (3 \(L3\) at iteration 150|2 \(L2\) at iteration 100)`, report)
	assert.Contains(t, report, "bit-identical to the uninterrupted run (1280 values)")
	assert.Contains(t, report, "\nOK\n", "the demonstration held")
}

// TestDemoHeads runs the demonstration with -heads: 8 ranks on 4 nodes,
// each node's first rank a head that raises the node's checkpoints to L2,
// L3 and L4 (head = 1, inline_lN = 0) while the solver runs on the other
// 4 ranks. Killed inside checkpoint 4 (whose Checkpoint first waits for
// checkpoint 3's post-processing), node 2 deleted: the restart is
// checkpoint 3 at L3 or checkpoint 2 at L2, the heads of the relaunch all
// return from Init with ckpt.ErrHead, and the field is bit-identical.
func TestDemoHeads(t *testing.T) {
	o := smallOptions(t, "-io-latency", "30ms", "-heads")
	var out bytes.Buffer
	require.NoError(t, demo(o, &out), out.String())
	report := out.String()
	assert.Contains(t, report, "8 ranks on 4 simulated nodes")
	assert.Contains(t, report, "the solver runs on the other 4 ranks")
	assert.Contains(t, report, "killed with SIGKILL during checkpoint 4 (L4) at iteration 200\n")
	assert.Contains(t, report, "lost node: deleted node0002's local storage")
	assert.Regexp(t, `restarted \(restart\) from checkpoint (3 \(L3\) at iteration 150|2 \(L2\) at iteration 100)`, report)
	assert.Contains(t, report, "4 heads returned from Init (ckpt.ErrHead) once the application ranks finalized")
	assert.Contains(t, report, "bit-identical to the uninterrupted run (1280 values)")
	assert.Contains(t, report, "\nOK\n", "the demonstration held")
	log, err := os.ReadFile(filepath.Join(o.dir, "job.log"))
	require.NoError(t, err)
	assert.Regexp(t, `\(L1 -> L[234]\) post-processed by the heads`, string(log))
	// The HDF set has one associated file per solver rank, none per head.
	matches, err := filepath.Glob(filepath.Join(o.dir, "field*"))
	require.NoError(t, err)
	assert.Len(t, matches, 5, "%v", matches)
}

// TestDemoSnapshotKillInBackground runs the demonstration in snapshot
// mode (-snapshot) and SIGKILLs the job right after checkpoint 3 (L3)
// returned, while it is being written from its staging copy in the
// background, and deletes node 2. Snapshot mode writes L3 straight at its
// level (no L1 commit on the way): the restart is checkpoint 3 at L3 if
// it committed before the kill, else checkpoint 2 at L2, never a mix,
// and the run ends bit-identical. The checkpoints before the kill print
// their copy, background and durable times.
func TestDemoSnapshotKillInBackground(t *testing.T) {
	o := smallOptions(t, "-io-latency", "30ms", "-snapshot", "-kill", "after:3")
	var out bytes.Buffer
	require.NoError(t, demo(o, &out), out.String())
	report := out.String()
	assert.Contains(t, report, "lost node: deleted node0002's local storage")
	assert.Regexp(t, `restarted \(restart\) from checkpoint (3 \(L3\) at iteration 150|2 \(L2\) at iteration 100)`, report)
	assert.Contains(t, report, "bit-identical to the uninterrupted run (1280 values)")
	assert.Contains(t, report, "\nOK\n", "the demonstration held")
	assert.Regexp(t, `snapshot mode: id +copy +background +to durable\n +1 `, report)
	log, err := os.ReadFile(filepath.Join(o.dir, "job.log"))
	require.NoError(t, err)
	assert.Regexp(t, `copied in [0-9.]+ sec\. \(Wt [0-9.]+, Cp [0-9.]+\), written in the background`, string(log))
	assert.Regexp(t, `durable from its staging copy in [0-9.]+ sec\. after the call`, string(log))
	assert.NotContains(t, string(log), "committed at L1", "snapshot mode commits at the level, not at L1 first")
}
