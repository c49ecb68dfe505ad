package vfd_test

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestWrapPath: a wrapper names a path only when the error it wraps does
// not; a one-word op adds nothing then, a longer one stays in front; the
// wrapped error stays visible to errors.Is and errors.As.
func TestWrapPath(t *testing.T) {
	named := &fs.PathError{Op: "write", Path: "/d/ckpt/data.fti", Err: syscall.ENOSPC}
	bare := errors.New("bad magic")
	tests := []struct {
		name string
		err  error
		op   string
		path string
		want string
	}{
		{"named, one word", named, "write", "/d/ckpt/data.fti", "write /d/ckpt/data.fti: no space left on device"},
		{"named, longer op", named, "write intent marker", "/d/ckpt/data.fti", "write intent marker: write /d/ckpt/data.fti: no space left on device"},
		{"named, trailing of", named, "size of", "/d/ckpt/data.fti", "write /d/ckpt/data.fti: no space left on device"},
		{"not named", bare, "read", "/d/x", "read /d/x: bad magic"},
		{"a longer name is not the name", named, "write", "/d/ckpt/data", "write /d/ckpt/data: write /d/ckpt/data.fti: no space left on device"},
		{"a part of the named file", named, "write", "/d/ckpt/data.fti (task 2)", "write /d/ckpt/data.fti: no space left on device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := vfd.WrapPath(tt.err, tt.op, tt.path)
			assert.Equal(t, tt.want, err.Error())
			assert.ErrorIs(t, err, tt.err)
		})
	}
	assert.NoError(t, vfd.WrapPath(nil, "write", "/x"))

	at := vfd.WrapPathAt(named, "read", "/d/ckpt/data.fti", 4096)
	assert.Equal(t, "write /d/ckpt/data.fti: no space left on device (at offset 4096)", at.Error())
	assert.ErrorIs(t, at, syscall.ENOSPC)
	at = vfd.WrapPathAt(named, "read back", "/d/ckpt/data.fti", 8)
	assert.Equal(t, "read back: write /d/ckpt/data.fti: no space left on device (at offset 8)", at.Error())
	assert.Equal(t, "read /d/x at 8: bad magic", vfd.WrapPathAt(bare, "read", "/d/x", 8).Error())
	assert.NoError(t, vfd.WrapPathAt(nil, "read", "/x", 0))

	// However many layers wrap it, the path appears once.
	var err error = named
	for range 4 {
		err = vfd.WrapPath(fmt.Errorf("header: %w", err), "write", "/d/ckpt/data.fti")
	}
	assert.Equal(t, 1, strings.Count(err.Error(), "/d/ckpt/data.fti"), err.Error())
}

func TestErrorNames(t *testing.T) {
	err := errors.New("open /a/b.fti: no such file or directory; /a/c.tmp (rank 2)")
	for name, want := range map[string]bool{
		"/a/b.fti": true, "/a/b": false, "/a/c.tmp": true, "/a/c": false, "/a": false,
		"/a/c.tmp (rank 2)": true, "": false, "/z": false,
	} {
		assert.Equal(t, want, vfd.ErrorNames(err, name), name)
	}
	assert.False(t, vfd.ErrorNames(nil, "/a/b.fti"))
}

// TestInjectedErrorText: the fault driver's error reads as the path
// error the operation would return, naming its op and path once, with
// what was injected after it.
func TestInjectedErrorText(t *testing.T) {
	d := vfd.NewFault(vfd.NewCore(), vfd.OnNth(vfd.OpWrite, 0, syscall.ENOSPC))
	f, err := vfd.Create(d, "data.fti")
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("abc"), 0)
	require.Error(t, err)
	assert.Regexp(t, `^write data\.fti: no space left on device \(injected fault, op #\d+\)$`, err.Error())
	assert.ErrorIs(t, err, syscall.ENOSPC)
	assert.ErrorIs(t, err, vfd.ErrInjected)

	torn := vfd.NewFault(vfd.NewCore(), vfd.ShortWrite(0, 1, nil))
	f, err = vfd.Create(torn, "t")
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("abc"), 0)
	require.Error(t, err)
	assert.Regexp(t, `^write t: injected fault, op #\d+, after 1 of 3 bytes$`, err.Error())
}
