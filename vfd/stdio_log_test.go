package vfd_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/vfd"
)

func TestStdioCoalescesSequentialWrites(t *testing.T) {
	c := vfd.NewCore()
	lg := vfd.NewLog(c, nil)
	d := vfd.NewStdio(lg, 1024)
	f, err := vfd.Create(d, "seq")
	require.NoError(t, err)
	want := pattern(3000)
	for off := 0; off < 3000; off += 100 {
		_, err := f.WriteAt(want[off:off+100], int64(off))
		require.NoError(t, err)
	}
	// 2 full buffers of 1000 bytes went down; 1000 bytes are pending.
	assert.Equal(t, int64(2), lg.Stats().Ops[vfd.OpWrite])
	info, err := c.Stat("seq")
	require.NoError(t, err)
	assert.Equal(t, int64(2000), info.Size(), "the pending buffer is not in the underlying file")

	got := make([]byte, 10)
	require.NoError(t, vfd.ReadFull(f, got, 2500), "a read over the buffer flushes it")
	assert.Equal(t, want[2500:2510], got)
	assert.Equal(t, int64(3), lg.Stats().Ops[vfd.OpWrite])

	_, err = f.WriteAt([]byte("far"), 10000) // not sequential: buffered anew
	require.NoError(t, err)
	_, err = f.WriteAt(pattern(5000), 20000) // larger than the buffer: flush + direct
	require.NoError(t, err)
	assert.Equal(t, int64(5), lg.Stats().Ops[vfd.OpWrite])
	require.NoError(t, f.Close())
	all := readAll(t, c, "seq")
	assert.Equal(t, want, all[:3000])
	assert.Equal(t, []byte("far"), all[10000:10003])
	assert.Equal(t, pattern(5000), all[20000:])
}

func TestLogTracesOps(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	d := vfd.NewLog(vfd.NewCore(), zap.New(core))
	f, err := vfd.Create(d, "traced")
	require.NoError(t, err)
	_, err = vfd.WriteAtType(f, vfd.MemOHdr, []byte("abcd"), 8)
	require.NoError(t, err)
	n, err := f.ReadAt(make([]byte, 20), 0)
	assert.Equal(t, 12, n)
	require.Error(t, err)
	require.NoError(t, f.Close())
	_, err = d.Stat("nope")
	require.Error(t, err)

	entries := logs.All()
	require.Len(t, entries, 5)
	w := entries[1].ContextMap()
	assert.Equal(t, "write", w["op"])
	assert.Equal(t, "traced", w["path"])
	assert.Equal(t, int64(8), w["offset"])
	assert.Equal(t, int64(4), w["size"])
	assert.Equal(t, "ohdr", w["mem-type"])
	assert.Contains(t, w, "duration")
	assert.Equal(t, zapcore.DebugLevel, entries[2].Level, "io.EOF on a read is not a failure")
	assert.Equal(t, zapcore.WarnLevel, entries[4].Level)
	assert.Equal(t, "stat", entries[4].ContextMap()["op"])

	s := d.Stats()
	assert.Equal(t, map[vfd.OpKind]int64{vfd.OpOpen: 1, vfd.OpWrite: 1, vfd.OpRead: 1, vfd.OpClose: 1, vfd.OpStat: 1}, s.Ops)
	assert.Equal(t, int64(1), s.Errors)
	assert.Equal(t, int64(12), s.BytesRead)
	assert.Equal(t, int64(4), s.BytesWritten)
}
