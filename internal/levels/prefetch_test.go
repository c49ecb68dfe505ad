package levels

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/sion"
	"github.com/ftigo/ftigo/vfd"
)

// readaheadDriver records every StartReadahead on the files it opens.
type readaheadDriver struct {
	vfd.Driver
	mu    sync.Mutex
	hints map[string][2]int64   // path -> off, n of the last hint
	all   map[string][][2]int64 // path -> every hint
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
	if f.d.all != nil {
		f.d.all[f.Name()] = append(f.d.all[f.Name()], [2]int64{off, n})
	}
	return nil
}

// TestOpenStartsReadingTheRecoveredFile: Open asks the storage to start
// reading each rank's data file of the newest committed checkpoint, whole,
// and no other file; the restart then recovers the same bytes. A run
// without a checkpoint hints nothing. (Without Env.ImageLimit: under it
// Open verifies an L1 file ahead instead, TestOpenVerifiesL1ImageAhead.)
func TestOpenStartsReadingTheRecoveredFile(t *testing.T) {
	const n = 4
	d := &readaheadDriver{Driver: vfd.Sec2{}, hints: map[string][2]int64{}}
	cl := newCluster(t, d, t.TempDir(), 2)
	cl.imageLimit = 0
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

// TestOpenStartsReadingTheTasks: with the data only in the L4 container,
// Open asks the storage to start reading every block of each rank's task
// there, exactly those bytes; the restart then recovers the same bytes.
func TestOpenStartsReadingTheTasks(t *testing.T) {
	const n = 4
	d := &readaheadDriver{Driver: vfd.Sec2{}, hints: map[string][2]int64{}, all: map[string][][2]int64{}}
	root := t.TempDir()
	cl := newCluster(t, d, root, 2)
	l4 := Global4{Inline: true, FSBlkSize: 512}
	cl.policy = FTIPolicy{KeepL4: true}
	big := func(r int) []byte { return payload(r, 2, 3000+400*r) }
	require.NoError(t, runL4(cl, n, l4, func(e *Engine) error {
		// A small first checkpoint, then tasks that outgrow their chunk.
		if _, _, err := e.Checkpoint(1, L4, writeBytes(payload(e.env.Rank, 1, 700))); err != nil {
			return err
		}
		_, _, err := e.Checkpoint(2, L4, scattered(big(e.env.Rank)))
		return err
	}))
	d.all = map[string][][2]int64{}
	got, id, err := recoverAll(t, cl, n, l4)
	require.NoError(t, err)
	require.Equal(t, int64(2), id)
	container := filepath.Join(root, "global", CheckpointDir(2), ContainerName)
	rd, err := sion.Open(vfd.Sec2{}, container)
	require.NoError(t, err)
	defer rd.Close()
	var want [][2]int64
	for r := 0; r < n; r++ {
		assert.Equal(t, big(r), got[r], "rank %d", r)
		task, err := rd.Task(r)
		require.NoError(t, err)
		require.Greater(t, len(task.BlockSizes), 1, "task %d in several blocks", r)
		for b, sz := range task.BlockSizes {
			if sz > 0 {
				want = append(want, [2]int64{task.Start + int64(b)*task.GlobalSkip, sz})
			}
		}
	}
	hinted := d.all[container]
	sortHints := func(h [][2]int64) {
		sort.Slice(h, func(i, j int) bool { return h[i][0] < h[j][0] })
	}
	sortHints(want)
	sortHints(hinted)
	assert.Equal(t, want, hinted, "every block of every task, once")
}

// openCounter counts the opens of every path.
type openCounter struct {
	vfd.Driver
	mu    sync.Mutex
	opens map[string]int
}

func (d *openCounter) Open(name string, flag vfd.Flag) (vfd.File, error) {
	d.mu.Lock()
	d.opens[name]++
	d.mu.Unlock()
	return d.Driver.Open(name, flag)
}

func (d *openCounter) reset() {
	d.mu.Lock()
	d.opens = map[string]int{}
	d.mu.Unlock()
}

func (d *openCounter) count(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opens[name]
}

// TestOpenVerifiesL1ImageAhead: under Env.ImageLimit, Open starts
// verifying each rank's data file of the newest (L1) checkpoint into
// memory, and Recover returns that image without reading the file again;
// the bytes are the checkpointed ones. A file damaged after its
// checkpoint fails the verification ahead; Recover then verifies it
// again, reports the same corruption and recovers the older checkpoint.
// An engine released without Recover waits for the verification ahead
// (the package's goroutine leak check fails otherwise).
func TestOpenVerifiesL1ImageAhead(t *testing.T) {
	const n = 4
	d := &openCounter{Driver: vfd.Sec2{}, opens: map[string]int{}}
	cl := newCluster(t, d, t.TempDir(), 2)
	require.NoError(t, cl.run(n, func(e *Engine) error {
		for id := int64(1); id <= 2; id++ {
			if _, _, err := e.Checkpoint(id, L1, writeBytes(payload(e.env.Rank, id, 5000))); err != nil {
				return err
			}
		}
		return nil
	}))
	paths := make([]string, n)
	d.reset()
	require.NoError(t, cl.run(n, func(e *Engine) error {
		m := e.Committed()[len(e.Committed())-1]
		f, _ := m.DataFile(e.env.Rank)
		paths[e.env.Rank] = e.env.Store(f.Where).Path(f.Name)
		if e.env.pre == nil || e.env.pre.seq != m.Seq {
			return fmt.Errorf("rank %d: Open started no verification of checkpoint %d", e.env.Rank, m.Seq)
		}
		got, src, err := e.Recover()
		if err != nil {
			return err
		}
		if got.ID != 2 || string(src.Image) != string(payload(e.env.Rank, 2, 5000)) {
			return fmt.Errorf("rank %d recovered checkpoint %d, image of %d bytes", e.env.Rank, got.ID, len(src.Image))
		}
		if e.env.pre != nil {
			return fmt.Errorf("rank %d: the verification ahead is still held after Recover", e.env.Rank)
		}
		return nil
	}))
	for r, p := range paths {
		assert.Equal(t, 1, d.count(p), "rank %d's data file is opened once: the image verified ahead is used", r)
	}

	// Damage rank 1's newest data file: the verification ahead fails and
	// Recover's own verification reports it.
	raw, err := os.ReadFile(paths[1])
	require.NoError(t, err)
	raw[100] ^= 0xff
	require.NoError(t, os.WriteFile(paths[1], raw, 0o644))
	d.reset()
	err = cl.run(n, func(e *Engine) error {
		_, _, err := e.Recover()
		if !errors.Is(err, ErrUnrecoverable) || !strings.Contains(fmt.Sprint(err), paths[1]+" (rank 1) at offset 0: "+ErrDigestMismatch.Error()) {
			return fmt.Errorf("rank %d: Recover: %v", e.env.Rank, err)
		}
		var ce *CorruptionError
		if e.env.Rank == 1 && (!errors.Is(err, ErrDigestMismatch) || !errors.As(err, &ce) || ce.Path != paths[1] || ce.Rank != 1) {
			return fmt.Errorf("rank 1: Recover does not report its damaged file: %v", err)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 2, d.count(paths[1]), "the failed verification ahead, then Recover's own")

	// Released without Recover: nothing is left running or held.
	require.NoError(t, cl.run(n, func(e *Engine) error {
		if e.env.pre == nil {
			return fmt.Errorf("rank %d: Open started no verification", e.env.Rank)
		}
		e.Release()
		if e.env.pre != nil {
			return fmt.Errorf("rank %d: Release kept the verification ahead", e.env.Rank)
		}
		return nil
	}))
}
