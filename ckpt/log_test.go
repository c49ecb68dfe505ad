package ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// tickClock advances by step on every reading, so every measured interval
// is positive and a multiple of step.
type tickClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *tickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// TestCheckpointInfoLine: every committed checkpoint logs exactly one info
// line (from rank 0) in FTI's manner, with id, level, MiB per rank, wall
// time, bandwidth and the split between writing, post-processing and
// commit, as text and as fields; a rejected checkpoint logs none.
func TestCheckpointInfoLine(t *testing.T) {
	const n = 4
	cfg := testConfig(t.TempDir(), 1)
	cfg.GroupSize = 2
	core, logs := observer.New(zapcore.InfoLevel)
	clk := &tickClock{t: time.Unix(5000, 0), step: time.Millisecond}
	opts := []Option{WithLogger(zap.New(core)), WithClock(clk.Now), WithLevels(failingL2{})}
	var bytes [5]int64 // per checkpoint id
	require.NoError(t, world(t, n, cfg, opts, func(r *Runtime) error {
		x := make([]float64, 4096*(r.c.Rank()+1))
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		for id, lvl := range []int{1: 1, 2: 3, 3: 4} {
			if id == 0 {
				continue
			}
			if err := r.Checkpoint(int64(id), lvl); err != nil {
				return err
			}
			if r.c.Rank() == 0 {
				c := r.eng.Committed()
				bytes[id] = c[len(c)-1].Bytes()
			}
		}
		if err := r.Checkpoint(4, 2); err == nil {
			return fmt.Errorf("the failing L2 checkpoint committed")
		}
		return nil
	}))

	lines := logs.FilterMessageSnippet("Ckpt. ID").FilterLevelExact(zapcore.InfoLevel).AllUntimed()
	require.Len(t, lines, 3, "one line per committed checkpoint, none for the rejected one")
	// The rejected one is logged once, as an error, with its error.
	failed := logs.FilterMessage("Ckpt. ID 4 (level 2) failed").AllUntimed()
	require.Len(t, failed, 1)
	assert.Equal(t, zapcore.ErrorLevel, failed[0].Level)
	assert.Equal(t, int64(0), failed[0].ContextMap()["rank"])
	assert.Contains(t, failed[0].ContextMap()["error"], "ckpt: checkpoint 4 at L2: checkpoint rejected: protect checkpoint at L2 failed on 4 ranks (0, 1, 2, 3); rank 0: injected protect failure")
	re := regexp.MustCompile(`^Ckpt\. ID (\d+) \((L\d)\) \((\d+\.\d\d) MiB/proc\) taken in (\d+\.\d{3}) sec\., (\d+\.\d) MiB/s \(Wt (\d+\.\d{3}), Wr (\d+\.\d{3}), Ps (\d+\.\d{3}), Cm (\d+\.\d{3})\)$`)
	for i, e := range lines {
		id := i + 1
		lvl := []levels.ID{0, levels.L1, levels.L3, levels.L4}[id]
		assert.Equal(t, zapcore.InfoLevel, e.Level)
		m := re.FindStringSubmatch(e.Message)
		require.NotNil(t, m, "line %q", e.Message)
		assert.Equal(t, strconv.Itoa(id), m[1])
		assert.Equal(t, lvl.String(), m[2])

		f := e.ContextMap()
		assert.Equal(t, int64(0), f["rank"], "logged by rank 0")
		assert.Equal(t, int64(id), f["ckpt-id"])
		assert.Equal(t, lvl.String(), f["ckpt-level"])
		assert.Equal(t, bytes[id], f["bytes"])
		mib := float64(bytes[id]) / n / (1 << 20)
		assert.InDelta(t, mib, f["mib-per-rank"], 1e-12)
		assert.Equal(t, fmt.Sprintf("%.2f", mib), m[3])
		wall := f["wall"].(time.Duration)
		wt, ps, cm := f["write"].(time.Duration), f["post"].(time.Duration), f["commit"].(time.Duration)
		for _, d := range []time.Duration{wall, wt, ps, cm} {
			assert.Positive(t, d)
			assert.Zero(t, d%time.Millisecond, "measured with the injected clock")
		}
		assert.LessOrEqual(t, wt+ps+cm, wall, "the split fits in the wall time")
		assert.InDelta(t, float64(bytes[id])/(1<<20)/wall.Seconds(), f["mib-per-s"], 1e-9)
		assert.Equal(t, fmt.Sprintf("%.3f", wall.Seconds()), m[4])
		assert.Equal(t, fmt.Sprintf("%.1f", f["mib-per-s"]), m[5])
		assert.Equal(t, time.Duration(0), f["wait"], "nothing in the background to wait for")
		assert.Equal(t, "0.000", m[6])
		assert.Equal(t, fmt.Sprintf("%.3f", wt.Seconds()), m[7])
		assert.Equal(t, fmt.Sprintf("%.3f", ps.Seconds()), m[8])
		assert.Equal(t, fmt.Sprintf("%.3f", cm.Seconds()), m[9])
	}
	// At verbosity 3 (warnings) the line is not logged, as in FTI.
	cfg.Verbosity = 3
	core, logs = observer.New(zapcore.DebugLevel)
	opts[0] = WithLogger(zap.New(core))
	require.NoError(t, world(t, n, cfg, opts, func(r *Runtime) error {
		x := []float64{1}
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		return r.Checkpoint(9, 1)
	}))
	assert.Zero(t, logs.FilterMessageSnippet("Ckpt. ID").Len())
}

// TestStricterLoggerStaysQuiet: a logger already stricter than verbosity
// (errors only, verbosity 2) is kept as it is, without one "failed to
// IncreaseLevel" line per rank on its error output, and still filters.
func TestStricterLoggerStaysQuiet(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.Verbosity = 2
	core, logs := observer.New(zapcore.ErrorLevel)
	var errOut bytes.Buffer
	var mu sync.Mutex
	lg := zap.New(core, zap.ErrorOutput(zapcore.AddSync(lockedWriter{&mu, &errOut})))
	require.NoError(t, world(t, 4, cfg, []Option{WithLogger(lg)}, func(r *Runtime) error {
		x := []float64{1}
		return errors.Join(Protect(r, 0, &x), r.Checkpoint(1, 1))
	}))
	assert.Empty(t, errOut.String())
	assert.Zero(t, logs.Len(), "info lines stay filtered: %v", logs.All())
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestL4ContainerDamageWording: an inline L4 checkpoint has no local copy
// of its data, so a corrupt or missing container is reported as such,
// not as "local copy unusable".
func TestL4ContainerDamageWording(t *testing.T) {
	for _, how := range []string{"corrupt", "missing"} {
		t.Run(how, func(t *testing.T) {
			root := t.TempDir()
			cfg := testConfig(root, 1)
			require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
				x := make([]float64, 1000)
				return errors.Join(Protect(r, 0, &x), r.Checkpoint(1, 4))
			}))
			p := filepath.Join(cfg.GlobalDir(runOf(t, cfg)), levels.CheckpointDir(1), levels.ContainerName)
			if how == "missing" {
				require.NoError(t, vfd.Sec2{}.Remove(p))
			} else {
				corruptFile(t, p)
			}
			for _, err := range initErrors(t, 2, cfg) {
				require.ErrorIs(t, err, ErrUnrecoverable)
				assert.Contains(t, err.Error(), "L4: the container is "+how+": rank 0's file")
				assert.Equal(t, 1, strings.Count(err.Error(), p), "the path once: %v", err)
				assert.NotContains(t, err.Error(), "local copy")
			}
		})
	}
}
