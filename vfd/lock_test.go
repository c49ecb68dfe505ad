package vfd_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ftigo/ftigo/vfd"
)

func TestOpenRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	direct, err := vfd.NewDirect(0, 0)
	require.NoError(t, err)
	cases := []struct{ name, path, kind string }{
		{"fifo without writer", fifo, "FIFO"},
		{"character device", "/dev/zero", "character device"},
		{"directory", dir, "directory"},
	}
	drivers := []struct {
		name string
		d    vfd.Driver
	}{{"sec2", vfd.Sec2{}}, {"stdio", vfd.NewStdio(vfd.Sec2{}, 0)}, {"direct", direct}}
	for _, dr := range drivers {
		for _, c := range cases {
			t.Run(dr.name+"/"+c.name, func(t *testing.T) {
				done := make(chan error, 1)
				go func() {
					f, err := dr.d.Open(c.path, vfd.ReadOnly)
					if err == nil {
						f.Close()
					}
					done <- err
				}()
				select {
				case err := <-done:
					require.Error(t, err)
					assert.ErrorIs(t, err, vfd.ErrNotRegular)
					assert.Contains(t, err.Error(), c.path)
					assert.Contains(t, err.Error(), c.kind)
				case <-time.After(10 * time.Second):
					t.Fatalf("Open(%s) blocked", c.path)
				}
			})
		}
	}
	// A regular file still opens, and blocking I/O works on it.
	p := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(p, []byte("abc"), 0o644))
	b, err := vfd.ReadFile(vfd.Sec2{}, p)
	require.NoError(t, err)
	assert.Equal(t, []byte("abc"), b)
}

func TestReadFileLimit(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge")
	f, err := vfd.CreateTrunc(vfd.Sec2{}, huge)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(20<<30)) // sparse: 20 GiB of nothing
	require.NoError(t, f.Close())
	_, err = vfd.ReadFileLimit(vfd.Sec2{}, huge, 1<<20)
	require.ErrorIs(t, err, vfd.ErrTooLarge)
	assert.Contains(t, err.Error(), huge)
	assert.Contains(t, err.Error(), "21474836480 bytes")

	small := filepath.Join(dir, "small")
	require.NoError(t, os.WriteFile(small, []byte("0123456789"), 0o644))
	b, err := vfd.ReadFileLimit(vfd.Sec2{}, small, 10)
	require.NoError(t, err)
	assert.Equal(t, "0123456789", string(b))
	_, err = vfd.ReadFileLimit(vfd.Sec2{}, small, 9)
	assert.ErrorIs(t, err, vfd.ErrTooLarge)
	_, err = vfd.ReadFileLimit(vfd.Sec2{}, filepath.Join(dir, "absent"), 9)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestLock(t *testing.T) {
	core := vfd.NewCore()
	require.NoError(t, core.MkdirAll("/m", 0o755))
	drivers := []struct {
		name string
		d    vfd.Driver
		path string
	}{
		{"sec2", vfd.Sec2{}, filepath.Join(t.TempDir(), "lock")},
		{"core", core, "/m/lock"},
		{"fault over core", vfd.NewFault(core), "/m/lock2"},
		{"log over sec2", vfd.NewLog(vfd.Sec2{}, nil), filepath.Join(t.TempDir(), "lock")},
	}
	for _, dr := range drivers {
		t.Run(dr.name, func(t *testing.T) {
			l1, err := vfd.Lock(dr.d, dr.path)
			require.NoError(t, err)
			_, err = vfd.Lock(dr.d, dr.path)
			require.ErrorIs(t, err, vfd.ErrLocked, "a second holder must be refused")
			assert.Contains(t, err.Error(), dr.path)
			require.NoError(t, l1.Close())
			require.NoError(t, l1.Close(), "a second Close does nothing")
			l2, err := vfd.Lock(dr.d, dr.path)
			require.NoError(t, err, "released locks can be taken again")
			require.NoError(t, l2.Close())
		})
	}
}

type noLockDriver struct{ vfd.Driver }

func TestLockUnsupported(t *testing.T) {
	_, err := vfd.Lock(noLockDriver{vfd.NewCore()}, "/x")
	require.True(t, errors.Is(err, vfd.ErrUnsupported), "got %v", err)
}
