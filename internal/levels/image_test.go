package levels

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// recovered is what one rank's Engine.Recover returned.
type recovered struct {
	m   *Manifest
	src Source
	err error
}

func recoverEach(t *testing.T, n int, run func(n int, fn func(e *Engine) error) error) []recovered {
	t.Helper()
	out := make([]recovered, n)
	var mu sync.Mutex
	require.NoError(t, run(n, func(e *Engine) error {
		m, src, err := e.Recover()
		mu.Lock()
		out[e.env.Rank] = recovered{m, src, err}
		mu.Unlock()
		return nil
	}))
	return out
}

// TestImageL1: under Env.ImageLimit the verified bytes come back in
// Source.Image (equal to the file); above it, or with no limit, they stay
// on storage; a damaged file is never read into an image: the restart
// goes to the older checkpoint with the corruption named.
func TestImageL1(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int64
		image bool
	}{{"on", 1 << 20, true}, {"file larger than the limit", 100, false}, {"off", -1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 2)
			cl.imageLimit = tc.limit
			cl.policy = FTIPolicy{KeepLast: 2}
			require.NoError(t, cl.run(4, func(e *Engine) error {
				for id := int64(1); id <= 2; id++ {
					if _, _, err := e.Checkpoint(id, L1, writeBytes(payload(e.env.Rank, id, 3000))); err != nil {
						return err
					}
				}
				return nil
			}))
			for r, got := range recoverEach(t, 4, cl.run) {
				require.NoError(t, got.err)
				assert.Equal(t, int64(2), got.m.ID)
				assert.Equal(t, tc.image, got.src.Image != nil, "rank %d image", r)
				if tc.image {
					assert.True(t, bytes.Equal(payload(r, 2, 3000), got.src.Image), "rank %d image bytes", r)
				}
				b, err := readSource(got.src)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(payload(r, 2, 3000), b), "rank %d", r)
			}

			cl.disrupt(t, "corrupt", 2, 3)
			var skipped []Skipped
			var mu sync.Mutex
			res := make([]recovered, 4)
			require.NoError(t, cl.run(4, func(e *Engine) error {
				m, src, err := e.Recover()
				mu.Lock()
				defer mu.Unlock()
				res[e.env.Rank] = recovered{m, src, err}
				if e.env.Rank == 3 { // the errors.Is chain is the damaged rank's
					skipped = e.Skipped()
				}
				return nil
			}))
			for r, got := range res {
				require.NoError(t, got.err)
				assert.Equal(t, int64(1), got.m.ID, "rank %d restarts from the older checkpoint", r)
				b, err := readSource(got.src)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(payload(r, 1, 3000), b), "rank %d", r)
			}
			require.Len(t, skipped, 1)
			assert.ErrorIs(t, skipped[0].Err, ErrDigestMismatch)
		})
	}
}

// TestImageReadError: an I/O error while the data is being read into
// memory fails the checkpoint like a damaged file (never a partial image):
// the older checkpoint is used.
func TestImageReadError(t *testing.T) {
	root := t.TempDir()
	bad := filepath.Join(root, "local", "node0001", RankFileName(CheckpointDir(2), RoleData, 3))
	d := vfd.NewFault(vfd.Sec2{}, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpRead && op.Path == bad {
			return errors.New("bad sector")
		}
		return nil
	}))
	cl := newCluster(t, d, root, 2)
	cl.policy = FTIPolicy{KeepLast: 2}
	require.NoError(t, cl.run(4, func(e *Engine) error {
		for id := int64(1); id <= 2; id++ {
			if _, _, err := e.Checkpoint(id, L1, writeBytes(payload(e.env.Rank, id, 5000))); err != nil {
				return err
			}
		}
		return nil
	}))
	for r, got := range recoverEach(t, 4, cl.run) {
		require.NoError(t, got.err)
		assert.Equal(t, int64(1), got.m.ID, "rank %d", r)
		require.NotNil(t, got.src.Image)
		assert.True(t, bytes.Equal(payload(r, 1, 5000), got.src.Image), "rank %d", r)
	}
}

// TestImageL4Inline: an inline L4 restart reads each task straight from
// the container into memory, verified; nothing is written locally; a
// corrupt task sends the restart to the older checkpoint.
func TestImageL4Inline(t *testing.T) {
	root := t.TempDir()
	cl := newCluster(t, vfd.Sec2{}, root, 1)
	cl.policy = FTIPolicy{KeepLast: 2}
	l4 := Global4{Inline: true, NFiles: 2}
	require.NoError(t, runL4(cl, 3, l4, func(e *Engine) error {
		for id := int64(1); id <= 2; id++ {
			if _, _, err := e.Checkpoint(id, L4, writeBytes(l4Payload(e.env.Rank, id))); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, os.RemoveAll(filepath.Join(root, "local")))
	run := func(n int, fn func(e *Engine) error) error { return runL4(cl, n, l4, fn) }
	for r, got := range recoverEach(t, 3, run) {
		require.NoError(t, got.err)
		assert.Equal(t, int64(2), got.m.ID)
		require.NotNil(t, got.src.Task, "rank %d reads its task", r)
		assert.True(t, bytes.Equal(l4Payload(r, 2), got.src.Image), "rank %d image", r)
	}
	for n := range 3 {
		_, err := os.Stat(filepath.Join(root, "local", fmt.Sprintf("node%04d", n), CheckpointDir(2)))
		assert.ErrorIs(t, err, os.ErrNotExist, "nothing staged locally on node %d", n)
	}

	corruptTask(t, root, 2, 1)
	for r, got := range recoverEach(t, 3, run) {
		require.NoError(t, got.err)
		assert.Equal(t, int64(1), got.m.ID, "rank %d", r)
		assert.True(t, bytes.Equal(l4Payload(r, 1), got.src.Image), "rank %d image", r)
	}
}

// TestImageL2L3: intact data files come back as images, and so do
// restored ones: at L2 the bytes received from the partner copy, at L3
// the rebuilt bytes (m = k: written in order), each checked against the
// recorded hash. Every byte is compared.
func TestImageL2L3(t *testing.T) {
	for _, lvl := range []ID{L2, L3} {
		t.Run(lvl.String(), func(t *testing.T) {
			w := newL23World(t, vfd.Sec2{}, 8, 2, 4, 0)
			require.Equal(t, []error{nil, nil, nil, nil, nil, nil, nil, nil}, w.checkpoint(1, lvl))
			eraseNodeDirs(1)(w)
			var mu sync.Mutex
			res := make([]recovered, 8)
			require.NoError(t, w.run(func(e *Engine) error {
				m, src, err := e.Recover()
				mu.Lock()
				res[e.env.Rank] = recovered{m, src, err}
				mu.Unlock()
				return nil
			}))
			for r, got := range res {
				require.NoError(t, got.err, "rank %d", r)
				lost := w.topo.NodeOf(r) == 1
				b, err := readSource(got.src)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(l23Payload(r, 1), b), "rank %d", r)
				require.NotNil(t, got.src.Image, "rank %d (lost %v)", r, lost)
				assert.True(t, bytes.Equal(l23Payload(r, 1), got.src.Image), "rank %d image", r)
			}
			// The restored files are in place: the next restart finds
			// everything intact.
			_, errs := w.recover()
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
		})
	}
}

// TestImageL3TooManyLosses: with images on, a group that lost more than
// its code tolerates (a node's files and the parity of the others) is
// never restored from what is left: every rank fails with
// ErrUnrecoverable naming the checkpoint.
func TestImageL3TooManyLosses(t *testing.T) {
	w := newL23World(t, vfd.Sec2{}, 8, 2, 4, 0)
	require.Equal(t, []error{nil, nil, nil, nil, nil, nil, nil, nil}, w.checkpoint(1, L3))
	eraseNodeDirs(1)(w)
	onFiles("parity*", false, 0, 2, 3)(w)
	_, errs := w.recover()
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		assert.ErrorIs(t, err, ErrUnrecoverable, "rank %d", r)
		assert.True(t, strings.Contains(fmt.Sprint(err), "ckpt00000001"), "rank %d: %v", r, err)
	}
}

// readCounter counts the bytes read from each file through a driver.
type readCounter struct {
	mu    sync.Mutex
	bytes map[string]int64
	on    bool
}

func (rc *readCounter) driver(inner vfd.Driver) vfd.Driver {
	return vfd.NewFault(inner, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpRead {
			rc.mu.Lock()
			if rc.on {
				rc.bytes[op.Path] += int64(op.Len)
			}
			rc.mu.Unlock()
		}
		return nil
	}))
}

func (rc *readCounter) arm(on bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.on = on
	if on {
		rc.bytes = map[string]int64{}
	}
}

// TestImageReadsOnce: a restart reads each byte of every data file from
// storage exactly once (Recover, then the data read from the Source); at
// L3 a rebuilt data file is not read back at all (hashed as written).
func TestImageReadsOnce(t *testing.T) {
	t.Run("L1", func(t *testing.T) {
		rc := &readCounter{}
		cl := newCluster(t, rc.driver(vfd.Sec2{}), t.TempDir(), 2)
		require.NoError(t, cl.run(4, func(e *Engine) error {
			_, _, err := e.Checkpoint(1, L1, writeBytes(payload(e.env.Rank, 1, 3<<20)))
			return err
		}))
		rc.arm(true)
		require.NoError(t, cl.run(4, func(e *Engine) error {
			_, src, err := e.Recover()
			if err != nil {
				return err
			}
			b, err := readSource(src)
			if err == nil && !bytes.Equal(b, payload(e.env.Rank, 1, 3<<20)) {
				err = fmt.Errorf("rank %d: wrong data", e.env.Rank)
			}
			return err
		}))
		rc.arm(false)
		for r := range 4 {
			p := filepath.Join(cl.root, "local", fmt.Sprintf("node%04d", r/2), RankFileName(CheckpointDir(1), RoleData, r))
			assert.Equal(t, int64(len(payload(r, 1, 3<<20))), rc.bytes[p], "rank %d: bytes read of %s", r, p)
		}
	})
	t.Run("L3 rebuilt", func(t *testing.T) {
		rc := &readCounter{}
		w := newL23World(t, rc.driver(vfd.Sec2{}), 8, 2, 4, 0)
		require.Equal(t, []error{nil, nil, nil, nil, nil, nil, nil, nil}, w.checkpoint(1, L3))
		eraseNodeDirs(1)(w)
		rc.arm(true)
		_, errs := w.recover()
		rc.arm(false)
		for r, err := range errs {
			require.NoError(t, err, "rank %d", r)
		}
		for r := range 8 {
			p := filepath.Join(w.nodeDir(w.topo.NodeOf(r)), RankFileName(CheckpointDir(1), RoleData, r))
			want := int64(len(l23Payload(r, 1)))
			if w.topo.NodeOf(r) == 1 {
				want = 0 // rebuilt: hashed and kept as it was written
			}
			assert.Equal(t, want, rc.bytes[p]+rc.bytes[p+TmpSuffix], "rank %d: bytes read of %s", r, p)
		}
	})
}

// TestImagePieces: a restart image is read in pieces of at most
// imagePiece bytes (the verifier's segment), whatever the transfer size
// asks, each byte once, and comes back equal to the file.
func TestImagePieces(t *testing.T) {
	var mu sync.Mutex
	reads := map[string][]int{}
	on := false
	d := vfd.NewFault(vfd.Sec2{}, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Kind == vfd.OpRead {
			mu.Lock()
			if on {
				reads[op.Path] = append(reads[op.Path], op.Len)
			}
			mu.Unlock()
		}
		return nil
	}))
	cl := newCluster(t, d, t.TempDir(), 1)
	require.NoError(t, cl.run(1, func(e *Engine) error {
		data := payload(0, 1, 3*imagePiece+12345)
		m, _, err := e.Checkpoint(1, L1, writeBytes(data))
		if err != nil {
			return err
		}
		f, ok := m.DataFile(0)
		require.True(t, ok)
		s := e.env.Store(f.Where)
		want, err := vfd.ReadFile(s.Driver, s.Path(f.Name))
		require.NoError(t, err)
		mu.Lock()
		on = true
		mu.Unlock()
		img, err := verifyImage(s, f, 16<<20)
		mu.Lock()
		on = false
		mu.Unlock()
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, img), "image differs from the file")
		got := reads[s.Path(f.Name)]
		require.NotEmpty(t, got)
		total := 0
		for i, n := range got {
			assert.LessOrEqual(t, n, imagePiece, "read %d of %v", i, got)
			total += n
		}
		assert.Equal(t, int(f.Size), total, "bytes read: %v", got)
		return nil
	}))
}
