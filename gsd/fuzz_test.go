package gsd

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// FuzzReader feeds arbitrary bytes to the reader, the verifier and Repair.
// None may panic or allocate beyond the input size; whatever the reader
// accepts must be readable chunk by chunk; a repaired file must open.
func FuzzReader(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.gsd")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		require.NoError(f, err)
		f.Add(b)
		if len(b) > 300 {
			f.Add(b[:len(b)-1])
			f.Add(b[:len(b)/2])
		}
	}
	f.Add(buildV1(2, []string{"a", "bb"}))
	// Sizes far beyond the file: every one must be refused or bounded
	// before anything is allocated for it.
	if three, err := os.ReadFile("testdata/three.gsd"); err == nil {
		le := binary.LittleEndian
		for _, mod := range []func(b []byte){
			func(b []byte) { le.PutUint64(b[offNameAlloc:], 1<<40) },
			func(b []byte) { le.PutUint64(b[offNameAlloc:], 1<<58) },
			func(b []byte) { le.PutUint64(b[offIndexAlloc:], 1<<40) },
			func(b []byte) { le.PutUint64(b[offIndexAlloc:], ^uint64(0)) },
			func(b []byte) { le.PutUint64(b[offIndexLoc:], 1<<62) },
			func(b []byte) { le.PutUint64(b[256+8:], 1<<60) },                // N
			func(b []byte) { le.PutUint32(b[256+24:], ^uint32(0)) },          // M
			func(b []byte) { le.PutUint64(b[256+16:], uint64(1<<63-16)) },    // location
			func(b []byte) { le.PutUint64(b[256+32*6:], ^uint64(0)>>1) },     // frame
			func(b []byte) { le.PutUint64(b[256+8:], 1<<61); b[256+30] = 1 }, // N of a uint8 chunk
		} {
			b := bytes.Clone(three)
			mod(b)
			f.Add(b)
		}
	}
	f.Fuzz(fuzzOne)
}

func fuzzOne(t *testing.T, data []byte) {
	{
		size := int64(len(data))
		_ = VerifyReaderAt(bytes.NewReader(data), size, "fuzz")
		r, err := NewReader(bytes.NewReader(data), size)
		if err == nil {
			names := r.ChunkNames("")
			for fr := uint64(0); fr < min(r.NFrames(), 64); fr++ {
				for _, n := range names {
					e, err := r.ChunkInfo(fr, n)
					if err != nil {
						continue
					}
					b, _, err := r.ReadChunkRaw(fr, n)
					if err != nil {
						t.Fatalf("frame %d %q: listed but unreadable: %v", fr, n, err)
					}
					if ds, _ := e.DataSize(); int64(len(b)) != ds {
						t.Fatalf("frame %d %q: %d bytes, entry says %d", fr, n, len(b), ds)
					}
					if e.N > 0 {
						if _, err := r.ReadRowsRaw(fr, n, e.N-1, 1); err != nil {
							t.Fatalf("last row: %v", err)
						}
					}
				}
			}
			if err := r.Refresh(); err != nil {
				t.Fatalf("refresh of an unchanged file: %v", err)
			}
		}
		core := vfd.NewCore()
		w, err := vfd.Create(core, "f.gsd")
		require.NoError(t, err)
		_, err = w.WriteAt(data, 0)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		res, err := Repair(core, "f.gsd")
		if err != nil {
			return // header damage is not repairable
		}
		r2, err := Open(core, "f.gsd")
		if err != nil {
			t.Fatalf("repaired file (%+v) does not open: %v", res, err)
		}
		if r != nil && r2.NFrames() > r.NFrames() {
			t.Fatalf("repair gained frames: %d > %d", r2.NFrames(), r.NFrames())
		}
		_ = r2.Close()
	}
}
