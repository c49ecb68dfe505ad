package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// ftigo halt on a running job: the ranks take their final checkpoint at
// their next Checkpoint call after the command, and ShouldExit; the
// relaunch restores that checkpoint.
func TestHaltRunningJob(t *testing.T) {
	dir := t.TempDir()
	cfg := ckpt.DefaultConfig()
	cfg.NodeSize, cfg.GroupSize, cfg.LocalTest = 1, 2, true
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")
	const haltAfter = 4
	// Rank 0 pauses after iterations 3 and 4 (rank 1 waits in the next
	// call) for the test to run ftigo halt.
	ready := map[int]chan struct{}{haltAfter - 1: make(chan struct{}), haltAfter: make(chan struct{})}
	resume := map[int]chan struct{}{haltAfter - 1: make(chan struct{}), haltAfter: make(chan struct{})}
	stopped := make([]int, 2)
	done := make(chan error, 1)
	go func() {
		done <- haltJob(cfg, func(rt *ckpt.Runtime, x []float64, c comm.Comm) error {
			for it := 1; it <= 10; it++ {
				x[0] = float64(it)
				if err := rt.Checkpoint(int64(it), 1); err != nil {
					return err
				}
				if rt.ShouldExit() {
					stopped[c.Rank()] = it
					return nil
				}
				if ch, ok := ready[it]; ok && c.Rank() == 0 {
					close(ch)
					<-resume[it]
				}
			}
			return errors.New("the job ran to its end")
		})
	}()
	<-ready[haltAfter-1]
	code, out, errOut := ftigo("halt", dir, "--reason", "maintenance", "--deadline", "2030-01-02T03:04:05Z", "--json")
	require.Equal(t, 0, code, errOut)
	var res haltResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, haltResult{HaltFile: filepath.Join(cfg.MetaDir, ckpt.HaltName), Action: "written",
		Reason: "maintenance", Deadline: "2030-01-02T03:04:05Z"}, res)
	h, err := ckpt.ReadHalt(vfd.Sec2{}, cfg.MetaDir)
	require.NoError(t, err)
	assert.Equal(t, "maintenance", h.Reason)
	assert.True(t, h.Deadline.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)))
	// A deadline years away leaves room to wait: the job goes on.
	close(resume[haltAfter-1])
	<-ready[haltAfter]
	assert.Equal(t, []int{0, 0}, stopped, "a distant deadline does not stop the job yet")
	// Without a deadline the next call stops.
	code, out, errOut = ftigo("halt", dir, "--reason", "maintenance")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "halt file written: "+filepath.Join(cfg.MetaDir, ckpt.HaltName))
	close(resume[haltAfter])
	require.NoError(t, <-done)
	assert.Equal(t, []int{haltAfter + 1, haltAfter + 1}, stopped, "every rank stops at its next call after the command")
	_, err = ckpt.ReadHalt(vfd.Sec2{}, cfg.MetaDir)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the job removes the halt file")

	// The relaunch restores the final checkpoint.
	require.NoError(t, haltJob(cfg, func(rt *ckpt.Runtime, x []float64, _ comm.Comm) error {
		if err := rt.Recover(); err != nil {
			return err
		}
		if x[0] != haltAfter+1 {
			return errors.New("the relaunch did not restore the final checkpoint")
		}
		return nil
	}))

	// ftigo stats reads the same run from its history: four L1
	// checkpoints and the final one at L4 (as the log says), two clean
	// launches, the second restarted from L4.
	code, out, errOut = ftigo("stats", dir, "--json")
	require.Equal(t, 0, code, errOut)
	var st statsResult
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, int64(2), st.Launches)
	assert.Equal(t, [4]int64{}, st.Failures)
	require.Len(t, st.Levels, 2)
	assert.Equal(t, []int{1, 4}, []int{st.Levels[0].Level, st.Levels[1].Level})
	assert.Equal(t, []int64{haltAfter, 1}, []int64{st.Levels[0].Checkpoints, st.Levels[1].Checkpoints})
	assert.Equal(t, int64(1), st.Levels[1].Restarts)
	assert.Zero(t, st.LostWork)
}

// haltJob runs fn on 2 in-process ranks, each with a runtime of cfg and
// one protected float64.
func haltJob(cfg ckpt.Config, fn func(rt *ckpt.Runtime, x []float64, c comm.Comm) error) error {
	return comm.Run(2, func(c comm.Comm) error {
		rt, err := ckpt.Init(cfg, c)
		if err != nil {
			return err
		}
		defer rt.Close()
		x := []float64{0}
		if err := ckpt.Protect(rt, 0, &x); err != nil {
			return err
		}
		return fn(rt, x, c)
	}, comm.WithTimeout(60*time.Second))
}

// halt --clear removes the file; with none it says so; bad values are
// usage errors.
func TestHaltClearAndUsage(t *testing.T) {
	dir := t.TempDir()
	meta := filepath.Join(dir, "meta")
	require.NoError(t, os.MkdirAll(meta, 0o755))
	name := filepath.Join(meta, ckpt.HaltName)

	code, out, errOut := ftigo("halt", dir, "--deadline", "15m")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "to end by: ")
	h, err := ckpt.ReadHalt(vfd.Sec2{}, meta)
	require.NoError(t, err)
	left := time.Until(h.Deadline)
	assert.True(t, left > 14*time.Minute && left <= 15*time.Minute, "deadline %v from now", left)

	code, out, errOut = ftigo("halt", dir, "--clear")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "halt file removed: "+name+"\n", out)
	_, err = os.Stat(name)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	code, out, errOut = ftigo("halt", dir, "--clear", "--json")
	require.Equal(t, 0, code, errOut)
	assert.JSONEq(t, `{"halt_file":"`+name+`","action":"none"}`, out)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--deadline", "soon"}, `--deadline "soon"`},
		{[]string{"--deadline", "-5m"}, `--deadline "-5m"`},
		{[]string{"--clear", "--reason", "x"}, "--clear takes neither"},
		{[]string{"--reason", "a\nb"}, "--reason must be one line"},
	} {
		code, _, errOut := ftigo(append([]string{"halt", dir}, tc.args...)...)
		assert.Equal(t, 2, code, tc.args)
		assert.Contains(t, errOut, tc.want, tc.args)
		_, err := os.Stat(name)
		assert.ErrorIs(t, err, fs.ErrNotExist, "no halt file after %v", tc.args)
	}
	code, _, errOut = ftigo("halt", filepath.Join(dir, "none"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, filepath.Join(dir, "none"))
}
