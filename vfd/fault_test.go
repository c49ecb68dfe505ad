package vfd_test

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

func TestFaultOnNth(t *testing.T) {
	d := vfd.NewFault(vfd.NewCore(), vfd.OnNth(vfd.OpWrite, 1, syscall.ENOSPC))
	f, err := vfd.Create(d, "a")
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("one"), 0)
	require.NoError(t, err)
	n, err := f.WriteAt([]byte("two"), 3)
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, vfd.ErrInjected)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	var ie *vfd.InjectedError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, vfd.Op{Kind: vfd.OpWrite, Path: "a", Off: 3, Len: 3, Index: 2}, ie.Op)
	_, err = f.WriteAt([]byte("3"), 3)
	require.NoError(t, err, "OnNth fails once")
	require.NoError(t, f.Close())
	assert.Equal(t, []byte("one3"), readAll(t, d.Inner(), "a"))
	assert.Equal(t, 1, d.Injected())
	// open, write, write, write, close, then ReadFile on the inner driver is not counted.
	assert.Equal(t, 5, d.Ops())
}

func TestFaultOnPath(t *testing.T) {
	tests := []struct {
		name  string
		glob  string
		kinds []vfd.OpKind
		op    func(d vfd.Driver) error
		fail  bool
	}{
		{"rename matches new name", "*.ckpt", []vfd.OpKind{vfd.OpRename}, func(d vfd.Driver) error { return d.Rename("x.tmp", "x.ckpt") }, true},
		{"base name glob", "x.*", nil, func(d vfd.Driver) error { _, err := d.Stat("dir/x.tmp"); return err }, true},
		{"full path glob", "dir/*", []vfd.OpKind{vfd.OpRemove}, func(d vfd.Driver) error { return d.Remove("dir/x.tmp") }, true},
		{"other kind passes", "*", []vfd.OpKind{vfd.OpSync}, func(d vfd.Driver) error { return d.SyncDir("dir") }, false},
		{"other path passes", "y*", nil, func(d vfd.Driver) error { _, err := d.ReadDir("dir"); return err }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := vfd.NewCore()
			require.NoError(t, c.MkdirAll("dir", 0o755))
			require.NoError(t, vfd.WriteFileAtomic(c, "x.tmp", []byte("a")))
			require.NoError(t, vfd.WriteFileAtomic(c, "dir/x.tmp", []byte("b")))
			d := vfd.NewFault(c, vfd.OnPath(tt.glob, tt.kinds, syscall.EIO))
			err := tt.op(d)
			if tt.fail {
				assert.ErrorIs(t, err, vfd.ErrInjected)
				assert.ErrorIs(t, err, syscall.EIO)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

func TestFaultShortWriteTears(t *testing.T) {
	c := vfd.NewCore()
	d := vfd.NewFault(c, vfd.ShortWrite(0, 4, syscall.EIO))
	f, err := vfd.Create(d, "a")
	require.NoError(t, err)
	n, err := f.WriteAt([]byte("abcdefgh"), 2)
	assert.Equal(t, 4, n)
	assert.ErrorIs(t, err, syscall.EIO)
	var ie *vfd.InjectedError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, 4, ie.Torn)
	require.NoError(t, f.Close())
	assert.Equal(t, []byte("\x00\x00abcd"), readAll(t, c, "a"))
}

func TestFaultNilErrorIsErrInjected(t *testing.T) {
	d := vfd.NewFault(vfd.NewCore(), vfd.OnIndex(0, nil))
	err := d.MkdirAll("x", 0o755)
	assert.ErrorIs(t, err, vfd.ErrInjected)
	assert.False(t, errors.Is(err, syscall.EIO))
	_, err = d.Stat("x")
	assert.ErrorIs(t, err, fs.ErrNotExist, "the failed mkdir did not run")
}

func TestFaultCloseReleasesInnerFile(t *testing.T) {
	d := vfd.NewFault(vfd.NewCore(), vfd.OnNth(vfd.OpClose, 0, syscall.EIO))
	f, err := vfd.Create(d, "a")
	require.NoError(t, err)
	assert.ErrorIs(t, f.Close(), syscall.EIO)
	_, err = f.(vfd.Unwrapper).Unwrap().Size()
	assert.ErrorIs(t, err, fs.ErrClosed)
}

func TestFaultLatency(t *testing.T) {
	d := vfd.NewFault(vfd.NewCore(), vfd.Latency(5*time.Millisecond, vfd.OpMkdir))
	start := time.Now()
	require.NoError(t, d.MkdirAll("a", 0o755))
	_, err := d.Stat("a")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 5*time.Millisecond)
}

// TestFaultEveryOpOfAtomicWrite is the "fail at op k" loop: for every op
// of WriteFileAtomic over an existing file, failing it must leave either
// the old or the new content, never a mix, both live and after a crash.
func TestFaultEveryOpOfAtomicWrite(t *testing.T) {
	for k := 0; ; k++ {
		c := vfd.NewCore()
		require.NoError(t, vfd.WriteFileAtomic(c, "f", []byte("old-content")))
		d := vfd.NewFault(c, vfd.OnIndex(k, syscall.EIO))
		err := vfd.WriteFileAtomic(d, "f", []byte("new-content!"))
		if d.Injected() == 0 {
			require.NoError(t, err)
			require.Greater(t, k, 3, "the loop must have covered the protocol")
			return
		}
		require.ErrorIs(t, err, syscall.EIO, "op %d", k)
		for _, got := range [][]byte{readAll(t, c, "f"), readAll(t, c.CrashClone(), "f")} {
			assert.Contains(t, []string{"old-content", "new-content!"}, string(got), "op %d", k)
		}
	}
}

// TestFaultCrashAtEveryOp crash-clones the core at every op of an atomic
// replace: the clone holds the old or the new content, whole.
func TestFaultCrashAtEveryOp(t *testing.T) {
	for k := 0; ; k++ {
		c := vfd.NewCore()
		require.NoError(t, vfd.WriteFileAtomic(c, "f", []byte("old")))
		var clone *vfd.Core
		d := vfd.NewFault(c, vfd.CrashCloneAt(c, k, &clone))
		require.NoError(t, vfd.WriteFileAtomic(d, "f", []byte("new")))
		if clone == nil {
			require.Greater(t, k, 3)
			return
		}
		assert.Contains(t, []string{"old", "new"}, string(readAll(t, clone, "f")), "crash before op %d", k)
	}
}

func TestFaultRandomlyIsSeeded(t *testing.T) {
	run := func(seed uint64) []int {
		d := vfd.NewFault(vfd.NewCore(), vfd.Randomly(0.3, seed, syscall.EIO, vfd.OpMkdir))
		var failed []int
		for i := range 50 {
			if err := d.MkdirAll(fmt.Sprintf("d%d", i), 0o755); err != nil {
				require.ErrorIs(t, err, syscall.EIO)
				failed = append(failed, i)
			}
			_, err := d.Stat("/") // other kinds never fail
			require.NoError(t, err)
		}
		return failed
	}
	a := run(42)
	assert.Equal(t, a, run(42))
	assert.NotEqual(t, a, run(43))
	assert.Greater(t, len(a), 5)
	assert.Less(t, len(a), 30)
}
