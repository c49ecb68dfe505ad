package gsd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// killFrom fails every operation from the one numbered k on: what a
// process killed just before operation k leaves behind (no clean-up runs).
func killFrom(k int) vfd.Injector {
	return vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Index >= k {
			return errors.New("killed")
		}
		return nil
	})
}

// checkCreated requires that name on d is either absent (ok when absent)
// or a complete empty GSD file of application app ("": any), and that
// CreateOrAppend then gives a writer whose frame lands in a valid file.
func checkCreated(t *testing.T, d vfd.Driver, name, app string, mayBeAbsent bool) {
	t.Helper()
	if _, err := d.Stat(name); errors.Is(err, fs.ErrNotExist) {
		require.True(t, mayBeAbsent, "file missing")
	} else {
		require.NoError(t, err)
		require.NoError(t, Verify(d, name))
		r, err := Open(d, name)
		require.NoError(t, err)
		assert.Equal(t, uint64(0), r.NFrames())
		if app != "" {
			assert.Equal(t, app, r.Application())
		}
		require.NoError(t, r.Close())
	}
	w, err := CreateOrAppend(d, name, "relaunch", "test", MakeVersion(1, 0))
	require.NoError(t, err)
	require.NoError(t, WriteChunk(w, "x", []int32{7}, 1, 1))
	require.NoError(t, w.EndFrame())
	require.NoError(t, w.Close())
	require.NoError(t, Verify(d, name))
	r, err := Open(d, name)
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, uint64(1), r.NFrames())
	v, _, err := ReadChunk[int32](r, 0, "x")
	require.NoError(t, err)
	assert.Equal(t, []int32{7}, v)
}

// TestCreateIsAtomic stops Create at each of its file operations, both as
// a killed process (everything before the operation done, nothing after)
// and as a power cut (only what was synced survives, vfd.Core's crash
// clone): the name is then either absent or a complete empty GSD file,
// never a 0-byte or header-less file, and a relaunch (CreateOrAppend)
// always gets a working file. With WithOverwrite the previous file stays
// whole until the new one replaces it.
func TestCreateIsAtomic(t *testing.T) {
	for _, overwrite := range []bool{false, true} {
		t.Run(fmt.Sprintf("overwrite=%v", overwrite), func(t *testing.T) {
			var opts []Option
			if overwrite {
				opts = append(opts, WithOverwrite())
			}
			setup := func(core *vfd.Core) {
				if !overwrite {
					return
				}
				w, err := Create(core, "t.gsd", "old", "test", MakeVersion(1, 0))
				require.NoError(t, err)
				require.NoError(t, w.Close())
			}
			clean := vfd.NewCore()
			setup(clean)
			counted := vfd.NewFault(clean)
			w, err := Create(counted, "t.gsd", "new", "test", MakeVersion(1, 0), opts...)
			require.NoError(t, err)
			ops := counted.Ops()
			require.NoError(t, w.Close())
			require.GreaterOrEqual(t, ops, 5, "tmp open, write, sync, close, rename, sync dir, reopen")
			for k := 0; k < ops; k++ {
				core := vfd.NewCore()
				setup(core)
				var crashed *vfd.Core
				fd := vfd.NewFault(core, vfd.CrashCloneAt(core, k, &crashed), killFrom(k))
				_, err := Create(fd, "t.gsd", "new", "test", MakeVersion(1, 0), opts...)
				require.Error(t, err, "op %d", k)
				require.NotNil(t, crashed, "op %d", k)
				for _, st := range []struct {
					what string
					d    *vfd.Core
				}{{"kill", core}, {"power cut", crashed}} {
					t.Run(fmt.Sprintf("op%d/%s", k, st.what), func(t *testing.T) {
						if overwrite {
							// The old file or the new one, whole.
							r, err := Open(st.d, "t.gsd")
							require.NoError(t, err)
							assert.Contains(t, []string{"old", "new"}, r.Application())
							require.NoError(t, r.Close())
						}
						checkCreated(t, st.d, "t.gsd", map[bool]string{false: "new", true: ""}[overwrite], !overwrite)
					})
				}
			}
		})
	}
}

// TestCreateOrAppend: a missing or empty file is created, a GSD file is
// appended to, anything else is refused and left alone.
func TestCreateOrAppend(t *testing.T) {
	var m [8]byte
	binary.LittleEndian.PutUint64(m[:], magic)
	three, err := os.ReadFile("testdata/three.gsd")
	require.NoError(t, err)
	tests := []struct {
		name    string
		content []byte // nil: no file
		empty   bool   // replaced by a fresh file
		frames  uint64 // frames before the appended one
		err     error  // refused with this error
	}{
		{"missing", nil, true, 0, nil},
		{"0 bytes", []byte{}, true, 0, nil},
		{"100 zero bytes", make([]byte, 100), true, 0, nil},
		{"fresh layout of zeros", make([]byte, 5376), true, 0, nil},
		{"1 MiB of zeros", make([]byte, 1<<20), true, 0, nil},
		{"3 bytes of the magic", m[:3], true, 0, nil},
		{"torn header", three[:200], true, 0, nil},
		{"valid file", three, false, 3, nil},
		{"text", []byte("hello, world\n"), false, 0, ErrNotGSD},
		{"zeros then text", append(make([]byte, 300), 'x'), false, 0, ErrNotGSD},
		{"more than 1 MiB of zeros", make([]byte, 1<<20+1), false, 0, ErrNotGSD},
		{"bad magic, rest of the header zero", append([]byte{1}, make([]byte, 299)...), false, 0, ErrNotGSD},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			core := vfd.NewCore()
			if tc.content != nil {
				f, err := vfd.Create(core, "t.gsd")
				require.NoError(t, err)
				_, err = f.WriteAt(tc.content, 0)
				require.NoError(t, err)
				require.NoError(t, f.Close())
				if !tc.empty && tc.err == nil {
					r, err := Open(core, "t.gsd")
					require.NoError(t, err)
					require.NoError(t, r.Close())
				} else {
					_, err = Open(core, "t.gsd")
					assert.ErrorIs(t, err, ErrNotGSD)
					assert.Equal(t, tc.empty, errors.Is(err, ErrEmpty), "%v", err)
					_, err = OpenAppend(core, "t.gsd")
					assert.Equal(t, tc.empty, errors.Is(err, ErrEmpty), "%v", err)
				}
			}
			w, err := CreateOrAppend(core, "t.gsd", "app", "test", MakeVersion(1, 0), WithSync(false))
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				assert.NotErrorIs(t, err, ErrEmpty)
				got, rerr := vfd.ReadFile(core, "t.gsd")
				require.NoError(t, rerr)
				assert.True(t, bytes.Equal(tc.content, got), "a refused file was changed")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.frames, w.Frame())
			require.NoError(t, WriteChunk(w, "step", []uint64{42}, 1, 1))
			require.NoError(t, w.EndFrame())
			require.NoError(t, w.Close())
			require.NoError(t, Verify(core, "t.gsd"))
			r, err := Open(core, "t.gsd")
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, tc.frames+1, r.NFrames())
			v, _, err := ReadChunk[uint64](r, tc.frames, "step")
			require.NoError(t, err)
			assert.Equal(t, []uint64{42}, v)
			if tc.empty {
				assert.Equal(t, "app", r.Application())
			}
		})
	}
}

// TestCreateRefusesExisting: without WithOverwrite an existing name is
// left alone (fs.ErrExist), and no temporary file stays behind.
func TestCreateRefusesExisting(t *testing.T) {
	core := vfd.NewCore()
	w, err := Create(core, "a.gsd", "first", "test", MakeVersion(1, 0))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, err = Create(core, "a.gsd", "second", "test", MakeVersion(1, 0))
	require.ErrorIs(t, err, fs.ErrExist)
	r, err := Open(core, "a.gsd")
	require.NoError(t, err)
	assert.Equal(t, "first", r.Application())
	require.NoError(t, r.Close())
	ents, err := core.ReadDir(".")
	require.NoError(t, err)
	require.Len(t, ents, 1, "only a.gsd, no leftover temporary file")
	// A write failure during Create removes the temporary file.
	fd := vfd.NewFault(core, vfd.OnNth(vfd.OpWrite, 0, nil))
	_, err = Create(fd, "b.gsd", "x", "test", MakeVersion(1, 0))
	require.ErrorIs(t, err, vfd.ErrInjected)
	ents, err = core.ReadDir(".")
	require.NoError(t, err)
	require.Len(t, ents, 1)
}
