package ckpt

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// dcpConfig is a 4-node, one-group configuration with dCP on.
func dcpConfig(root string, n int) Config {
	cfg := testConfig(root, 1)
	if n > 1 {
		cfg.GroupSize = n
	}
	cfg.EnableDCP = true
	cfg.DCPBlockSize = 4096
	cfg.DCPStackSize = 10
	return cfg
}

// shares are FTI's dCP test's split of a rank's data over 5 buffers (%).
var shares = []int{20, 35, 15, 5, 25}

// dcpBuffers is a rank's 5 buffers of size bytes in total.
func dcpBuffers(rank, size int) [][]byte {
	r := rand.New(rand.NewPCG(uint64(rank), 77))
	out := make([][]byte, len(shares))
	for i, s := range shares {
		out[i] = make([]byte, size*s/100)
		for j := range out[i] {
			out[i][j] = byte(r.Uint32())
		}
	}
	return out
}

// touch changes a contiguous range of share of each buffer at a random
// offset (FTI's xor_data) and returns the bytes of the dCP blocks it
// changed: what a differential checkpoint must write.
func touch(bufs [][]byte, share float64, bs int, r *rand.Rand) int64 {
	var want int64
	for _, b := range bufs {
		n := int(share * float64(len(b)))
		if n == 0 {
			continue
		}
		off := r.IntN(len(b) - n + 1)
		for i := off; i < off+n; i++ {
			b[i] ^= 0x5a
		}
		first, last := off/bs, (off+n-1)/bs
		want += int64(min((last+1)*bs, len(b)) - first*bs)
	}
	return want
}

// TestDCPShareEveryLevel is FTI's dCP "standard" test at every level: with
// a known share of each buffer changed between checkpoints, the share of
// the data a differential checkpoint writes is that share, up to the
// blocks the changed ranges only partly cover (FTI accepts 2 points more);
// exactly the bytes of the changed blocks. The delta files, the L2 copies,
// the L3 parity and the L4 container grow with what changed, not with the
// data, and the restart gives the last state bit for bit.
func TestDCPShareEveryLevel(t *testing.T) {
	const n = 4
	size, bs := 4<<20, 4096 // FTI's test's block size
	if raceEnabled {
		size, bs = 1<<20, 1024 // the same shares of partial blocks, fewer bytes
	}
	for lvl := 1; lvl <= 4; lvl++ {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			root := t.TempDir()
			cfg := dcpConfig(root, n)
			cfg.DCPBlockSize = bs
			core, logs := observer.New(zapcore.InfoLevel)
			var mu sync.Mutex
			final := map[int][][]byte{}
			err := world(t, n, cfg, []Option{WithLogger(zap.New(core))}, func(r *Runtime) error {
				bufs := dcpBuffers(r.c.Rank(), size)
				for i := range bufs {
					if err := Protect(r, i, &bufs[i]); err != nil {
						return err
					}
				}
				rnd := rand.New(rand.NewPCG(uint64(r.c.Rank()), uint64(lvl)))
				// The first differential request is full: nothing to build on.
				if err := r.Checkpoint(1, lvl+4); err != nil {
					return err
				}
				if r.last.DCP != nil || r.last.Layers() != 1 {
					return fmt.Errorf("the first checkpoint is differential: %+v", r.last.DCP)
				}
				for i, share := range []float64{0, 0.1, 0.37, 0.02, 0.5, 1} {
					want := touch(bufs, share, cfg.DCPBlockSize, rnd)
					if err := r.Checkpoint(int64(i+2), lvl+4); err != nil {
						return err
					}
					m := r.last
					if m.DCP == nil || m.Layers() != i+2 || m.Level != levels.ID(lvl) {
						return fmt.Errorf("checkpoint %d: not a delta on the chain (%+v)", i+2, m.DCP)
					}
					// The share over every rank, from the manifest; this
					// rank's bytes, from its delta file.
					got := m.DCP.Share()
					if got < share-1e-9 || got > share+0.02 {
						return fmt.Errorf("share %.4f: written share %.4f (FTI accepts +2 points)", share, got)
					}
					if err := checkDeltaFiles(cfg, m, r.c.Rank(), want, size, bs); err != nil {
						return fmt.Errorf("share %.2f: %w", share, err)
					}
				}
				mu.Lock()
				final[r.c.Rank()] = cloneBufs(bufs)
				mu.Unlock()
				return nil
			})
			require.NoError(t, err)
			// FTI's line, once per checkpoint.
			lines := logs.FilterMessageSnippet("dCP share: ").All()
			require.Len(t, lines, 7)
			assert.Contains(t, lines[0].Message, "dCP share: 100.00%")
			assert.Contains(t, lines[1].Message, "Total dCP update: 0.00 MB, dCP share: 0.00%")

			// Restart from the newest delta, bit for bit.
			require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
				if r.recoveredManifest().DCP == nil || r.recoveredManifest().ID != 7 {
					return fmt.Errorf("restarted from %+v", r.Recovered())
				}
				bufs := make([][]byte, len(shares))
				for i := range bufs {
					if err := Protect(r, i, &bufs[i]); err != nil {
						return err
					}
				}
				if err := r.Recover(); err != nil {
					return err
				}
				for i := range bufs {
					if !bytes.Equal(bufs[i], final[r.c.Rank()][i]) {
						return fmt.Errorf("rank %d buffer %d differs", r.c.Rank(), i)
					}
				}
				return nil
			}))
		})
	}
}

// openDeltaFile returns the bytes of blocks a delta file stores.
func openDeltaFile(f vfd.File) (int64, error) {
	d, err := fileformat.OpenDelta(f)
	if err != nil {
		return 0, err
	}
	if err := d.Verify(); err != nil {
		return 0, err
	}
	return d.Written(), nil
}

func cloneBufs(b [][]byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = bytes.Clone(b[i])
	}
	return out
}

// checkDeltaFiles checks the files of differential checkpoint m on rank
// rank: its delta holds exactly want bytes of blocks, and the redundancy
// its level adds is sized by the delta, not by the data.
func checkDeltaFiles(cfg Config, m *levels.Manifest, rank int, want int64, size, bs int) error {
	f, ok := m.DataFile(rank)
	if !ok {
		return errors.New("no data entry")
	}
	var delta vfd.File
	var err error
	if f.Attrs[levels.AttrInContainer] != "" {
		delta, err = levels.OpenTask(levels.Store{Driver: vfd.Sec2{}, Dir: cfg.GlobalDir(m.Run)}, f)
	} else {
		delta, err = vfd.OpenRead(vfd.Sec2{}, filepath.Join(cfg.NodeDir(rank, m.Run), f.Name))
	}
	if err != nil {
		return err
	}
	defer delta.Close()
	d, err := openDeltaFile(delta)
	if err != nil {
		return err
	}
	if d != want {
		return fmt.Errorf("rank %d's delta stores %d bytes of blocks, %d changed", rank, d, want)
	}
	// Metadata: the image's block hashes (32 B per block) and a few
	// hundred bytes.
	limit := want + int64(size/bs*32) + 8<<10
	if f.Size > limit {
		return fmt.Errorf("rank %d's delta file is %d bytes for %d changed", rank, f.Size, want)
	}
	var largest, sum int64
	for r := range m.Ranks {
		df, _ := m.DataFile(r)
		largest = max(largest, df.Size)
		sum += df.Size
	}
	held, err := m.RankFiles(rank)
	if err != nil {
		return err
	}
	for _, h := range held {
		switch h.Role {
		case levels.RolePartner:
			// The copy of the left neighbour's delta: only its bytes travel.
			if df, _ := m.DataFile(h.Of); h.Size != df.Size {
				return fmt.Errorf("rank %d holds a copy of %d bytes of a %d-byte delta", rank, h.Size, df.Size)
			}
		case levels.RoleParity:
			// The parity of the group's deltas: as large as the largest, plus a header.
			if h.Size > largest+4<<10 || h.Size < largest {
				return fmt.Errorf("rank %d holds parity of %d bytes for deltas of at most %d", rank, h.Size, largest)
			}
		case levels.RoleContainer:
			// The container holds the deltas, each in a chunk sized to it.
			if h.Size > sum+int64(m.Ranks)*8<<10 {
				return fmt.Errorf("the L4 container is %d bytes for deltas of %d bytes", h.Size, sum)
			}
		}
	}
	return nil
}

// TestDCPVariablesChange: variables grow, shrink, change type, appear and
// disappear between differential checkpoints; every checkpoint restores
// bit for bit (each restart reads the newest delta's chain).
func TestDCPVariablesChange(t *testing.T) {
	for _, lvl := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
			const n = 2
			root := t.TempDir()
			cfg := dcpConfig(root, n)
			cfg.DCPBlockSize = 1024
			type step struct {
				a      []uint32 // id 1
				b      []byte   // id 2, absent when nil
				bAsI64 bool     // id 2 protected as []int64 (type change)
				c      []uint16 // id 3, absent when nil
			}
			mk := func(rank, k int) step {
				a := make([]uint32, 3000+1000*(k%3)) // grows, grows, shrinks ...
				for i := range a {
					a[i] = uint32(rank*100000 + i)
				}
				a[k] ^= 0xffff // one more block changed each step
				s := step{a: a}
				if k != 2 {
					s.b = bytes.Repeat([]byte{byte(rank), 1, 2, 3, 4, 5, 6, byte(k / 4)}, 300)
					s.bAsI64 = k >= 3
				}
				if k >= 1 && k != 3 {
					s.c = make([]uint16, 700*k)
					for i := range s.c {
						s.c[i] = uint16(i * rank)
					}
				}
				return s
			}
			protect := func(r *Runtime, s *step, bi64 *[]int64) error {
				r.Unprotect(2)
				r.Unprotect(3)
				errs := []error{Protect(r, 1, &s.a)}
				if s.b != nil {
					if s.bAsI64 {
						*bi64 = asInt64(s.b)
						errs = append(errs, Protect(r, 2, bi64))
					} else {
						errs = append(errs, Protect(r, 2, &s.b))
					}
				}
				if s.c != nil {
					errs = append(errs, Protect(r, 3, &s.c))
				}
				return errors.Join(errs...)
			}
			for k := 0; k < 6; k++ {
				// Each step restarts from the previous one and checkpoints the next.
				require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
					rank := r.c.Rank()
					if k > 0 {
						want := mk(rank, k-1)
						var got step
						got.b, got.c = []byte{}, []uint16{}
						var bi64 []int64
						got.bAsI64 = want.bAsI64
						if want.b == nil {
							got.b = nil
						}
						if want.c == nil {
							got.c = nil
						}
						if err := protect(r, &got, &bi64); err != nil {
							return err
						}
						if err := r.Recover(); err != nil {
							return err
						}
						if got.bAsI64 {
							got.b = fromInt64(bi64)
						}
						if !assert.ObjectsAreEqual(want.a, got.a) || !bytes.Equal(want.b, got.b) || !assert.ObjectsAreEqual(want.c, got.c) {
							return fmt.Errorf("step %d rank %d: restored state differs", k-1, rank)
						}
						if r.recoveredManifest().DCP == nil && k > 1 {
							return fmt.Errorf("step %d: restarted from a full checkpoint", k-1)
						}
					}
					s := mk(rank, k)
					var bi64 []int64
					if err := protect(r, &s, &bi64); err != nil {
						return err
					}
					return r.Checkpoint(int64(k+1), lvl+4)
				}))
			}
		})
	}
}

func asInt64(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		for j := 0; j < 8; j++ {
			out[i] |= int64(b[8*i+j]) << (8 * j)
		}
	}
	return out
}

func fromInt64(x []int64) []byte {
	out := make([]byte, 8*len(x))
	for i, v := range x {
		for j := 0; j < 8; j++ {
			out[8*i+j] = byte(v >> (8 * j))
		}
	}
	return out
}

// TestDCPStackAndRetention: chains stop at dcp_stack_size (the next
// checkpoint is full), a superseding full checkpoint drops the chain, the
// kept checkpoints' chains are never deleted, and differential requests
// at another level build on that level only.
func TestDCPStackAndRetention(t *testing.T) {
	const n = 2
	root := t.TempDir()
	cfg := dcpConfig(root, n)
	cfg.DCPStackSize = 3
	require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
		x := make([]byte, 64<<10)
		if err := Protect(r, 0, &x); err != nil {
			return err
		}
		layers := func() []int {
			var out []int
			for _, m := range r.eng.Committed() {
				out = append(out, m.Layers())
			}
			return out
		}
		expect := func(step string, want ...int) error {
			if got := layers(); !assert.ObjectsAreEqual(want, got) {
				return fmt.Errorf("%s: layers of the committed checkpoints %v, want %v", step, got, want)
			}
			return nil
		}
		id := int64(0)
		ck := func(level int) error {
			id++
			x[int(id)*5000%len(x)]++
			return r.Checkpoint(id, level)
		}
		for i, s := range []struct {
			level int
			want  []int
		}{
			{5, []int{1}},       // full base: nothing to build on
			{5, []int{1, 2}},    // delta; FTI's rule would drop the base, the delta needs it
			{5, []int{1, 2, 3}}, // delta: the chain has dcp_stack_size layers
			{5, []int{1}},       // full again; the old chain is dropped
			{5, []int{1, 2}},    // delta
			{8, []int{1}},       // L4: no L4 to build on, full; it supersedes the L1 chain
			{5, []int{1, 1}},    // L1: nothing at L1 left, full
			{8, []int{1, 2}},    // L4 delta on the L4; the L1 goes, the L4 base stays
			{1, []int{1, 2, 1}}, // a plain L1 checkpoint is full
			{4, []int{1}},       // a full L4 supersedes everything
		} {
			if err := ck(s.level); err != nil {
				return err
			}
			if err := expect(fmt.Sprintf("step %d (level %d)", i+1, s.level), s.want...); err != nil {
				return err
			}
		}
		return nil
	}))
}

// TestDCPAfterRestart: a restart continues the chain it recovered (the
// first differential checkpoint builds on it); with another
// dcp_block_size it starts a new chain with a full checkpoint; without
// enable_dcp the chain still restores.
func TestDCPAfterRestart(t *testing.T) {
	const n = 2
	root := t.TempDir()
	cfg := dcpConfig(root, n)
	run := func(cfg Config, want int, level int) {
		t.Helper()
		require.NoError(t, world(t, n, cfg, nil, func(r *Runtime) error {
			var x []uint64
			ver := []int64{0}
			if err := errors.Join(Protect(r, 0, &x), Protect(r, 1, &ver)); err != nil {
				return err
			}
			if r.Status() != Fresh {
				if err := r.Recover(); err != nil {
					return err
				}
				if !assert.ObjectsAreEqual(dversion(r.c.Rank(), int(ver[0])), x) {
					return fmt.Errorf("rank %d: not version %d", r.c.Rank(), ver[0])
				}
			}
			v := int(ver[0]) + 1
			x, ver[0] = dversion(r.c.Rank(), v), int64(v)
			if err := r.Checkpoint(int64(v), level); err != nil {
				return err
			}
			if got := r.last.Layers(); got != want {
				return fmt.Errorf("version %d: %d layers, want %d", v, got, want)
			}
			return nil
		}))
	}
	run(cfg, 1, 5) // full
	run(cfg, 2, 5) // a delta on the recovered checkpoint
	run(cfg, 3, 5)
	cfg.DCPBlockSize = 1024
	run(cfg, 1, 5) // another block size: full
	run(cfg, 2, 5)
	cfg.EnableDCP = false
	run(cfg, 1, 1) // restores the chain, then a plain checkpoint
}

// TestDCPRecoverInRun: right after a differential checkpoint, Recover,
// RecoverVar, StoredSize and Realloc read its image through the chain,
// in the same run (FTI's Recover reads the newest checkpoint).
func TestDCPRecoverInRun(t *testing.T) {
	cfg := dcpConfig(t.TempDir(), 2)
	cfg.DCPBlockSize = 1024
	require.NoError(t, world(t, 2, cfg, nil, func(r *Runtime) error {
		a := make([]int32, 5000)
		b := []float64{1, 2, 3}
		if err := errors.Join(Protect(r, 1, &a), Protect(r, 2, &b)); err != nil {
			return err
		}
		if err := r.Checkpoint(1, 5); err != nil {
			return err
		}
		a[4000] = 7
		b = append(b, 4) // grows
		if err := r.Checkpoint(2, 5); err != nil {
			return err
		}
		if r.last.DCP == nil {
			return errors.New("not differential")
		}
		a[4000], b = 0, nil
		if n, err := r.StoredSize(2); err != nil || n != 32 {
			return fmt.Errorf("stored size %d, %v", n, err)
		}
		if err := r.Realloc(2); err != nil || len(b) != 4 {
			return fmt.Errorf("realloc: %d, %v", len(b), err)
		}
		if err := r.RecoverVar(1); err != nil || a[4000] != 7 {
			return fmt.Errorf("recover var: %d, %v", a[4000], err)
		}
		if err := r.Recover(); err != nil {
			return err
		}
		if !assert.ObjectsAreEqual([]float64{1, 2, 3, 4}, b) || a[4000] != 7 {
			return fmt.Errorf("recovered %v %d", b, a[4000])
		}
		return nil
	}))
}
