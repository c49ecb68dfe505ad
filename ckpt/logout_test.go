package ckpt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// TestFTILoggerLines: NewFTILogger prints FTI's prefixes, information
// and debug on stdout, warnings and errors on stderr, each rank's tag,
// information from (application) rank 0 only, each field once, and
// nothing below the verbosity.
func TestFTILoggerLines(t *testing.T) {
	var out, errOut bytes.Buffer
	base := NewFTILogger(1, &out, &errOut)
	r0 := base.With(zap.Int("rank", 0))
	r3 := base.With(zap.Int("rank", 3))
	r0.Info("hello", zap.String("k", "v"), zap.String("k", "w"))
	r3.Info("rank 3's information is not printed")
	r3.Warn("careful", zap.String("file", "/x"))
	r3.Error("broken", zap.Error(errors.New("disk full")))
	r3.Debug("dbg")
	r0.Info("Ckpt. ID 1 (L1) (1.00 MiB/proc) taken in 0.1 sec.", zap.Int64("bytes", 1))
	// With heads: the tag is the world rank, the information is
	// application rank 0's.
	h := base.With(zap.Int("rank", 5), zap.Int("app-rank", 0))
	h.Info("from application rank 0")
	h.Warn("tagged with the world rank")
	base.With(zap.Int("rank", 0), zap.Int("app-rank", 2)).Info("application rank 2 is silent")
	assert.Equal(t, "[ FTI  Information ] : hello (k=w)\n"+
		"[FTI Debug - 000003] : dbg\n"+
		"[ FTI  Information ] : Ckpt. ID 1 (L1) (1.00 MiB/proc) taken in 0.1 sec.\n"+
		"[ FTI  Information ] : from application rank 0\n", out.String())
	assert.Equal(t, "[ FTI Warning 000003 ] : careful (file=/x)\n"+
		"[ FTI Error - 000003 ] : broken (error=disk full)\n"+
		"[ FTI Warning 000005 ] : tagged with the world rank\n", errOut.String())

	for v, want := range map[int][]string{
		1: {"d", "i", "w", "e"}, 2: {"i", "w", "e"}, 3: {"w", "e"}, 4: {"e"},
	} {
		var b bytes.Buffer
		l := NewFTILogger(v, &b, &b).With(zap.Int("rank", 0))
		l.Debug("d")
		l.Info("i")
		l.Warn("w")
		l.Error("e")
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			got = append(got, line[strings.LastIndex(line, " ")+1:])
		}
		assert.Equal(t, want, got, "verbosity %d", v)
	}

	// One Write per line, from many goroutines at once.
	var mu sync.Mutex
	var shared bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if bytes.Count(p, []byte("\n")) != 1 {
			return 0, fmt.Errorf("write of %q is not one line", p)
		}
		return shared.Write(p)
	})
	l := NewFTILogger(3, w, w)
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lr := l.With(zap.Int("rank", r))
			for range 50 {
				lr.Warn("w", zap.Int("i", r))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 400, strings.Count(shared.String(), "\n"))
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// logChildEnv names the directory and verbosity of a run of
// TestDefaultLoggerChild, in the child process TestDefaultLogger starts.
const logChildEnv = "FTIGO_TEST_LOG_CHILD"

// TestDefaultLoggerChild is a program that gives Init no logger: it
// loads dir/config.fti, takes an L4 checkpoint asked as 8 and an L1 one
// asked as 5 (dCP is off), fails a level-9 one, loses a file of the L1
// one and restarts. It runs only in the child process of
// TestDefaultLogger.
func TestDefaultLoggerChild(t *testing.T) {
	dir := os.Getenv(logChildEnv)
	if dir == "" {
		t.Skip("run by TestDefaultLogger in a child process")
	}
	cfg, err := LoadConfig(vfd.Sec2{}, filepath.Join(dir, "config.fti"))
	require.NoError(t, err)
	launch := func(fn func(r *Runtime, x *[]float64) error) {
		require.NoError(t, comm.Run(2, func(c comm.Comm) error {
			r, err := Init(cfg, c)
			if err != nil {
				return err
			}
			defer r.Close()
			x := make([]float64, 512)
			if err := Protect(r, 0, &x); err != nil {
				return err
			}
			return fn(r, &x)
		}, comm.WithTimeout(30*time.Second)))
	}
	launch(func(r *Runtime, _ *[]float64) error {
		if err := errors.Join(r.Checkpoint(1, 8), r.Checkpoint(2, 5)); err != nil {
			return err
		}
		if err := r.Checkpoint(3, 9); !errors.Is(err, ErrLevelUnavailable) {
			return fmt.Errorf("level 9 without h5_single_file_enable: %v", err)
		}
		return nil
	})
	require.NoError(t, os.Remove(filepath.Join(cfg.NodeDir(1, runOf(t, cfg)), "ckpt00000002/data000001.fti")))
	launch(func(r *Runtime, _ *[]float64) error { return r.Recover() })
}

// TestDefaultLogger: a program without a logger prints, at each
// verbosity, what FTI would: the configuration's warnings (a misspelled
// key, an unsupported ckpt_io), the downgraded dCP requests, the
// fallback to an older checkpoint and the failed checkpoint on stderr;
// the checkpoint, restart and recovery lines on stdout from rank 0 at
// verbosity 2 and below; every rank's debug lines at verbosity 1; and
// nothing else.
func TestDefaultLogger(t *testing.T) {
	for v := 1; v <= 4; v++ {
		t.Run(fmt.Sprintf("verbosity=%d", v), func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "config.fti")
			require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(
				"[basic]\nnode_size = 1\ngroup_size = 2\nckpt_dir = %s/local\nglbl_dir = %s/global\nmeta_dir = %s/meta\nverbosity = %d\nckpt_ll = 5\nckpt_io = 2\n[advanced]\nlocal_test = 1\nblock_size = 16\n",
				dir, dir, dir, v)), 0o644))
			cmd := exec.Command(os.Args[0], "-test.run=^TestDefaultLoggerChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), logChildEnv+"="+dir)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			out, errs := ftiLines(stdout.String()), ftiLines(stderr.String())

			type want struct {
				lines []string // regexps, each matching exactly n lines
				n     int
				from  int // the lowest verbosity that prints them
			}
			warn := `^\[ FTI Warning 000000 \] : `
			for _, w := range []want{
				{[]string{warn + `config: ` + regexp.QuoteMeta(cfgPath) + `: unknown keys ignored: \[basic\] ckpt_ll$`,
					warn + `config: ` + regexp.QuoteMeta(cfgPath) + `:\d+: \[basic\] ckpt_io = 2 ignored: `}, 2, 3},
				{[]string{warn + regexp.QuoteMeta("L4 dCP requested, but dCP is disabled (enable_dcp = 0): the checkpoint is taken whole at L4 (ckpt-level=8)"),
					warn + regexp.QuoteMeta("L1 dCP requested, but dCP is disabled (enable_dcp = 0): the checkpoint is taken whole at L1 (ckpt-level=5)"),
					warn + regexp.QuoteMeta("checkpoint not recoverable, trying an older one (seq=2, ckpt-id=2, ckpt-level=L1, error=recover checkpoint ckpt00000002 (id 2, L1) failed on rank 1: "),
					warn + regexp.QuoteMeta("restarting from the older checkpoint 1 (L4): skipped unrecoverable checkpoint(s) 2 (L1, ckpt00000002)")}, 1, 3},
				{[]string{`^\[ FTI Error - 000000 \] : ` + regexp.QuoteMeta("Ckpt. ID 3 (level 9) failed (ckpt-id=3, ckpt-level=9, error=ckpt: checkpoint level 9 (FTI_L4_H5_SINGLE): level not available: set h5_single_file_enable = 1)") + `$`}, 1, 4},
			} {
				for _, re := range w.lines {
					n := 0
					if v <= w.from {
						n = w.n
					}
					assert.Len(t, grep(errs, re), n, "stderr %q at verbosity %d:\n%s", re, v, stderr.String())
					assert.Empty(t, grep(out, re), "not on stdout")
				}
			}
			info := `^\[ FTI  Information \] : `
			for _, re := range []string{
				info + `Ckpt\. ID 1 \(L4\) \(0\.00 MiB/proc\) taken in \d+\.\d{3} sec\., \d+\.\d MiB/s \(Wt \d+\.\d{3}, Wr \d+\.\d{3}, Ps \d+\.\d{3}, Cm \d+\.\d{3}\)$`,
				info + `Ckpt\. ID 2 \(L1\) \(0\.00 MiB/proc\) taken in `,
				info + `This is a restart\. Recovering successfully from level 4 with Ckpt\. 1 \(ckpt00000001\) in \d+\.\d{3} sec\.$`,
				info + `Recovered 1 variables from Ckpt\. 1 \(L4\) in \d+\.\d{3} sec\.$`,
			} {
				n := 0
				if v <= 2 {
					n = 1
				}
				assert.Len(t, grep(out, re), n, "stdout %q at verbosity %d:\n%s", re, v, stdout.String())
			}
			for _, rank := range []string{"000000", "000001"} {
				n := 0
				if v == 1 {
					n = 1 // the first launch is a fresh run on both ranks
				}
				assert.Len(t, grep(out, `^\[FTI Debug - `+rank+`\] : fresh run$`), n, "verbosity %d", v)
			}
			// Nothing but FTI's lines, on the right stream, each once
			// per event: warnings and errors on stderr only, and the
			// skipped checkpoint not printed a second time.
			for _, l := range out {
				assert.Regexp(t, `^(\[ FTI  Information \]|\[FTI Debug - \d{6}\]) : `, l)
			}
			for _, l := range errs {
				assert.Regexp(t, `^\[ FTI (Warning|Error -) \d{6} \] : `, l)
			}
			if v >= 2 {
				assert.Empty(t, grep(out, `FTI Debug`))
			}
			if v == 4 {
				assert.Len(t, errs, 1, "errors only")
				assert.Empty(t, out)
			}
			assert.NotContains(t, stderr.String(), "ftigo: warning", "the default logger prints the fallback, once")
		})
	}
}

// ftiLines returns the lines of s that FTI's logger printed.
func ftiLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "[FTI") || strings.HasPrefix(l, "[ FTI") {
			out = append(out, l)
		}
	}
	return out
}

func grep(lines []string, re string) []string {
	r := regexp.MustCompile(re)
	var out []string
	for _, l := range lines {
		if r.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// repeatedKey returns the first key a JSON object (or one nested in it)
// holds twice, "" if none; encoding/json keeps the last silently.
func repeatedKey(line []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	var walk func() (string, error)
	walk = func() (string, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return "", err
				}
				key := k.(string)
				if seen[key] {
					return key, nil
				}
				seen[key] = true
				if dup, err := walk(); dup != "" || err != nil {
					return dup, err
				}
			}
			_, err = dec.Token()
			return "", err
		case json.Delim('['):
			for dec.More() {
				if dup, err := walk(); dup != "" || err != nil {
					return dup, err
				}
			}
			_, err = dec.Token()
			return "", err
		}
		return "", nil
	}
	return walk()
}

func TestRepeatedKey(t *testing.T) {
	for line, want := range map[string]string{
		`{"a":1,"b":{"c":[1,{"d":2}]}}`: "",
		`{"rank":3,"rank":3}`:           "rank",
		`{"a":{"x":1,"x":2}}`:           "x",
		`{"a":[{"y":1},{"y":1,"y":2}]}`: "y",
	} {
		got, err := repeatedKey([]byte(line))
		require.NoError(t, err, line)
		assert.Equal(t, want, got, line)
	}
}

// jsonLog is a zap logger writing JSON lines, at debug level, to a
// buffer safe for the ranks' goroutines.
type jsonLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (j *jsonLog) logger() *zap.Logger {
	w := zapcore.AddSync(lockedWriter{&j.mu, &j.buf})
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), w, zapcore.DebugLevel))
}

// lines parses every line, failing the test on one that repeats a key.
func (j *jsonLog) lines(t *testing.T) []map[string]any {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(j.buf.Bytes()), []byte("\n")) {
		dup, err := repeatedKey(l)
		require.NoError(t, err, "%s", l)
		assert.Empty(t, dup, "key %q twice in %s", dup, l)
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m), "%s", l)
		out = append(out, m)
	}
	return out
}

// TestLogKeysOnce: no line of a JSON log repeats a key, over checkpoints
// at every level, a failed one, restarts that rebuild lost files from
// the partner copy, the parity and the container, a fallback, and heads;
// with heads, rank (the world's) and app-rank (the application's) are
// both there and differ.
func TestLogKeysOnce(t *testing.T) {
	j := &jsonLog{}
	lg := j.logger()
	for _, sc := range []struct {
		name    string
		levels  []int // the checkpoints taken, at these levels
		fails   bool  // the checkpoint at L2 fails (a failing level)
		recover bool  // the restart after node 1 is lost recovers; else it is unrecoverable
	}{
		{"L1", []int{1}, false, false},
		{"L2", []int{2}, false, true},
		{"L3", []int{3}, false, true},
		{"L4 then L1", []int{4, 1}, false, true}, // a fallback to the L4 one
		{"failed", []int{2}, true, false},
	} {
		root := t.TempDir()
		cfg := testConfig(root, 1)
		cfg.GroupSize, cfg.Verbosity = 4, 1
		opts := []Option{WithLogger(lg)}
		if sc.fails {
			opts = append(opts, WithLevels(failingL2{}))
		}
		require.NoError(t, world(t, 4, cfg, opts, func(r *Runtime) error {
			x := make([]float64, 2048)
			if err := Protect(r, 0, &x); err != nil {
				return err
			}
			for i, lvl := range sc.levels {
				if err := r.Checkpoint(int64(i+1), lvl); (err != nil) != sc.fails {
					return fmt.Errorf("%s: checkpoint at L%d: %v", sc.name, lvl, err)
				}
			}
			return nil
		}), sc.name)
		if sc.fails {
			continue
		}
		require.NoError(t, os.RemoveAll(filepath.Join(root, "local", "node0001")))
		if !sc.recover {
			for r, err := range initErrors(t, 4, cfg, WithLogger(lg)) {
				require.ErrorIs(t, err, ErrUnrecoverable, "%s: rank %d", sc.name, r)
			}
			continue
		}
		require.NoError(t, world(t, 4, cfg, []Option{WithLogger(lg)}, func(r *Runtime) error {
			x := make([]float64, 2048)
			return errors.Join(Protect(r, 0, &x), r.Recover())
		}), sc.name)
	}
	// Heads: 8 ranks, 4 application ranks, L2 post-processed by them.
	cfg := headConfig(2)
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(t.TempDir(), "l"), filepath.Join(t.TempDir(), "g"), filepath.Join(t.TempDir(), "m")
	cfg.Verbosity = 1
	for launch := range 2 {
		require.NoError(t, comm.Run(8, func(c comm.Comm) error {
			r, err := Init(cfg, c, WithLogger(lg))
			if errors.Is(err, ErrHead) {
				return nil
			}
			if err != nil {
				return err
			}
			x := make([]float64, 1024)
			if err := Protect(r, 0, &x); err != nil {
				return err
			}
			if launch == 1 {
				if err := r.Recover(); err != nil {
					return err
				}
			}
			if err := errors.Join(r.Checkpoint(int64(2*launch+1), 2), r.Checkpoint(int64(2*launch+2), 2)); err != nil {
				return err
			}
			if launch == 0 {
				return r.Close() // as if killed: the next launch restarts
			}
			return r.Finalize()
		}, comm.WithTimeout(60*time.Second)))
	}
	lines := j.lines(t)
	require.Greater(t, len(lines), 50)
	both := 0
	for _, m := range lines {
		rank, ok := m["rank"]
		require.True(t, ok, "every line of the runtime carries rank: %v", m)
		if app, ok := m["app-rank"]; ok {
			both++
			assert.NotEqual(t, rank, app, "world rank %v and application rank %v", rank, app)
		}
	}
	assert.Positive(t, both, "with heads, lines carry both ranks")
	msgs := map[string]bool{}
	for _, m := range lines {
		msgs[fmt.Sprint(m["msg"])] = true
	}
	for _, want := range []string{"restored data file from partner copy", "L3: data file lost", "partner copy", "L3 encode",
		"Ckpt. ID 1 (level 2) failed", "restarting from the older checkpoint 1 (L4): skipped unrecoverable checkpoint(s) 2 (L1, ckpt00000002)"} {
		assert.True(t, msgs[want], "the scenarios reach %q", want)
	}
}
