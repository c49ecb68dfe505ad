package vfd_test

import (
	"io/fs"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"

	"github.com/ftigo/ftigo/vfd"
)

// TestWritebackIsNotSync: bytes that were only handed to StartWriteback,
// through any stack over a core, are lost in a crash clone like any other
// unsynced bytes; the synced ones survive.
func TestWritebackIsNotSync(t *testing.T) {
	tests := []struct {
		name string
		wrap func(c *vfd.Core) vfd.Driver
	}{
		{"core", func(c *vfd.Core) vfd.Driver { return c }},
		{"stdio", func(c *vfd.Core) vfd.Driver { return vfd.NewStdio(c, 64) }},
		{"log", func(c *vfd.Core) vfd.Driver { return vfd.NewLog(c, nil) }},
		{"fault", func(c *vfd.Core) vfd.Driver { return vfd.NewFault(c) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := vfd.NewCore()
			d := tt.wrap(c)
			f, err := vfd.Create(d, "f")
			require.NoError(t, err)
			require.NoError(t, c.SyncDir("/"))
			_, err = f.WriteAt([]byte("synced"), 0)
			require.NoError(t, err)
			require.NoError(t, f.Sync())
			_, err = f.WriteAt([]byte(" hinted"), 6)
			require.NoError(t, err)
			require.NoError(t, vfd.StartWriteback(f, 0, 0))
			require.NoError(t, vfd.StartWriteback(f, 6, 7))
			require.NoError(t, vfd.DropCache(f, 0, 0))
			assert.Equal(t, []byte("synced hinted"), readAll(t, c, "f"), "the hint reached the core (stdio flushed its buffer)")
			assert.Equal(t, []byte("synced"), readAll(t, c.CrashClone(), "f"), "written back but not synced: lost")
			require.NoError(t, f.Sync())
			assert.Equal(t, []byte("synced hinted"), readAll(t, c.CrashClone(), "f"))
			require.NoError(t, f.Close())
		})
	}
}

// recorder is a Fault over a core that records the writeback hints
// reaching it (path, offset, length).
func recorder() (*vfd.Fault, *[]vfd.Op) {
	var ops []vfd.Op
	return vfd.NewFault(vfd.NewCore(), vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpWriteback || op.Kind == vfd.OpDropCache {
			ops = append(ops, vfd.Op{Kind: op.Kind, Path: op.Path, Off: op.Off, Len: op.Len})
		}
		return nil
	})), &ops
}

// TestWritebackForwarding: each wrapper passes the hint on to the files
// under it, with the range mapped as the wrapper maps addresses.
func TestWritebackForwarding(t *testing.T) {
	wb := func(path string, off int64, n int) vfd.Op {
		return vfd.Op{Kind: vfd.OpWriteback, Path: path, Off: off, Len: n}
	}
	tests := []struct {
		name  string
		wrap  func(inner vfd.Driver) vfd.Driver
		file  string
		hints [][2]int64
		want  []vfd.Op
	}{
		{"stdio", func(in vfd.Driver) vfd.Driver { return vfd.NewStdio(in, 0) }, "f",
			[][2]int64{{5, 10}, {0, 0}}, []vfd.Op{wb("f", 5, 10), wb("f", 0, 0)}},
		{"log", func(in vfd.Driver) vfd.Driver { return vfd.NewLog(in, nil) }, "f",
			[][2]int64{{5, 10}}, []vfd.Op{wb("f", 5, 10)}},
		{"fault", func(in vfd.Driver) vfd.Driver { return vfd.NewFault(in) }, "f",
			[][2]int64{{5, 10}}, []vfd.Op{wb("f", 5, 10)}},
		{"split", func(in vfd.Driver) vfd.Driver { return vfd.NewSplit(in, "", in, "") }, "s",
			[][2]int64{{5, 10}}, []vfd.Op{wb("s-m.h5", 5, 10), wb("s-r.h5", 5, 10)}},
		{"family", func(in vfd.Driver) vfd.Driver { return vfd.NewFamily(in, 1000) }, "m-%d",
			[][2]int64{
				{900, 1200},  // the end of member 0, all of 1, the start of 2
				{2500, 0},    // through the end: members 2 and 3
				{3100, 50},   // inside the last member
				{10000, 100}, // past the last member: nothing
			},
			[]vfd.Op{
				wb("m-0", 900, 100), wb("m-1", 0, 1000), wb("m-2", 0, 100),
				wb("m-2", 500, 500), wb("m-3", 0, 1000),
				wb("m-3", 100, 50),
			}},
	}
	hints := []struct {
		kind vfd.OpKind
		call func(f vfd.File, off, n int64) error
	}{{vfd.OpWriteback, vfd.StartWriteback}, {vfd.OpDropCache, vfd.DropCache}}
	for _, h := range hints {
		for _, tt := range tests {
			t.Run(h.kind.String()+"/"+tt.name, func(t *testing.T) {
				rec, got := recorder()
				d := tt.wrap(rec)
				f, err := vfd.Create(d, tt.file)
				require.NoError(t, err)
				data := pattern(3500)
				_, err = f.WriteAt(data, 0)
				require.NoError(t, err)
				for _, r := range tt.hints {
					require.NoError(t, h.call(f, r[0], r[1]))
				}
				want := slices.Clone(tt.want)
				for i := range want {
					want[i].Kind = h.kind
				}
				assert.Equal(t, want, *got)
				back := make([]byte, len(data))
				require.NoError(t, vfd.ReadFull(f, back, 0))
				assert.Equal(t, data, back)
				require.NoError(t, f.Close())
				assert.ErrorIs(t, h.call(f, 0, 0), fs.ErrClosed)
				assert.ErrorIs(t, h.call(f, -1, 0), vfd.ErrNegativeOffset)
			})
		}
	}
}

// TestStdioWritebackFlushesOnlyOverlappingBuffer: the pending buffer
// goes down before a hint over its range, and stays for a hint elsewhere.
func TestStdioWritebackFlushesOnlyOverlappingBuffer(t *testing.T) {
	c := vfd.NewCore()
	lg := vfd.NewLog(c, nil)
	f, err := vfd.Create(vfd.NewStdio(lg, 1024), "s")
	require.NoError(t, err)
	_, err = f.WriteAt(pattern(100), 1000)
	require.NoError(t, err)
	require.NoError(t, vfd.StartWriteback(f, 0, 1000), "ends where the buffer starts")
	require.NoError(t, vfd.StartWriteback(f, 1100, 0), "starts where the buffer ends")
	assert.Zero(t, lg.Stats().Ops[vfd.OpWrite], "no overlap: still buffered")
	require.NoError(t, vfd.StartWriteback(f, 1099, 1))
	assert.Equal(t, int64(1), lg.Stats().Ops[vfd.OpWrite], "overlap: flushed")
	assert.Equal(t, int64(3), lg.Stats().Ops[vfd.OpWriteback], "every hint is passed on")
	assert.Equal(t, append(make([]byte, 1000), pattern(100)...), readAll(t, c, "s"))
	require.NoError(t, f.Close())
}

// TestFaultWriteback: hints reach the injectors, so they can be failed,
// but take no global index unless NumberWriteback is on.
func TestFaultWriteback(t *testing.T) {
	// open(0) write(1) writeback sync(2) close(3), or with numbering
	// open(0) write(1) writeback(2) sync(3) close(4).
	run := func(t *testing.T, d *vfd.Fault) (wbErr, syncErr error) {
		f, err := vfd.Create(d, "f")
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("data"), 0)
		require.NoError(t, err)
		wbErr = vfd.StartWriteback(f, 0, 4)
		syncErr = f.Sync()
		require.NoError(t, f.Close())
		return wbErr, syncErr
	}
	tests := []struct {
		name     string
		number   bool
		inj      vfd.Injector
		wbFails  bool
		syncFail bool
		ops      int
		index    int // Index of the failed op
	}{
		{"index 2 is the sync", false, vfd.OnIndex(2, syscall.EIO), false, true, 4, 2},
		{"numbered: index 2 is the writeback", true, vfd.OnIndex(2, syscall.EIO), true, false, 5, 2},
		{"fail the writeback by kind", false, vfd.OnNth(vfd.OpWriteback, 0, syscall.EIO), true, false, 4, -1},
		{"by path and kind", false, vfd.OnPath("f", []vfd.OpKind{vfd.OpWriteback}, syscall.EIO), true, false, 4, -1},
		{"OnIndex(-1) never matches an unnumbered hint", false, vfd.OnIndex(-1, syscall.EIO), false, false, 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := vfd.NewCore()
			d := vfd.NewFault(c, tt.inj)
			d.NumberWriteback(tt.number)
			wbErr, syncErr := run(t, d)
			assert.Equal(t, tt.ops, d.Ops())
			failed := wbErr
			if tt.syncFail {
				failed = syncErr
				assert.NoError(t, wbErr)
			} else {
				assert.NoError(t, syncErr)
			}
			if !tt.wbFails && !tt.syncFail {
				assert.NoError(t, wbErr)
				assert.Zero(t, d.Injected())
				return
			}
			require.ErrorIs(t, failed, vfd.ErrInjected)
			assert.ErrorIs(t, failed, syscall.EIO)
			var ie *vfd.InjectedError
			require.ErrorAs(t, failed, &ie)
			assert.Equal(t, tt.index, ie.Op.Index)
			if tt.wbFails {
				assert.Equal(t, vfd.Op{Kind: vfd.OpWriteback, Path: "f", Off: 0, Len: 4, Index: tt.index}, ie.Op)
			}
			assert.Equal(t, []byte("data"), readAll(t, c, "f"), "a failed hint changes nothing")
		})
	}
}

func TestLogTracesWriteback(t *testing.T) {
	obs, logs := observer.New(zapcore.DebugLevel)
	d := vfd.NewLog(vfd.NewCore(), zap.New(obs))
	f, err := vfd.Create(d, "w")
	require.NoError(t, err)
	require.NoError(t, vfd.StartWriteback(f, 4096, 8192))
	require.NoError(t, f.Close())
	assert.ErrorIs(t, vfd.StartWriteback(f, 0, 0), fs.ErrClosed)
	var entries []observer.LoggedEntry
	for _, e := range logs.All() {
		if e.ContextMap()["op"] == "writeback" {
			entries = append(entries, e)
		}
	}
	require.Len(t, entries, 2)
	m := entries[0].ContextMap()
	assert.Equal(t, "w", m["path"])
	assert.Equal(t, int64(4096), m["offset"])
	assert.Equal(t, int64(8192), m["size"])
	assert.Equal(t, zapcore.WarnLevel, entries[1].Level, "the closed-file error")
	s := d.Stats()
	assert.Equal(t, int64(2), s.Ops[vfd.OpWriteback])
	assert.Equal(t, int64(1), s.Errors)
	assert.Zero(t, s.BytesWritten, "a hint writes nothing")
	assert.Equal(t, "writeback", vfd.OpWriteback.String())
}

// TestSec2WritebackRefusedStopsTrying: on a file sync_file_range refuses
// (a FIFO: ESPIPE) the hint is nil and the file stops issuing it; on a
// regular file it is issued.
func TestSec2WritebackRefusedStopsTrying(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	f, err := vfd.OpenSec2AnyKind(fifo, vfd.ReadWrite) // Open refuses FIFOs; O_RDWR does not block on Linux
	require.NoError(t, err)
	assert.False(t, vfd.WritebackRefused(f))
	require.NoError(t, vfd.StartWriteback(f, 0, 4096))
	assert.True(t, vfd.WritebackRefused(f), "ESPIPE turns the hint off for this file")
	require.NoError(t, vfd.StartWriteback(f, 0, 4096))
	require.NoError(t, f.Close())
	assert.ErrorIs(t, vfd.StartWriteback(f, 0, 1), fs.ErrClosed)

	g, err := vfd.Create(vfd.Sec2{}, filepath.Join(dir, "regular"))
	require.NoError(t, err)
	defer g.Close()
	_, err = g.WriteAt(pattern(1<<16), 0)
	require.NoError(t, err)
	require.NoError(t, vfd.StartWriteback(g, 0, 1<<16))
	assert.False(t, vfd.WritebackRefused(g), "ext4, xfs and tmpfs accept sync_file_range")
}

// TestFaultDropCache: DropCache ops reach the injectors without a global
// index, like writeback hints, and take one with NumberWriteback.
func TestFaultDropCache(t *testing.T) {
	for _, number := range []bool{false, true} {
		c := vfd.NewCore()
		d := vfd.NewFault(c, vfd.OnNth(vfd.OpDropCache, 1, syscall.EIO))
		d.NumberWriteback(number)
		f, err := vfd.Create(d, "f")
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("data"), 0)
		require.NoError(t, err)
		require.NoError(t, vfd.DropCache(f, 0, 2), "the first drop passes")
		err = vfd.DropCache(f, 2, 2)
		require.ErrorIs(t, err, syscall.EIO, "the second is failed")
		var ie *vfd.InjectedError
		require.ErrorAs(t, err, &ie)
		want := vfd.Op{Kind: vfd.OpDropCache, Path: "f", Off: 2, Len: 2, Index: -1}
		ops := 2 // open, write
		if number {
			want.Index, ops = 3, 4
		}
		assert.Equal(t, want, ie.Op)
		assert.Equal(t, ops, d.Ops())
		require.NoError(t, f.Close())
		assert.Equal(t, []byte("data"), readAll(t, c, "f"))
	}
}

func TestLogTracesDropCache(t *testing.T) {
	obs, logs := observer.New(zapcore.DebugLevel)
	d := vfd.NewLog(vfd.NewCore(), zap.New(obs))
	f, err := vfd.Create(d, "w")
	require.NoError(t, err)
	require.NoError(t, vfd.DropCache(f, 4096, 8192))
	require.NoError(t, f.Close())
	var got []map[string]any
	for _, e := range logs.All() {
		if e.ContextMap()["op"] == "dropcache" {
			got = append(got, e.ContextMap())
		}
	}
	require.Len(t, got, 1)
	assert.Equal(t, "w", got[0]["path"])
	assert.Equal(t, int64(4096), got[0]["offset"])
	assert.Equal(t, int64(8192), got[0]["size"])
	assert.Equal(t, int64(1), d.Stats().Ops[vfd.OpDropCache])
	assert.Equal(t, "dropcache", vfd.OpDropCache.String())
}

// TestSec2DropCache: after DropCache the range is no longer in the page
// cache (mincore over a mapping of the file), the rest still is, and the
// content reads back unchanged. Skipped where the page cache is the file
// (tmpfs, ramfs).
func TestSec2DropCache(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	if st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC {
		t.Skipf("%s is on tmpfs or ramfs: its pages cannot be dropped", dir)
	}
	const size = 8 << 20
	name := filepath.Join(dir, "f")
	f, err := vfd.Create(vfd.Sec2{}, name)
	require.NoError(t, err)
	defer f.Close()
	data := pattern(size)
	_, err = f.WriteAt(data, 0)
	require.NoError(t, err)
	resident := func() (first, second int) {
		m, err := unix.Mmap(int(f.(interface{ Fd() uintptr }).Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
		require.NoError(t, err)
		defer unix.Munmap(m)
		vec := make([]byte, size/4096)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			require.NoError(t, e, "mincore")
		}
		for i, v := range vec {
			if v&1 == 0 {
				continue
			}
			if i < len(vec)/2 {
				first++
			} else {
				second++
			}
		}
		return first, second
	}
	a, b := resident()
	require.Equal(t, size/4096/2, a, "freshly written pages are cached")
	require.Equal(t, size/4096/2, b)
	require.NoError(t, vfd.DropCache(f, 0, size/2))
	a, b = resident()
	assert.Zero(t, a, "the dropped half left the page cache")
	assert.Equal(t, size/4096/2, b, "the other half stayed")
	back := make([]byte, size)
	require.NoError(t, vfd.ReadFull(f, back, 0))
	assert.Equal(t, data, back, "the content is unchanged")
	require.NoError(t, vfd.DropCache(f, 0, 0))
	a, b = resident()
	assert.Zero(t, a+b, "n == 0 drops through the end of file")
}
