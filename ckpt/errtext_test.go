package ckpt

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// maxErrorText bounds what a user-facing error says besides its paths.
const maxErrorText = 300

var (
	pkgPrefix = regexp.MustCompile(`(^|[ (])(ckpt|comm|vfd|fileformat|sion|h5ckpt|levels|partner|encode): `)
	pathToken = regexp.MustCompile(`/[^\s:;,()]+`)
)

// assertErrorShape checks a user-facing error's text: one line, "ckpt: "
// once and in front, no prefix of an internal package, at most one other
// package's prefix (the root cause's), each path once, no formatting
// verb left, and at most maxErrorText characters besides the paths.
func assertErrorShape(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	msg := err.Error()
	assert.NotContains(t, msg, "\n", "one line")
	assert.True(t, strings.HasPrefix(msg, "ckpt: "), "ckpt's prefix in front: %s", msg)
	assert.Equal(t, 1, strings.Count(msg, "ckpt: "), "ckpt's prefix once: %s", msg)
	for _, p := range []string{"levels: ", "partner: ", "encode: ", "comm: rank"} {
		assert.NotContains(t, msg, p, "no internal prefix")
	}
	assert.LessOrEqual(t, len(pkgPrefix.FindAllString(msg, -1)), 2, "no chain of package prefixes: %s", msg)
	assert.NotRegexp(t, `%[0-9]*[a-z!]`, msg, "no formatting verb")
	seen := map[string]int{}
	for _, p := range pathToken.FindAllString(msg, -1) {
		seen[p]++
	}
	paths := 0
	for p, n := range seen {
		assert.Equal(t, 1, n, "path %s named %d times in %s", p, n, msg)
		paths += len(p) * n
	}
	assert.LessOrEqual(t, len(msg)-paths, maxErrorText, "length besides the paths: %s", msg)
}

// checkpointWithFault runs Checkpoint(1, level) on 4 ranks (one node
// each, one group), where rank faulty writes area ("local", "global" or
// "meta") through a driver failing every write to a file matching glob
// with ENOSPC. It returns every rank's error.
func checkpointWithFault(t *testing.T, root string, level, faulty int, area, glob string) []error {
	cfg := testConfig(root, 1)
	cfg.GroupSize = 4
	errs := make([]error, 4)
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		d := [3]vfd.Driver{vfd.Sec2{}, vfd.Sec2{}, vfd.Sec2{}}
		if c.Rank() == faulty || faulty < 0 {
			i := map[string]int{"local": 0, "global": 1, "meta": 2}[area]
			d[i] = vfd.NewFault(vfd.Sec2{}, vfd.OnPath(glob, []vfd.OpKind{vfd.OpWrite}, syscall.ENOSPC))
		}
		r, err := Init(cfg, c, WithLogger(zap.NewNop()), WithDrivers(d[0], d[1], d[2]))
		if err != nil {
			return err
		}
		defer r.Close()
		x := make([]float64, 1000)
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		errs[c.Rank()] = r.Checkpoint(1, level)
		return nil
	}, comm.WithTimeout(30*time.Second)))
	return errs
}

// TestErrorTextENOSPC: a full device, wherever it strikes, gives every
// rank the same one-line error naming the rank, the file once and the
// cause; the rank that hit it also matches ENOSPC.
func TestErrorTextENOSPC(t *testing.T) {
	q := regexp.QuoteMeta
	tests := []struct {
		name               string
		level, rank        int
		area, glob, file   string // file: under root, <run> the run's id
		want               string // the error, with %P for the file
		failedOn, atOffset string
	}{
		{"data file", 2, 3, "local", "data*", "local/node0003/<run>/ckpt00000001/data000003.fti",
			`ckpt: checkpoint 1 at L2: checkpoint rejected: write checkpoint data failed on rank 3: write header: write %P: no space left on device \(injected fault, op #\d+\)`, "", ""},
		{"partner copy", 2, 2, "local", "partner*", "local/node0002/<run>/ckpt00000001/partner000001.fti",
			`ckpt: checkpoint 1 at L2: checkpoint rejected: protect checkpoint at L2 failed on rank 2: L2: partner copy \(rank 2 -> 3, from 1\): write %P: no space left on device \(injected fault, op #\d+\) \(at offset 0\)`, "", ""},
		{"parity", 3, 1, "local", "parity*", "local/node0001/<run>/ckpt00000001/parity000001.fti",
			`ckpt: checkpoint 1 at L3: checkpoint rejected: protect checkpoint at L3 failed on rank 1: L3: finish parity: write %P: no space left on device \(injected fault, op #\d+\) \(at offset 0\)`, "", ""},
		{"container", 4, 2, "global", "l4.sion", "global/<run>/ckpt00000001/l4.sion",
			`ckpt: checkpoint 1 at L4: checkpoint rejected: write checkpoint data failed on rank 2: write header: sion: write task 2 block 0: write %P: no space left on device \(injected fault, op #\d+\) \(at offset \d+\)`, "", ""},
		{"manifest", 1, 0, "meta", "*.manifest*", "meta/ckpt00000001.manifest",
			`ckpt: checkpoint 1 at L1: checkpoint rejected: write manifest failed on rank 0: manifest: write %P: no space left on device \(injected fault, op #\d+\)`, "", ""},
		{"manifest replica", 1, 0, "global", "*.manifest*", "global/<run>/manifests/ckpt00000001.manifest",
			`ckpt: checkpoint 1 at L1: checkpoint rejected: write manifest failed on rank 0: manifest replica: write %P: no space left on device \(injected fault, op #\d+\)`, "", ""},
		{"every rank", 1, -1, "local", "data*", "local/node0000/<run>/ckpt00000001/data000000.fti",
			`ckpt: checkpoint 1 at L1: checkpoint rejected: write checkpoint data failed on 4 ranks \(0, 1, 2, 3\); rank 0: write header: write %P: no space left on device \(injected fault, op #\d+\)`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			errs := checkpointWithFault(t, root, tt.level, tt.rank, tt.area, tt.glob)
			file := strings.ReplaceAll(tt.file, "<run>", runOf(t, testConfig(root, 1)))
			re := "^" + strings.ReplaceAll(tt.want, "%P", q(filepath.Join(root, file))) + "$"
			for r, err := range errs {
				require.Error(t, err, "rank %d", r)
				assert.Regexp(t, re, err.Error(), "rank %d", r)
				assert.Equal(t, errs[0].Error(), err.Error(), "the same on every rank")
				assertErrorShape(t, err)
				if r == tt.rank || tt.rank < 0 {
					assert.ErrorIs(t, err, syscall.ENOSPC, "rank %d", r)
					assert.ErrorIs(t, err, vfd.ErrInjected, "rank %d", r)
				}
			}
		})
	}
}

// TestErrorTextPeerFailure: a rank that gives up before a checkpoint
// aborts the world; the others' error says so in one line, naming the
// rank and its reason once, and matches comm.ErrAborted.
func TestErrorTextPeerFailure(t *testing.T) {
	cfg := testConfig(t.TempDir(), 1)
	cfg.GroupSize = 2
	errs := make([]error, 4)
	runErr := comm.Run(4, func(c comm.Comm) error {
		r, err := Init(cfg, c, WithLogger(zap.NewNop()))
		if err != nil {
			return err
		}
		defer r.Close()
		x := make([]float64, 100)
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		if c.Rank() == 3 {
			return errors.New("solver diverged")
		}
		errs[c.Rank()] = r.Checkpoint(1, 2)
		return nil
	}, comm.WithTimeout(30*time.Second))
	require.ErrorContains(t, runErr, "solver diverged")
	for r := range 3 {
		assert.Equal(t, "ckpt: checkpoint 1: comm: world aborted: rank 3: solver diverged", errs[r].Error(), "rank %d", r)
		assert.ErrorIs(t, errs[r], comm.ErrAborted)
		assertErrorShape(t, errs[r])
	}
}

// TestErrorTextMetadataLost: a checkpoint whose manifests are gone
// stops the start-up with one line of a few hundred characters: the
// checkpoint, where its copies were, one surviving file and what to do.
func TestErrorTextMetadataLost(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		x := make([]float64, 1000)
		// L1 does not supersede L4: checkpoint 1 stays committed.
		return errors.Join(Protect(r, 0, &x), r.Checkpoint(1, 4), r.Checkpoint(2, 1))
	}))
	primary := filepath.Join(root, "meta", levels.ManifestName(2))
	replica := filepath.Join(cfg.GlobalDir(runOf(t, cfg)), levels.ReplicaName(2))
	require.NoError(t, os.Remove(primary))
	require.NoError(t, os.Remove(replica))
	want := "ckpt: checkpoint metadata lost: checkpoint ckpt00000002 has no valid manifest and no marker: both copies are missing (" +
		primary + ", " + replica + "); 2 of its files survive, such as " + filepath.Join(cfg.NodeDir(0, runOf(t, cfg)), "ckpt00000002/data000000.fti") +
		", but cannot be verified; to restart from ckpt00000001, move " + filepath.Join(root, "meta", "ckpt00000002.parts") + ", " + filepath.Join(cfg.GlobalDir(runOf(t, cfg)), levels.ReplicaDir, "ckpt00000002.parts") +
		", and ckpt00000002 out of glbl_dir (" + cfg.GlobalDir(runOf(t, cfg)) +
		") and every node's ckpt_dir (such as " + cfg.NodeDir(0, runOf(t, cfg)) + ")"
	for r, err := range initErrors(t, 2, cfg) {
		require.ErrorIs(t, err, ErrMetadataLost, "rank %d", r)
		assert.Equal(t, want, err.Error(), "rank %d", r)
		assertErrorShape(t, err)
	}
}

// TestErrorTextConfig: a configuration refused on every rank reads as
// its own reason, not as a vote; a bad value names the file and line.
func TestErrorTextConfig(t *testing.T) {
	root := t.TempDir()
	for r, err := range initErrors(t, 4, testConfig(root, 3)) {
		require.ErrorIs(t, err, ErrConfig, "rank %d", r)
		assert.Equal(t, "ckpt: invalid configuration: 4 ranks is not a multiple of node_size 3: change node_size to a divisor of 4 or run a multiple of 3 ranks", err.Error())
		assertErrorShape(t, err)
	}
	p := filepath.Join(root, "bad.fti")
	require.NoError(t, os.WriteFile(p, []byte("[basic]\nnode_size = 1\ngroup_size = 1\nckpt_dir = a\nglbl_dir = b\nmeta_dir = c\nverbosity = 9\n"), 0o644))
	_, err := LoadConfig(vfd.Sec2{}, p)
	require.ErrorIs(t, err, ErrConfig)
	assert.Equal(t, "ckpt: invalid configuration: "+p+":7: [basic] verbosity = 9: out of range: use 1..4", err.Error())
	assertErrorShape(t, err)
}

// TestErrorTextUnrecoverable: a restart whose only checkpoint lost a
// file names the checkpoint, the rank and the file once.
func TestErrorTextUnrecoverable(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(root, 1)
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		x := make([]float64, 1000)
		return errors.Join(Protect(r, 0, &x), r.Checkpoint(1, 1))
	}))
	lost := filepath.Join(cfg.NodeDir(1, runOf(t, cfg)), "ckpt00000001/data000001.fti")
	require.NoError(t, os.Remove(lost))
	for r, err := range initErrors(t, 2, cfg) {
		require.ErrorIs(t, err, ErrUnrecoverable, "rank %d", r)
		assert.Equal(t, "ckpt: restart: no recoverable checkpoint: recover checkpoint ckpt00000001 (id 1, L1) failed on rank 1: "+lost+" (rank 1): checkpoint file missing", err.Error())
		assertErrorShape(t, err)
	}
}
