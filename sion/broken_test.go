package sion

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestReadMutatedFiles damages test4.sion field by field; each damage is
// reported with its own sentinel and the offset of the field.
func TestReadMutatedFiles(t *testing.T) {
	orig, err := os.ReadFile(testdata("test4.sion"))
	require.NoError(t, err)
	le := binary.LittleEndian
	put32 := func(off int, v int32) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint32(b[off:], uint32(v)); return b }
	}
	put64 := func(off int, v int64) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint64(b[off:], uint64(v)); return b }
	}
	cut := func(n int) func([]byte) []byte { return func(b []byte) []byte { return b[:n] } }
	const sov = 23552
	tests := []struct {
		name string
		mut  func([]byte) []byte
		want error
		off  int64
	}{
		{"empty file", cut(0), ErrBadMagic, 0},
		{"cut inside magic", cut(3), ErrTruncated, 0},
		{"cut inside META1", cut(500), ErrTruncated, 0},
		{"cut inside the per-task arrays", cut(1100), ErrTruncated, 24},
		{"cut inside data", cut(3000), ErrTruncated, 1144},
		{"cut inside META2", cut(sov + 40), ErrTruncated, sov},
		{"fileformat 2", put32(16, 2), ErrVersion, 16},
		{"fileformat 6", put32(16, 6), ErrVersion, 16},
		{"fsblksize 0", put32(20, 0), ErrInconsistent, 20},
		{"ntasks 0", put32(24, 0), ErrInconsistent, 24},
		{"ntasks huge", put32(24, 1<<30), ErrTruncated, 24},
		{"nfiles 0", put32(28, 0), ErrInconsistent, 28},
		{"filenumber out of range in a set", func(b []byte) []byte { put32(28, 2)(b); return put32(32, 5)(b) }, ErrInconsistent, 32},
		{"negative chunk size", put64(1076+32+8, -1), ErrInconsistent, 1076 + 32 + 8},
		{"negative maxchunks", put32(1140, -1), ErrInconsistent, 1140},
		{"start_of_varheader inside META1", put64(1144, 100), ErrInconsistent, 1144},
		{"start_of_varheader past the end", put64(1144, 1<<40), ErrTruncated, 1144},
		{"maxchunks larger than META2", put32(1140, 1000), ErrTruncated, sov},
		{"blockcount above maxchunks", put64(sov, 4), ErrInconsistent, sov},
		{"negative blockcount", put64(sov+8, -1), ErrInconsistent, sov + 8},
		{"block larger than its chunk", put64(sov+32, 5000), ErrInconsistent, sov + 32},
		{"negative block size", put64(sov+32+8, -5), ErrInconsistent, sov + 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mut(bytes.Clone(orig))
			_, err := NewReader(bytes.NewReader(b), int64(len(b)))
			require.ErrorIs(t, err, tc.want)
			var ce *CorruptionError
			require.True(t, errors.As(err, &ce), "%v", err)
			assert.Equal(t, tc.off, ce.Offset, "%v", err)
		})
	}
}

// TestReadBrokenSets damages a 2-file set: a missing sibling, a foreign
// sibling, a bad mapping.
func TestReadBrokenSets(t *testing.T) {
	f0, err := os.ReadFile(testdata("par2.sion"))
	require.NoError(t, err)
	f1, err := os.ReadFile(testdata("par2.sion.000001"))
	require.NoError(t, err)
	mapAt := len(f0) - 32 // four (file, lrank) pairs
	tests := []struct {
		name   string
		f0, f1 func([]byte) []byte
		noSib  bool
		want   error
	}{
		{name: "missing sibling", noSib: true, want: os.ErrNotExist},
		{name: "sibling from a larger set", f1: func(b []byte) []byte { binary.LittleEndian.PutUint32(b[28:], 3); return b }, want: ErrInconsistent},
		{name: "mapping entry out of range", f0: func(b []byte) []byte { binary.LittleEndian.PutUint32(b[mapAt+8:], 7); return b }, want: ErrInconsistent},
		{name: "mapping entry repeated", f0: func(b []byte) []byte { copy(b[mapAt+8:mapAt+16], b[mapAt:mapAt+8]); return b }, want: ErrInconsistent},
		{name: "mapping size wrong", f0: func(b []byte) []byte { binary.LittleEndian.PutUint32(b[mapAt-4:], 3); return b }, want: ErrInconsistent},
		{name: "sibling unclosed", f1: func(b []byte) []byte { binary.LittleEndian.PutUint64(b[1076+32+4:], 0); return b }, want: ErrUnclosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Join(dir, "par2.sion")
			b0, b1 := bytes.Clone(f0), bytes.Clone(f1)
			if tc.f0 != nil {
				b0 = tc.f0(b0)
			}
			if tc.f1 != nil {
				b1 = tc.f1(b1)
			}
			require.NoError(t, os.WriteFile(name, b0, 0o644))
			if !tc.noSib {
				require.NoError(t, os.WriteFile(name+".000001", b1, 0o644))
			}
			_, err := Open(vfd.Sec2{}, name)
			require.ErrorIs(t, err, tc.want, fmt.Sprint(err))
		})
	}
}

// TestReadOlderFileformats reads test4.sion relabelled as fileformat 4
// (chunk sizes used as stored) and as fileformat 3 with the requested,
// unrounded chunk sizes (the reader rounds them to fsblksize).
func TestReadOlderFileformats(t *testing.T) {
	orig, err := os.ReadFile(testdata("test4.sion"))
	require.NoError(t, err)
	le := binary.LittleEndian
	for _, v := range []int32{3, 4} {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) {
			b := bytes.Clone(orig)
			le.PutUint32(b[16:], uint32(v))
			if v == 3 {
				for i, c := range []int64{1000, 1500, 100, 3000} {
					le.PutUint64(b[1076+32+8*i:], uint64(c))
				}
			}
			r, err := NewReader(bytes.NewReader(b), int64(len(b)))
			require.NoError(t, err)
			assert.Equal(t, v, r.Files()[0].FileFormat)
			assert.Equal(t, []int64{1024, 2048, 1024, 3072}, r.Files()[0].ChunkSizes)
			for i, w := range test4Tasks {
				got, err := r.ReadTask(i)
				require.NoError(t, err)
				assert.Equal(t, w.sha, shaPrefix(got))
			}
		})
	}
}
