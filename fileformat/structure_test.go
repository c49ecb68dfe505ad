package fileformat

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestStructureChecks edits single fields of grown.fti and then reseals
// the metadata and file block hashes, so only the structural checks
// behind the hashes can catch the edit. Offsets are those of
// docs/format/ftiff.md: in grown.fti the MB starts at 95 with three
// 32-byte variable records, BMD 0 at MB+96, VMDs at MB+112 and MB+200,
// BMD 1 at MB+288, VMDs at MB+304 and MB+392, block hashes at MB+480.
func TestStructureChecks(t *testing.T) {
	good, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join("testdata", "grown.fti"))
	require.NoError(t, err)
	const mb = 95
	fb := len(good) - FBSize
	u8 := func(off int, v byte) func([]byte) { return func(b []byte) { b[off] = v } }
	u32 := func(off int, v uint32) func([]byte) { return func(b []byte) { le.PutUint32(b[off:], v) } }
	u64 := func(off int, v uint64) func([]byte) { return func(b []byte) { le.PutUint64(b[off:], v) } }
	add64 := func(off int, d int64) func([]byte) {
		return func(b []byte) { le.PutUint64(b[off:], uint64(int64(le.Uint64(b[off:]))+d)) }
	}
	tests := []struct {
		name string
		edit func([]byte)
		want error
	}{
		{"duplicate variable id", u32(mb+0, 2), ErrCorrupt},
		{"negative variable id", u32(mb+0, 0xffffffff), ErrCorrupt},
		{"unknown element type", u8(mb+4, 99), ErrCorrupt},
		{"reserved byte in variable record", u8(mb+5, 1), ErrCorrupt},
		{"element size", u32(mb+8, 3), ErrCorrupt},
		{"reserved word in variable record", u32(mb+12, 1), ErrCorrupt},
		{"variable size beyond data", u64(mb+16, 1<<40), ErrCorrupt},
		{"variable size not a multiple", u64(mb+16, 23), ErrCorrupt},
		{"variable size smaller than chunks", u64(mb+16, 20), ErrCorrupt},
		{"name padding", u8(mb+25, 'x'), ErrCorrupt},
		{"name length past the end", func(b []byte) { le.PutUint16(b[mb+6:], 0xffff) }, ErrCorrupt},
		{"block without chunks", u32(mb+96, 0), ErrCorrupt},
		{"block with too many chunks", u32(mb+96, 1000), ErrCorrupt},
		{"block reserved", u32(mb+100, 1), ErrCorrupt},
		{"block dbsize", add64(mb+104, 1), ErrCorrupt},
		{"vmd idx out of range", u32(mb+112+4, 9), ErrCorrupt},
		{"vmd idx of another variable", u32(mb+112+4, 1), ErrCorrupt},
		{"vmd container id", u32(mb+112+8, 1), ErrCorrupt},
		{"vmd hascontent 0", u8(mb+112+12, 0), ErrCorrupt},
		{"vmd hascontent 2", u8(mb+112+12, 2), ErrCorrupt},
		{"vmd reserved", u8(mb+112+13, 1), ErrCorrupt},
		{"vmd dptr", add64(mb+112+16, 4), ErrCorrupt},
		{"vmd fptr", add64(mb+112+24, 1), ErrCorrupt},
		{"vmd chunksize beyond container", add64(mb+112+32, 1), ErrCorrupt},
		{"vmd chunksize short", add64(mb+112+32, -4), ErrCorrupt},
		{"vmd container size 0", u64(mb+112+40, 0), ErrCorrupt},
		{"vmd container size huge", u64(mb+112+40, 1<<62), ErrCorrupt},
		{"vmd first block hash", add64(mb+200+48, 1), ErrCorrupt},
		{"vmd chunk hash", u8(mb+112+56, 0), ErrHashMismatch},
		{"dCP block hash", func(b []byte) { b[mb+480] ^= 1 }, ErrHashMismatch},
		{"fb flags", u32(fb+12, 8), ErrCorrupt},
		{"fb block size tiny", u32(fb+16, 10), ErrCorrupt},
		{"fb block size other", u32(fb+16, 2048), ErrHashMismatch},
		{"fb numVars", u32(fb+20, 4), ErrCorrupt},
		{"fb numVars huge", u32(fb+20, 1<<30), ErrCorrupt},
		{"fb numBlocks", u32(fb+24, 3), ErrCorrupt},
		{"fb numChunks", u32(fb+28, 5), ErrCorrupt},
		{"fb numChunks fewer", u32(fb+28, 3), ErrCorrupt},
		{"fb ckptSize", add64(fb+32, 1), ErrCorrupt},
		{"fb ckptSize negative", u64(fb+32, 1<<63), ErrCorrupt},
		{"fb fs larger", add64(fb+40, 1), ErrTruncated},
		{"fb fs smaller", add64(fb+40, -1), ErrCorrupt},
		{"fb metaOff", add64(fb+72, 1), ErrCorrupt},
		{"fb metaOff before header", u64(fb+72, 3), ErrCorrupt},
		{"fb metaSize", add64(fb+80, -1), ErrCorrupt},
		{"fb block hash count", add64(fb+88, 1), ErrCorrupt},
		{"fb checksum", func(b []byte) { b[fb+128] ^= 1 }, ErrHashMismatch},
		{"fb version", func(b []byte) { b[fb+8] = 9 }, ErrCorrupt},
		{"header size", func(b []byte) { b[10] = 65 }, ErrCorrupt},
		{"negative rank", func(b []byte) { b[27] = 0x80 }, ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), good...)
			tc.edit(b)
			b = resealed(b)
			r, err := Open(&memFile{name: "grown.fti", b: b})
			if err == nil {
				err = r.Verify()
			}
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, tc.want, "%v", err)
		})
	}
}

// TestPaddingMustBeZero checks that Verify rejects a non-zero byte in the
// empty tail of a shrunk container (bytes no hash covers).
func TestPaddingMustBeZero(t *testing.T) {
	good, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join("testdata", "grown.fti"))
	require.NoError(t, err)
	b := append([]byte(nil), good...)
	b[83] = 1 // var "b": 5-byte container at 80 holding 2 bytes
	r, err := Open(&memFile{name: "grown.fti", b: b})
	require.NoError(t, err)
	got := make([]byte, 2)
	require.NoError(t, r.ReadVar(2, got), "the data itself is intact")
	assert.Equal(t, []byte("hi"), got)
	err = r.Verify()
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(83), ce.Offset)
	assert.Equal(t, int32(2), ce.VarID)
	assert.ErrorIs(t, err, ErrCorrupt)
}

func TestVerifySeesChangesAfterOpen(t *testing.T) {
	good, err := vfd.ReadFile(vfd.Sec2{}, filepath.Join("testdata", "grown.fti"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		edit func(m *memFile)
		want error
	}{
		{"header", func(m *memFile) { m.b[20] ^= 1 }, ErrHashMismatch},
		{"file block", func(m *memFile) { m.b[len(m.b)-1] ^= 1 }, ErrHashMismatch},
		{"metadata", func(m *memFile) { m.b[100] ^= 1 }, ErrHashMismatch},
		{"shorter", func(m *memFile) { m.b = m.b[:len(m.b)-1] }, ErrTruncated},
		{"longer", func(m *memFile) { m.b = append(m.b, 0) }, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &memFile{name: "grown.fti", b: append([]byte(nil), good...)}
			r, err := Open(m)
			require.NoError(t, err)
			tc.edit(m)
			err = r.Verify()
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}
