package levels

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/sion"
	"github.com/ftigo/ftigo/vfd"
)

// scattered writes b out of order: the second half first (after a gap,
// which the task fills with zeros), then the first half, then rewrites
// the first 16 bytes with their own values.
func scattered(b []byte) WriteFunc {
	return func(f vfd.File) (int64, Digest, bool, error) {
		h := len(b) / 2
		if _, err := f.WriteAt(b[h:], int64(h)); err != nil {
			return 0, Digest{}, false, err
		}
		if _, err := f.WriteAt(b[:h], 0); err != nil {
			return 0, Digest{}, false, err
		}
		if _, err := f.WriteAt(b[:min(16, len(b))], 0); err != nil {
			return 0, Digest{}, false, err
		}
		back := make([]byte, len(b))
		if _, err := f.ReadAt(back, 0); err != nil {
			return 0, Digest{}, false, err
		}
		if !bytes.Equal(back, b) {
			return 0, Digest{}, false, fmt.Errorf("read back differs")
		}
		if err := f.Truncate(int64(len(b)) - 1); err == nil {
			return 0, Digest{}, false, fmt.Errorf("a task shrank")
		}
		return int64(len(b)), Digest{}, false, nil // the engine hashes
	}
}

// TestL4InlineLayout: the data of every rank is only in the container,
// one entry per physical file lists it (no whole-file hash), and a task
// that outgrows its chunk (sized from the previous checkpoint) continues
// in further blocks, written out of order, and still reads back exactly.
func TestL4InlineLayout(t *testing.T) {
	for _, nfiles := range []int{1, 2} {
		t.Run(fmt.Sprintf("nfiles=%d", nfiles), func(t *testing.T) {
			root := t.TempDir()
			cl := newCluster(t, vfd.Sec2{}, root, 2)
			cl.policy = FTIPolicy{KeepL4: true}
			l4 := Global4{Inline: true, NFiles: nfiles, FSBlkSize: 512}
			const n = 4
			big := func(r int) []byte { return payload(r, 2, 3000+400*r) }
			var mu sync.Mutex
			manifests := map[int]*Manifest{}
			require.NoError(t, runL4(cl, n, l4, func(e *Engine) error {
				if _, _, err := e.Checkpoint(1, L4, writeBytes(payload(e.env.Rank, 1, 700))); err != nil {
					return err
				}
				m, _, err := e.Checkpoint(2, L4, scattered(big(e.env.Rank)))
				mu.Lock()
				manifests[e.env.Rank] = m
				mu.Unlock()
				return err
			}))
			m := fullOf(t, manifests[0])
			containers := 0
			for r, files := range m.Files {
				d := files[0]
				assert.Equal(t, RoleData, d.Role)
				assert.Equal(t, "1", d.Attrs[AttrInContainer], "rank %d", r)
				assert.Equal(t, int64(len(big(r))), d.Size)
				_, err := os.Stat(filepath.Join(root, "local", fmt.Sprintf("node%04d", r/2), d.Name))
				assert.ErrorIs(t, err, os.ErrNotExist, "rank %d has a local data file", r)
				for _, f := range files[1:] {
					assert.Equal(t, RoleContainer, f.Role)
					assert.Equal(t, DigestSION, f.Attrs[AttrDigest])
					containers++
				}
			}
			assert.Equal(t, nfiles, containers)

			rd, err := sion.Open(vfd.Sec2{}, filepath.Join(root, "global", CheckpointDir(2), ContainerName))
			require.NoError(t, err)
			for r := 0; r < n; r++ {
				task, err := rd.Task(r)
				require.NoError(t, err)
				assert.Greater(t, len(task.BlockSizes), 1, "task %d outgrew its 1024-byte chunk", r)
				b, err := rd.ReadTask(r)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(big(r), b), "task %d", r)
			}
			require.NoError(t, rd.Close())

			got, id, err := recoverAll(t, cl, n, l4)
			require.NoError(t, err)
			assert.Equal(t, int64(2), id)
			for r := 0; r < n; r++ {
				assert.True(t, bytes.Equal(big(r), got[r]), "rank %d", r)
			}
		})
	}
}

// ftiffWrite writes an FTI-FF file the way the runtime does: the engine
// gets no digest and records the file checksum.
func ftiffWrite(r int, id int64) WriteFunc {
	vars := []fileformat.Var{
		{ID: 1, Name: "field", Type: fileformat.Uint8, Data: payload(r, id, 9000)},
		{ID: 2, Name: "iter", Type: fileformat.Uint8, Data: []byte{byte(id)}},
	}
	return func(f vfd.File) (int64, Digest, bool, error) {
		_, sum, err := fileformat.Write(f, fileformat.Meta{CkptID: id, Rank: int32(r), Level: 4}, vars, nil)
		return sum.FileSize, Digest{}, false, err
	}
}

// TestL4InlineFTIFF: an FTI-FF data file's checksum is recorded, not
// re-hashed; recovery checks it with fileformat's Verify, and a corrupted
// task fails with ErrDigestMismatch naming the container.
func TestL4InlineFTIFF(t *testing.T) {
	root := t.TempDir()
	cl := newCluster(t, vfd.Sec2{}, root, 2)
	l4 := Global4{Inline: true, FSBlkSize: 512}
	const n = 4
	require.NoError(t, runL4(cl, n, l4, func(e *Engine) error {
		m, _, err := e.Checkpoint(5, L4, ftiffWrite(e.env.Rank, 5))
		if err != nil {
			return err
		}
		if f, _ := m.DataFile(e.env.Rank); f.Attrs[AttrDigest] != DigestFTIFF {
			return fmt.Errorf("rank %d: digest kind %q", e.env.Rank, f.Attrs[AttrDigest])
		}
		return nil
	}))
	got, id, err := recoverAll(t, cl, n, l4)
	require.NoError(t, err)
	assert.Equal(t, int64(5), id)
	for r := 0; r < n; r++ {
		rd, err := fileformat.Open(&memFile{b: got[r]})
		require.NoError(t, err, "rank %d", r)
		require.NoError(t, rd.Verify())
		v := make([]byte, 9000+r)
		require.NoError(t, rd.ReadVar(1, v))
		assert.Equal(t, payload(r, 5, 9000), v)
	}

	require.NoError(t, os.RemoveAll(filepath.Join(root, "local")))
	corruptTask(t, root, 1, 1)
	_, _, err = recoverAll(t, cl, n, l4)
	require.ErrorIs(t, err, ErrUnrecoverable)
	assert.Contains(t, err.Error(), "rank 1's file at offset 10: ")
	assert.Contains(t, err.Error(), "l4.sion (task of rank 1)")
	assert.Contains(t, err.Error(), ErrDigestMismatch.Error())
}

// memFile is a read-only vfd.File over bytes.
type memFile struct{ b []byte }

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(m.b).ReadAt(p, off)
}
func (m *memFile) WriteAt([]byte, int64) (int, error) { return 0, os.ErrPermission }
func (m *memFile) Close() error                       { return nil }
func (m *memFile) Name() string                       { return "mem" }
func (m *memFile) Size() (int64, error)               { return int64(len(m.b)), nil }
func (m *memFile) Truncate(int64) error               { return os.ErrPermission }
func (m *memFile) Sync() error                        { return nil }

// TestL4TaskFileEdges: reads past the end stop with io.EOF, bad offsets and
// closed files fail, and an aborted container leaves no file behind.
func TestL4TaskFileEdges(t *testing.T) {
	root := t.TempDir()
	cl := newCluster(t, vfd.Sec2{}, root, 1)
	require.NoError(t, runWorld(1, func(c comm.Comm) error {
		env := cl.env(c)
		l4 := Global4{Inline: true, FSBlkSize: 512}
		p := &Pending{Seq: 1, Dir: CheckpointDir(1), Level: L4}
		f, err := l4.OpenData(env, p, 100) // chunk 512
		require.NoError(t, err)
		b := payload(0, 1, 1300) // three blocks
		n, err := f.WriteAt(b, 0)
		require.NoError(t, err)
		require.Equal(t, len(b), n)
		got := make([]byte, 200)
		n, err = f.ReadAt(got, 1200)
		assert.ErrorIs(t, err, io.EOF)
		assert.Equal(t, b[1200:], got[:n])
		_, err = f.ReadAt(got, -1)
		assert.Error(t, err)
		_, err = f.WriteAt(got, -1)
		assert.Error(t, err)
		require.NoError(t, f.Truncate(1400))
		size, err := f.Size()
		require.NoError(t, err)
		assert.Equal(t, int64(1400), size)
		assert.ErrorIs(t, f.Truncate(10), ErrSizeMismatch)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
		_, err = f.ReadAt(got, 0)
		assert.ErrorIs(t, err, vfd.ErrClosed)
		_, err = f.WriteAt(got, 0)
		assert.ErrorIs(t, err, vfd.ErrClosed)
		assert.ErrorIs(t, f.Sync(), vfd.ErrClosed)
		require.NoError(t, l4.AbortData(env, p, f))
		return nil
	}))
	ents, err := os.ReadDir(filepath.Join(root, "global", CheckpointDir(1)))
	require.NoError(t, err)
	assert.Empty(t, ents)
}

// TestL4TaskFileWriteback: a writeback hint on a task reaches the
// container at the physical offsets of the task's blocks (a range over
// three blocks becomes three hints; n == 0 runs to the bytes written), and
// bad ranges and closed files are refused.
func TestL4TaskFileWriteback(t *testing.T) {
	root := t.TempDir()
	core, logs := observer.New(zapcore.DebugLevel)
	cl := newCluster(t, vfd.NewLog(vfd.Sec2{}, zap.New(core)), root, 1)
	type hint struct{ off, n int64 }
	hints := func() []hint {
		var out []hint
		for _, e := range logs.TakeAll() {
			m := e.ContextMap()
			if fmt.Sprint(m["op"]) == "writeback" && strings.Contains(fmt.Sprint(m["path"]), ContainerName) {
				out = append(out, hint{m["offset"].(int64), m["size"].(int64)})
			}
		}
		return out
	}
	require.NoError(t, runWorld(1, func(c comm.Comm) error {
		env := cl.env(c)
		l4 := Global4{Inline: true, FSBlkSize: 512}
		p := &Pending{Seq: 1, Dir: CheckpointDir(1), Level: L4}
		f, err := l4.OpenData(env, p, 100) // chunk 512, one task: blocks 512 apart
		require.NoError(t, err)
		_, err = f.WriteAt(payload(0, 1, 1300), 0) // three blocks
		require.NoError(t, err)
		start := int64(roundUpTo(sion.Meta1Size(1), 512))
		logs.TakeAll()
		require.NoError(t, vfd.StartWriteback(f, 100, 1000))
		assert.Equal(t, []hint{{start + 100, 412}, {start + 512, 512}, {start + 1024, 76}}, hints())
		require.NoError(t, vfd.StartWriteback(f, 1200, 0))
		assert.Equal(t, []hint{{start + 1024 + 176, 100}}, hints())
		require.NoError(t, vfd.StartWriteback(f, 1300, 50)) // past the bytes written: nothing
		assert.Empty(t, hints())
		assert.ErrorIs(t, vfd.StartWriteback(f, -1, 10), vfd.ErrNegativeOffset)
		require.NoError(t, f.Close())
		assert.ErrorIs(t, vfd.StartWriteback(f, 0, 10), vfd.ErrClosed)
		require.NoError(t, l4.AbortData(env, p, f))
		return nil
	}))
}
