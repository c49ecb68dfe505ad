package levels

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/vfd"
)

func TestFileDigestAndHashingWriter(t *testing.T) {
	data := payload(3, 9, 3<<20) // spans several read pieces
	want := Digest(blake3.Sum256(data))
	for _, tt := range []struct {
		name       string
		write      func(w *HashingWriter) error
		sequential bool
	}{
		{"sequential", func(w *HashingWriter) error {
			for off := 0; off < len(data); off += 1 << 20 {
				if _, err := w.WriteAt(data[off:min(off+1<<20, len(data))], int64(off)); err != nil {
					return err
				}
			}
			return nil
		}, true},
		{"out of order", func(w *HashingWriter) error {
			half := len(data) / 2
			if _, err := w.WriteAt(data[half:], int64(half)); err != nil {
				return err
			}
			_, err := w.WriteAt(data[:half], 0)
			return err
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := vfd.CreateTrunc(vfd.Sec2{}, filepath.Join(t.TempDir(), "f"))
			require.NoError(t, err)
			defer f.Close()
			w := NewHashingWriter(f)
			require.NoError(t, tt.write(w))
			d, ok := w.Sum()
			assert.Equal(t, tt.sequential, ok)
			if ok {
				assert.Equal(t, want, d)
			}
			assert.Equal(t, f, w.Unwrap())
			got, err := FileDigest(f)
			require.NoError(t, err)
			assert.Equal(t, want, got, "FileDigest reads every byte")
		})
	}
	var d Digest
	require.Error(t, d.UnmarshalText([]byte("abc")))
	require.Error(t, d.UnmarshalText([]byte(want.String()[:62]+"zz")))
	require.NoError(t, d.UnmarshalText([]byte(want.String())))
	assert.Equal(t, want, d)
}
