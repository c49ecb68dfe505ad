package levels

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/sion"
	"github.com/ftigo/ftigo/vfd"
)

// runL4 opens an engine with L1 and the given L4 on every rank and calls fn.
func runL4(cl *cluster, n int, l4 Global4, fn func(e *Engine) error) error {
	return runWorld(n, func(c comm.Comm) error {
		e, err := NewEngine(cl.env(c), Config{Levels: []Level{Local1{}, l4}, Policy: cl.policy, PartRanks: testPartRanks()})
		if err != nil {
			return err
		}
		defer e.Release() // its background work ends with the run
		if err := e.Open(); err != nil {
			return err
		}
		return fn(e)
	})
}

// modes runs fn with the local-then-copy L4 and with the inline one.
func modes(t *testing.T, fn func(t *testing.T, inline bool)) {
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) { fn(t, inline) })
	}
}

func l4Payload(r int, id int64) []byte { return payload(r, id, 5000+1000*r) }

// recoverAll restarts the world and returns each rank's recovered bytes and id.
func recoverAll(t *testing.T, cl *cluster, n int, l4 Global4) (map[int][]byte, int64, error) {
	var mu sync.Mutex
	got := map[int][]byte{}
	var id int64
	err := runL4(cl, n, l4, func(e *Engine) error {
		m, src, err := e.Recover()
		if err != nil {
			return err
		}
		b, err := readSource(src)
		mu.Lock()
		got[e.env.Rank], id = b, m.ID
		mu.Unlock()
		return err
	})
	return got, id, err
}

func TestL4RoundTrip(t *testing.T) {
	modes(t, func(t *testing.T, inline bool) {
		for _, tc := range []struct {
			ranks, nfiles int
		}{{1, 1}, {4, 1}, {4, 2}, {5, 2}} {
			t.Run(fmt.Sprintf("ranks=%d/nfiles=%d", tc.ranks, tc.nfiles), func(t *testing.T) {
				root := t.TempDir()
				cl := newCluster(t, vfd.Sec2{}, root, 2-tc.ranks%2)
				l4 := Global4{Inline: inline, NFiles: tc.nfiles, FSBlkSize: 1024}
				require.NoError(t, runL4(cl, tc.ranks, l4, func(e *Engine) error {
					m, _, err := e.Checkpoint(1, L4, writeBytes(l4Payload(e.env.Rank, 1)))
					if err != nil {
						return err
					}
					if m.Level != L4 {
						return fmt.Errorf("level %v", m.Level)
					}
					return nil
				}))
				// The container reads with the sion package, every task as written.
				r, err := sion.Open(vfd.Sec2{}, filepath.Join(root, "global", "ckpt00000001", ContainerName))
				require.NoError(t, err)
				require.Equal(t, tc.ranks, r.NTasks())
				assert.Len(t, r.Files(), tc.nfiles)
				for i := 0; i < tc.ranks; i++ {
					b, err := r.ReadTask(i)
					require.NoError(t, err)
					assert.True(t, bytes.Equal(l4Payload(i, 1), b), "task %d", i)
				}
				require.NoError(t, r.Close())

				// All local storage lost: recovered from the container, bit for bit.
				require.NoError(t, os.RemoveAll(filepath.Join(root, "local")))
				got, id, err := recoverAll(t, cl, tc.ranks, l4)
				require.NoError(t, err)
				assert.Equal(t, int64(1), id)
				for i := 0; i < tc.ranks; i++ {
					assert.True(t, bytes.Equal(l4Payload(i, 1), got[i]), "rank %d", i)
				}
				local0 := filepath.Join(root, "local", "node0000", RankFileName(CheckpointDir(1), RoleData, 0))
				if inline {
					// Read straight from the container: nothing was
					// written locally, so without the container the
					// checkpoint is gone.
					_, err := os.Stat(local0)
					require.ErrorIs(t, err, os.ErrNotExist, "an inline L4 restart stages nothing locally")
					require.NoError(t, os.RemoveAll(filepath.Join(root, "global", "ckpt00000001")))
					_, _, err = recoverAll(t, cl, tc.ranks, l4)
					require.ErrorIs(t, err, ErrUnrecoverable)
					return
				}
				// The rebuilt local files are in place: a second restart uses them.
				require.NoError(t, os.RemoveAll(filepath.Join(root, "global", "ckpt00000001")))
				got, _, err = recoverAll(t, cl, tc.ranks, l4)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(l4Payload(0, 1), got[0]))
			})
		}
	})
}

// corruptTask flips bytes inside rank r's task data in the container.
func corruptTask(t *testing.T, root string, seq uint64, r int) {
	name := filepath.Join(root, "global", CheckpointDir(seq), ContainerName)
	rd, err := sion.Open(vfd.Sec2{}, name)
	require.NoError(t, err)
	task, err := rd.Task(r)
	require.NoError(t, err)
	file := rd.Files()[task.File].Name
	require.NoError(t, rd.Close())
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("TextForCorruption"), task.Start+10)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestL4Disruption(t *testing.T) {
	modes(t, func(t *testing.T, inline bool) {
		tests := []struct {
			how  string
			want string // in the container part of the error every rank shares
		}{
			{"container corrupted", "l4.sion (rank 2) at offset 0: " + ErrDigestMismatch.Error()},
			{"container deleted", "rank 0's file: " + ErrMissingFile.Error() + ": sion: open "},
			{"container truncated", sion.ErrTruncated.Error()},
		}
		for _, tc := range tests {
			for _, older := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/older=%v", tc.how, older), func(t *testing.T) {
					root := t.TempDir()
					cl := newCluster(t, vfd.Sec2{}, root, 2)
					cl.policy = FTIPolicy{KeepL4: older}
					l4 := Global4{Inline: inline, FSBlkSize: 512}
					n := 4
					require.NoError(t, runL4(cl, n, l4, func(e *Engine) error {
						for id := int64(1); id <= 2; id++ {
							if _, _, err := e.Checkpoint(id, L4, writeBytes(l4Payload(e.env.Rank, id))); err != nil {
								return err
							}
						}
						return nil
					}))
					require.NoError(t, os.RemoveAll(filepath.Join(root, "local")))
					c2 := filepath.Join(root, "global", CheckpointDir(2), ContainerName)
					switch tc.how {
					case "container corrupted":
						corruptTask(t, root, 2, 2)
					case "container deleted":
						require.NoError(t, os.Remove(c2))
					case "container truncated":
						require.NoError(t, os.Truncate(c2, 3000))
					}
					got, id, err := recoverAll(t, cl, n, l4)
					if older {
						require.NoError(t, err)
						assert.Equal(t, int64(1), id, "falls back to the older L4 checkpoint")
						for i := 0; i < n; i++ {
							assert.True(t, bytes.Equal(l4Payload(i, 1), got[i]), "rank %d", i)
						}
						return
					}
					require.Error(t, err)
					assert.ErrorIs(t, err, ErrUnrecoverable)
					assert.Contains(t, err.Error(), tc.want)
				})
			}
		}
	})
}

// stageLocal writes rank r's data of checkpoint 1 where older versions of
// ftigo staged an inline L4 task at restart (in node r/nodeSize).
func stageLocal(t *testing.T, cl *cluster, r int, data []byte) {
	t.Helper()
	dir := filepath.Join(cl.root, "local", fmt.Sprintf("node%04d", r/cl.nodeSize), CheckpointDir(1))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(RankFileName(CheckpointDir(1), RoleData, r))), data, 0o644))
}

// TestL4LocalPreferred: the data goes only into the container; once a
// local copy is in place (restored by a restart without Inline, staged by
// an older version with it), a deleted container does not matter.
func TestL4LocalPreferred(t *testing.T) {
	modes(t, func(t *testing.T, inline bool) {
		root := t.TempDir()
		cl := newCluster(t, vfd.Sec2{}, root, 1)
		l4 := Global4{Inline: inline}
		require.NoError(t, runL4(cl, 3, l4, func(e *Engine) error {
			_, _, err := e.Checkpoint(7, L4, writeBytes(l4Payload(e.env.Rank, 7)))
			return err
		}))
		_, err := os.Stat(filepath.Join(root, "local", "node0000", RankFileName(CheckpointDir(1), RoleData, 1)))
		if inline {
			require.ErrorIs(t, err, os.ErrNotExist, "an inline L4 checkpoint writes nothing locally")
		}
		_, _, err = recoverAll(t, cl, 3, l4) // without Inline: restores every rank's local file
		require.NoError(t, err)
		if inline {
			for r := range 3 {
				stageLocal(t, cl, r, l4Payload(r, 7))
			}
		}
		require.NoError(t, os.RemoveAll(filepath.Join(root, "global", CheckpointDir(1))))
		got, id, err := recoverAll(t, cl, 3, l4)
		require.NoError(t, err)
		assert.Equal(t, int64(7), id)
		assert.Equal(t, l4Payload(1, 7), got[1])
	})
}

// TestL4RebuildsDamagedLocalFile: a corrupt or truncated local data file is
// replaced by the verified task from the container (without Inline), or,
// as a local copy of an inline checkpoint, removed and the task read from
// the container.
func TestL4RebuildsDamagedLocalFile(t *testing.T) {
	modes(t, func(t *testing.T, inline bool) {
		for _, how := range []string{"corrupt", "truncate", "erase"} {
			t.Run(how, func(t *testing.T) {
				root := t.TempDir()
				cl := newCluster(t, vfd.Sec2{}, root, 2)
				l4 := Global4{Inline: inline, NFiles: 2}
				require.NoError(t, runL4(cl, 4, l4, func(e *Engine) error {
					_, _, err := e.Checkpoint(3, L4, writeBytes(l4Payload(e.env.Rank, 3)))
					return err
				}))
				_, _, err := recoverAll(t, cl, 4, l4) // without Inline: restores the local copies
				require.NoError(t, err)
				if inline {
					for r := range 4 {
						stageLocal(t, cl, r, l4Payload(r, 3))
					}
				}
				cl.disrupt(t, how, 1, 3)
				got, id, err := recoverAll(t, cl, 4, l4)
				require.NoError(t, err)
				assert.Equal(t, int64(3), id)
				for r := 0; r < 4; r++ {
					assert.True(t, bytes.Equal(l4Payload(r, 3), got[r]), "rank %d", r)
				}
				b, err := os.ReadFile(filepath.Join(root, "local", "node0001", RankFileName(CheckpointDir(1), RoleData, 3)))
				if inline {
					// A damaged staged copy is a cache gone bad: removed,
					// the data read from the container.
					require.ErrorIs(t, err, os.ErrNotExist)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, l4Payload(3, 3), b)
			})
		}
	})
}

// TestL4CrashAtEveryOp takes a crash image of the in-memory file system
// before every operation of an L4 checkpoint (on top of a committed one)
// and restarts from each image with all local storage lost: the restart
// recovers the old checkpoint or the new one, bit for bit, never anything else.
func TestL4CrashAtEveryOp(t *testing.T) {
	modes(t, func(t *testing.T, inline bool) {
		const n = 4
		core := vfd.NewCore()
		var mu sync.Mutex
		var clones []*vfd.Core
		armed := false
		fd := vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
			if armed {
				mu.Lock()
				clones = append(clones, core.CrashClone())
				mu.Unlock()
			}
			return nil
		}))
		cl := newCluster(t, fd, "/r", 2)
		cl.policy = FTIPolicy{KeepL4: true}
		l4 := Global4{Inline: inline, NFiles: 2, FSBlkSize: 512}
		require.NoError(t, runL4(cl, n, l4, func(e *Engine) error {
			_, _, err := e.Checkpoint(1, L4, writeBytes(l4Payload(e.env.Rank, 1)))
			return err
		}))
		armed = true
		require.NoError(t, runL4(cl, n, l4, func(e *Engine) error {
			_, _, err := e.Checkpoint(2, L4, writeBytes(l4Payload(e.env.Rank, 2)))
			return err
		}))
		armed = false
		clones = append(clones, core.CrashClone())
		require.Greater(t, len(clones), 20)
		seen := map[int64]int{}
		for k, img := range clones {
			require.NoError(t, img.RemoveAll("/r/local"))
			icl := newCluster(t, img, "/r", 2)
			icl.policy = cl.policy
			got, id, err := recoverAll(t, icl, n, l4)
			require.NoError(t, err, "image %d", k)
			for r := 0; r < n; r++ {
				require.True(t, bytes.Equal(l4Payload(r, id), got[r]), "image %d rank %d id %d", k, r, id)
			}
			seen[id]++
		}
		t.Logf("%d crash images, recovered ids %v", len(clones), seen)
		assert.Positive(t, seen[1], "early images recover the old checkpoint")
		assert.Positive(t, seen[2], "the final image recovers the new one")
	})
}

// TestL4FlushLastCheckpoint flushes an L1 checkpoint to L4 with CopyWrite
// (keep_last_ckpt at Finalize); with every local directory lost the next
// run recovers it from the container.
func TestL4FlushLastCheckpoint(t *testing.T) {
	modes(t, func(t *testing.T, inline bool) {
		root := t.TempDir()
		cl := newCluster(t, vfd.Sec2{}, root, 2)
		l4 := Global4{Inline: inline}
		require.NoError(t, runL4(cl, 4, l4, func(e *Engine) error {
			m, _, err := e.Checkpoint(9, L1, writeBytes(l4Payload(e.env.Rank, 9)))
			if err != nil {
				return err
			}
			src, err := e.RecoverOne(m)
			if err != nil {
				return err
			}
			_, _, err = e.Checkpoint(m.ID, L4, CopyWrite(src))
			return err
		}))
		require.NoError(t, os.RemoveAll(filepath.Join(root, "local")))
		got, id, err := recoverAll(t, cl, 4, l4)
		require.NoError(t, err)
		assert.Equal(t, int64(9), id)
		for r := 0; r < 4; r++ {
			assert.True(t, bytes.Equal(l4Payload(r, 9), got[r]), "rank %d", r)
		}

		// A source that does not match its digest is refused.
		f, err := vfd.CreateTrunc(vfd.Sec2{}, filepath.Join(root, "x"))
		require.NoError(t, err)
		defer f.Close()
		require.NoError(t, os.WriteFile(filepath.Join(root, "src"), []byte("abc"), 0o644))
		_, _, _, err = CopyWrite(Source{Store: Store{vfd.Sec2{}, root}, Name: "src", Size: 3})(f)
		assert.ErrorIs(t, err, ErrDigestMismatch)
	})
}

// TestL4FailAtEveryOp fails each driver operation of an L4 checkpoint in
// turn: every rank gets the same outcome, and a restart with all local
// storage lost recovers the new checkpoint when it committed and the old
// one otherwise.
func TestL4FailAtEveryOp(t *testing.T) {
	modes(t, func(t *testing.T, inline bool) {
		const n = 4
		l4 := Global4{Inline: inline, NFiles: 2, FSBlkSize: 512}
		for i := 0; ; i++ {
			core := vfd.NewCore()
			var mu sync.Mutex
			count, armed, injected := 0, false, false
			fd := vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
				mu.Lock()
				defer mu.Unlock()
				if !armed {
					return nil
				}
				count++
				if count-1 == i {
					injected = true
					return vfd.ErrInjected
				}
				return nil
			}))
			cl := newCluster(t, fd, "/r", 2)
			cl.policy = FTIPolicy{KeepL4: true}
			require.NoError(t, runL4(cl, n, l4, func(e *Engine) error {
				_, _, err := e.Checkpoint(1, L4, writeBytes(l4Payload(e.env.Rank, 1)))
				return err
			}))
			errs := make([]error, n)
			require.NoError(t, runL4(cl, n, l4, func(e *Engine) error {
				c := e.env.Comm
				if err := c.Barrier(); err != nil { // every rank is past Open
					return err
				}
				if c.Rank() == 0 {
					mu.Lock()
					armed = true
					mu.Unlock()
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				_, _, errs[c.Rank()] = e.Checkpoint(2, L4, writeBytes(l4Payload(c.Rank(), 2)))
				return nil
			}))
			mu.Lock()
			armed = false
			mu.Unlock()
			if !injected {
				require.Greater(t, i, 20, "an L4 checkpoint takes more than 20 operations")
				break
			}
			for r := 1; r < n; r++ {
				require.Equal(t, errs[0] == nil, errs[r] == nil, "op %d: ranks disagree: %v / %v", i, errs[0], errs[r])
			}
			require.NoError(t, core.RemoveAll("/r/local"))
			got, id, err := recoverAll(t, newCluster(t, core, "/r", 2), n, l4)
			require.NoError(t, err, "op %d", i)
			if errs[0] == nil {
				require.Equal(t, int64(2), id, "op %d: committed checkpoint not recovered", i)
			}
			for r := 0; r < n; r++ {
				require.True(t, bytes.Equal(l4Payload(r, id), got[r]), "op %d rank %d", i, r)
			}
		}
	})
}

// TestForeignManifestKeepsTheOtherCopysFiles: the primary manifest copy of
// a committed L1 checkpoint is replaced by a valid manifest of another run
// describing an inline L4 checkpoint of the same sequence number (found by
// the chaos loop). Recovery tries that copy first; its digests do not
// match this run's local data files, which the L4 level would otherwise
// remove as a damaged cache, and the container it names does not exist.
// The files must survive that attempt so that the other copy, this run's,
// recovers the checkpoint bit for bit.
func TestForeignManifestKeepsTheOtherCopysFiles(t *testing.T) {
	const n = 4
	l4 := Global4{Inline: true}
	this := newCluster(t, vfd.Sec2{}, t.TempDir(), 2)
	require.NoError(t, runL4(this, n, l4, func(e *Engine) error {
		_, _, err := e.Checkpoint(5, L1, writeBytes(l4Payload(e.env.Rank, 5)))
		return err
	}))
	other := newCluster(t, vfd.Sec2{}, t.TempDir(), 2)
	require.NoError(t, runL4(other, n, l4, func(e *Engine) error {
		_, _, err := e.Checkpoint(9, L4, writeBytes(l4Payload(e.env.Rank, 9)))
		return err
	}))
	foreign, err := os.ReadFile(filepath.Join(other.root, "meta", ManifestName(1)))
	require.NoError(t, err)
	primary := filepath.Join(this.root, "meta", ManifestName(1))
	require.NoError(t, os.WriteFile(primary, foreign, 0o644))

	got, id, err := recoverAll(t, this, n, l4)
	require.NoError(t, err)
	assert.Equal(t, int64(5), id)
	for r := range n {
		assert.Equal(t, l4Payload(r, 5), got[r], "rank %d", r)
		b, err := os.ReadFile(filepath.Join(this.root, "local", fmt.Sprintf("node%04d", r/2), RankFileName(CheckpointDir(1), RoleData, r)))
		require.NoError(t, err, "rank %d: this run's data file", r)
		assert.NotEmpty(t, b)
	}
	// The foreign copy was set aside and rewritten from the one recovered.
	fixed, err := os.ReadFile(primary)
	require.NoError(t, err)
	assert.NotEqual(t, foreign, fixed)
}
