package levels

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/blake3"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// l23World is a simulated job for the L2/L3 tests: nodes are directories
// root/local/node%04d, one topology per run.
type l23World struct {
	t                    *testing.T
	d                    vfd.Driver
	root                 string
	nranks, nsize, gsize int
	topo                 *partner.Topology
	levels               []Level
	// faulty, when set, wraps the local driver of one rank.
	faultRank int
	fault     vfd.Driver
	// imageLimit is every rank's Env.ImageLimit (on by default, as the
	// runtime runs; -1 for the double read).
	imageLimit int64
}

func newL23World(t *testing.T, d vfd.Driver, nranks, nsize, gsize int, m int) *l23World {
	topo, err := partner.NewTopology(nranks, nsize, gsize, nil)
	require.NoError(t, err)
	return &l23World{t: t, d: d, root: t.TempDir(), nranks: nranks, nsize: nsize, gsize: gsize, topo: topo,
		levels: []Level{Local1{}, Partner2{Buffers: &partner.Buffers{}}, RS3{M: m}}, faultRank: -1, imageLimit: 1 << 30}
}

func (w *l23World) nodeDir(n int) string {
	return filepath.Join(w.root, "local", w.topo.NodeDir(n))
}

func (w *l23World) env(c comm.Comm) *Env {
	d := w.d
	if c.Rank() == w.faultRank {
		d = w.fault
	}
	return &Env{
		Comm: c, Topo: w.topo, Rank: c.Rank(),
		Local:      Store{d, w.nodeDir(w.topo.NodeOf(c.Rank()))},
		Global:     Store{w.d, filepath.Join(w.root, "global")},
		Meta:       Store{w.d, filepath.Join(w.root, "meta")},
		BlockSize:  1000,
		ImageLimit: w.imageLimit,
	}
}

func (w *l23World) run(fn func(e *Engine) error) error {
	return comm.Run(w.nranks, func(c comm.Comm) error {
		e, err := NewEngine(w.env(c), Config{Levels: w.levels, PartRanks: testPartRanks()})
		if err != nil {
			return err
		}
		if err := e.Open(); err != nil {
			return err
		}
		defer e.Wait()
		return fn(e)
	}, comm.WithTimeout(30*time.Second))
}

func l23Payload(r int, id int64) []byte { return payload(r, id, 3000+97*r) }

// checkpoint takes checkpoint id at lvl on every rank; errs collects each rank's error.
func (w *l23World) checkpoint(id int64, lvl ID) []error {
	return w.checkpointWith(id, lvl, func(r int) WriteFunc { return writeBytes(l23Payload(r, id)) })
}

// checkpointWith is checkpoint with each rank's write function.
func (w *l23World) checkpointWith(id int64, lvl ID, write func(r int) WriteFunc) []error {
	errs := make([]error, w.nranks)
	require.NoError(w.t, w.run(func(e *Engine) error {
		_, _, errs[e.env.Rank] = e.Checkpoint(id, lvl, write(e.env.Rank))
		return nil
	}))
	return errs
}

// recover restarts and returns the recovered manifest id and level per rank
// (or the error), checking the data bit for bit.
func (w *l23World) recover() (map[int]*Manifest, []error) {
	var mu sync.Mutex
	ms := map[int]*Manifest{}
	errs := make([]error, w.nranks)
	require.NoError(w.t, w.run(func(e *Engine) error {
		m, src, err := e.Recover()
		r := e.env.Rank
		if err == nil {
			var b []byte
			b, err = readSource(src)
			if err == nil && !bytes.Equal(b, l23Payload(r, m.ID)) {
				err = fmt.Errorf("rank %d: recovered data differs", r)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		errs[r] = err
		if err == nil {
			ms[r] = m
		}
		return nil
	}))
	return ms, errs
}

func (w *l23World) ckptFiles(node int, glob string) []string {
	var out []string
	dir := w.nodeDir(node)
	ents, err := w.d.ReadDir(dir)
	require.NoError(w.t, err)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sub, err := w.d.ReadDir(path.Join(dir, e.Name()))
		require.NoError(w.t, err)
		for _, f := range sub {
			if ok, _ := path.Match(glob, f.Name()); ok {
				out = append(out, path.Join(dir, e.Name(), f.Name()))
			}
		}
	}
	return out
}

func (w *l23World) corrupt(p string) {
	f, err := w.d.Open(p, vfd.ReadWrite)
	require.NoError(w.t, err)
	_, err = f.WriteAt([]byte("TextForCorruption"), 0)
	require.NoError(w.t, err)
	require.NoError(w.t, f.Close())
}

type disruption func(w *l23World)

func onFiles(glob string, remove bool, nodes ...int) disruption {
	return func(w *l23World) {
		for _, n := range nodes {
			files := w.ckptFiles(n, glob)
			require.NotEmpty(w.t, files, "node %d has %s", n, glob)
			for _, f := range files {
				if remove {
					require.NoError(w.t, w.d.Remove(f))
				} else {
					w.corrupt(f)
				}
			}
		}
	}
}

func eraseNodeDirs(nodes ...int) disruption {
	return func(w *l23World) {
		for _, n := range nodes {
			require.NoError(w.t, w.d.RemoveAll(w.nodeDir(n)))
		}
	}
}

// TestL2L3DisruptionMatrix runs the L2 and L3 rows of FTI's disruption
// matrix (section 11 of the semantics spec) on both layouts.
func TestL2L3DisruptionMatrix(t *testing.T) {
	layouts := []struct {
		name                 string
		nranks, nsize, gsize int
	}{{"16r-4n-1g", 16, 4, 4}, {"8r-8n-2g", 8, 1, 4}}
	rows := []struct {
		name   string
		lvl    ID
		hit    disruption
		expect bool
	}{
		{"erase data files, non-consecutive", L2, onFiles("data*", true, 0, 2), true},
		{"corrupt data files, non-consecutive", L2, onFiles("data*", false, 0, 2), true},
		{"erase partner files, non-consecutive", L2, onFiles("partner*", true, 0, 2), true},
		{"corrupt partner files, non-consecutive", L2, onFiles("partner*", false, 0, 2), true},
		{"erase node dirs, consecutive", L2, eraseNodeDirs(0, 1), false},
		{"erase node dirs, non-consecutive", L2, eraseNodeDirs(0, 2), true},
		{"erase data files, non-consecutive", L3, onFiles("data*", true, 0, 2), true},
		{"corrupt data files, non-consecutive", L3, onFiles("data*", false, 0, 2), true},
		{"erase parity files, non-consecutive", L3, onFiles("parity*", true, 0, 2), true},
		{"corrupt parity files, non-consecutive", L3, onFiles("parity*", false, 0, 2), true},
		{"corrupt every data file", L3, onFiles("data*", false, 0, 1, 2, 3), true},
		{"erase node dirs, consecutive", L3, eraseNodeDirs(0, 1), true},
		{"erase node dirs, non-consecutive", L3, eraseNodeDirs(0, 2), true},
		{"erase three node dirs", L3, eraseNodeDirs(0, 1, 2), false},
		{"erase L1 files (control)", L1, onFiles("data*", true, 0, 2), false},
	}
	for _, lay := range layouts {
		for _, row := range rows {
			t.Run(fmt.Sprintf("%s/%v/%s", lay.name, row.lvl, row.name), func(t *testing.T) {
				w := newL23World(t, vfd.NewCore(), lay.nranks, lay.nsize, lay.gsize, 0)
				for r, err := range w.checkpoint(1, row.lvl) {
					require.NoError(t, err, "rank %d", r)
				}
				row.hit(w)
				ms, errs := w.recover()
				for r, err := range errs {
					if row.expect {
						require.NoError(t, err, "rank %d", r)
						assert.Equal(t, row.lvl, ms[r].Level)
					} else {
						require.ErrorIs(t, err, ErrUnrecoverable, "rank %d", r)
					}
				}
				if row.expect {
					// a second restart finds everything intact again
					_, errs = w.recover()
					for r, err := range errs {
						require.NoError(t, err, "second restart, rank %d", r)
					}
				}
			})
		}
	}
}

// TestL3ParityCount: with m=2 of a group of 4 the parity is rotated:
// every member holds a parity file about as large as its data file
// (overhead m/(k-m) = 1), any 2 members may lose data, parity or both and
// are rebuilt, and 3 whole members are refused. Losing only data files is
// counted per stripe: three members' data with all parity intact leaves
// every stripe with 2 of its 4 shards, which is rebuilt.
func TestL3ParityCount(t *testing.T) {
	tests := []struct {
		name   string
		hit    disruption
		expect bool
	}{
		{"two data files", func(w *l23World) { onFiles("data*", true, 1, 3)(w) }, true},
		{"data and parity on one node", eraseNodeDirs(0), true},
		{"one node and one data file", func(w *l23World) { eraseNodeDirs(0)(w); onFiles("data*", false, 2)(w) }, true},
		{"two nodes", eraseNodeDirs(1, 2), true},
		{"two parity files and one data file of a third node", func(w *l23World) {
			onFiles("parity*", true, 0, 1)(w)
			onFiles("data*", true, 3)(w)
		}, false},
		{"three data files", func(w *l23World) { onFiles("data*", true, 1, 2, 3)(w) }, true},
		{"three nodes", eraseNodeDirs(0, 1, 3), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newL23World(t, vfd.NewCore(), 4, 1, 4, 2)
			for r, err := range w.checkpoint(1, L3) {
				require.NoError(t, err, "rank %d", r)
			}
			for n := range 4 {
				assert.Len(t, w.ckptFiles(n, "parity*"), 1, "node %d holds a parity file", n)
			}
			tc.hit(w)
			_, errs := w.recover()
			for r, err := range errs {
				if tc.expect {
					require.NoError(t, err, "rank %d", r)
				} else {
					require.ErrorIs(t, err, ErrUnrecoverable, "rank %d", r)
					assert.Contains(t, err.Error(), "at most 2 may be lost (any 2 of the 4 members)")
				}
			}
		})
	}
}

// TestL2L3ReplacementNode restarts with a lost node replaced by a new host
// and the hosts listed in another order: the saved node table puts the
// replacement in the lost node's slot, and its files are rebuilt (L2, L3
// with FTI's parity and with rotated parity, m = 1).
func TestL2L3ReplacementNode(t *testing.T) {
	hosts := func(order ...string) []string {
		var ids []string
		for _, h := range order {
			for range 4 {
				ids = append(ids, h)
			}
		}
		return ids
	}
	for _, tc := range []struct {
		lvl ID
		m   int
	}{{L2, 0}, {L3, 0}, {L3, 1}} {
		lvl := tc.lvl
		t.Run(fmt.Sprintf("%v-m%d", lvl, tc.m), func(t *testing.T) {
			w := newL23World(t, vfd.NewCore(), 16, 4, 4, tc.m)
			var err error
			w.topo, err = partner.NewTopology(16, 4, 4, hosts("a", "b", "c", "d"))
			require.NoError(t, err)
			saved, err := w.topo.Table().Marshal()
			require.NoError(t, err)
			for r, err := range w.checkpoint(1, lvl) {
				require.NoError(t, err, "rank %d", r)
			}
			eraseNodeDirs(2)(w) // host c is gone
			table, err := partner.UnmarshalTable(saved)
			require.NoError(t, err)
			// new run: x replaces c, and the launcher lists the hosts in reverse
			cur, err := partner.NewTopologyTable(16, 4, 4, hosts("a", "b", "x", "d"), partner.NodeTable{"d", "x", "b", "a"})
			require.NoError(t, err)
			w.topo, err = cur.Remap(table)
			require.NoError(t, err)
			assert.Equal(t, partner.NodeTable{"a", "b", "x", "d"}, w.topo.Table())
			ms, errs := w.recover()
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
				assert.Equal(t, lvl, ms[r].Level)
			}
			// without the remap, ranks would look in the wrong node
			// directories: recovery must refuse, never return wrong data.
			w.topo = cur
			eraseNodeDirs(1)(w)
			_, errs = w.recover()
			for _, err := range errs {
				if err != nil {
					require.ErrorIs(t, err, ErrUnrecoverable)
				}
			}
		})
	}
}

// TestL2L3FaultMidTransfer injects a write error into one rank's partner
// copy or parity file: the checkpoint is rejected on every rank and the
// previous one stays recoverable.
func TestL2L3FaultMidTransfer(t *testing.T) {
	tests := []struct {
		lvl  ID
		glob string
	}{{L2, "partner*"}, {L3, "parity*"}}
	for _, tc := range tests {
		t.Run(tc.lvl.String(), func(t *testing.T) {
			core := vfd.NewCore()
			w := newL23World(t, core, 8, 2, 2, 0)
			for r, err := range w.checkpoint(1, L1) {
				require.NoError(t, err, "rank %d", r)
			}
			w.faultRank = 2
			w.fault = vfd.NewFault(core, vfd.OnPath(tc.glob, []vfd.OpKind{vfd.OpWrite}, nil))
			for r, err := range w.checkpoint(2, tc.lvl) {
				require.ErrorIs(t, err, ErrVoteFailed, "rank %d", r)
			}
			w.faultRank = -1
			ms, errs := w.recover()
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
				assert.Equal(t, int64(1), ms[r].ID)
			}
			// and a fault-free checkpoint at the level works afterwards
			for r, err := range w.checkpoint(3, tc.lvl) {
				require.NoError(t, err, "rank %d", r)
			}
			ms, errs = w.recover()
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
				assert.Equal(t, int64(3), ms[r].ID)
			}
		})
	}
}

// TestL2L3OfflineRebuild erases node directories after a job ended and
// rebuilds them with no communicator, from the manifest alone: files
// recorded with their BLAKE3 and FTI-FF files recorded with their
// checksum (checked by the format as rebuilt).
func TestL2L3OfflineRebuild(t *testing.T) {
	for _, tc := range []struct {
		lvl   ID
		ftiff bool
	}{{L2, false}, {L3, false}, {L2, true}, {L3, true}} {
		t.Run(fmt.Sprintf("%v/ftiff=%v", tc.lvl, tc.ftiff), func(t *testing.T) {
			lvl := tc.lvl
			w := newL23World(t, vfd.NewCore(), 16, 4, 4, 0)
			var m *Manifest
			require.NoError(t, w.run(func(e *Engine) error {
				write := writeBytes(l23Payload(e.env.Rank, 1))
				if tc.ftiff {
					write = ftiffWrite(e.env.Rank, 1)
				}
				mm, _, err := e.Checkpoint(1, lvl, write)
				if e.env.Rank == 0 {
					m = mm
				}
				return err
			}))
			m = fullOf(t, m)
			for r := range m.Ranks {
				d, _ := m.DataFile(r)
				if tc.ftiff {
					require.Equal(t, DigestFTIFF, d.Attrs[AttrDigest], "rank %d", r)
				} else {
					require.Empty(t, d.Attrs[AttrDigest], "rank %d", r)
				}
			}
			eraseNodeDirs(2)(w)
			local := func(n int) Store { return Store{w.d, w.nodeDir(n)} }
			var rb OfflineRebuilder = Partner2{}
			if lvl == L3 {
				rb = RS3{}
			}
			paths, err := rb.RebuildOffline(m, w.topo, local, partner.Options{BlockSize: 512})
			require.NoError(t, err)
			assert.Len(t, paths, 8) // node 2's 4 data files and 4 partner or parity files
			for r, fs := range m.Files {
				for _, f := range fs {
					require.NoError(t, VerifyFile(local(w.topo.NodeOf(r)), f), "rank %d %s", r, f.Name)
				}
			}
			eraseNodeDirs(1, 2, 3)(w)
			_, err = rb.RebuildOffline(m, w.topo, local, partner.Options{})
			require.ErrorIs(t, err, partner.ErrUnrecoverable)
			other, err := partner.NewTopology(2*m.Ranks, 4, 4, nil)
			require.NoError(t, err)
			_, err = rb.RebuildOffline(m, other, local, partner.Options{})
			require.ErrorIs(t, err, ErrTopologyMismatch)
		})
	}
}

// TestDataReaderDigest: at L2 and L3 the data file is read once, by
// Protect, which records its digest (the engine does not read it back),
// the digest is the BLAKE3 of the file, and the data file's fsync,
// running beside Protect, is voted on: a failed data fsync rejects the
// checkpoint on every rank and the previous one stays recoverable.
func TestDataReaderDigest(t *testing.T) {
	for _, lvl := range []ID{L2, L3} {
		t.Run(lvl.String(), func(t *testing.T) {
			core := vfd.NewCore()
			var mu sync.Mutex
			read := map[string]int64{} // bytes read per data file
			counter := vfd.NewFault(core, vfd.InjectorFunc(func(op vfd.Op) error {
				if op.Kind == vfd.OpRead && path.Base(path.Dir(op.Path)) != "meta" {
					if ok, _ := path.Match("data*", path.Base(op.Path)); ok {
						mu.Lock()
						read[path.Base(op.Path)] += int64(op.Len)
						mu.Unlock()
					}
				}
				return nil
			}))
			w := newL23World(t, counter, 4, 1, 4, 0)
			// a writer that cannot hash while writing (ckpt's FTI-FF
			// writer gives no whole-file BLAKE3), so the digest is left
			// to the engine or the level
			plain := func(id int64) func(r int) WriteFunc {
				return func(r int) WriteFunc {
					return func(f vfd.File) (int64, Digest, bool, error) {
						b := l23Payload(r, id)
						_, err := f.WriteAt(b, 0)
						return int64(len(b)), Digest{}, false, err
					}
				}
			}
			for r, err := range w.checkpointWith(1, lvl, plain(1)) {
				require.NoError(t, err, "rank %d", r)
			}
			atCheckpoint := maps.Clone(read)
			var m *Manifest
			ms, errs := w.recover()
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
				m = ms[r]
			}
			for r := range 4 {
				f, ok := m.DataFile(r)
				require.True(t, ok)
				b, err := vfd.ReadFile(core, filepath.Join(w.nodeDir(w.topo.NodeOf(r)), f.Name))
				require.NoError(t, err)
				assert.Equal(t, Digest(blake3.Sum256(b)), f.Digest, "rank %d: recorded digest is the file's BLAKE3", r)
				// one pass while checkpointing: Protect's (of the file
				// under its final name, the intent marker being durable
				// ahead, or under its tmp name)
				// (and at L2 the probe of whether the file is an FTI-FF
				// file, whose checksum it would record: its header and
				// the magic of its file block)
				probe := int64(0)
				if lvl == L2 || lvl == L3 {
					probe = fileformat.HeaderSize + 8
				}
				assert.Equal(t, f.Size+probe, atCheckpoint[path.Base(f.Name)]+atCheckpoint[path.Base(f.Name)+TmpSuffix], "rank %d: bytes read while checkpointing", r)
			}

			w.faultRank = 1
			w.fault = vfd.NewFault(core, vfd.OnPath("data*", []vfd.OpKind{vfd.OpSync}, syscall.EIO))
			for r, err := range w.checkpointWith(2, lvl, plain(2)) {
				require.ErrorIs(t, err, ErrVoteFailed, "rank %d", r)
				if r == 1 {
					require.ErrorIs(t, err, syscall.EIO)
				}
			}
			w.faultRank = -1
			ms, errs = w.recover()
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
				assert.Equal(t, int64(1), ms[r].ID)
			}
		})
	}
}
