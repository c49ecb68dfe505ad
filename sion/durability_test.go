package sion

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// writeTest4On writes the test4 pattern through d and returns the first error.
func writeTest4On(d vfd.Driver, name string) error {
	w, err := Create(d, name, []int64{1000, 1500, 100, 3000}, []int64{100, 101, 102, 103}, &Options{FSBlkSize: 1024, Prefix: "test4.sion"})
	if err != nil {
		return err
	}
	for k := 0; k < 5; k++ {
		if _, err := w.Task(0).Write(bytes.Repeat([]byte{'a'}, 500)); err != nil {
			return errors.Join(err, w.Abort())
		}
	}
	if _, err := w.Task(1).Write(bytes.Repeat([]byte{'b'}, 1000)); err != nil {
		return errors.Join(err, w.Abort())
	}
	for k := 0; k < 4; k++ {
		if _, err := w.Task(3).Write(bytes.Repeat([]byte{'d'}, 1000)); err != nil {
			return errors.Join(err, w.Abort())
		}
	}
	return w.Close()
}

// checkCompleteOrAbsent asserts that name is either missing or a complete
// container with the test4 contents.
func checkCompleteOrAbsent(t *testing.T, d vfd.Driver, name string, want []wantTask) (present bool) {
	t.Helper()
	r, err := Open(d, name)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	require.NoError(t, err, "a file under the final name must be complete")
	defer r.Close()
	for i, w := range want {
		b, err := r.ReadTask(i)
		require.NoError(t, err)
		assert.Equal(t, w.sha, shaPrefix(b), "task %d", i)
	}
	return true
}

func newCoreDir(t *testing.T) *vfd.Core {
	core := vfd.NewCore()
	require.NoError(t, core.MkdirAll("d", 0o755))
	require.NoError(t, core.SyncDir("."))
	return core
}

// TestCrashAtEveryOp takes a crash image before every driver operation of a
// serial write: the final name is either absent or complete and correct.
func TestCrashAtEveryOp(t *testing.T) {
	core := newCoreDir(t)
	var clones []*vfd.Core
	fd := vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
		clones = append(clones, core.CrashClone())
		return nil
	}))
	require.NoError(t, writeTest4On(fd, "d/test4.sion"))
	clones = append(clones, core.CrashClone())
	require.Greater(t, len(clones), 10)
	present := 0
	for _, c := range clones {
		if checkCompleteOrAbsent(t, c, "d/test4.sion", test4Tasks) {
			present++
		}
	}
	assert.Equal(t, 1, present, "only the image after the last SyncDir holds the container")
	// The finished container is byte-identical to SIONlib's.
	got, err := vfd.ReadFile(core, "d/test4.sion")
	require.NoError(t, err)
	want, err := vfd.ReadFile(vfd.Sec2{}, testdata("test4.sion"))
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// TestFailAtEveryOp injects an error into each driver operation in turn:
// the writer reports it, and leaves neither a final file nor a temporary one.
func TestFailAtEveryOp(t *testing.T) {
	core := newCoreDir(t)
	counter := vfd.NewFault(core)
	require.NoError(t, writeTest4On(counter, "d/test4.sion"))
	nops := counter.Ops()
	require.Greater(t, nops, 10)
	for i := 0; i < nops; i++ {
		core := newCoreDir(t)
		fd := vfd.NewFault(core, vfd.OnIndex(i, nil))
		err := writeTest4On(fd, "d/test4.sion")
		if fd.Injected() == 0 {
			continue
		}
		var op vfd.Op
		var ie *vfd.InjectedError
		if errors.As(err, &ie) {
			op = ie.Op
		}
		if op.Kind == vfd.OpSyncDir || op.Kind == vfd.OpClose && err == nil {
			// A failed directory sync after the rename is reported; the file is in place.
			require.ErrorIs(t, err, vfd.ErrInjected)
			continue
		}
		require.ErrorIs(t, err, vfd.ErrInjected, "op %d", i)
		_, serr := core.Stat("d/test4.sion")
		assert.ErrorIs(t, serr, fs.ErrNotExist, "op %d (%v): final file left behind", i, op.Kind)
		_, serr = core.Stat("d/test4.sion" + TmpSuffix)
		assert.ErrorIs(t, serr, fs.ErrNotExist, "op %d (%v): temporary file left behind", i, op.Kind)
	}
}

// TestParallelCrashAtEveryOp crash-clones a 2-file collective write before
// every operation: file 0 under its final name is absent or the whole set reads back.
func TestParallelCrashAtEveryOp(t *testing.T) {
	core := newCoreDir(t)
	var clones []*vfd.Core
	fd := vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
		clones = append(clones, core.CrashClone())
		return nil
	}))
	err := comm.Run(4, func(c comm.Comm) error {
		chunks := []int64{1000, 1500, 100, 3000}
		pw, err := ParCreate(c, fd, "d/par2.sion", chunks[c.Rank()], 2, &Options{FSBlkSize: 1024})
		if err != nil {
			return err
		}
		n := []int{2500, 2000, 0, 4000}[c.Rank()]
		step := []int{500, 1000, 1, 1000}[c.Rank()]
		for k := 0; k < n; k += step {
			if _, err := pw.Write(bytes.Repeat([]byte{"abcd"[c.Rank()]}, step)); err != nil {
				return err
			}
		}
		return pw.Close()
	})
	require.NoError(t, err)
	clones = append(clones, core.CrashClone())
	present := 0
	for _, c := range clones {
		if checkCompleteOrAbsent(t, c, "d/par2.sion", parTasks) {
			present++
		}
	}
	assert.GreaterOrEqual(t, present, 1)
	got, err := vfd.ReadFile(core, "d/par2.sion.000001")
	require.NoError(t, err)
	want, err := vfd.ReadFile(vfd.Sec2{}, testdata("par2.sion.000001"))
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// writeRank3Failing writes d/p.sion on core from four ranks, rank 3's
// write failing, and returns every rank's error.
func writeRank3Failing(core vfd.Driver) []error {
	fd := vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpWrite && op.Off == 6144 { // rank 3's first chunk
			return vfd.ErrInjected
		}
		return nil
	}))
	errs := make([]error, 4)
	_ = comm.Run(4, func(c comm.Comm) error {
		chunks := []int64{1000, 1500, 100, 3000}
		pw, err := ParCreate(c, fd, "d/p.sion", chunks[c.Rank()], 1, &Options{FSBlkSize: 1024})
		if err != nil {
			errs[c.Rank()] = err
			return nil
		}
		_, werr := pw.Write([]byte("xyz"))
		errs[c.Rank()] = errors.Join(werr, pw.Close())
		return nil
	})
	return errs
}

// TestParallelFailure makes one rank's write fail: every rank gets an
// error and no file is left.
func TestParallelFailure(t *testing.T) {
	core := newCoreDir(t)
	errs := writeRank3Failing(core)
	assert.ErrorIs(t, errs[3], vfd.ErrInjected)
	for r := 0; r < 3; r++ {
		assert.ErrorIs(t, errs[r], ErrPeerFailed, "rank %d", r)
	}
	for _, n := range []string{"d/p.sion", "d/p.sion.tmp"} {
		_, err := core.Stat(n)
		assert.ErrorIs(t, err, fs.ErrNotExist, n)
	}
}

// TestParallelFailureNamesRank fails rank 3's write: the failing rank
// gets its own error, and every other rank's ErrPeerFailed names rank 3
// and its error.
func TestParallelFailureNamesRank(t *testing.T) {
	core := newCoreDir(t)
	errs := writeRank3Failing(core)
	require.ErrorIs(t, errs[3], vfd.ErrInjected)
	assert.NotErrorIs(t, errs[3], ErrPeerFailed)
	for r := 0; r < 3; r++ {
		require.ErrorIs(t, errs[r], ErrPeerFailed, "rank %d", r)
		assert.NotErrorIs(t, errs[r], vfd.ErrInjected, "rank %d", r)
		assert.Contains(t, errs[r].Error(), "write and sync d/p.sion failed on rank 3: ", "rank %d", r)
		assert.Contains(t, errs[r].Error(), "injected fault, op #", "rank %d", r)
	}
}
