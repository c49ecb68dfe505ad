package fileformat

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCopyToChecks copies a file whose container has a zero tail, intact
// and damaged after Open. The intact copy must equal the file and pass
// Verify. A damaged block or metadata byte must fail the copy at the
// Verifier's offset, before the bad bytes are written.
func TestCopyToChecks(t *testing.T) {
	const bs = 512
	data := bytes.Repeat([]byte("0123456789abcdef"), 300) // 4800 bytes
	big := []Var{{ID: 7, Type: Uint8, Data: append(data, make([]byte, 2000)...)}}
	_, lay, _ := writeFile(t, Meta{CkptID: 1, Rank: 3}, big, nil, WithBlockSize(bs))
	src := &memFile{name: "src.fti"}
	_, _, err := Write(src, Meta{CkptID: 2, Rank: 3}, []Var{{ID: 7, Type: Uint8, Data: data}}, lay, WithBlockSize(bs), WithClock(fixedClock))
	require.NoError(t, err)
	open := func(b []byte) *Reader {
		r, err := Open(&memFile{name: "src.fti", b: b})
		require.NoError(t, err)
		return r
	}
	r := open(src.b)
	require.Len(t, r.chunk, 1)
	c := r.chunk[0]
	require.Greater(t, c.ContainerSize, c.Size, "the container has a zero tail")

	cp := &memFile{name: "copy.fti", b: []byte("stale")}
	n, err := r.CopyTo(cp)
	require.NoError(t, err)
	assert.Equal(t, int64(len(src.b)), n)
	assert.Equal(t, src.b, cp.b)
	require.NoError(t, open(cp.b).Verify())

	for _, tc := range []struct {
		name    string
		at      int64 // damaged byte
		wantOff int64 // CorruptionError.Offset
		maxLen  int   // bytes of dst written at most
	}{
		{"data block", c.Fptr + 2*bs + 5, c.Fptr + 2*bs, int(c.Fptr)},
		{"metadata", r.fb.metaOff + 3, r.fb.metaOff, int(r.fb.fs - FBSize)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(src.b)
			r := open(b)
			b[tc.at] ^= 0x10 // after Open: only CopyTo sees it
			cp := &memFile{name: "copy.fti"}
			n, err := r.CopyTo(cp)
			require.ErrorIs(t, err, ErrHashMismatch)
			assert.Zero(t, n)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.wantOff, ce.Offset)
			assert.EqualValues(t, 3, ce.Rank)
			assert.LessOrEqual(t, len(cp.b), tc.maxLen, "nothing from the bad piece on is written")
			if tc.name == "data block" {
				assert.EqualValues(t, 7, ce.VarID)
				assert.Equal(t, 0, ce.Chunk)
			}
		})
	}
}
