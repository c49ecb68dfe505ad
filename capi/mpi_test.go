package main

// The C tests: libftigo.so is built per MPI flavour with the README's
// command, C and C++ programs from testdata/ are compiled against
// include/fti.h with the flavour's compiler wrapper and run under its
// mpirun. They skip when the tools are missing and fail instead under
// FTIGO_REQUIRE_TOOLS=1 (CI).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ftigo/ftigo/internal/testutil"
)

// flavour is one MPI implementation the library is built for: MPI_Comm
// is an int in MPICH and a pointer in Open MPI, so each gets its own
// libftigo.so.
type flavour struct {
	name    string
	tags    string // go build -tags
	cc, cxx string // compiler wrappers
	fc      string // Fortran compiler wrapper
	run     string // launcher
	np      int    // ranks: MPICH busy-polls, so no more than the cores
	runArgs []string
}

var flavours = []flavour{
	{name: "openmpi", tags: "mpi", cc: "mpicc.openmpi", cxx: "mpicxx.openmpi", fc: "mpifort.openmpi", run: "mpirun.openmpi", np: 4,
		runArgs: []string{"-x", "GOMAXPROCS=1"}},
	{name: "mpich", tags: "mpi mpich", cc: "mpicc.mpich", cxx: "mpicxx.mpich", fc: "mpifort.mpich", run: "mpirun.mpich", np: 2},
}

// mpiEnv lets Open MPI run as root and oversubscribe the cores, and
// gives each rank's Go runtime one thread.
var mpiEnv = []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
	"OMPI_MCA_rmaps_base_oversubscribe=1", "GOMAXPROCS=1"}

// Built libraries and programs, shared by every test of the binary.
var (
	buildDir   string
	buildMu    sync.Mutex
	buildCache = map[string]buildResult{}
)

type buildResult struct {
	path string
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ftigo-capi-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		// The in-process tests' ranks and runtimes must all have ended.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// cached runs build once per key for the whole test binary.
func cached(t testing.TB, key string, build func() (string, error)) string {
	t.Helper()
	buildMu.Lock()
	r, ok := buildCache[key]
	if !ok {
		p, err := build()
		r = buildResult{p, err}
		buildCache[key] = r
	}
	buildMu.Unlock()
	require.NoError(t, r.err, "build %s", key)
	return r.path
}

// goTool is the go command: go test puts its GOROOT/bin first in PATH.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

func run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// needTools skips (or fails under FTIGO_REQUIRE_TOOLS=1) without the
// flavour's compilers and launcher.
func needTools(t testing.TB, f flavour, cxx bool) {
	t.Helper()
	testutil.NeedTool(t, f.cc, "compiles the C tests against libftigo ("+f.name+")")
	testutil.NeedTool(t, f.run, "runs the C tests ("+f.name+")")
	testutil.NeedTool(t, "pkg-config", "finds MPI for the cgo build of libftigo")
	if cxx {
		testutil.NeedTool(t, f.cxx, "compiles the C++ test ("+f.name+")")
	}
}

// libDir builds libftigo.so for f with the README's command
// (capi/build.sh, with the Fortran module when the compilers are there)
// and returns its directory. The C, Fortran and Python tests share it.
func libDir(t testing.TB, f flavour) string {
	return filepath.Join(buildOut(t, f), "lib")
}

// buildOut runs build.sh for f once and returns its output directory.
func buildOut(t testing.TB, f flavour) string {
	return cached(t, "build.sh/"+f.name, func() (string, error) {
		out := filepath.Join(buildDir, "out-"+f.name)
		cmd := exec.Command("bash", "build.sh", "--mpi", f.name, out)
		cmd.Env = append(os.Environ(), "GO="+goTool())
		b, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("build.sh: %w\n%s", err, b)
		}
		return out, nil
	})
}

// program compiles testdata/src for f with the README's compile line.
func program(t testing.TB, f flavour, src string) string {
	lib := libDir(t, f)
	return cached(t, f.name+"/"+src, func() (string, error) {
		out := filepath.Join(buildDir, f.name, strings.TrimSuffix(src, filepath.Ext(src)))
		cc, std := f.cc, []string{"-std=c99"}
		if strings.HasSuffix(src, ".cpp") {
			// Open MPI's own C++ bindings (mpi.h includes them) trip
			// -Wcast-function-type; fti.h itself is held to -Wextra.
			cc, std = f.cxx, []string{"-std=c++11", "-Wno-cast-function-type"}
		}
		inc, err := filepath.Abs("include")
		if err == nil {
			err = os.MkdirAll(filepath.Dir(out), 0o755)
		}
		if err != nil {
			return "", err
		}
		args := append(std, "-O2", "-Wall", "-Wextra", "-Werror", filepath.Join("testdata", src),
			"-I"+inc, "-L"+lib, "-lftigo", "-Wl,-rpath,"+lib, "-o", out)
		return out, run(cc, args...)
	})
}

// ftigoCLI builds the ftigo command.
func ftigoCLI(t testing.TB) string {
	return cached(t, "cmd/ftigo", func() (string, error) {
		out := filepath.Join(buildDir, "ftigo")
		return out, run(goTool(), "build", "-o", out, "github.com/ftigo/ftigo/cmd/ftigo")
	})
}

// writeConfig writes an FTI config.fti for a run in dir: one rank per
// simulated node, every node in one group.
func writeConfig(t testing.TB, dir string, np int, extra string) string {
	t.Helper()
	return writeConfigAt(t, filepath.Join(dir, "config.fti"), np, [3]string{filepath.Join(dir, "local"), filepath.Join(dir, "global"), filepath.Join(dir, "meta")},
		extra, "failure = 0\nexec_id = 2024-01-01_00-00-00")
}

// writeConfigAt writes config file p for np ranks with the directories
// ckpt_dir, glbl_dir and meta_dir of dirs, extra in [basic] and restart
// as the [restart] section.
func writeConfigAt(t testing.TB, p string, np int, dirs [3]string, extra, restart string) string {
	t.Helper()
	cfg := fmt.Sprintf(`[basic]
head = 0
node_size = 1
group_size = %d
ckpt_dir = %s
glbl_dir = %s
meta_dir = %s
verbosity = 2
%s
[restart]
%s

[advanced]
local_test = 1
block_size = 64
`, np, dirs[0], dirs[1], dirs[2], extra, restart)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(cfg), 0o644))
	return p
}

// rankFiles returns the arguments that make f's launcher write each
// rank's stdout and stderr to its own files under dir, and those files'
// names. Ranks' lines must not interleave: Open MPI gives each rank a
// pseudo-terminal and forwards what it reads in pieces, so lines from
// different ranks break into each other on the launcher's stdout.
func (f flavour) rankFiles(dir string, np int) (args []string, stdout, stderr []string) {
	for r := 0; r < np; r++ {
		if f.name == "openmpi" {
			stdout = append(stdout, filepath.Join(dir, "1", fmt.Sprintf("rank.%d", r), "stdout"))
			stderr = append(stderr, filepath.Join(dir, "1", fmt.Sprintf("rank.%d", r), "stderr"))
		} else {
			stdout = append(stdout, filepath.Join(dir, fmt.Sprintf("out.%d", r)))
			stderr = append(stderr, filepath.Join(dir, fmt.Sprintf("err.%d", r)))
		}
	}
	if f.name == "openmpi" {
		return []string{"--output-filename", dir}, stdout, stderr
	}
	return []string{"-outfile-pattern", filepath.Join(dir, "out.%r"), "-errfile-pattern", filepath.Join(dir, "err.%r")}, stdout, stderr
}

// job is one mpirun launch; each rank's output goes to its own files.
type job struct {
	cmd            *exec.Cmd
	np             int
	stdout, stderr []string // per rank
	launcher       bytes.Buffer
	mu             sync.Mutex
	pids           map[int]bool
	killed         bool
	done           chan struct{}
	err            error
}

var pidLine = regexp.MustCompile(`(?m)^EVENT rank=\d+ pid pid=(\d+)$`)

// launch starts prog under f's mpirun with np ranks. When killOn is not
// empty, the first rank output line containing it makes launch SIGKILL
// every rank and the launcher at once, as a node or job failure would.
func launch(t testing.TB, f flavour, np int, killOn string, prog string, args ...string) *job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	fileArgs, stdout, stderr := f.rankFiles(t.TempDir(), np)
	all := append(append(append([]string{"-np", strconv.Itoa(np)}, fileArgs...), f.runArgs...), prog)
	cmd := exec.CommandContext(ctx, f.run, append(all, args...)...)
	cmd.Env = append(os.Environ(), mpiEnv...)
	j := &job{cmd: cmd, np: np, stdout: stdout, stderr: stderr, pids: map[int]bool{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &j.launcher, &j.launcher
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		j.err = cmd.Wait()
		cancel()
		close(exited)
	}()
	go func() {
		defer close(j.done)
		if killOn == "" {
			<-exited
			return
		}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-exited:
				return
			case <-tick.C:
			}
			out := j.ranksOutput(false)
			j.mu.Lock()
			for _, m := range pidLine.FindAllStringSubmatch(out, -1) {
				pid, _ := strconv.Atoi(m[1])
				j.pids[pid] = true
			}
			if !j.killed && strings.Contains(out, killOn) {
				j.killed = true
				for pid := range j.pids {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				cmd.Process.Kill()
			}
			j.mu.Unlock()
		}
	}()
	return j
}

// ranksOutput returns every rank's output, rank by rank (stderr after
// stdout when withErr).
func (j *job) ranksOutput(withErr bool) string {
	var b strings.Builder
	for r := 0; r < j.np; r++ {
		out, _ := os.ReadFile(j.stdout[r])
		b.Write(out)
		if withErr {
			e, _ := os.ReadFile(j.stderr[r])
			b.Write(e)
		}
	}
	return b.String()
}

// wait waits for the launch to end and returns every rank's output (and
// the launcher's when it failed); after a kill it also waits until every
// rank is gone.
func (j *job) wait(t testing.TB) (string, error) {
	t.Helper()
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.killed {
		deadline := time.Now().Add(20 * time.Second)
		for pid := range j.pids {
			for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "rank process %d still alive after SIGKILL", pid)
		}
	}
	out := j.ranksOutput(true)
	if j.err != nil {
		out += "\n--- " + j.cmd.Path + ": " + j.err.Error() + " ---\n" + j.launcher.String()
	}
	return out, j.err
}

// mpirun runs prog to completion and returns its output.
func mpirun(t testing.TB, f flavour, np int, prog string, args ...string) (string, error) {
	t.Helper()
	return launch(t, f, np, "", prog, args...).wait(t)
}

// checks parses "CHECK name got=X want=Y ok|FAIL" lines and asserts every
// one passed; it returns how many there were.
func checks(t *testing.T, out string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "CHECK ") {
			continue
		}
		n++
		assert.True(t, strings.HasSuffix(line, " ok"), "%s", line)
	}
	return n
}

// forEachFlavour runs fn as a subtest per MPI flavour, one after the
// other (the kill test's timing needs the cores).
func forEachFlavour(t *testing.T, cxx bool, fn func(t *testing.T, f flavour)) {
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			needTools(t, f, cxx)
			fn(t, f)
		})
	}
}

func readAll(t *testing.T, dir string, np int) [][]byte {
	t.Helper()
	out := make([][]byte, np)
	for r := range out {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("final-%04d.bin", r)))
		require.NoError(t, err)
		out[r] = b
	}
	return out
}

// heat runs the C solver to the end and returns its output.
func heat(t *testing.T, f flavour, np int, cfg, outDir string, nx, rows, iters, every int, levels string, extra ...string) string {
	t.Helper()
	return heatProg(t, f, program(t, f, "heatdis.c"), np, cfg, outDir, nx, rows, iters, every, levels, extra...)
}

// heatProg runs a heat solver (heatdis.c's arguments) to the end and
// returns its output.
func heatProg(t *testing.T, f flavour, prog string, np int, cfg, outDir string, nx, rows, iters, every int, levels string, extra ...string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(outDir, 0o755))
	args := append([]string{cfg, outDir, strconv.Itoa(nx), strconv.Itoa(rows), strconv.Itoa(iters), strconv.Itoa(every), levels}, extra...)
	out, err := mpirun(t, f, np, prog, args...)
	require.NoError(t, err, "%s", out)
	return out
}

// heatSize gives every rank 1 MiB of grid at 4 ranks, 2 MiB at 2: big
// enough that an L4 checkpoint lasts far longer than the kill takes.
func heatSize(np int) (nx, rows int) { return 512, 1024 / np }

// TestHeatKillDuringCheckpointLoseNode is the scenario: the C
// heat solver checkpoints at L1, L2, L3 and L4 in turn through FTI's C
// API, is SIGKILLed while the L4 checkpoint is being written, loses one
// node's local storage, and the relaunch restarts from the L3 checkpoint
// (rebuilt by Reed-Solomon decoding) and ends bit-identical to an
// uninterrupted run.
func TestHeatKillDuringCheckpointLoseNode(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		killLoseNode(t, f, program(t, f, "heatdis.c"))
	})
}

// killLoseNode runs the kill-during-L4, lose-a-node, relaunch scenario
// with solver prog (heatdis.c's arguments), against the C solver's
// uninterrupted run.
func killLoseNode(t *testing.T, f flavour, prog string) {
	np := f.np
	nx, rows := heatSize(np)
	// Four times the grid: an L4 checkpoint commits in two rounds of
	// flushes, and at 1 MiB per rank it could commit before a kill
	// sent by a loaded machine landed.
	rows *= 4
	const iters, every = 600, 100
	root := t.TempDir()
	ref := filepath.Join(root, "ref")
	heat(t, f, np, writeConfig(t, ref, np, ""), filepath.Join(ref, "out"), nx, rows, iters, 0, "0")

	dir := filepath.Join(root, "run")
	cfg := writeConfig(t, dir, np, "")
	cfgBefore, err := os.ReadFile(cfg)
	require.NoError(t, err)
	outDir := filepath.Join(dir, "out")
	require.NoError(t, os.MkdirAll(outDir, 0o755))
	args := []string{cfg, outDir, strconv.Itoa(nx), strconv.Itoa(rows), strconv.Itoa(iters), strconv.Itoa(every), "1234"}
	j := launch(t, f, np, "ckpt-begin id=4 level=4", prog, args...)
	out1, err := j.wait(t)
	require.Error(t, err, "launch 1 must die:\n%s", out1)
	require.True(t, j.killed, "launch 1 ended before the L4 checkpoint began:\n%s", out1)
	for id := 1; id <= 3; id++ {
		assert.Contains(t, out1, fmt.Sprintf("ckpt-end id=%d level=%d rc=1", id, id))
	}
	require.NotContains(t, out1, "ckpt-end id=4", "the L4 checkpoint finished before the kill")
	require.NoFileExists(t, filepath.Join(outDir, "final-0000.bin"))

	lost := filepath.Join(dir, "local", fmt.Sprintf("node%04d", np/2))
	require.DirExists(t, lost)
	require.NoError(t, os.RemoveAll(lost))

	out2, err := mpirun(t, f, np, prog, args...)
	require.NoError(t, err, "%s", out2)
	assert.Contains(t, out2, "This is a restart. Recovering successfully from level 3 with Ckpt. 3 (ckpt")
	for r := 0; r < np; r++ {
		assert.Contains(t, out2, fmt.Sprintf("EVENT rank=%d start status=1 iter=300", r))
		assert.Contains(t, out2, fmt.Sprintf("EVENT rank=%d done iter=%d", r, iters))
	}
	want, got := readAll(t, filepath.Join(ref, "out"), np), readAll(t, outDir, np)
	for r := range want {
		assert.True(t, bytes.Equal(want[r], got[r]), "rank %d's final field differs from the uninterrupted run", r)
	}
	cfgAfter, err := os.ReadFile(cfg)
	require.NoError(t, err)
	assert.Equal(t, string(cfgBefore), string(cfgAfter), "the restart state lives in meta_dir, never in the user's config.fti")
}

// TestErrorPaths runs every function's error paths from C: before
// MPI_Init, before FTI_Init, bad ids, levels, types, sizes and NULL
// pointers, the unimplemented functions, after FTI_Finalize and after
// MPI_Finalize. Every call returns FTI's code, nothing crashes.
func TestErrorPaths(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, 1, "max_var_id = 999")
		bad := filepath.Join(dir, "bad.fti")
		require.NoError(t, os.WriteFile(bad, []byte("[basic]\nnode_size = 1\n[advanced]\nblock_size = many\n"), 0o644))
		out, err := mpirun(t, f, f.np, program(t, f, "errors.c"), cfg, bad)
		require.NoError(t, err, "%s", out)
		n := checks(t, out)
		assert.Greater(t, n, 150*f.np, "every rank ran every check")
		assert.Equal(t, f.np, strings.Count(out, "FAILURES 0\n"))
		for _, msg := range []string{
			"FTI_Protect: FTI is not initialized; call FTI_Init first",
			"FTI_Protect: FTI is finalized; call FTI_Init to start a new session",
			"FTI_Init: MPI is not initialized",
			"FTI_Checkpoint: MPI is already finalized",
			`got "many"`,
			"FTI_Protect: id 1000 out of bounds ([basic] max_var_id = 999)",
			"FTI_Protect: variable 1: NULL pointer for 8 elements",
			"handle 99 is not a type",
			"L4 dCP requested, but dCP is disabled (enable_dcp = 0): the checkpoint is taken whole at L4",
			"FTI_Checkpoint: dCP only implemented for level 4! setting to level 1...",
			"FTI_FinalizeICP: incremental checkpoint not committed",
			"FTI_SendFile: /tmp/a -> /tmp/b not queued",
			"set h5_single_file_enable = 1",
			`FTI_InitGroup: Group / already has the fields child.`,
			`FTI_RenameGroup: group "/fields" holds global dataset 5 already`,
			`FTI_AddSubset: rank mismatch: variable 1 given rank 1, dataset 5 "fields/u" has rank 2`,
			"FTI_UpdateSubset: variable 1 is not a subset of dataset 5 (FTI_AddSubset first)",
			"FTI_GetDatasetSpan: Dataset rank mismatch",
			"FTI_RecoverDatasetDimension: this is no recovery",
			`variable 1 has 24 bytes but its subset [1 4] of dataset 5 "fields/u" holds 4 elements`,
			"FTI_DefineDataset: Trying to define datasize: number of elements 2, but the dataset count is 4.",
			"FTI_SetAttribute with FTI_ATTRIBUTE_DIM is not implemented by ftigo",
			"FTI_Recover: nothing to recover",
			"a warning from the application",
		} {
			assert.Contains(t, out, msg)
		}
		if f.np > 1 {
			assert.Contains(t, out, "FTI_Checkpoint: ranks passed different ids or levels (here id 1, level 2)")
			assert.Contains(t, out, `overlapping subsets: dataset 5 "fields/u"`)
			assert.Contains(t, out, `dataset id 5 is 5 "fields/u" [`+fmt.Sprint(f.np)+` 4] float64 on rank 0 but`)
		}
		assert.NotContains(t, out, "debug output hidden at verbosity 2")
		assert.NotContains(t, out, "unknown priority prints nothing")
	})
}

// TestTypedNamedResizable runs dynamic.c twice: composite, old-style
// complex, opaque, long double and unsigned types; names kept across the
// restart; a variable that grew between checkpoints restored through
// FTI_Realloc with C's realloc; refused count, size and type mismatches
// that leave memory untouched; FTI_RecoverVar and FTI_Snapshot's recovery.
func TestTypedNamedResizable(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, 2, "")
		prog := program(t, f, "dynamic.c")
		out, err := mpirun(t, f, 2, prog, cfg, "write")
		require.NoError(t, err, "%s", out)
		assert.Greater(t, checks(t, out), 30)
		out, err = mpirun(t, f, 2, prog, cfg, "read")
		require.NoError(t, err, "%s", out)
		assert.Greater(t, checks(t, out), 60)
		assert.Equal(t, 2, strings.Count(out, "FAILURES 0\n"))
		assert.Contains(t, out, "FTI_Recover: Checkpoint has 6 protected variables, but FTI protects 3.")
		assert.Contains(t, out, "FTI_Recover: Cannot recover 80 bytes to protected variable (ID 0) size: 4")
		assert.Contains(t, out, "FTI_Recover: variable 6 is stored as struct elements of 24 bytes but protected as FTI_INTG (4 bytes)")
	})
}

// TestCXX compiles a C++ program that includes fti.h and runs it.
func TestCXX(t *testing.T) {
	forEachFlavour(t, true, func(t *testing.T, f flavour) {
		dir := t.TempDir()
		out, err := mpirun(t, f, f.np, program(t, f, "cxx.cpp"), writeConfig(t, dir, f.np, ""))
		require.NoError(t, err, "%s", out)
		assert.Equal(t, 11*f.np, checks(t, out))
		assert.Equal(t, f.np, strings.Count(out, "FAILURES 0\n"))
		assert.Contains(t, out, "[ FTI  Information ] : hello from C++")
	})
}

// exitCode runs the ftigo command and returns its exit code and output.
func exitCode(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(ftigoCLI(t), args...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	require.NoError(t, err, "%s", out)
	return 0, string(out)
}

// TestStaging runs FTI's staging calls from C with enable_staging = 1:
// every rank's file goes from the staging directory to global storage in
// the background, its status is polled to FTI_SI_SCES and the copy
// checked; a missing source ends in FTI_SI_FAIL; the staging directory
// is gone after FTI_Finalize.
func TestStaging(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, 1, "enable_staging = 1")
		dest := filepath.Join(dir, "results")
		out, err := mpirun(t, f, f.np, program(t, f, "staging.c"), cfg, dest)
		require.NoError(t, err, "%s", out)
		n := checks(t, out)
		assert.Equal(t, 14*f.np, n, "every rank ran every check")
		assert.Equal(t, f.np, strings.Count(out, "FAILURES 0\n"))
		for r := 0; r < f.np; r++ {
			b, err := os.ReadFile(filepath.Join(dest, fmt.Sprintf("rank%d", r)))
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("staged by rank %d\n", r), string(b))
		}
	})
}

// TestHeatHeads runs the C solver with FTI's heads (head = 1, nodes of 2
// processes, inline_l2/l3/l4 = 0, keep_heads_alive = 0): the heads never
// return from FTI_Init (they end the process once the application has
// finalized, as FTI's do), the application ranks compute on
// FTI_COMM_WORLD without them, their L2, L3 and L4 checkpoints are
// post-processed by the heads, and the final field is bit-identical to an
// uninterrupted run on the application ranks alone. It runs after a plain
// MPI_Init, as FTI's codes call it (MPI_THREAD_SINGLE: every MPI call of
// the library is made by the thread that called FTI_Init), and after
// MPI_Init_thread with MPI_THREAD_MULTIPLE.
func TestHeatHeads(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		for _, multiple := range []bool{false, true} {
			name := "MPI_Init"
			if multiple {
				name = "thread_multiple"
				t.Setenv("HEATDIS_THREAD_MULTIPLE", "1")
			}
			t.Run(name, func(t *testing.T) {
				const np, app = 4, 2
				out := heatBackground(t, f, program(t, f, "heatdis.c"), np, app, "head = 1\nnode_size = 2\ngroup_size = 2\ninline_l2 = 0\ninline_l3 = 0\ninline_l4 = 0", multiple)
				for id := 1; id <= 3; id++ {
					assert.Contains(t, out, fmt.Sprintf("Ckpt. ID %d (L1 -> L%d) post-processed by the heads", id, id+1))
				}
				assert.NotContains(t, out, "EVENT rank=2", "a head ran the solver")
			})
		}
	})
}

// TestHeatAsync runs the C solver after a plain MPI_Init with
// asynchronous post-processing on the application ranks (head = 0,
// inline_l2/l3/l4 = 0): each rank's background goroutine raises the
// checkpoints, its MPI calls funnelled to the thread that called FTI_Init,
// and the final field is bit-identical to an uninterrupted run.
func TestHeatAsync(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		out := heatBackground(t, f, program(t, f, "heatdis.c"), 2, 2, "group_size = 2\ninline_l2 = 0\ninline_l3 = 0\ninline_l4 = 0", false)
		for id := 1; id <= 3; id++ {
			assert.Contains(t, out, fmt.Sprintf("Ckpt. ID %d (L1 -> L%d) post-processed in the background", id, id+1))
		}
		assert.NotContains(t, out, "inline_lN = 0 ignored")
	})
}

// heatBackground runs the C solver with np processes (app of them
// application ranks) and the configuration's extra keys, checkpointing at
// L2, L3 and L4, and checks that every checkpoint ended FTI_DONE, that the
// thread level is the one asked for and that the final field equals an
// uninterrupted run's. It returns the output.
func heatBackground(t *testing.T, f flavour, prog string, np, app int, extra string, multiple bool) string {
	t.Helper()
	nx, rows := 256, 128
	const iters, every = 400, 100
	root := t.TempDir()
	ref := filepath.Join(root, "ref")
	heat(t, f, app, writeConfig(t, ref, app, ""), filepath.Join(ref, "out"), nx, rows, iters, 0, "0")
	dir := filepath.Join(root, "run")
	cfg := writeConfig(t, dir, np, extra)
	out := heatProg(t, f, prog, np, cfg, filepath.Join(dir, "out"), nx, rows, iters, every, "234")
	level := "single"
	if multiple {
		level = "multiple"
	}
	for r := 0; r < app; r++ {
		assert.Contains(t, out, fmt.Sprintf("EVENT rank=%d thread provided=%s", r, level))
		assert.Contains(t, out, fmt.Sprintf("EVENT rank=%d done iter=%d", r, iters))
	}
	for id := 1; id <= 3; id++ {
		assert.Contains(t, out, fmt.Sprintf("ckpt-end id=%d level=%d rc=1", id, id+1))
	}
	assert.NotContains(t, out, "needs MPI_THREAD_MULTIPLE")
	want, got := readAll(t, filepath.Join(ref, "out"), app), readAll(t, filepath.Join(dir, "out"), app)
	for r := range want {
		assert.True(t, bytes.Equal(want[r], got[r]), "rank %d's final field differs from the uninterrupted run", r)
	}
	return out
}
