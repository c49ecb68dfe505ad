package levels

import (
	"bytes"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestImageSpare: Open prepares the memory of this rank's image of the
// newest checkpoint (allocated and populated in the background, placed as
// verifyImage places it), the level verifies the file into exactly that
// memory, and Recover forgets it. When the newest checkpoint turns out
// damaged, the older one is verified into memory of its own, correct,
// and the prepared memory is let go all the same.
func TestImageSpare(t *testing.T) {
	const size = 3<<20 + 777
	cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 2)
	cl.policy = FTIPolicy{KeepLast: 2}
	require.NoError(t, cl.run(4, func(e *Engine) error {
		for id := int64(1); id <= 2; id++ {
			if _, _, err := e.Checkpoint(id, L1, writeBytes(payload(e.env.Rank, id, size))); err != nil {
				return err
			}
		}
		return nil
	}))
	type result struct {
		id       int64
		image    []byte
		prepared uintptr // the address of the memory Open prepared, 0: none
		left     bool    // Recover kept the prepared memory
	}
	run := func() []result {
		res := make([]result, 4)
		var mu sync.Mutex
		require.NoError(t, cl.run(4, func(e *Engine) error {
			var r result
			if s := e.env.spare; s != nil {
				<-s.ready
				if len(s.buf) > 0 {
					r.prepared = uintptr(unsafe.Pointer(unsafe.SliceData(s.buf)))
				}
			}
			m, src, err := e.Recover()
			if err != nil {
				return err
			}
			r.id, r.image, r.left = m.ID, src.Image, e.env.spare != nil
			mu.Lock()
			res[e.env.Rank] = r
			mu.Unlock()
			return nil
		}))
		return res
	}
	for r, got := range run() {
		assert.Equal(t, int64(2), got.id)
		require.NotZero(t, got.prepared, "rank %d: Open prepared no memory", r)
		require.NotEmpty(t, got.image, "rank %d", r)
		assert.Equal(t, got.prepared, uintptr(unsafe.Pointer(unsafe.SliceData(got.image))), "rank %d: image not in the prepared memory", r)
		assert.True(t, bytes.Equal(payload(r, 2, size), got.image), "rank %d image bytes", r)
		assert.False(t, got.left, "rank %d: Recover kept the prepared memory", r)
	}

	cl.disrupt(t, "corrupt", 2, 3)
	for r, got := range run() {
		assert.Equal(t, int64(1), got.id, "rank %d restarts from the older checkpoint", r)
		require.NotZero(t, got.prepared, "rank %d", r)
		assert.True(t, bytes.Equal(payload(r, 1, size), got.image), "rank %d image bytes", r)
		assert.False(t, got.left, "rank %d: Recover kept the prepared memory", r)
	}
}

// TestTakeSpare: the prepared memory goes to the file it was prepared
// for, once.
func TestTakeSpare(t *testing.T) {
	f := File{Name: "ckpt00000001/data000001.fti", Of: 1, Size: 5 << 20}
	env := &Env{spare: newSpareImage(f)}
	for _, other := range []File{{Name: "x", Of: 1, Size: f.Size}, {Name: f.Name, Of: 2, Size: f.Size}, {Name: f.Name, Of: 1, Size: f.Size + 1}} {
		assert.Nil(t, env.takeSpare(other), "%+v", other)
	}
	b := env.takeSpare(f)
	require.Len(t, b, int(f.Size))
	assert.Equal(t, make([]byte, f.Size), b, "prepared memory is zero")
	assert.Nil(t, env.takeSpare(f), "taken twice")
}

// TestImageSpareOnlyL1L4: no memory is prepared for a level that would
// not take it (L2 verifies through its own path): it would only double
// the memory a restart holds.
func TestImageSpareOnlyL1L4(t *testing.T) {
	w := newL23World(t, vfd.Sec2{}, 8, 2, 4, 0)
	require.Equal(t, []error{nil, nil, nil, nil, nil, nil, nil, nil}, w.checkpoint(1, L2))
	var mu sync.Mutex
	prepared := 0
	require.NoError(t, w.run(func(e *Engine) error {
		mu.Lock()
		defer mu.Unlock()
		if e.env.spare != nil {
			prepared++
		}
		return nil
	}))
	assert.Zero(t, prepared, "ranks that prepared image memory for an L2 checkpoint")
}
