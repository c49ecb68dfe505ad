package levels

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// readaheadDriver records every StartReadahead on the files it opens.
type readaheadDriver struct {
	vfd.Driver
	mu    sync.Mutex
	hints map[string][2]int64 // path -> off, n
}

type readaheadFile struct {
	vfd.File
	d *readaheadDriver
}

func (d *readaheadDriver) Open(name string, flag vfd.Flag) (vfd.File, error) {
	f, err := d.Driver.Open(name, flag)
	if err != nil {
		return nil, err
	}
	return &readaheadFile{f, d}, nil
}

func (f *readaheadFile) StartReadahead(off, n int64) error {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	f.d.hints[f.Name()] = [2]int64{off, n}
	return nil
}

// TestOpenStartsReadingTheRecoveredFile: Open asks the storage to start
// reading each rank's data file of the newest committed checkpoint, whole,
// and no other file; the restart then recovers the same bytes. A run
// without a checkpoint hints nothing.
func TestOpenStartsReadingTheRecoveredFile(t *testing.T) {
	const n = 4
	d := &readaheadDriver{Driver: vfd.Sec2{}, hints: map[string][2]int64{}}
	cl := newCluster(t, d, t.TempDir(), 2)
	require.NoError(t, cl.run(n, func(e *Engine) error {
		for id := int64(1); id <= 2; id++ {
			if _, _, err := e.Checkpoint(id, L1, writeBytes(payload(e.env.Rank, id, 5000))); err != nil {
				return err
			}
		}
		return nil
	}))
	assert.Empty(t, d.hints, "a fresh run has nothing to read ahead")
	var mu sync.Mutex
	want := map[string][2]int64{}
	require.NoError(t, cl.run(n, func(e *Engine) error {
		m := e.Committed()[len(e.Committed())-1]
		f, ok := m.DataFile(e.env.Rank)
		if !ok {
			return fmt.Errorf("rank %d: no data file", e.env.Rank)
		}
		mu.Lock()
		want[e.env.Store(f.Where).Path(f.Name)] = [2]int64{0, f.Size}
		mu.Unlock()
		_, src, err := e.Recover()
		if err != nil {
			return err
		}
		b, err := readSource(src)
		if err != nil {
			return err
		}
		if string(b) != string(payload(e.env.Rank, 2, 5000)) {
			return fmt.Errorf("rank %d recovered other bytes", e.env.Rank)
		}
		return nil
	}))
	require.Len(t, want, n)
	for p, h := range want {
		assert.Equal(t, h, d.hints[p], "hint for %s", filepath.Base(p))
	}
	assert.Len(t, d.hints, n, "only the newest checkpoint's data files: %v", d.hints)
}
