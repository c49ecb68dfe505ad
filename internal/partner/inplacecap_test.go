package partner

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestSinkInPlaceImageWithSpareCapacity: a sink receiving in place into
// an image whose slice has capacity beyond its length still knows the
// blocks it lent (they end where the image's bytes end, not its
// capacity): none of them is taken for a pool block and handed back to
// the shared pool, where another transfer would write into the image.
func TestSinkInPlaceImageWithSpareCapacity(t *testing.T) {
	const bs = minPooled
	size := 3*bs + 10
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	pool := &Buffers{}
	d := vfd.NewCore()
	s, err := createSink(Ref{Driver: d, Path: "/in/f"}, bs, int64(size), pool, 0)
	require.NoError(t, err)
	img := make([]byte, size, size+2*bs)
	s.receiveInPlace(img)
	for off := 0; off < size; {
		b := s.buffer()
		n := copy(b, data[off:])
		s.put(b[:n])
		off += n
	}
	_, n, err := s.finish()
	require.NoError(t, err)
	require.Equal(t, int64(size), n)
	assert.Equal(t, data, img[:size], "the image")
	got, err := vfd.ReadFile(d, "/in/f")
	require.NoError(t, err)
	assert.Equal(t, data, got, "the file")
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(img)))
	hi := lo + uintptr(cap(img))
	for i := range 8 {
		b := pool.get(bs)
		at := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		assert.False(t, at >= lo && at < hi, "pool block %d lies in the image", i)
	}
}
