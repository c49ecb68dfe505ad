package fileformat

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// crashVars are written by the crash tests: several chunks in two blocks,
// one with an empty container tail.
func crashVars(t *testing.T) ([]Var, *Layout) {
	t.Helper()
	v := []Var{{ID: 1, Name: "u", Type: Float64, Data: pattern(800, 1)}, {ID: 2, Name: "n", Data: pattern(300, 2)}}
	_, lay, _ := writeFile(t, Meta{CkptID: 1}, v, nil)
	v[0].Data = pattern(3000, 3)
	v[1].Data = pattern(100, 4)
	return v, lay
}

// mustNotVerify opens name on d and checks that Open, ReadVar or Verify
// reports a *CorruptionError.
func mustNotVerify(t *testing.T, d vfd.Driver, name string, vars []Var, what string) {
	t.Helper()
	f, err := vfd.OpenRead(d, name)
	require.NoError(t, err, what)
	defer f.Close()
	r, err := Open(f)
	if err == nil {
		for _, v := range vars {
			got := make([]byte, len(v.Data))
			if err = r.ReadVar(v.ID, got); err != nil {
				break
			}
			require.Equal(t, v.Data, got, "%s: var %d restored wrong without error", what, v.ID)
		}
	}
	if err == nil {
		err = r.Verify()
	}
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce, what)
}

// TestCrashFailedWrite fails every write of Write in turn (fault driver
// over the core driver): Write reports the injected error and the partial
// file never verifies.
func TestCrashFailedWrite(t *testing.T) {
	vars, lay := crashVars(t)
	for n := 0; ; n++ {
		core := vfd.NewCore()
		fd := vfd.NewFault(core, vfd.OnNth(vfd.OpWrite, n, nil))
		f, err := vfd.Create(fd, "c.fti")
		require.NoError(t, err)
		_, _, err = Write(f, Meta{CkptID: 2}, vars, lay)
		require.NoError(t, f.Close())
		if err == nil {
			require.Greater(t, n, 3, "Write did fewer writes than expected")
			break
		}
		require.ErrorIs(t, err, vfd.ErrInjected, "write %d", n)
		mustNotVerify(t, core, "c.fti", vars, "write "+itoa(n)+" failed")
	}
}

// TestCrashTornWrite tears each write after a few bytes.
func TestCrashTornWrite(t *testing.T) {
	vars, lay := crashVars(t)
	for n := 0; ; n++ {
		done := false
		for _, keep := range []int{0, 1, 7, 63} {
			core := vfd.NewCore()
			fd := vfd.NewFault(core, vfd.ShortWrite(n, keep, nil))
			f, err := vfd.Create(fd, "c.fti")
			require.NoError(t, err)
			_, _, err = Write(f, Meta{CkptID: 2}, vars, lay)
			require.NoError(t, f.Close())
			if err == nil {
				done = true
				break
			}
			require.ErrorIs(t, err, vfd.ErrInjected)
			mustNotVerify(t, core, "c.fti", vars, "write "+itoa(n)+" torn at "+itoa(keep))
		}
		if done {
			break
		}
	}
}

// recFile records every write for the lost-write test.
type recFile struct {
	memFile
	ops []recOp
}

type recOp struct {
	off  int64
	data []byte
}

func (r *recFile) WriteAt(p []byte, off int64) (int, error) {
	r.ops = append(r.ops, recOp{off, append([]byte(nil), p...)})
	return r.memFile.WriteAt(p, off)
}

// TestCrashLostWrite replays every write but one (a page the crash lost,
// later pages durable): the result never verifies.
func TestCrashLostWrite(t *testing.T) {
	vars, lay := crashVars(t)
	rec := &recFile{memFile: memFile{name: "c.fti"}}
	_, _, err := Write(rec, Meta{CkptID: 2}, vars, lay)
	require.NoError(t, err)
	require.Greater(t, len(rec.ops), 3)
	for lost := range rec.ops {
		m := &memFile{name: "c.fti"}
		for i, op := range rec.ops {
			if i != lost {
				_, _ = m.WriteAt(op.data, op.off)
			}
		}
		if int64(len(m.b)) < int64(len(rec.b)) {
			_ = m.Truncate(int64(len(rec.b)))
		}
		core := vfd.NewCore()
		require.NoError(t, vfd.WriteFileAtomic(core, "c.fti", m.b))
		mustNotVerify(t, core, "c.fti", vars, "write "+itoa(lost)+" lost")
	}
}

// TestCrashCloneDurability checks the commit contract on the core driver:
// without Sync the checkpoint may vanish (and then never verifies), after
// Sync and SyncDir it survives a crash intact.
func TestCrashCloneDurability(t *testing.T) {
	vars, lay := crashVars(t)
	core := vfd.NewCore()
	require.NoError(t, core.MkdirAll("d", 0o755))
	require.NoError(t, core.SyncDir("."))
	f, err := vfd.Create(core, "d/c.fti")
	require.NoError(t, err)
	_, _, err = Write(f, Meta{CkptID: 2}, vars, lay)
	require.NoError(t, err)

	crashed := core.CrashClone()
	if g, err := vfd.OpenRead(crashed, "d/c.fti"); err == nil {
		_, err = Open(g)
		assert.Error(t, err, "an unsynced checkpoint must not verify after a crash")
		_ = g.Close()
	} else {
		assert.True(t, errors.Is(err, errNotExist()), "%v", err)
	}

	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.NoError(t, core.SyncDir("d"))
	crashed = core.CrashClone()
	g, err := vfd.OpenRead(crashed, "d/c.fti")
	require.NoError(t, err)
	defer g.Close()
	r, err := Open(g)
	require.NoError(t, err)
	require.NoError(t, r.Verify())
	for _, v := range vars {
		got := make([]byte, len(v.Data))
		require.NoError(t, r.ReadVar(v.ID, got))
		assert.Equal(t, v.Data, got)
	}
}

// TestWithSync checks that WithSync writes the same bytes, makes the file
// durable by itself, and that a failure of either sync leaves a file that
// never verifies after a crash.
func TestWithSync(t *testing.T) {
	vars, lay := crashVars(t)
	plain := &memFile{name: "p.fti"}
	_, want, err := Write(plain, Meta{CkptID: 2, Timestamp: 7}, vars, lay)
	require.NoError(t, err)

	core := vfd.NewCore()
	require.NoError(t, core.SyncDir("."))
	f, err := vfd.Create(core, "c.fti")
	require.NoError(t, err)
	require.NoError(t, core.SyncDir("."))
	_, got, err := Write(f, Meta{CkptID: 2, Timestamp: 7}, vars, lay, WithSync())
	require.NoError(t, err)
	assert.Equal(t, want.Checksum, got.Checksum)
	crashed := core.CrashClone() // no Sync by the caller
	b, err := vfd.ReadFile(crashed, "c.fti")
	require.NoError(t, err)
	assert.Equal(t, plain.b, b)
	require.NoError(t, f.Close())

	for n := 0; n < 2; n++ {
		core := vfd.NewCore()
		require.NoError(t, core.SyncDir("."))
		fd := vfd.NewFault(core, vfd.OnNth(vfd.OpSync, n, nil))
		f, err := vfd.Create(fd, "c.fti")
		require.NoError(t, err)
		require.NoError(t, core.SyncDir("."))
		_, _, err = Write(f, Meta{CkptID: 2}, vars, lay, WithSync())
		require.ErrorIs(t, err, vfd.ErrInjected, "sync %d", n)
		crashed := core.CrashClone()
		mustNotVerify(t, crashed, "c.fti", vars, "sync "+itoa(n)+" failed, then crash")
		require.NoError(t, f.Close())
	}
}
