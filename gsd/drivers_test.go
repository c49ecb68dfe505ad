package gsd

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestDrivers runs one trajectory through every kind of storage: OS
// files, the in-memory core driver, and families of small members (so
// chunks, the index and the namelist straddle member boundaries).
func TestDrivers(t *testing.T) {
	dir := t.TempDir()
	// live: a reader opened during the run refreshes at the end. An open
	// family file does not see members another handle adds, so family
	// readers open after the writer.
	tests := []struct {
		name string
		d    vfd.Driver
		file string
		live bool
	}{
		{"sec2", vfd.Sec2{}, filepath.Join(dir, "a.gsd"), true},
		{"core", vfd.NewCore(), "a.gsd", true},
		{"family over core", vfd.NewFamily(vfd.NewCore(), 1000), "traj-%04d.gsd", false},
		{"family over sec2", vfd.NewFamily(vfd.Sec2{}, 4096), filepath.Join(dir, "fam-%04d.gsd"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// fsync is exercised on core (free); on disk it would only cost time.
			_, onDisk := tc.d.(vfd.Sec2)
			w, err := Create(tc.d, tc.file, "drivers", "test", MakeVersion(1, 0), WithSync(!onDisk && tc.name != "family over sec2"))
			require.NoError(t, err)
			r := (*Reader)(nil)
			for f := 0; f < 150; f++ {
				pos := make([]float32, 3*(f%7+1))
				for i := range pos {
					pos[i] = float32(f) + float32(i)/100
				}
				require.NoError(t, WriteChunk(w, "pos", pos, uint64(f%7+1), 3))
				if f%4 == 0 {
					require.NoError(t, WriteChunk(w, fmt.Sprintf("name/%03d-padding-padding", f), []uint64{uint64(f)}, 1, 1))
				}
				require.NoError(t, w.EndFrame())
				if f == 10 && tc.live {
					r, err = Open(tc.d, tc.file)
					require.NoError(t, err)
				}
			}
			require.NoError(t, w.Close())
			if tc.live {
				require.NoError(t, r.Refresh())
			} else {
				r, err = Open(tc.d, tc.file)
				require.NoError(t, err)
			}
			require.NoError(t, Verify(tc.d, tc.file))
			defer r.Close()
			require.Equal(t, uint64(150), r.NFrames())
			for f := uint64(0); f < 150; f++ {
				pos, e, err := ReadChunk[float32](r, f, "pos")
				require.NoError(t, err)
				require.Equal(t, f%7+1, e.N)
				assert.Equal(t, float32(f), pos[0])
			}
			assert.Len(t, r.ChunkNames("name/"), 38)
		})
	}
}

// TestConcurrentRefresh runs one writer and several refreshing readers at
// once (run with -race): readers only ever see whole, committed frames.
func TestConcurrentRefresh(t *testing.T) {
	d := vfd.NewCore()
	w, err := Create(d, "live.gsd", "live", "test", MakeVersion(1, 0), WithSync(false))
	require.NoError(t, err)
	require.NoError(t, WriteChunk(w, "x", []int64{0, 0}, 1, 2))
	require.NoError(t, w.EndFrame())
	const frames = 400
	var wg sync.WaitGroup
	done := make(chan struct{})
	for k := 0; k < 3; k++ {
		r, err := Open(d, "live.gsd")
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			seen := uint64(0)
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := r.Refresh(); err != nil {
					t.Errorf("refresh: %v", err)
					return
				}
				n := r.NFrames()
				if n < seen {
					t.Errorf("frames went back from %d to %d", seen, n)
					return
				}
				seen = n
				v, _, err := ReadChunk[int64](r, n-1, "x")
				if err != nil || v[0] != int64(n-1) || v[1] != -int64(n-1) {
					t.Errorf("frame %d: %v %v", n-1, v, err)
					return
				}
			}
		}()
	}
	for f := 1; f < frames; f++ {
		require.NoError(t, WriteChunk(w, "x", []int64{int64(f), -int64(f)}, 1, 2))
		if f%9 == 0 {
			require.NoError(t, WriteChunk(w, fmt.Sprintf("extra-%d", f), []uint8{1}, 1, 1))
		}
		require.NoError(t, w.EndFrame())
	}
	close(done)
	wg.Wait()
	require.NoError(t, w.Close())
}
