package gsd

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errInjected = errors.New("injected read error")

// failingReader fails every read that covers byte failAt (none when it is
// negative) and counts the reads it is asked for.
type failingReader struct {
	r      io.ReaderAt
	failAt int64
	reads  int
}

func (f *failingReader) ReadAt(p []byte, off int64) (int, error) {
	f.reads++
	if f.failAt >= 0 && off <= f.failAt && f.failAt < off+int64(len(p)) {
		return 0, errInjected
	}
	return f.r.ReadAt(p, off)
}

// syntheticIndex returns a 256-byte gap followed by n used index slots;
// slot s holds frame s at location s+1.
func syntheticIndex(n int) []byte {
	b := make([]byte, headerSize+n*entrySize)
	for s := range n {
		encodeEntry(b[headerSize+s*entrySize:], Entry{Frame: uint64(s), N: 1, M: 1, Type: TypeUint8, Location: int64(s + 1)})
	}
	return b
}

func TestScanIndex(t *testing.T) {
	n := 2*entryBatch + 5
	data := syntheticIndex(n)
	tests := []struct {
		name      string
		from, to  uint64
		stopAt    int64 // visit returns false at this slot; -1 never
		failAt    int64 // reads reaching this byte fail; -1 never
		wantFirst uint64
		wantLast  uint64 // last slot visited (without a read error)
	}{
		{"whole block across batches", 0, uint64(n), -1, -1, 0, uint64(n - 1)},
		{"from the middle", entryBatch - 2, uint64(n), -1, -1, entryBatch - 2, uint64(n - 1)},
		{"stop early", 0, uint64(n), 7, -1, 0, 7},
		{"stop after a batch boundary", 0, uint64(n), entryBatch + 1, -1, 0, entryBatch + 1},
		{"empty range", 5, 5, -1, -1, 0, 0},
		{"read error", 0, uint64(n), -1, headerSize + int64(entryBatch+3)*entrySize, 0, entryBatch - 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fr := &failingReader{r: bytes.NewReader(data), failAt: tc.failAt}
			var seen []uint64
			err := scanIndex(fr, "x.gsd", headerSize, tc.from, tc.to, func(slot uint64, raw []byte, e Entry) bool {
				require.Len(t, raw, entrySize)
				require.Equal(t, slot, e.Frame, "entry decoded from its own slot")
				require.Equal(t, int64(slot+1), e.Location)
				seen = append(seen, slot)
				return int64(slot) != tc.stopAt
			})
			if tc.failAt >= 0 {
				require.ErrorIs(t, err, errInjected)
				require.ErrorIs(t, err, ErrCorrupt)
				var ce *CorruptionError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, "index", ce.Part)
				assert.Equal(t, "read index", ce.Reason)
				assert.Equal(t, headerSize+ce.Entry*entrySize, ce.Offset)
				assert.LessOrEqual(t, ce.Offset, tc.failAt, "the failed read starts at or before the bad byte")
				if len(seen) > 0 {
					assert.Less(t, int64(seen[len(seen)-1]), ce.Entry, "no slot of the failed read is visited")
				}
				return
			}
			require.NoError(t, err)
			if tc.from == tc.to {
				assert.Empty(t, seen)
				assert.Zero(t, fr.reads)
				return
			}
			require.NotEmpty(t, seen)
			assert.Equal(t, tc.wantFirst, seen[0])
			assert.Equal(t, tc.wantLast, seen[len(seen)-1])
			assert.Len(t, seen, int(tc.wantLast-tc.wantFirst+1), "every slot once, in order")
		})
	}
}

// TestIndexReadErrorSameForLoaderAndVerify: the loader (NewReader) and
// VerifyReaderAt walk the index through the same scanIndex and report a
// failed index read the same way.
func TestIndexReadErrorSameForLoaderAndVerify(t *testing.T) {
	base, err := os.ReadFile("testdata/three.gsd")
	require.NoError(t, err)
	failAt := int64(headerSize + 3*entrySize) // in the index of three.gsd, not in its header or namelist
	fr := &failingReader{r: bytes.NewReader(base), failAt: failAt}
	_, loadErr := NewReader(fr, int64(len(base)))
	verifyErr := VerifyReaderAt(fr, int64(len(base)), "")
	for _, err := range []error{loadErr, verifyErr} {
		require.ErrorIs(t, err, errInjected)
		var ce *CorruptionError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "index", ce.Part)
		assert.Equal(t, "read index", ce.Reason)
		assert.Equal(t, int64(0), ce.Entry)
		assert.Equal(t, int64(headerSize), ce.Offset)
	}
	assert.Equal(t, loadErr.Error(), verifyErr.Error())
}
