package partner

import (
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ftigo/ftigo/encode"
	"github.com/ftigo/ftigo/vfd"
)

// TestCorruptionErrorWording: a file that does not exist is reported as
// "missing", one with wrong bytes as "corrupt".
func TestCorruptionErrorWording(t *testing.T) {
	dir := t.TempDir()
	f := FileInfo{Ref: Ref{Driver: vfd.Sec2{}, Path: dir + "/absent"}, Size: 3, Hash: encode.Hash{}}
	err := f.Check(2, 1<<10)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), "partner: missing "+dir+"/absent (rank 2): ")
	assert.NotContains(t, err.Error(), "corrupt")

	p := dir + "/bad"
	assert.NoError(t, vfd.WriteFileAtomic(vfd.Sec2{}, p, []byte("abc")))
	f.Path = p
	err = f.Check(2, 1<<10)
	assert.ErrorIs(t, err, ErrHashMismatch)
	assert.Contains(t, err.Error(), "partner: corrupt "+p+" (rank 2) at offset 0: ")
}
