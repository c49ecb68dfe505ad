package partner

import (
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

// TestCorruptionErrorWording: a file that does not exist is reported as
// "missing", one with wrong bytes as "corrupt".
func TestCorruptionErrorWording(t *testing.T) {
	dir := t.TempDir()
	f := FileInfo{Ref: Ref{Driver: vfd.Sec2{}, Path: dir + "/absent"}, Size: 3, Hash: encode.Hash{}}
	err := f.Check(2, 1<<10)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Equal(t, "missing file of rank 2: open "+dir+"/absent: no such file or directory", err.Error())
	assert.NotContains(t, err.Error(), "corrupt")

	p := dir + "/bad"
	assert.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, p, []byte("abc")))
	f.Path = p
	err = f.Check(2, 1<<10)
	assert.ErrorIs(t, err, ErrHashMismatch)
	assert.Contains(t, err.Error(), "corrupt "+p+" (rank 2) at offset 0: hash mismatch: ")
}

// TestCheckImage: CheckImage reports what Check reports, for the same
// files, and returns the bytes only when they check out.
func TestCheckImage(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 5<<20+17) // more than one piece of the load
	for i := range data {
		data[i] = byte(i*13 + i>>11)
	}
	good := dir + "/good"
	assert.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, good, data))
	h, err := encode.HashReader(mustOpen(t, good), int64(len(data)), 1<<16)
	assert.NoError(t, err)
	for _, tc := range []struct {
		name string
		f    FileInfo
	}{
		{"good", FileInfo{Ref: Ref{Driver: vfd.Sec2{}, Path: good}, Size: int64(len(data)), Hash: h}},
		{"missing", FileInfo{Ref: Ref{Driver: vfd.Sec2{}, Path: dir + "/absent"}, Size: int64(len(data)), Hash: h}},
		{"wrong size", FileInfo{Ref: Ref{Driver: vfd.Sec2{}, Path: good}, Size: int64(len(data)) - 1, Hash: h}},
		{"wrong hash", FileInfo{Ref: Ref{Driver: vfd.Sec2{}, Path: good}, Size: int64(len(data)), Hash: encode.Hash{1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.f.Check(3, 1<<16)
			img, err := tc.f.CheckImage(3, 1<<16)
			if want == nil {
				assert.NoError(t, err)
				assert.Equal(t, data, img)
				return
			}
			assert.Nil(t, img)
			assert.EqualError(t, err, want.Error())
			if tc.name == "missing" {
				assert.ErrorIs(t, err, fs.ErrNotExist)
			} else {
				assert.ErrorIs(t, err, ErrHashMismatch)
			}
		})
	}
}

func mustOpen(t *testing.T, p string) vfd.File {
	t.Helper()
	f, err := vfd.OpenRead(vfd.Sec2{}, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
