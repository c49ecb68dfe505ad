package gsd

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// crashWorkload writes frames until an operation fails; it returns how
// many EndFrame calls succeeded. Frame f has "pos" (f+1 rows) and, every
// third frame, a new long name, so the run relocates the namelist and the
// index.
func crashWorkload(d vfd.Driver, name string, frames int, opts ...Option) (ok int, err error) {
	w, err := Create(d, name, "crash", "test", MakeVersion(1, 0), append([]Option{WithIndexCapacity(1)}, opts...)...)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			_ = w.Close()
		}
	}()
	w.hdr.IndexAllocated = initIndexSlots
	for f := 0; f < frames; f++ {
		pos := make([]float32, 3*(f+1))
		for i := range pos {
			pos[i] = float32(f*1000 + i)
		}
		if err := WriteChunk(w, "pos", pos, uint64(f+1), 3); err != nil {
			return ok, err
		}
		if f%3 == 0 {
			if err := WriteChunk(w, fmt.Sprintf("log/%02d/%0100d", f, f), []int64{int64(f)}, 1, 1); err != nil {
				return ok, err
			}
		}
		if err := w.EndFrame(); err != nil {
			return ok, err
		}
		ok++
	}
	return ok, w.Close()
}

// checkSurvivor opens a file left by a crash: it must be valid, hold
// between committed and committed+1 frames with the right contents, and
// take an appended frame.
func checkSurvivor(t *testing.T, d vfd.Driver, name string, committed int) {
	t.Helper()
	checkSurvivorRange(t, d, name, committed, committed+1)
}

func checkSurvivorRange(t *testing.T, d vfd.Driver, name string, lo, hi int) {
	t.Helper()
	require.NoError(t, Verify(d, name))
	r, err := Open(d, name)
	require.NoError(t, err)
	n := int(r.NFrames())
	assert.GreaterOrEqual(t, n, lo)
	assert.LessOrEqual(t, n, hi)
	for f := 0; f < n; f++ {
		pos, e, err := ReadChunk[float32](r, uint64(f), "pos")
		require.NoError(t, err, "frame %d", f)
		require.Equal(t, uint64(f+1), e.N)
		assert.Equal(t, float32(f*1000+3*f+2), pos[len(pos)-1])
	}
	require.NoError(t, r.Close())
	w, err := OpenAppend(d, name, WithSync(false))
	require.NoError(t, err)
	require.Equal(t, uint64(n), w.Frame())
	require.NoError(t, WriteChunk(w, "appended", []int32{int32(n)}, 1, 1))
	require.NoError(t, w.EndFrame())
	require.NoError(t, w.Close())
	require.NoError(t, Verify(d, name))
	r, err = Open(d, name)
	require.NoError(t, err)
	defer r.Close()
	v, _, err := ReadChunk[int32](r, uint64(n), "appended")
	require.NoError(t, err)
	assert.Equal(t, []int32{int32(n)}, v)
}

// TestCrashAtEveryOperation cuts the power (vfd core CrashClone keeps only
// synced bytes) after each operation of a durable writer: every committed
// frame survives and the file stays valid and appendable.
func TestCrashAtEveryOperation(t *testing.T) {
	const frames = 12
	// Count the operations of a clean run.
	clean := vfd.NewFault(vfd.NewCore())
	ok, err := crashWorkload(clean, "t.gsd", frames, WithWriteBuffer(64))
	require.NoError(t, err)
	require.Equal(t, frames, ok)
	total := clean.Ops()
	for k := 1; k < total; k++ {
		core := vfd.NewCore()
		fd := vfd.NewFault(core, vfd.OnIndex(k, nil))
		committed, err := crashWorkload(fd, "t.gsd", frames, WithWriteBuffer(64))
		require.ErrorIs(t, err, vfd.ErrInjected, "op %d", k)
		after := core.CrashClone()
		if _, statErr := after.Stat("t.gsd"); statErr != nil {
			require.Equal(t, 0, committed, "op %d: file lost after a commit", k)
			continue
		}
		t.Run(fmt.Sprintf("op%03d", k), func(t *testing.T) { checkSurvivor(t, after, "t.gsd", committed) })
	}
}

// TestKillAtEveryWrite kills a writer without fsync at each write, tearing
// that write: the file as left on the (surviving) OS is valid with every
// frame whose EndFrame returned.
func TestKillAtEveryWrite(t *testing.T) {
	const frames = 12
	clean := vfd.NewFault(vfd.NewCore())
	_, err := crashWorkload(clean, "t.gsd", frames, WithSync(false), WithWriteBuffer(0))
	require.NoError(t, err)
	writes := 0
	for k := 0; k < clean.Ops(); k++ {
		writes++ // an upper bound is enough; extra runs end cleanly
	}
	for n := 1; n < writes; n++ {
		core := vfd.NewCore()
		fd := vfd.NewFault(core, vfd.ShortWrite(n, -1, nil))
		committed, err := crashWorkload(fd, "t.gsd", frames, WithSync(false), WithWriteBuffer(0))
		if err == nil {
			break // past the last write
		}
		require.ErrorIs(t, err, vfd.ErrInjected)
		t.Run(fmt.Sprintf("write%03d", n), func(t *testing.T) { checkSurvivor(t, core, "t.gsd", committed) })
	}
}

// TestCrashBuffered cuts the power at every operation of a writer in
// buffered mode (a commit every 144 bytes of data): the file is always
// valid, holds a prefix of the ended frames with the right contents, and
// takes appends.
func TestCrashBuffered(t *testing.T) {
	const frames = 12
	opts := []Option{WithWriteBuffer(64), WithBuffered(3*12*4, 0)}
	clean := vfd.NewFault(vfd.NewCore())
	_, err := crashWorkload(clean, "t.gsd", frames, opts...)
	require.NoError(t, err)
	for k := 1; k < clean.Ops(); k++ {
		core := vfd.NewCore()
		ended, err := crashWorkload(vfd.NewFault(core, vfd.OnIndex(k, nil)), "t.gsd", frames, opts...)
		require.ErrorIs(t, err, vfd.ErrInjected, "op %d", k)
		after := core.CrashClone()
		if _, statErr := after.Stat("t.gsd"); statErr != nil {
			continue
		}
		t.Run(fmt.Sprintf("op%03d", k), func(t *testing.T) { checkSurvivorRange(t, after, "t.gsd", 0, ended+1) })
	}
}

// TestCrashOrderedSync cuts the power at every operation of a writer with
// one fsync per commit: the file stays valid with every frame committed
// before the previous commit, and takes appends.
func TestCrashOrderedSync(t *testing.T) {
	const frames = 12
	opts := []Option{WithOrderedSync()}
	clean := vfd.NewFault(vfd.NewCore())
	_, err := crashWorkload(clean, "t.gsd", frames, opts...)
	require.NoError(t, err)
	for k := 1; k < clean.Ops(); k++ {
		core := vfd.NewCore()
		ended, err := crashWorkload(vfd.NewFault(core, vfd.OnIndex(k, nil)), "t.gsd", frames, opts...)
		require.ErrorIs(t, err, vfd.ErrInjected, "op %d", k)
		after := core.CrashClone()
		if _, statErr := after.Stat("t.gsd"); statErr != nil {
			continue
		}
		t.Run(fmt.Sprintf("op%03d", k), func(t *testing.T) { checkSurvivorRange(t, after, "t.gsd", max(ended-1, 0), ended+1) })
	}
}
