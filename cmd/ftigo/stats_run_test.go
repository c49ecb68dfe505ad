package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/policy"
	"github.com/ftigo/ftigo/vfd"
)

// manifestLog collects the committed checkpoints ftigo inspect lists,
// each time it is asked, by sequence number: the manifestLog a run wrote,
// before newer checkpoints retire them.
type manifestLog struct {
	mu  sync.Mutex
	dir string
	all map[uint64]ckptReport
}

func (m *manifestLog) capture(t *testing.T) {
	code, out, errOut := ftigo("inspect", m.dir, "--json")
	require.Equal(t, 0, code, errOut)
	var res inspectResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range res.Checkpoints {
		if c.Committed {
			m.all[c.Seq] = c
		}
	}
}

// markDied rewrites the run history as a killed launch leaves it: the
// newest launch without its end (it was last seen at its Close).
func markDied(t *testing.T, meta string) {
	name := filepath.Join(meta, policy.HistoryName)
	raw, err := os.ReadFile(name)
	require.NoError(t, err)
	h, err := policy.UnmarshalHistory(raw)
	require.NoError(t, err)
	l := h.Current()
	require.NotNil(t, l)
	l.End, l.Ending = 0, ""
	raw, err = h.Marshal()
	require.NoError(t, err)
	require.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, name, raw))
}

// ftigo stats on a real run: a first launch takes L2 then L1 and dies;
// node 1 is lost with its local files; the relaunch restarts from L2
// (the L1 checkpoint is gone with the node), then takes differential
// L4 checkpoints post-processed in the background, and closes. Every
// number stats reports is checked against the manifestLog the launches
// wrote (ftigo inspect after each checkpoint) and the restart.
func TestStatsRealRun(t *testing.T) {
	dir := t.TempDir()
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, 2, true
	cfg.EnableDCP, cfg.DCPBlockSize = true, 4096
	cfg.Async[4] = true
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")
	m := &manifestLog{dir: dir, all: map[uint64]ckptReport{}}
	const n = 20000
	job := func(fn func(rt *ckpt.Runtime, x []float64, c comm.Comm) error) {
		require.NoError(t, comm.Run(2, func(c comm.Comm) error {
			rt, err := ckpt.Init(cfg, c)
			if err != nil {
				return err
			}
			defer rt.Close()
			x := make([]float64, n)
			for i := range x {
				x[i] = float64(c.Rank()*n + i)
			}
			if err := ckpt.Protect(rt, 1, &x); err != nil {
				return err
			}
			return fn(rt, x, c)
		}, comm.WithTimeout(60*time.Second)))
	}
	// take checkpoints id at level l on every rank, then inspects.
	take := func(rt *ckpt.Runtime, c comm.Comm, id int64, l int) error {
		if err := rt.Checkpoint(id, l); err != nil {
			return err
		}
		rt.Wait()
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			m.capture(t)
		}
		return c.Barrier()
	}
	job(func(rt *ckpt.Runtime, x []float64, c comm.Comm) error {
		if err := take(rt, c, 1, 2); err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond) // work the failure loses
		x[0] = -1
		return take(rt, c, 2, 1)
	})
	markDied(t, cfg.MetaDir)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "local", "node0001")))
	var recovered float64
	job(func(rt *ckpt.Runtime, x []float64, c comm.Comm) error {
		if err := rt.Recover(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			recovered = x[0]
		}
		for v := int64(3); v <= 5; v++ {
			x[v*1000] = -float64(v) // a block or so changes per checkpoint
			if err := take(rt, c, v, 4+4); err != nil {
				return err
			}
		}
		return nil
	})
	assert.Equal(t, 0.0, recovered, "the restart came from L2, before x[0] changed")

	code, out, errOut := ftigo("stats", dir, "--json")
	require.Equal(t, 0, code, errOut)
	var st statsResult
	require.NoError(t, json.Unmarshal([]byte(out), &st))

	// The manifestLog: per level, the count, the bytes and the dCP bytes.
	type sum struct {
		n, bytes, written, protected int64
		seq                          []uint64
	}
	want := map[int]*sum{}
	for seq, r := range m.all {
		s := want[r.Level]
		if s == nil {
			s = &sum{}
			want[r.Level] = s
		}
		s.n++
		s.bytes += r.Bytes
		s.seq = append(s.seq, seq)
		if r.DCP != nil {
			s.written += r.DCP.Written
			s.protected += r.DCP.Protected
		}
	}
	require.Len(t, m.all, 5, "five checkpoints committed")
	require.Equal(t, []int64{1, 1, 3}, []int64{want[1].n, want[2].n, want[4].n})
	got := map[int]statsLevel{}
	for _, l := range st.Levels {
		got[l.Level] = l
	}
	require.Len(t, got, 3, "levels 1, 2 and 4")
	for lvl, s := range want {
		g := got[lvl]
		assert.Equal(t, s.n, g.Checkpoints, "L%d checkpoints", lvl)
		assert.Equal(t, s.bytes, g.Bytes, "L%d bytes", lvl)
		if s.protected == 0 {
			assert.Zero(t, g.DCPShare, "L%d: no differential checkpoint, no dCP share", lvl)
		}
		assert.GreaterOrEqual(t, g.Total, g.Blocked, "L%d: total includes the background time", lvl)
	}
	// The L4 chain: a full base (no dCP record in its manifest: it
	// writes all it protects, as much as each delta protects), then two
	// deltas writing a fraction.
	require.Equal(t, 2*want[4].protected, 2*want[4].protected/2*2)
	p := want[4].protected / 2
	require.Positive(t, p)
	assert.Less(t, want[4].written, want[4].protected/10, "the deltas write a few blocks")
	assert.InDelta(t, float64(p+want[4].written)/float64(3*p), got[4].DCPShare, 1e-12, "L4 dCP share")

	// The restart: one, from L2, after a failure of one lost node.
	assert.Equal(t, int64(2), st.Launches)
	assert.Equal(t, int64(1), got[2].Restarts)
	assert.Zero(t, got[1].Restarts+got[4].Restarts)
	assert.Greater(t, got[2].Recover, 0.0)
	assert.Equal(t, got[2].Recover, st.Recover)
	assert.Equal(t, [4]int64{0, 1, 0, 0}, st.Failures, "one node lost: a level-2 failure")
	// The lost work runs from the L2 manifest's time to the failed
	// launch's last sign of life, after its L1 checkpoint.
	l2, l1 := m.all[want[2].seq[0]], m.all[want[1].seq[0]]
	t2, err := time.Parse(time.RFC3339, l2.Time)
	require.NoError(t, err)
	t1, err := time.Parse(time.RFC3339, l1.Time)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, st.LostWork, 0.05, "the sleep between the two checkpoints")
	assert.GreaterOrEqual(t, st.LostWork+1, t1.Sub(t2).Seconds(), "manifest times are whole seconds")
	assert.Equal(t, st.LostWork, got[2].LostWork)
	assert.InDelta(t, (st.Wall-st.Blocked-st.Recover-st.LostWork)/st.Wall, st.ETTR, 1e-12)
}
