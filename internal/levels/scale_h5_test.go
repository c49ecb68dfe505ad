package levels

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/h5ckpt"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// h5Write returns a WriteFunc writing b as this rank's variable 1 of the
// HDF5 L4 file the level names (as the runtime's ckpt_io = 5 does).
func h5Write(c comm.Comm, id int64, b []byte) WriteFunc {
	return func(f vfd.File) (int64, Digest, bool, error) {
		hf, ok := f.(*H5File)
		if !ok {
			return 0, Digest{}, false, fmt.Errorf("got a %T", f)
		}
		var res h5ckpt.Result
		err := h5ckpt.Write(c, hf.Driver, hf.Path, h5ckpt.Meta{CkptID: id, Level: 4}, []fileformat.Var{{ID: 1, Name: "x", Type: fileformat.Uint8, Data: b}},
			nil, nil, h5ckpt.WithResult(&res), h5ckpt.WithHashWorkers(1))
		return int64(len(b)), Digest(res.TablesHash), true, err
	}
}

// h5RestartShares checkpoints 1 KiB per rank at L4 as one HDF5 file on n
// in-process ranks, then restarts and recovers it, and returns what each
// rank received and read from the global area while it recovered.
func h5RestartShares(t *testing.T, n int) []share {
	shares, err := h5Restart(t, n, nil)
	require.NoError(t, err)
	return shares
}

// h5Restart is h5RestartShares with damage applied to the HDF5 file (in
// d, at path) between the checkpoint and the restart; it returns the
// restart's error.
func h5Restart(t *testing.T, n int, damage func(d *vfd.Core, path string)) ([]share, error) {
	const size = 1024
	topo, err := partner.NewTopology(n, 4, 4, nil)
	require.NoError(t, err)
	d := vfd.NewCore()
	root := "/h5scale"
	global := make([]*vfd.Log, n)
	shares := make([]share, n)
	var mu sync.Mutex
	world := func(fn func(c comm.Comm, e *Engine) error) error {
		return comm.Run(n, func(c comm.Comm) error {
			global[c.Rank()] = vfd.NewLog(d, nil)
			env := &Env{Comm: c, Topo: topo, Rank: c.Rank(),
				Local:  Store{d, filepath.Join(root, "local", topo.NodeDir(topo.NodeOf(c.Rank())))},
				Global: Store{global[c.Rank()], filepath.Join(root, "global")},
				Meta:   Store{d, filepath.Join(root, "meta")}}
			e, err := NewEngine(env, Config{Levels: []Level{Local1{}, Global4H5{}}, Policy: keepAll{}, PartRanks: scalePartRanks})
			if err != nil {
				return err
			}
			defer e.Release()
			if err := e.Open(); err != nil {
				return err
			}
			return fn(c, e)
		}, comm.WithTimeout(5*time.Minute))
	}
	require.NoError(t, world(func(c comm.Comm, e *Engine) error {
		_, _, err := e.Checkpoint(1, L4, h5Write(c, 1, payload(c.Rank(), 1, size)[:size]))
		e.Wait()
		return err
	}))
	if damage != nil {
		damage(d, filepath.Join(root, "global", "ckpt00000001", H5Name))
	}
	err = world(func(c comm.Comm, e *Engine) error {
		ms := e.Committed()
		if len(ms) != 1 || ms[0].Level != L4 {
			return fmt.Errorf("%d committed", len(ms))
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		g := global[c.Rank()]
		before, r0 := comm.CountsOf(c), g.Stats().BytesRead
		src, err := e.RecoverOne(ms[0])
		if err != nil {
			return err
		}
		got := comm.CountsOf(c).Sub(before)
		// The rank's own bytes, read through the view as the runtime does.
		hf, err := h5ckpt.OpenView(src.Store.Driver, src.Store.Path(src.Name), c.Rank(), src.H5View)
		if err != nil {
			return err
		}
		defer hf.Close()
		b := make([]byte, size)
		if err := hf.ReadVar(c.Rank(), 1, b); err != nil {
			return err
		}
		if !bytes.Equal(b, payload(c.Rank(), 1, size)[:size]) {
			return fmt.Errorf("rank %d: data differs", c.Rank())
		}
		mu.Lock()
		shares[c.Rank()] = share{msgs: got.Received, bytes: got.BytesReceived, read: g.Stats().BytesRead - r0}
		mu.Unlock()
		return nil
	})
	return shares, err
}

// TestScaleH5RestartIsFlat recovers an HDF5 L4 checkpoint at 16 and 256
// ranks: a rank other than 0 must receive and read from the global area
// no more at 256 than 1.5 times what it did at 16 (it reads its own
// blocks and gets its own view; rank 0 alone parses and hashes the
// file's tables, which grow with the ranks).
func TestScaleH5RestartIsFlat(t *testing.T) {
	small, big := 16, 256
	a, b := h5RestartShares(t, small), h5RestartShares(t, big)
	most := func(s []share) (m share) {
		for _, x := range s[1:] {
			m.msgs, m.bytes, m.read = max(m.msgs, x.msgs), max(m.bytes, x.bytes), max(m.read, x.read)
		}
		return m
	}
	x, y := most(a), most(b)
	t.Logf("per rank (not rank 0), %d ranks: %+v; %d ranks: %+v; rank 0: %+v, %+v", small, x, big, y, a[0], b[0])
	assert.Positive(t, y.read, "the ranks read their blocks")
	assert.Positive(t, y.bytes, "the ranks received their views")
	assert.LessOrEqual(t, y.read, x.read*3/2+256, "bytes read from the global area per rank grow from %d at %d ranks to %d at %d", x.read, small, y.read, big)
	assert.LessOrEqual(t, y.bytes, x.bytes*3/2+256, "bytes received per rank grow from %d at %d ranks to %d at %d", x.bytes, small, y.bytes, big)
	assert.LessOrEqual(t, y.msgs, x.msgs*3/2+16, "messages received per rank grow from %d at %d ranks to %d at %d", x.msgs, small, y.msgs, big)
}

// TestH5RestartViewsFindDamage: with the views rank 0 hands out, a
// flipped byte of one rank's data and a missing file still fail the
// recovery on every rank, with the message of the rank that found it.
func TestH5RestartViewsFindDamage(t *testing.T) {
	_, err := h5Restart(t, 16, func(d *vfd.Core, p string) {
		b, err := vfd.ReadFile(d, p)
		require.NoError(t, err)
		// Rank 3's 1 KiB lies somewhere in the file: find it and flip a byte.
		i := bytes.Index(b, payload(3, 1, 1024)[:1024])
		require.Positive(t, i)
		b[i+10] ^= 1
		require.NoError(t, vfd.WriteFileAtomic(d, p, b))
	})
	// The agreed error carries rank 3's message to every rank.
	require.Error(t, err)
	assert.Contains(t, err.Error(), "failed on rank 3: L4: rank 3's file at offset")
	assert.Contains(t, err.Error(), ErrDigestMismatch.Error())

	_, err = h5Restart(t, 16, func(d *vfd.Core, p string) { require.NoError(t, d.Remove(p)) })
	require.Error(t, err)
	assert.Contains(t, err.Error(), ErrMissingFile.Error())
	assert.Contains(t, err.Error(), "found by rank 0")
}
