package gsd

import (
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
	"github.com/ftigo/ftigo/vfd"
)

// shippedV1 is the 1.0 test file of the Debian python3-gsd package: 127
// names ("0".."126", in hash order) × 5 frames, int32 value 13·name.
const shippedV1 = "/usr/lib/python3/dist-packages/gsd/test/test_gsd_v1.gsd"

// buildV1 lays out a 1.0 file the way gsd 1.x did: header, 128 index
// slots, 128 fixed 64-byte names, data. Entries within a frame are in
// write order (not sorted by id), as 1.0 allowed.
func buildV1(frames int, names []string) []byte {
	le := binary.LittleEndian
	const idx, nl, data = 256, 256 + 128*32, 256 + 128*32 + 128*64
	b := make([]byte, data)
	h := Header{IndexLocation: idx, IndexAllocated: 128, NameLocation: nl, NameAllocated: 128,
		SchemaVersion: MakeVersion(1, 2), GSDVersion: Version1, Application: "ftigo-v1", Schema: "none"}
	copy(b, h.encode())
	for i, n := range names {
		putCString(b[nl+64*i:nl+64*(i+1)], n)
	}
	slot := 0
	for f := 0; f < frames; f++ {
		for k := len(names) - 1; k >= 0; k-- { // reverse id order
			e := Entry{Frame: uint64(f), N: 1, M: 1, Location: int64(len(b)), ID: uint16(k), Type: TypeInt32}
			b = le.AppendUint32(b, uint32(int32(13*k+f)))
			encodeEntry(b[idx+32*slot:], e)
			slot++
		}
	}
	return b
}

func checkV1Contents(t *testing.T, r *Reader, frames int, names []string) {
	t.Helper()
	require.Equal(t, uint64(frames), r.NFrames())
	require.ElementsMatch(t, names, r.ChunkNames(""))
	for f := 0; f < frames; f++ {
		for k, n := range names {
			v, e, err := ReadChunk[int32](r, uint64(f), n)
			require.NoError(t, err, "frame %d %s", f, n)
			assert.Equal(t, []int32{int32(13*k + f)}, v)
			assert.Equal(t, TypeInt32, e.Type)
		}
	}
}

func TestReadAndUpgradeV1(t *testing.T) {
	names := []string{"position", "a-name-of-exactly-sixty-three-bytes-in-the-v1-namelist-slot-xyz", "z"}
	require.Len(t, names[1], 63)
	data := buildV1(4, names)
	r, err := NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	assert.Equal(t, Version1, r.Version())
	checkV1Contents(t, r, 4, names)
	require.NoError(t, VerifyReaderAt(bytes.NewReader(data), int64(len(data)), "v1"))

	name := tmpName(t, "v1.gsd")
	require.NoError(t, os.WriteFile(name, data, 0o644))
	_, err = OpenAppend(sec2, name)
	require.ErrorIs(t, err, ErrVersion, "1.0 files must be upgraded before appending")
	require.NoError(t, Upgrade(sec2, name))
	require.NoError(t, Verify(sec2, name))
	r, err = Open(sec2, name)
	require.NoError(t, err)
	assert.Equal(t, Version2, r.Version())
	assert.Equal(t, "ftigo-v1", r.Application())
	checkV1Contents(t, r, 4, names)
	es := r.Entries()
	for i := 1; i < len(es); i++ {
		assert.True(t, es[i-1].Frame < es[i].Frame || es[i-1].ID < es[i].ID, "sorted by (frame, id) at %d", i)
	}
	require.NoError(t, r.Close())
	require.NoError(t, Upgrade(sec2, name), "upgrading a 2.0 file does nothing")
	w, err := OpenAppend(sec2, name, WithSync(false))
	require.NoError(t, err)
	require.NoError(t, WriteChunk(w, "z", []int32{99}, 1, 1))
	require.NoError(t, w.EndFrame())
	require.NoError(t, w.Close())
	require.NoError(t, Verify(sec2, name))
}

func TestReadShippedV1File(t *testing.T) {
	if _, err := os.Stat(shippedV1); err != nil {
		testutil.Missing(t, "python3-gsd's test file "+shippedV1+" (apt-get install python3-gsd)")
	}
	r, err := Open(vfd.Sec2{}, shippedV1)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, Version1, r.Version())
	assert.Equal(t, "test_gsd_v1", r.Application())
	names := make([]string, 127)
	for i := range names {
		names[i] = strconv.Itoa(i)
	}
	require.Equal(t, uint64(5), r.NFrames())
	require.ElementsMatch(t, names, r.ChunkNames(""))
	for f := uint64(0); f < 5; f++ {
		for i, n := range names {
			v, _, err := ReadChunk[int32](r, f, n)
			require.NoError(t, err)
			require.Equal(t, []int32{int32(13 * i)}, v, "frame %d name %s", f, n)
		}
	}
}
