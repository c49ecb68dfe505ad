package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sharedConfig writes root/<name>.fti for np ranks: ckpt_dir root/local
// and glbl_dir root/global, shared by every job under root, and meta_dir
// root/meta-<name>, its own. restart is the [restart] section's body.
func sharedConfig(t *testing.T, root, name string, np int, restart string) string {
	t.Helper()
	return writeConfigAt(t, filepath.Join(root, name+".fti"), np,
		[3]string{filepath.Join(root, "local"), filepath.Join(root, "global"), filepath.Join(root, "meta-"+name)}, "", restart)
}

// runOfMeta returns the run id meta_dir names (ftigo.run).
func runOfMeta(t *testing.T, meta string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(meta, "ftigo.run"))
	require.NoError(t, err)
	id, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ftigo-run ")
	require.True(t, ok, "%q", b)
	return id
}

// heatJob is one C heat solver job of TestHeatJobsShareStorage.
type heatJob struct {
	name             string
	nx, rows         int
	levels, killLine string
}

func (h heatJob) args(cfg, out string, iters, every int) []string {
	return []string{cfg, out, strconv.Itoa(h.nx), strconv.Itoa(h.rows), strconv.Itoa(iters), strconv.Itoa(every), h.levels}
}

// TestHeatJobsShareStorage: two C heat solvers, A and B, of different
// grid sizes, run at once on the same ckpt_dir and glbl_dir (each its own
// meta_dir) through FTI's C API, and are killed in their third
// checkpoint (A while it writes, B in a pause before it). A is
// relaunched on its config. B's run is restarted by a third config with
// its own meta_dir that names it ([restart] failure = 1, exec_id):
// refused while B's meta_dir still names the run, accepted once it is
// lost. The two relaunches run at once. Each restarts from its own
// checkpoint and ends bit-identical to an uninterrupted run. Then, while
// A runs, a job on A's meta_dir is refused: the error names A's process.
func TestHeatJobsShareStorage(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		np := f.np
		// Checkpoints at 100, 200, ... 500: A is killed in its third one
		// (or soon after, on a loaded machine), well before it ends.
		const iters, every = 600, 100
		jobs := []heatJob{
			{name: "a", nx: 256, rows: 64, levels: "1234", killLine: "ckpt-begin id=3 level=3"},
			{name: "b", nx: 128, rows: 96, levels: "4321", killLine: "ckpt-begin id=3 level=2"},
		}
		root := t.TempDir()
		prog := program(t, f, "heatdis.c")
		refs := map[string]string{}
		for _, h := range jobs {
			ref := filepath.Join(root, "ref-"+h.name)
			refs[h.name] = filepath.Join(ref, "out")
			heat(t, f, np, writeConfig(t, ref, np, ""), refs[h.name], h.nx, h.rows, iters, 0, "0")
		}
		shared := filepath.Join(root, "shared")
		cfgs := map[string]string{}
		launches := map[string]*job{}
		for _, h := range jobs {
			cfgs[h.name] = sharedConfig(t, shared, h.name, np, "failure = 0")
			out := filepath.Join(shared, "out-"+h.name)
			require.NoError(t, os.MkdirAll(out, 0o755))
			if h.name == "b" {
				// B pauses before each checkpoint: the kill lands there,
				// before it writes anything of its third.
				require.NoError(t, os.Setenv("HEATDIS_PAUSE_MS", "3000"))
			}
			launches[h.name] = launch(t, f, np, h.killLine, prog, h.args(cfgs[h.name], out, iters, every)...)
			require.NoError(t, os.Unsetenv("HEATDIS_PAUSE_MS"))
		}
		for _, h := range jobs {
			out, err := launches[h.name].wait(t)
			require.Error(t, err, "job %s must die:\n%s", h.name, out)
			require.True(t, launches[h.name].killed, "job %s ended before its third checkpoint:\n%s", h.name, out)
			assert.NotContains(t, out, "metadata lost", "job %s", h.name)
		}
		runA, runB := runOfMeta(t, filepath.Join(shared, "meta-a")), runOfMeta(t, filepath.Join(shared, "meta-b"))
		require.NotEqual(t, runA, runB)
		require.DirExists(t, filepath.Join(shared, "global", runA))
		require.DirExists(t, filepath.Join(shared, "global", runB))

		// B's run named by a config with another meta_dir: refused while
		// meta-b names it, taken over once meta-b is lost.
		cfgC := sharedConfig(t, shared, "c", np, "failure = 1\nexec_id = "+runB)
		out, err := mpirun(t, f, np, prog, jobs[1].args(cfgC, filepath.Join(shared, "out-b"), iters, every)...)
		require.Error(t, err, "%s", out)
		assert.Contains(t, out, "run "+runB+" belongs to meta_dir "+filepath.Join(shared, "meta-b")+", which still names it")
		require.NoError(t, os.RemoveAll(filepath.Join(shared, "meta-b")))
		relaunch := map[string]string{"a": cfgs["a"], "b": cfgC}
		for _, h := range jobs {
			launches[h.name] = launch(t, f, np, "", prog, h.args(relaunch[h.name], filepath.Join(shared, "out-"+h.name), iters, every)...)
		}
		started := regexp.MustCompile(`EVENT rank=0 start status=1 iter=(\d+)`)
		for _, h := range jobs {
			out, err := launches[h.name].wait(t)
			require.NoError(t, err, "relaunch of job %s:\n%s", h.name, out)
			m := started.FindStringSubmatch(out)
			require.NotNil(t, m, "job %s must restart:\n%s", h.name, out)
			if h.name == "b" {
				assert.Equal(t, "200", m[1], "B's run restarts from its second checkpoint")
				assert.Contains(t, out, "The execution ID is: "+runB+" (taken over from glbl_dir")
			} else {
				assert.Contains(t, []string{"200", "300", "400", "500"}, m[1], "A restarts from the checkpoint before or after the kill")
			}
			want, got := readAll(t, refs[h.name], np), readAll(t, filepath.Join(shared, "out-"+h.name), np)
			for r := range want {
				assert.True(t, bytes.Equal(want[r], got[r]), "job %s rank %d: final field differs from the uninterrupted run", h.name, r)
			}
		}

		// While A runs (a long pause before its first checkpoint keeps it
		// there), a second job on A's meta_dir is refused, naming A's
		// process. Then A is killed.
		for _, d := range []string{"out-a2", "out-a3"} {
			require.NoError(t, os.MkdirAll(filepath.Join(shared, d), 0o755))
		}
		a := jobs[0]
		require.NoError(t, os.Setenv("HEATDIS_PAUSE_MS", "600000"))
		holder := launch(t, f, np, "never printed", prog, a.args(cfgs["a"], filepath.Join(shared, "out-a2"), iters, every)...)
		require.NoError(t, os.Unsetenv("HEATDIS_PAUSE_MS"))
		pid := regexp.MustCompile(`EVENT rank=0 pid pid=(\d+)`)
		var m []string
		for deadline := time.Now().Add(2 * time.Minute); (m == nil || holder.pidCount() < np) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			m = pid.FindStringSubmatch(holder.ranksOutput(false))
		}
		require.NotNil(t, m, "the holder job did not start")
		// MPICH's launcher may drop the output of ranks that MPI_Abort
		// ends: a refused job that printed nothing is tried again.
		for try := 0; try < 3; try++ {
			out, err = mpirun(t, f, np, prog, a.args(cfgs["a"], filepath.Join(shared, "out-a3"), iters, every)...)
			require.Error(t, err, "a second job on meta-a must be refused:\n%s", out)
			if strings.Contains(out, "FTI_Init returned") {
				break
			}
		}
		assert.Contains(t, out, "meta_dir "+filepath.Join(shared, "meta-a")+" is in use by heatdis (pid "+m[1]+" on host ")
		holder.killNow()
		holderOut, err := holder.wait(t)
		require.Error(t, err, "the holder is killed:\n%s", holderOut)
	})
}

// pidCount is how many rank processes the job has reported.
func (j *job) pidCount() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pids)
}

// killNow SIGKILLs every rank the job reported and its launcher, as a
// kill line would (launch must have been given one, so that it collects
// the ranks' pids).
func (j *job) killNow() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.killed = true
	for pid := range j.pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = j.cmd.Process.Kill()
}
