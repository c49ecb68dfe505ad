package partner

import (
	"bytes"
	"path"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// opLog records, per path, the writes, syncs and cache hints that reach
// a Fault driver.
type opLog struct {
	mu  sync.Mutex
	ops map[string][]vfd.Op
}

func (l *opLog) MaybeError(op vfd.Op) error {
	switch op.Kind {
	case vfd.OpWrite, vfd.OpSync, vfd.OpWriteback, vfd.OpDropCache:
		l.mu.Lock()
		l.ops[op.Path] = append(l.ops[op.Path], vfd.Op{Kind: op.Kind, Off: op.Off, Len: op.Len})
		l.mu.Unlock()
	}
	return nil
}

func (l *opLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = map[string][]vfd.Op{}
}

func (l *opLog) of(p string) []vfd.Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops[p]
}

const (
	testPiece = 64 << 10
	testBlock = 16 << 10
)

// checkDropsBehind checks the hints a sink that drops behind gave for a
// file of size bytes: the writeback of every whole piece started once, in
// order; every piece dropped once it is dropWindow pieces behind the
// write, so that no write lands more than dropWindow+1 pieces (plus a
// block) past the dropped range; the whole file dropped after its sync.
func checkDropsBehind(t *testing.T, name string, ops []vfd.Op, size int64) {
	t.Helper()
	checkDropsBehindBy(t, name, ops, size, testPiece, dropWindow)
}

// checkDropsBehindBy is checkDropsBehind for a sink whose piece is
// piece bytes, dropped window pieces behind the write (the parity sink's
// piece is a quarter of testPiece, its window four times as many).
func checkDropsBehindBy(t *testing.T, name string, ops []vfd.Op, size, piece, window int64) {
	t.Helper()
	var hinted, dropped, written int64
	synced := false
	for i, op := range ops {
		switch op.Kind {
		case vfd.OpWrite:
			require.False(t, synced, "%s: op %d: a write after the sync", name, i)
			written = max(written, op.Off+int64(op.Len))
			assert.LessOrEqual(t, written-dropped, (window+1)*piece+testBlock,
				"%s: op %d: %d bytes written past the dropped range", name, i, written-dropped)
		case vfd.OpWriteback:
			assert.Equal(t, vfd.Op{Kind: vfd.OpWriteback, Off: hinted, Len: int(piece)}, op, "%s: op %d", name, i)
			assert.LessOrEqual(t, op.Off+int64(op.Len), written, "%s: op %d: hint before the write", name, i)
			hinted += piece
		case vfd.OpSync:
			synced = true
		case vfd.OpDropCache:
			if synced {
				assert.Equal(t, vfd.Op{Kind: vfd.OpDropCache}, op, "%s: op %d: after the sync, the whole file", name, i)
				dropped = -1
				continue
			}
			assert.Equal(t, vfd.Op{Kind: vfd.OpDropCache, Off: dropped, Len: int(piece)}, op, "%s: op %d", name, i)
			assert.Equal(t, hinted-window*piece-piece, dropped, "%s: op %d: dropped %d pieces behind", name, i, window)
			dropped += piece
		}
	}
	assert.Equal(t, size/piece*piece, hinted, "%s: every whole piece hinted", name)
	assert.Equal(t, int64(-1), dropped, "%s: the whole file dropped after the sync", name)
}

// checkKeptHinted checks the hints a sink that keeps its file in the page
// cache gave for a file of size bytes: the writeback of every whole piece
// started once, in order, after its write; nothing dropped.
func checkKeptHinted(t *testing.T, name string, ops []vfd.Op, size int64) {
	t.Helper()
	var hinted, written int64
	synced := false
	for i, op := range ops {
		switch op.Kind {
		case vfd.OpWrite:
			require.False(t, synced, "%s: op %d: a write after the sync", name, i)
			written = max(written, op.Off+int64(op.Len))
		case vfd.OpWriteback:
			assert.Equal(t, vfd.Op{Kind: vfd.OpWriteback, Off: hinted, Len: testPiece}, op, "%s: op %d", name, i)
			assert.LessOrEqual(t, op.Off+int64(op.Len), written, "%s: op %d: hint before the write", name, i)
			hinted += testPiece
		case vfd.OpSync:
			synced = true
		default:
			t.Errorf("%s: op %d: %v: the file is kept in the page cache", name, i, op)
		}
	}
	assert.True(t, synced, "%s: synced", name)
	assert.Equal(t, size/testPiece*testPiece, hinted, "%s: every whole piece hinted", name)
}

func noHints(t *testing.T, name string, ops []vfd.Op) {
	t.Helper()
	require.NotEmpty(t, ops, "%s was written", name)
	for i, op := range ops {
		assert.Contains(t, []vfd.OpKind{vfd.OpWrite, vfd.OpSync}, op.Kind, "%s: op %d: %v", name, i, op)
	}
}

// TestTransfersDropBehind: the partner copies and parity files of a
// checkpoint leave the page cache behind the write (vfd.DropCache), as do
// copies re-sent at recovery, while a data file restored from its copy
// stays cached for the restart to read (its writeback started piece by
// piece, so that its fsync does not write it all); with KeepCache
// nothing is dropped or hinted.
// The files hold the right bytes either way.
func TestTransfersDropBehind(t *testing.T) {
	log := &opLog{ops: map[string][]vfd.Op{}}
	d := vfd.NewFault(vfd.NewCore(), log)
	const size = 10*testPiece + 1234
	cl := newCluster(t, d, 4, 1, 4, func(int) int { return size })
	o := Options{BlockSize: testBlock, dropPiece: testPiece}

	t.Run("L2 checkpoint", func(t *testing.T) {
		log.reset()
		require.NoError(t, cl.run(func(c comm.Comm) error {
			_, err := CopyToPartner(c, cl.topo, o, cl.own(c.Rank()), Ref{cl.d, cl.copyPath(c.Rank())})
			return err
		}))
		for r := range cl.data {
			checkDropsBehind(t, cl.copyPath(r), log.of(cl.copyPath(r)), size)
			assert.True(t, bytes.Equal(cl.data[cl.topo.Left(r)], cl.read(cl.copyPath(r))), "copy held by %d", r)
		}
	})
	t.Run("L2 recovery", func(t *testing.T) {
		for _, f := range []string{cl.dataPath(1), cl.copyPath(1)} {
			require.NoError(t, cl.d.Remove(f))
		}
		log.reset()
		errs := make([]error, 4)
		require.NoError(t, cl.run(func(c comm.Comm) error {
			_, errs[c.Rank()] = RecoverPartner(c, cl.topo, o, cl.own(c.Rank()), cl.held(c.Rank()))
			return nil
		}))
		for r, err := range errs {
			require.NoError(t, err, "rank %d", r)
		}
		checkKeptHinted(t, "restored data of rank 1", log.of(cl.dataPath(1)+TmpSuffix), size)
		checkDropsBehind(t, "re-sent copy held by rank 1", log.of(cl.copyPath(1)+TmpSuffix), size)
		cl.assertAllGood()
		assert.True(t, bytes.Equal(cl.data[0], cl.read(cl.copyPath(1))))
	})
	t.Run("L3 checkpoint", func(t *testing.T) {
		log.reset()
		par := make([]Parity, 4)
		require.NoError(t, cl.run(func(c comm.Comm) error {
			var err error
			par[c.Rank()], err = EncodeGroup(c, cl.topo, o, 0, cl.own(c.Rank()), Ref{cl.d, cl.parityPath(c.Rank())})
			return err
		}))
		for r := range cl.data {
			// The parity sink hints and drops in quarter pieces (the
			// final sync has less writeback left to wait for), as far
			// behind the write as the other sinks.
			checkDropsBehindBy(t, cl.parityPath(r), log.of(cl.parityPath(r)), par[r].Size, testPiece/4, 4*dropWindow)
			b := cl.read(cl.parityPath(r))
			assert.Equal(t, par[r].Size, int64(len(b)))
		}
	})
	t.Run("KeepCache", func(t *testing.T) {
		log.reset()
		keep := o
		keep.KeepCache = true
		require.NoError(t, cl.run(func(c comm.Comm) error {
			r := c.Rank()
			if _, err := CopyToPartner(c, cl.topo, keep, cl.own(r), Ref{cl.d, path.Join(cl.nodeDir(r), "copy-kept")}); err != nil {
				return err
			}
			_, err := EncodeGroup(c, cl.topo, keep, 0, cl.own(r), Ref{cl.d, path.Join(cl.nodeDir(r), "parity-kept")})
			return err
		}))
		for r := range cl.data {
			noHints(t, "kept copy", log.of(path.Join(cl.nodeDir(r), "copy-kept")))
			noHints(t, "kept parity", log.of(path.Join(cl.nodeDir(r), "parity-kept")))
		}
	})
}
