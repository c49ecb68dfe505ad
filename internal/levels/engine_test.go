package levels

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// cluster is the on-disk world of a test: one root with local/, global/ and meta/.
type cluster struct {
	t        testing.TB
	d        vfd.Driver
	root     string
	nodeSize int
	policy   Policy
	// imageLimit is every rank's Env.ImageLimit: on by default (as the
	// runtime runs), -1 for the double read.
	imageLimit int64
	// groupSize is the topology's group size (0: 1); levels the
	// engines' levels (nil: L1 only).
	groupSize int
	levels    []Level
	// runID is the run the engines belong to ("": one from before run
	// ids, in the flat directories).
	runID string
}

func newCluster(t testing.TB, d vfd.Driver, root string, nodeSize int) *cluster {
	return &cluster{t: t, d: d, root: root, nodeSize: nodeSize, imageLimit: 1 << 30}
}

func (cl *cluster) env(c comm.Comm) *Env {
	topo, err := partner.NewTopology(c.Size(), cl.nodeSize, max(cl.groupSize, 1), nil)
	require.NoError(cl.t, err)
	return &Env{
		Comm: c, Topo: topo, Rank: c.Rank(), Run: cl.runID,
		Local:      Store{cl.d, RunDir(filepath.Join(cl.root, "local", topo.NodeDir(topo.NodeOf(c.Rank()))), cl.runID)},
		Global:     Store{cl.d, RunDir(filepath.Join(cl.root, "global"), cl.runID)},
		Meta:       Store{cl.d, filepath.Join(cl.root, "meta")},
		Logger:     zaptest.NewLogger(cl.t),
		ImageLimit: cl.imageLimit,
	}
}

// run opens an engine on every rank of an n-rank world and calls fn.
func (cl *cluster) run(n int, fn func(e *Engine) error) error {
	return runWorld(n, func(c comm.Comm) error {
		e, err := NewEngine(cl.env(c), cl.config())
		if err != nil {
			return err
		}
		if err := e.Open(); err != nil {
			return err
		}
		defer e.Release()
		return fn(e)
	})
}

// config is the engines' configuration.
func (cl *cluster) config() Config {
	lv := cl.levels
	if lv == nil {
		lv = []Level{Local1{}}
	}
	return Config{Levels: lv, Policy: cl.policy, PartRanks: testPartRanks()}
}

// payload is rank r's data for checkpoint id.
func payload(r int, id int64, size int) []byte {
	b := make([]byte, size+r)
	for i := range b {
		b[i] = byte(int64(i)*7 + int64(r)*13 + id*31)
	}
	return b
}

func writeBytes(b []byte) WriteFunc {
	return func(f vfd.File) (int64, Digest, bool, error) {
		hw := NewHashingWriter(f)
		if _, err := hw.WriteAt(b, 0); err != nil {
			return 0, Digest{}, false, err
		}
		d, ok := hw.Sum()
		return int64(len(b)), d, ok, nil
	}
}

func readSource(src Source) ([]byte, error) {
	f, err := OpenSource(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if n == 0 {
		return b, nil
	}
	return b, vfd.ReadFull(f, b, 0)
}

func TestCheckpointRecoverRoundTrip(t *testing.T) {
	for _, n := range []int{1, 4, 8} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			cl := newCluster(t, vfd.Sec2{}, t.TempDir(), min(n, 2))
			require.NoError(t, cl.run(n, func(e *Engine) error {
				for id := int64(1); id <= 3; id++ {
					m, st, err := e.Checkpoint(id, L1, writeBytes(payload(e.env.Rank, id, 1000)))
					if err != nil {
						return err
					}
					if m.ID != id || m.Ranks != n || st.Bytes != int64(1000+e.env.Rank) {
						return fmt.Errorf("bad manifest %+v stats %+v", m, st)
					}
				}
				if got := len(e.Committed()); got != 1 {
					return fmt.Errorf("FTI retention keeps 1 L1 checkpoint, have %d", got)
				}
				return nil
			}))
			// Restart.
			var mu sync.Mutex
			seen := map[int][]byte{}
			require.NoError(t, cl.run(n, func(e *Engine) error {
				m, src, err := e.Recover()
				if err != nil {
					return err
				}
				if m.ID != 3 || m.Seq != 3 {
					return fmt.Errorf("recovered id %d seq %d", m.ID, m.Seq)
				}
				b, err := readSource(src)
				mu.Lock()
				seen[e.env.Rank] = b
				mu.Unlock()
				return err
			}))
			for r := 0; r < n; r++ {
				assert.Equal(t, payload(r, 3, 1000), seen[r], "rank %d", r)
			}
			// Only the committed checkpoint's manifest remains: its root
			// and its parts directory.
			ents, err := vfd.Sec2{}.ReadDir(filepath.Join(cl.root, "meta"))
			require.NoError(t, err)
			require.Len(t, ents, 2)
			assert.Equal(t, "ckpt00000003.manifest", ents[0].Name())
			assert.Equal(t, PartsDirName(3), ents[1].Name())
		})
	}
}

func TestRecoverNothing(t *testing.T) {
	cl := newCluster(t, vfd.Sec2{}, t.TempDir(), 2)
	require.NoError(t, cl.run(4, func(e *Engine) error {
		_, _, err := e.Recover()
		if !errors.Is(err, ErrNoCheckpoint) {
			return fmt.Errorf("want ErrNoCheckpoint, got %v", err)
		}
		return nil
	}))
}

// disrupt damages rank r's data file of checkpoint seq.
func (cl *cluster) disrupt(t *testing.T, how string, seq uint64, r int) {
	p := filepath.Join(cl.root, "local", fmt.Sprintf("node%04d", r/cl.nodeSize), RankFileName(CheckpointDir(seq), RoleData, r))
	switch how {
	case "erase":
		require.NoError(t, cl.d.Remove(p))
	case "corrupt":
		f, err := cl.d.Open(p, vfd.ReadWrite)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("TextForCorruption"), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	case "truncate":
		f, err := cl.d.Open(p, vfd.ReadWrite)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(10))
		require.NoError(t, f.Close())
	}
}

func TestL1Disruption(t *testing.T) {
	wantErr := map[string]error{"erase": ErrMissingFile, "corrupt": ErrDigestMismatch, "truncate": ErrSizeMismatch}
	for _, n := range []int{1, 4, 8} {
		for _, how := range []string{"erase", "corrupt", "truncate"} {
			for _, older := range []bool{false, true} {
				name := fmt.Sprintf("ranks=%d/%s/older=%v", n, how, older)
				t.Run(name, func(t *testing.T) {
					cl := newCluster(t, vfd.Sec2{}, t.TempDir(), min(n, 4))
					if older {
						cl.policy = FTIPolicy{KeepLast: 2}
					}
					require.NoError(t, cl.run(n, func(e *Engine) error {
						for id := int64(10); id <= 11; id++ {
							if _, _, err := e.Checkpoint(id, L1, writeBytes(payload(e.env.Rank, id, 512))); err != nil {
								return err
							}
						}
						return nil
					}))
					victim := n - 1
					cl.disrupt(t, how, 2, victim)
					var mu sync.Mutex
					errs := map[int]error{}
					data := map[int][]byte{}
					require.NoError(t, cl.run(n, func(e *Engine) error {
						m, src, err := e.Recover()
						mu.Lock()
						defer mu.Unlock()
						errs[e.env.Rank] = err
						if err == nil {
							if m.ID != 10 {
								return fmt.Errorf("recovered id %d", m.ID)
							}
							data[e.env.Rank], err = readSource(src)
							return err
						}
						return nil
					}))
					if !older {
						for r := 0; r < n; r++ {
							require.ErrorIs(t, errs[r], ErrUnrecoverable)
							assert.Equal(t, errs[0].Error(), errs[r].Error(), "identical on every rank")
							assert.Contains(t, errs[r].Error(), fmt.Sprintf("rank %d", victim))
						}
						require.ErrorIs(t, errs[victim], wantErr[how])
						return
					}
					for r := 0; r < n; r++ {
						assert.True(t, bytes.Equal(payload(r, 10, 512), data[r]), "rank %d data word by word", r)
					}
				})
			}
		}
	}
}

func runWorld(n int, fn func(c comm.Comm) error) error {
	return comm.Run(n, fn, comm.WithTimeout(30*time.Second))
}

func TestFTIPolicy(t *testing.T) {
	mk := func(seq uint64, l ID) *Manifest { return &Manifest{Seq: seq, Level: l} }
	seqs := func(ms []*Manifest) []uint64 {
		var out []uint64
		for _, m := range ms {
			out = append(out, m.Seq)
		}
		return out
	}
	all := []*Manifest{mk(1, L4), mk(2, L3), mk(3, L2), mk(4, L1), mk(5, L1)}
	tests := []struct {
		name   string
		p      FTIPolicy
		latest *Manifest
		want   []uint64
	}{
		{"L1 supersedes L1 only", FTIPolicy{}, mk(6, L1), []uint64{4, 5}},
		{"L3 supersedes L1-L3", FTIPolicy{}, mk(6, L3), []uint64{2, 3, 4, 5}},
		{"L4 supersedes all", FTIPolicy{}, mk(6, L4), []uint64{1, 2, 3, 4, 5}},
		{"keep_l4_ckpt", FTIPolicy{KeepL4: true}, mk(6, L4), []uint64{2, 3, 4, 5}},
		{"keep last 3", FTIPolicy{KeepLast: 3}, mk(6, L4), []uint64{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, seqs(tt.p.Drop(append(append([]*Manifest(nil), all...), tt.latest), tt.latest)))
		})
	}
}

// keepAll is a policy that drops nothing.
type keepAll struct{}

func (keepAll) Drop([]*Manifest, *Manifest) []*Manifest { return nil }
