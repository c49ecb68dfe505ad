package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
)

// scaleJSON runs a small scale sweep with --json and decodes it.
func scaleJSON(t *testing.T, args ...string) (*scaleResult, string) {
	t.Helper()
	code, out, errs := ftigo(append([]string{"bench", "--repeats", "1", "--json"}, args...)...)
	require.Equal(t, 0, code, errs)
	var res scaleResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	return &res, out
}

// TestBenchScaleJSON: a scale sweep of 4 and 16 ranks, at the default
// 4 KiB and 64 KiB per rank, has an Init row and a checkpoint and a
// restart row per level at every point, every counter positive and
// consistent, the data a level moves between ranks visible in the bytes
// received, and a goal row per operation and size whose ratios are those
// of the rows.
func TestBenchScaleJSON(t *testing.T) {
	res, out := scaleJSON(t, "--sweep-ranks", "16,4", "--dir", t.TempDir())
	assert.Equal(t, "scale", res.Kind)
	assert.Contains(t, res.World, "in-process world")
	assert.Equal(t, 4, res.GroupSize)
	assert.Contains(t, res.Description, "ranks [4 16], 4KiB,64KiB per rank, groups of 4, levels [1 2 3 4], 1 repeats")
	assert.Equal(t, []string{}, res.Skipped)
	cases := []string{"Init", "L1 checkpoint", "L1 restart", "L2 checkpoint", "L2 restart, node 1 lost",
		"L3 checkpoint", "L3 restart, nodes 1,2 lost", "L4 checkpoint", "L4 restart"}
	require.Len(t, res.Rows, 2*2*len(cases), "per size and count (in increasing order): Init, then a checkpoint and a restart per level")
	byKey := map[string]scaleRow{}
	allocated := 0.0
	for i, row := range res.Rows {
		size, ranks := []int64{4 << 10, 64 << 10}[i/(2*len(cases))], []int{4, 16}[i/len(cases)%2]
		what := fmt.Sprintf("%s at %d x %d", row.Case, ranks, size)
		assert.Equal(t, cases[i%len(cases)], row.Case, what)
		assert.Equal(t, ranks, row.Ranks, what)
		assert.Equal(t, size, row.BytesRank, what)
		assert.Equal(t, 4, row.GroupSize, what)
		if row.Kind == "init" {
			assert.Equal(t, 0, row.Level)
			assert.Equal(t, 4, row.Samples, "Init is measured in every level's first job")
		} else {
			assert.Equal(t, 1, row.Samples, what)
			assert.Equal(t, (i%len(cases)+1)/2, row.Level, what)
		}
		assert.Greater(t, row.Wall.Min, 0.0, what)
		assert.LessOrEqual(t, row.Wall.Min, row.Wall.Median, what)
		assert.LessOrEqual(t, row.Wall.Median, row.Wall.Max, what)
		assert.Greater(t, row.CPURank, 0.0, what)
		for name, f := range map[string]perRank{"msgs recv": row.MsgsRecv, "bytes recv": row.BytesRecv, "msgs sent": row.MsgsSent,
			"bytes sent": row.BytesSent, "collectives": row.Collectives} {
			assert.Greater(t, f.Mean, 0.0, "%s: %s", what, name)
			assert.GreaterOrEqual(t, float64(f.Max), f.Mean, "%s: %s: the most a rank got is at least the mean", what, name)
		}
		assert.GreaterOrEqual(t, row.BytesRecv.Mean, row.MsgsRecv.Mean, "%s: a message carries a byte at least", what)
		assert.GreaterOrEqual(t, row.AllocRank, 0.0, what)
		assert.GreaterOrEqual(t, row.PeakHeapRank, 0.0, what)
		allocated += row.AllocRank
		assert.Greater(t, row.MaxRSS, int64(1<<20), what)
		if runtime.GOOS == "linux" {
			assert.Greater(t, row.OpenFiles, int64(0), what)
		}
		if res.DecodedCounter {
			require.NotNil(t, row.Decoded, what)
			if row.Kind == "restart" {
				assert.Greater(t, row.Decoded.Mean, 0.0, "%s: a restart reads the metadata", what)
			}
		} else {
			assert.Nil(t, row.Decoded, what)
		}
		byKey[fmt.Sprintf("%s/%d/%d", row.Case, ranks, size)] = row
	}
	assert.Greater(t, allocated, 0.0)
	assert.Equal(t, hasDecodedCounter(reflect.TypeFor[*ckpt.Runtime]()), res.DecodedCounter)
	assert.Equal(t, res.DecodedCounter, strings.Contains(out, "metadata_decoded_per_rank"), "the field is absent where the engine has no counter")
	// What a level moves between ranks, at 64 KiB per rank (more than
	// any metadata of 16 ranks): L2 sends every rank's file to its
	// partner and L3 the group's data to each encoder, so every rank
	// receives at least its size; L1 and L4 move only metadata. A
	// restart of L2 and L3 sends the lost nodes' data back to them.
	const big = 64 << 10
	for _, ranks := range []int{4, 16} {
		get := func(c string) scaleRow { return byKey[fmt.Sprintf("%s/%d/%d", c, ranks, big)] }
		assert.GreaterOrEqual(t, get("L2 checkpoint").BytesRecv.Mean, float64(big), "%d ranks", ranks)
		assert.GreaterOrEqual(t, get("L3 checkpoint").BytesRecv.Mean, float64(big), "%d ranks", ranks)
		assert.Less(t, get("L1 checkpoint").BytesRecv.Mean, float64(big), "%d ranks", ranks)
		assert.Less(t, get("L4 checkpoint").BytesRecv.Mean, float64(big), "%d ranks", ranks)
		assert.GreaterOrEqual(t, get("L2 restart, node 1 lost").BytesRecv.Max, int64(big), "%d ranks", ranks)
		assert.GreaterOrEqual(t, get("L3 restart, nodes 1,2 lost").BytesRecv.Max, int64(big), "%d ranks", ranks)
	}
	require.Len(t, res.Goals, 2*len(cases), "a goal row per operation and size")
	for _, g := range res.Goals {
		c := g.Case
		if g.Kind == "restart" {
			c = restartCase(g.Level, 4)
		}
		lo, hi := byKey[fmt.Sprintf("%s/4/%d", c, g.BytesRank)], byKey[fmt.Sprintf("%s/16/%d", c, g.BytesRank)]
		assert.Equal(t, 4, g.From, g.Case)
		assert.Equal(t, 16, g.To, g.Case)
		assert.InDelta(t, hi.CPURank/lo.CPURank, g.CPU, 1e-9, g.Case)
		assert.InDelta(t, hi.BytesRecv.Mean/lo.BytesRecv.Mean, g.Bytes, 1e-9, g.Case)
		assert.InDelta(t, hi.MsgsRecv.Mean/lo.MsgsRecv.Mean, g.Msgs, 1e-9, g.Case)
		assert.InDelta(t, float64(hi.BytesRecv.Max)/float64(lo.BytesRecv.Max), g.BytesMax, 1e-9, g.Case)
		want := goalCkptRestart
		if g.Kind == "init" {
			want = goalInit
		}
		assert.Equal(t, want, g.Goal, g.Case)
		assert.Equal(t, g.CPU <= want && g.Bytes <= want, g.Pass, g.Case)
	}
	assert.NotContains(t, out, "null")
}

// TestScaleMeterCounts: the meter counts exactly the traffic of its
// operation on every rank, gather brings every rank's share to rank 0,
// and a row's per-rank figures are their mean and maximum: a Bcast of
// 100 bytes from rank 0 then an Allgather of 8 bytes is, on a rank other
// than 0, one message of 100 bytes and n-1 of 8.
func TestScaleMeterCounts(t *testing.T) {
	for _, n := range []int{4, 16} {
		var shares []share
		err := comm.Run(n, func(c comm.Comm) error {
			m := meter{c: c, proc: c.Rank() == 0, level: 1}
			work := int64(0)
			s, err := m.measure("test", func() int64 { return work }, func() error {
				buf := make([]byte, 100)
				if err := c.Bcast(0, buf); err != nil {
					return err
				}
				work = int64(c.Rank()) * 10 // "decoded" while measured
				return c.Allgather(make([]byte, 8), make([]byte, 8*n))
			})
			if err != nil {
				return err
			}
			// traffic after the measurement is not the operation's
			if err := c.Bcast(0, make([]byte, 1000)); err != nil {
				return err
			}
			all, err := gather(c, s, s)
			if c.Rank() == 0 && err == nil {
				require.Len(t, all, n)
				assert.Equal(t, column(all, 0), column(all, 1))
				shares = column(all, 0)
			}
			return err
		})
		require.NoError(t, err)
		row := scaleRowOf("checkpoint", 1, scaleConfig{ranks: n, size: 8, group: 4, decoded: true}, [][]share{shares})
		nf := float64(n)
		assert.InDelta(t, ((nf-1)*1+nf*(nf-1))/nf, row.MsgsRecv.Mean, 1e-12, "%d ranks", n)
		assert.Equal(t, int64(n), row.MsgsRecv.Max, "a rank other than root: the Bcast and n-1 pieces")
		assert.InDelta(t, ((nf-1)*100+nf*(nf-1)*8)/nf, row.BytesRecv.Mean, 1e-12, "%d ranks", n)
		assert.Equal(t, int64(100+8*(n-1)), row.BytesRecv.Max)
		assert.Equal(t, perRank{Mean: 2, Max: 2}, row.Collectives, "the Bcast and the Allgather; the barrier and the agreement are outside")
		assert.Equal(t, perRank{Mean: 10 * (nf - 1) / 2, Max: int64(10 * (n - 1))}, *row.Decoded)
		assert.Greater(t, row.Wall.Median, 0.0)
		assert.Greater(t, row.MaxRSS, int64(0))
		for r, s := range shares {
			if r > 0 {
				assert.Zero(t, s.wall, "rank %d does not measure the process", r)
				assert.Zero(t, s.cpu, "rank %d", r)
			}
		}
		assert.Nil(t, scaleRowOf("checkpoint", 1, scaleConfig{ranks: n, size: 8, group: 4}, [][]share{shares}).Decoded,
			"without the engine's counter there is no decoded figure")
	}
}

// TestShareRoundTrips: a share travels as shareLen int64.
func TestShareRoundTrips(t *testing.T) {
	s := share{counts: comm.Counts{Sent: 1, Received: 2, BytesSent: 3, BytesReceived: 4, Collectives: 5}, decoded: 6,
		wall: 7, cpu: 8, alloc: 9, peak: 10, rss: 11, files: 12}
	require.Len(t, s.vec(), shareLen)
	assert.Equal(t, s, shareOf(s.vec()))
}

type fakeWork struct{ Decoded int64 }
type fakeRuntime struct{ n int64 }

func (f *fakeRuntime) Work() fakeWork { return fakeWork{f.n} }

type fakePtrRuntime struct{}

func (fakePtrRuntime) Work() *fakeWork { return &fakeWork{7} }

type wrongWork struct{ Decoded int }
type wrongRuntime struct{}

func (wrongRuntime) Work() wrongWork { return wrongWork{1} }

type argRuntime struct{}

func (argRuntime) Work(int) fakeWork { return fakeWork{1} }

// TestMetadataDecoded: the decoded counter is read from a Work method
// returning a struct (or a pointer to one) with an int64 Decoded, and is
// absent otherwise.
func TestMetadataDecoded(t *testing.T) {
	for _, tc := range []struct {
		name string
		rt   any
		n    int64
		ok   bool
	}{
		{"counts", &fakeRuntime{42}, 42, true},
		{"nil runtime of a counting type", (*fakeRuntime)(nil), 0, true},
		{"pointer result", fakePtrRuntime{}, 7, true},
		{"Decoded not int64", wrongRuntime{}, 0, false},
		{"Work takes arguments", argRuntime{}, 0, false},
		{"no Work", struct{}{}, 0, false},
		{"nil", nil, 0, false},
		{"the runtime of this build", (*ckpt.Runtime)(nil), 0, hasDecodedCounter(reflect.TypeFor[*ckpt.Runtime]())},
	} {
		n, ok := metadataDecoded(tc.rt)
		assert.Equal(t, tc.n, n, tc.name)
		assert.Equal(t, tc.ok, ok, tc.name)
	}
	assert.True(t, hasDecodedCounter(reflect.TypeFor[*fakeRuntime]()))
	assert.False(t, hasDecodedCounter(reflect.TypeFor[fakeRuntime]()), "the method is on the pointer")
	assert.False(t, hasDecodedCounter(reflect.TypeFor[wrongRuntime]()))
	assert.False(t, hasDecodedCounter(nil))
}

// TestScaleGoals: the goal compares the largest count with the smallest
// of every operation and size: PASS up to the goal (1.5x, Init 2x) for
// both CPU and bytes received per rank, MISS above or when undefined.
func TestScaleGoals(t *testing.T) {
	row := func(kind string, level, ranks int, cpu, bytes float64) scaleRow {
		return scaleRow{Case: kind, Kind: kind, Level: level, Ranks: ranks, BytesRank: 4096, CPURank: cpu,
			BytesRecv: perRank{Mean: bytes, Max: int64(bytes)}, MsgsRecv: perRank{Mean: 1, Max: 1}}
	}
	rows := []scaleRow{
		row("init", 0, 64, 1, 100), row("init", 0, 256, 5, 500), row("init", 0, 1024, 2, 200),
		row("checkpoint", 1, 64, 1, 100), row("checkpoint", 1, 1024, 1.5, 151),
		row("restart", 2, 64, 0, 100), row("restart", 2, 1024, 1, 100),
		row("checkpoint", 3, 64, 1, 0), row("checkpoint", 3, 1024, 1, 0),
		row("checkpoint", 4, 64, 1, 1),
	}
	rows[5].Case, rows[6].Case = "L2 restart, node 1 lost", "L2 restart, node 1 lost"
	goals := scaleGoals(rows)
	require.Len(t, goals, 4, "L4 was measured at one count only")
	assert.Equal(t, scaleGoal{Case: "init", Kind: "init", BytesRank: 4096, From: 64, To: 1024, CPU: 2, Bytes: 2, Msgs: 1, BytesMax: 2, Goal: 2, Pass: true},
		goals[0], "the largest count against the smallest, whatever lies between")
	assert.Equal(t, 1.5, goals[1].CPU)
	assert.InDelta(t, 1.51, goals[1].Bytes, 1e-12)
	assert.False(t, goals[1].Pass, "1.51x bytes received misses 1.5x")
	assert.Equal(t, "L2 restart", goals[2].Case, "the goal names the restart without its lost nodes")
	assert.Equal(t, -1.0, goals[2].CPU, "undefined: nothing at the smallest count")
	assert.False(t, goals[2].Pass)
	assert.Equal(t, 1.0, goals[3].Bytes, "nothing received at either count is no growth")
	assert.True(t, goals[3].Pass)
	assert.Nil(t, goals[0].Decoded)
	d := perRank{Mean: 10, Max: 10}
	rows[3].Decoded, rows[4].Decoded = &d, &perRank{Mean: 30, Max: 30}
	require.NotNil(t, scaleGoals(rows)[1].Decoded)
	assert.Equal(t, 3.0, *scaleGoals(rows)[1].Decoded)
	table := goalTable(goals)
	assert.Contains(t, table, "PASS")
	assert.Contains(t, table, "MISS")
	assert.Contains(t, table, "inf")
	assert.Contains(t, table, "64 -> 1024")
	assert.Empty(t, scaleGoals(rows[9:]))
}

// TestScaleSkipReason: a point is skipped when its arrays need more
// memory than the sweep may take, or when the time predicted from the
// points before (their growth, at least linear) exceeds --time-limit.
func TestScaleSkipReason(t *testing.T) {
	bf := &benchFlags{maxMemFactor: 0.5}
	assert.Empty(t, skipReason(1024, 4096, 1<<30, bf, nil, nil))
	assert.Equal(t, "needs 2 GiB of memory, 1 GiB available", skipReason(256<<10, 4096, 1<<30, bf, nil, nil))
	assert.Empty(t, skipReason(1024, 4096, 0, bf, nil, nil), "unknown memory: measured")
	bf.timeLimit = 100 * time.Second
	done := []point{{64, 4096}, {256, 4096}}
	// 1 s, then 16 s for four times the ranks: ranks^2, so 1024 ranks
	// take 256 s
	why := skipReason(1024, 4096, 0, bf, done, []time.Duration{time.Second, 16 * time.Second})
	assert.Equal(t, "predicted to take 256 s (256 ranks took 16.0 s, growing as ranks^2.0), over --time-limit 1m40s", why)
	// flat: predicted linear, 4 x 16 s
	assert.Empty(t, skipReason(1024, 4096, 0, bf, done, []time.Duration{16 * time.Second, 16 * time.Second}))
	assert.Contains(t, skipReason(4096, 4096, 0, bf, done, []time.Duration{16 * time.Second, 16 * time.Second}), "predicted to take 256 s")
	assert.Empty(t, skipReason(1024, 4096, 0, bf, done[:1], []time.Duration{time.Second}), "one point: linear, 16 s")
}

// TestBenchScaleSkipsTheLargerCounts: once a count is skipped, the larger
// ones of its size are too, and every one is listed.
func TestBenchScaleSkipsTheLargerCounts(t *testing.T) {
	res, _ := scaleJSON(t, "--sweep-ranks", "4,8,16", "--levels", "1", "--sweep-sizes", "1KiB", "--dir", t.TempDir(), "--time-limit", "1ns")
	require.Len(t, res.Rows, 3, "4 ranks only: Init, L1 checkpoint, L1 restart")
	assert.Empty(t, res.Goals)
	require.Len(t, res.Skipped, 2)
	assert.Contains(t, res.Skipped[0], "8 ranks x 1 KiB: predicted to take")
	assert.Equal(t, "16 ranks x 1 KiB: a smaller count of 1 KiB per rank was skipped", res.Skipped[1])
}

// TestBenchScaleMemory: --storage memory keeps every file in the
// process (vfd's in-memory driver): the sweep runs, restarts check their
// data, and nothing is written to disk.
func TestBenchScaleMemory(t *testing.T) {
	res, _ := scaleJSON(t, "--sweep-ranks", "8", "--sweep-sizes", "4KiB", "--storage", "memory")
	require.Len(t, res.Rows, 9)
	assert.Contains(t, res.Description, "files in memory")
	for _, row := range res.Rows {
		assert.Greater(t, row.BytesRecv.Mean, 0.0, row.Case)
	}
	_, err := os.Stat("/ftigo-bench")
	assert.ErrorIs(t, err, os.ErrNotExist, "the in-memory namespace stays in memory")
}

// TestBenchScalePlotAndFrom: --plot draws the cost per rank against the
// ranks (SVG and PNG), and --from reads a saved sweep back, prints its
// rows and goals and draws it again.
func TestBenchScalePlotAndFrom(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(dir, "scale.svg")
	_, out := scaleJSON(t, "--sweep-ranks", "4,8", "--levels", "1,2", "--dir", t.TempDir(), "--plot", svg)
	classes, texts := parseSVG(t, svg)
	for _, c := range []string{"init-L0-4KiB-cpu", "checkpoint-L1-4KiB-bytes", "restart-L2-64KiB-msgs", "legend"} {
		assert.GreaterOrEqual(t, classes[c], 1, "series %s", c)
	}
	for _, s := range []string{"Init: CPU per rank, s", "checkpoint: bytes received per rank", "restart (Init + Recover): messages received per rank", "L2", "8"} {
		assert.Contains(t, texts, s)
	}
	saved := filepath.Join(dir, "scale.json")
	require.NoError(t, os.WriteFile(saved, []byte(out), 0o644))
	png := filepath.Join(dir, "scale.png")
	code, text, errs := ftigo("bench", "--from", saved, "--plot", png)
	require.Equal(t, 0, code, errs)
	assertColors(t, png, levelColor(0), levelColor(1), levelColor(2))
	for _, s := range []string{"L2 restart, node 1 lost", "goal: each per-rank figure", "4 -> 8", " of 10 PASS", "plot: " + png} {
		assert.Contains(t, text, s)
	}
	if !strings.Contains(out, "metadata_decoded_per_rank") {
		assert.Contains(t, text, "decoded: n/a")
	}
	// two saved sweeps merge; a file of another kind is refused
	code, text, errs = ftigo("bench", "--from", saved+","+saved)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, text, "2 results merged")
	other := filepath.Join(dir, "other.json")
	require.NoError(t, os.WriteFile(other, []byte(`{"rows": [{"case": "x", "kind": "checkpoint", "level": 1, "ranks": 1, "bytes_per_rank": 8}]}`), 0o644))
	code, _, errs = ftigo("bench", "--from", saved+","+other)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "--from "+other+": not a scale sweep")
}

// TestBenchScaleRejectsBadFlags: the scale sweep's own mistakes are
// usage errors naming the flag.
func TestBenchScaleRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bench", "--sweep-ranks", "64,66"}, "--sweep-ranks 66: not a multiple of --group-size 4"},
		{[]string{"bench", "--sweep-ranks", "64", "--group-size", "0"}, "--group-size 0: at least 1"},
		{[]string{"bench", "--sweep-ranks", "8", "--group-size", "1", "--levels", "2"}, "L2 and L3 need groups of at least 2 ranks"},
		{[]string{"bench", "--sweep-ranks", "64", "--cold"}, "the scale sweep (--sweep-ranks, --mpi) takes no --cold"},
		{[]string{"bench", "--sweep-ranks", "64", "--ranks", "8"}, "takes no --ranks"},
		{[]string{"bench", "--sweep-ranks", "64", "--async"}, "takes no --async"},
		{[]string{"bench", "--sweep-ranks", "64", "--size", "4KiB", "--sweep-sizes", "8KiB"}, "give one"},
		{[]string{"bench", "--sweep-ranks", "64", "--storage", "tape"}, `--storage "tape": files or memory`},
		{[]string{"bench", "--sweep-ranks", "64", "--storage", "memory", "--dir", "/tmp"}, "--storage memory keeps the files in this process"},
		{[]string{"bench", "--sweep-ranks", "64", "--time-limit", "-1s"}, "--time-limit -1s: not negative"},
		{[]string{"bench", "--group-size", "8"}, "--group-size belongs to the scale sweep"},
		{[]string{"bench", "--memprofile", "m.out"}, "--memprofile belongs to the scale sweep"},
		{[]string{"bench", "--mpi", "--sweep-ranks", "16", "--dir", "/tmp"}, "--mpi measures the processes of the MPI job: drop --sweep-ranks"},
		{[]string{"bench", "--mpi"}, "--mpi needs --dir"},
		{[]string{"bench", "--from", "x.json", "--mpi"}, "--from reads saved results"},
	} {
		code, out, errs := ftigo(tc.args...)
		assert.Equal(t, 2, code, "%v", tc.args)
		assert.Empty(t, out, "%v", tc.args)
		assert.Contains(t, errs, tc.msg, "%v", tc.args)
	}
}

// TestBenchScaleJSONKeys: the names of the scale sweep's JSON fields are
// those docs/performance.md documents.
func TestBenchScaleJSONKeys(t *testing.T) {
	d, r := perRank{}, 1.0
	b, err := json.Marshal(scaleResult{Rows: []scaleRow{{Decoded: &d}}, Goals: []scaleGoal{{Decoded: &r}}, Skipped: []string{}})
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	keys := func(m map[string]any) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	top, row, goal := keys(m), keys(m["rows"].([]any)[0].(map[string]any)), keys(m["goals"].([]any)[0].(map[string]any))
	assert.ElementsMatch(t, []string{"kind", "rows", "goals", "description", "world", "group_size", "decoded_counter", "load_start", "load_end", "skipped"}, top)
	assert.ElementsMatch(t, []string{"case", "kind", "level", "ranks", "group_size", "bytes_per_rank", "samples", "wall", "cpu_per_rank_s",
		"messages_received_per_rank", "bytes_received_per_rank", "messages_sent_per_rank", "bytes_sent_per_rank", "collectives_per_rank",
		"metadata_decoded_per_rank", "alloc_bytes_per_rank", "peak_heap_bytes_per_rank", "max_rss_bytes", "open_files_peak"}, row)
	assert.ElementsMatch(t, []string{"case", "kind", "level", "bytes_per_rank", "ranks_from", "ranks_to", "cpu_per_rank_ratio",
		"bytes_received_per_rank_ratio", "messages_received_per_rank_ratio", "bytes_received_max_ratio", "metadata_decoded_per_rank_ratio",
		"goal", "pass"}, goal)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "performance.md"))
	require.NoError(t, err)
	for _, k := range slices.Concat(top, row, goal) {
		assert.True(t, strings.Contains(string(doc), "`"+k+"`"), "docs/performance.md documents `%s`", k)
	}
}

// TestScaleBlockSize: the transfer blocks follow the size per rank, a
// power of two from 4 KiB to FTI's 1 MiB.
func TestScaleBlockSize(t *testing.T) {
	for size, want := range map[int64]int{8: 4 << 10, 4 << 10: 4 << 10, 5000: 8 << 10, 64 << 10: 64 << 10, 1 << 20: 1 << 20, 256 << 20: 1 << 20} {
		assert.Equal(t, want, scaleBlockSize(size), "%d bytes per rank", size)
	}
}

// TestFileCounter: the counter sees every descriptor this process opens.
func TestFileCounter(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("open files are counted on Linux only")
	}
	fc := newFileCounter()
	before := fc.count()
	require.Greater(t, before, int64(0))
	var fs []*os.File
	for i := range 3 {
		f, err := os.Create(filepath.Join(t.TempDir(), fmt.Sprint(i)))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	assert.Equal(t, before+3, fc.count())
	for _, f := range fs {
		require.NoError(t, f.Close())
	}
	assert.Equal(t, before, fc.count())
}

// TestOpenFilesHint: running out of descriptors says what to do, also
// when an agreement carried the error as text; other errors pass as
// they are.
func TestOpenFilesHint(t *testing.T) {
	err := openFilesHint(fmt.Errorf("level 2: %w", &os.PathError{Op: "open", Path: "x", Err: syscall.EMFILE}))
	assert.ErrorIs(t, err, syscall.EMFILE)
	assert.Contains(t, err.Error(), "--storage memory")
	assert.Contains(t, openFilesHint(errors.New("rank 3: open x: too many open files")).Error(), "the open files limit is")
	other := errors.New("disk full")
	assert.Equal(t, other, openFilesHint(other))
	assert.NoError(t, openFilesHint(nil))
}

// TestPrepareProcess: a count that fits the open files limit needs no
// note; one that cannot fit names the limit and the way out.
func TestPrepareProcess(t *testing.T) {
	assert.Empty(t, prepareProcess(4, true))
	assert.Empty(t, prepareProcess(1<<20, false), "files in memory need no descriptors")
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	huge := int(min(lim.Max, 1<<40)/filesPerRank) + 1
	note := prepareProcess(huge, true)
	if note == "" {
		t.Skipf("this user may raise the open files limit to %d", filesPerRank*huge+fileMargin)
	}
	assert.Contains(t, note, fmt.Sprintf("%d in-process ranks may hold up to", huge))
	assert.Contains(t, note, "--storage memory")
}

// TestBenchScaleIsQuiet: the sweep's runtimes log nothing: the process's
// own standard output and error stay empty, so that --json output is
// JSON even when ckpt logs by default.
func TestBenchScaleIsQuiet(t *testing.T) {
	dir := t.TempDir()
	outF, err := os.Create(filepath.Join(dir, "stdout"))
	require.NoError(t, err)
	errF, err := os.Create(filepath.Join(dir, "stderr"))
	require.NoError(t, err)
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outF, errF
	res, _ := scaleJSON(t, "--sweep-ranks", "4", "--sweep-sizes", "4KiB", "--dir", t.TempDir())
	os.Stdout, os.Stderr = stdout, stderr
	require.NoError(t, outF.Close())
	require.NoError(t, errF.Close())
	require.Len(t, res.Rows, 9)
	for _, name := range []string{"stdout", "stderr"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Empty(t, string(b), "the process's %s", name)
	}
}
