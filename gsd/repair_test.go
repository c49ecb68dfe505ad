package gsd

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVerifyNamesTheEntry(t *testing.T) {
	base, err := os.ReadFile("testdata/three.gsd")
	require.NoError(t, err)
	le := binary.LittleEndian
	tests := []struct {
		name   string
		mod    func(b []byte)
		entry  int64
		reason string
	}{
		{"swapped entries", func(b []byte) {
			e1, e2 := bytes.Clone(b[256+64:256+96]), bytes.Clone(b[256+96:256+128])
			copy(b[256+64:], e2)
			copy(b[256+96:], e1)
		}, 3, "not sorted"},
		{"type 11", func(b []byte) { b[256+32+30] = 11 }, 1, "type 11"},
		{"duplicate", func(b []byte) { le.PutUint16(b[256+32+28:], 0) }, 1, "duplicate"},
		{"flags", func(b []byte) { b[256+31] = 1 }, 0, "flags"},
		{"M zero", func(b []byte) { le.PutUint32(b[256+24:], 0) }, 0, "M is 0"},
		{"frame at capacity", func(b []byte) {
			for k := 5; k < 7; k++ {
				le.PutUint64(b[256+32*k:], 128)
			}
		}, 5, "index_allocated_entries"},
		{"unused slot not zero", func(b []byte) { b[256+32*100+3] = 1 }, -1, "not zero"},
		{"data past EOF", func(b []byte) { le.PutUint64(b[256+32*6+16:], 5450) }, 6, "past the end"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(base)
			tc.mod(b)
			err := VerifyReaderAt(bytes.NewReader(b), int64(len(b)), "x.gsd")
			require.ErrorIs(t, err, ErrCorrupt)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.entry, ce.Entry)
			assert.Contains(t, ce.Reason, tc.reason)
			assert.Equal(t, "x.gsd", ce.Path)
		})
	}
	require.NoError(t, VerifyReaderAt(bytes.NewReader(base), int64(len(base)), "three.gsd"))
}

func TestRepair(t *testing.T) {
	base, err := os.ReadFile("testdata/three.gsd")
	require.NoError(t, err)
	tests := []struct {
		name    string
		data    []byte
		frames  uint64
		entries int
		changed bool
	}{
		{"valid file untouched", base, 3, 7, false},
		{"one byte cut", base[:len(base)-1], 2, 5, true},
		{"last frame cut", base[:5428], 2, 5, true},
		{"into frame 1", base[:5410], 1, 2, true},
		{"all data cut", base[:5376], 0, 0, true},
		{"namelist cut", base[:4400], 0, 0, true},
		{"index and everything after it cut", base[:256+32*4+5], 0, 0, true},
		{"type 11 in frame 2", func() []byte { b := bytes.Clone(base); b[256+32*6+30] = 11; return b }(), 2, 5, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := tmpName(t, "r.gsd")
			require.NoError(t, os.WriteFile(name, tc.data, 0o644))
			res, err := Repair(sec2, name)
			require.NoError(t, err)
			assert.Equal(t, tc.changed, res.Changed)
			assert.Equal(t, tc.frames, res.Frames)
			assert.Equal(t, tc.entries, res.Entries)
			require.NoError(t, Verify(sec2, name))
			r, err := Open(sec2, name)
			require.NoError(t, err)
			defer r.Close()
			assert.Equal(t, tc.frames, r.NFrames())
			for f := uint64(0); f < tc.frames; f++ {
				v, _, err := ReadChunk[float32](r, f, "temperature")
				require.NoError(t, err)
				assert.Equal(t, float32(10*f+3), v[3])
			}
			w, err := OpenAppend(sec2, name, WithSync(false))
			require.NoError(t, err)
			require.NoError(t, WriteChunk(w, "step", []uint64{99}, 1, 1))
			require.NoError(t, w.EndFrame())
			require.NoError(t, w.Close())
			require.NoError(t, Verify(sec2, name))
		})
	}
	_, err = Repair(sec2, tmpName(t, "missing.gsd"))
	assert.Error(t, err)
	short := tmpName(t, "short.gsd")
	require.NoError(t, os.WriteFile(short, base[:100], 0o644))
	_, err = Repair(sec2, short)
	assert.ErrorIs(t, err, ErrNotGSD)
}
