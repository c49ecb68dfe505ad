package vfd_test

import (
	"io/fs"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// recordSyncs wraps c in a fault driver that lists the directories synced.
// It fails the sync of failDir (when not empty) with EIO.
func recordSyncs(c *vfd.Core, failDir string) (*vfd.Fault, *[]string) {
	var synced []string
	d := vfd.NewFault(c, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind != vfd.OpSyncDir {
			return nil
		}
		synced = append(synced, op.Path)
		if op.Path == failDir {
			return syscall.EIO
		}
		return nil
	}))
	return d, &synced
}

// survives reports whether name is in a crash clone of c.
func survives(c *vfd.Core, name string) bool {
	_, err := c.CrashClone().Stat(name)
	return err == nil
}

func TestMkdirDurable(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, c *vfd.Core)
		dir   string
		fail  string // directory whose sync fails
		syncs []string
		err   error
		after map[string]bool // name: in the crash clone
	}{
		{name: "one new directory", dir: "a",
			syncs: []string{"a", "."}, after: map[string]bool{"a": true}},
		{name: "every component new", dir: "a/b/c",
			syncs: []string{"a/b/c", "a/b", "a", "."}, after: map[string]bool{"a": true, "a/b": true, "a/b/c": true}},
		{name: "under a durable parent", dir: "a/b/c", setup: durableDir("a"),
			syncs: []string{"a/b/c", "a/b", "a"}, after: map[string]bool{"a/b/c": true}},
		{name: "absolute path", dir: "/x/y/",
			syncs: []string{"/x/y", "/x", "/"}, after: map[string]bool{"/x/y": true}},
		{name: "exists: left alone", dir: "a/b", setup: durableDir("a/b"),
			after: map[string]bool{"a/b": true}},
		{name: "exists but not durable: left alone", dir: "a/b", setup: mkdir("a/b"),
			after: map[string]bool{"a": false}},
		{name: "new under a parent not durable", dir: "a/b", setup: mkdir("a"),
			syncs: []string{"a/b", "a"}, after: map[string]bool{"a": false}},
		{name: "a file in the way", dir: "f/b", setup: file("f"),
			err: syscall.ENOTDIR, after: map[string]bool{"f": true}},
		{name: "the directory is a file", dir: "f", setup: file("f"),
			err: syscall.ENOTDIR, after: map[string]bool{"f": true}},
		{name: "middle sync fails: the rest still synced", dir: "a/b/c", fail: "a/b",
			syncs: []string{"a/b/c", "a/b", "a", "."}, err: syscall.EIO,
			after: map[string]bool{"a": true, "a/b": true, "a/b/c": false}},
		{name: "parent sync fails: nothing survives", dir: "a/b", setup: durableDir("a"), fail: "a",
			syncs: []string{"a/b", "a"}, err: syscall.EIO, after: map[string]bool{"a": true, "a/b": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := vfd.NewCore()
			if tt.setup != nil {
				tt.setup(t, c)
			}
			d, synced := recordSyncs(c, tt.fail)
			err := vfd.MkdirDurable(d, tt.dir)
			if tt.err != nil {
				assert.ErrorIs(t, err, tt.err)
			} else {
				require.NoError(t, err)
				fi, err := c.Stat(tt.dir)
				require.NoError(t, err)
				assert.True(t, fi.IsDir())
			}
			assert.Equal(t, tt.syncs, *synced, "directories synced, in order")
			for name, want := range tt.after {
				assert.Equal(t, want, survives(c, name), "%s after a crash", name)
			}
		})
	}
}

// A plain MkdirAll does not survive a crash: the contrast MkdirDurable makes.
func TestMkdirAllAloneIsLostInACrash(t *testing.T) {
	c := vfd.NewCore()
	require.NoError(t, c.MkdirAll("a/b", 0o755))
	assert.False(t, survives(c, "a"))
	require.NoError(t, vfd.MkdirDurable(c, "x/y"))
	assert.True(t, survives(c, "x/y"))
}

func TestMkdirDurableMkdirFails(t *testing.T) {
	c := vfd.NewCore()
	d := vfd.NewFault(c, vfd.OnNth(vfd.OpMkdir, 0, syscall.EROFS))
	err := vfd.MkdirDurable(d, "a/b")
	assert.ErrorIs(t, err, syscall.EROFS)
	assert.ErrorIs(t, err, vfd.ErrInjected)
	_, err = c.Stat("a")
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestRenameDurable(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		dirs     []string // made durable before
		fail     string
		syncs    []string
		err      error
		after    map[string]bool
	}{
		{name: "same directory", old: "d/x.tmp", new: "d/x", dirs: []string{"d"},
			syncs: []string{"d"}, after: map[string]bool{"d/x": true, "d/x.tmp": false}},
		{name: "same directory, spelt another way", old: "d/./x.tmp", new: "d/x", dirs: []string{"d"},
			syncs: []string{"d"}, after: map[string]bool{"d/x": true, "d/x.tmp": false}},
		{name: "across directories", old: "src/f", new: "dst/f", dirs: []string{"src", "dst"},
			syncs: []string{"dst", "src"}, after: map[string]bool{"dst/f": true, "src/f": false}},
		{name: "root to a directory", old: "f", new: "dst/f", dirs: []string{"dst"},
			syncs: []string{"dst", "."}, after: map[string]bool{"dst/f": true, "f": false}},
		{name: "destination sync fails: the old name stays", old: "src/f", new: "dst/f", dirs: []string{"src", "dst"}, fail: "dst",
			syncs: []string{"dst"}, err: syscall.EIO, after: map[string]bool{"dst/f": false, "src/f": true}},
		{name: "source sync fails: under both names, never lost", old: "src/f", new: "dst/f", dirs: []string{"src", "dst"}, fail: "src",
			syncs: []string{"dst", "src"}, err: syscall.EIO, after: map[string]bool{"dst/f": true, "src/f": true}},
		{name: "no such file", old: "d/none", new: "d/x", dirs: []string{"d"},
			err: fs.ErrNotExist, after: map[string]bool{"d/x": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := vfd.NewCore()
			for _, dir := range tt.dirs {
				require.NoError(t, vfd.MkdirDurable(c, dir))
			}
			if tt.err != fs.ErrNotExist {
				require.NoError(t, vfd.WriteFileAtomic(c, tt.old, []byte("payload")))
			}
			d, synced := recordSyncs(c, tt.fail)
			err := vfd.RenameDurable(d, tt.old, tt.new)
			if tt.err != nil {
				assert.ErrorIs(t, err, tt.err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.syncs, *synced, "directories synced, in order")
			crashed := c.CrashClone()
			for name, want := range tt.after {
				_, err := crashed.Stat(name)
				require.Equal(t, want, err == nil, "%s after a crash", name)
				if want {
					assert.Equal(t, []byte("payload"), readAll(t, crashed, name), "%s after a crash", name)
				}
			}
		})
	}
}

// A plain Rename is undone by a crash: the contrast RenameDurable makes.
func TestRenameAloneIsUndoneByACrash(t *testing.T) {
	c := vfd.NewCore()
	require.NoError(t, vfd.WriteFileAtomic(c, "x.tmp", []byte("payload")))
	require.NoError(t, c.Rename("x.tmp", "x"))
	assert.False(t, survives(c, "x"))
	assert.True(t, survives(c, "x.tmp"))
}

func durableDir(dir string) func(t *testing.T, c *vfd.Core) {
	return func(t *testing.T, c *vfd.Core) { require.NoError(t, vfd.MkdirDurable(c, dir)) }
}

func mkdir(dir string) func(t *testing.T, c *vfd.Core) {
	return func(t *testing.T, c *vfd.Core) { require.NoError(t, c.MkdirAll(dir, 0o755)) }
}

func file(name string) func(t *testing.T, c *vfd.Core) {
	return func(t *testing.T, c *vfd.Core) { require.NoError(t, vfd.WriteFileAtomic(c, name, []byte("f"))) }
}

// On real files the same calls create, rename and leave no old name.
func TestDurableOpsSec2(t *testing.T) {
	root := t.TempDir()
	d := vfd.Sec2{}
	dir := root + "/a/b"
	require.NoError(t, vfd.MkdirDurable(d, dir))
	fi, err := d.Stat(dir)
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	require.NoError(t, vfd.MkdirDurable(d, dir), "an existing directory is no error")
	require.NoError(t, vfd.WriteFileAtomic(d, root+"/f", []byte("payload")))
	require.NoError(t, vfd.RenameDurable(d, root+"/f", dir+"/f"))
	assert.Equal(t, []byte("payload"), readAll(t, d, dir+"/f"))
	_, err = d.Stat(root + "/f")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, vfd.WriteFileAtomic(d, root+"/file", nil))
	assert.ErrorIs(t, vfd.MkdirDurable(d, root+"/file/x"), syscall.ENOTDIR)
}
