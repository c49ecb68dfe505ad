package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// readDir returns every file under dir by relative path.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
		return err
	}))
	return out
}

// f64bytes is the little-endian image of xs, as C holds it.
func f64bytes(xs []float64) []byte {
	b := make([]byte, 8*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

// TestInteropWithGo: C and Go work on the same files. The C heat solver
// checkpoints at L1, L2, L3 and dies; the ftigo command inspects and
// verifies that checkpoint, sees a deleted node, rebuilds it byte for
// byte and verifies again; a Go program (in-process ranks) recovers the
// C checkpoint with ckpt.Recover, finds exactly the state of an
// uninterrupted run at that iteration and checkpoints it again; the C
// solver restarts from the Go checkpoint and ends bit-identical to an
// uninterrupted run.
func TestInteropWithGo(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		np := f.np
		nx, rows := heatSize(np)
		root := t.TempDir()
		ref300, ref600 := filepath.Join(root, "ref300"), filepath.Join(root, "ref600")
		heat(t, f, np, writeConfig(t, ref300, np, ""), filepath.Join(ref300, "out"), nx, rows, 300, 0, "0")
		heat(t, f, np, writeConfig(t, ref600, np, ""), filepath.Join(ref600, "out"), nx, rows, 600, 0, "0")

		dir := filepath.Join(root, "run")
		cfgPath := writeConfig(t, dir, np, "")
		heat(t, f, np, cfgPath, filepath.Join(dir, "out1"), nx, rows, 350, 100, "123", "crash")

		code, out := exitCode(t, "inspect", cfgPath)
		require.Equal(t, 0, code, "%s", out)
		assert.Regexp(t, `(?m)^ckpt0+3\.manifest +3 +L3 +`+strconv.Itoa(np)+` +`+strconv.Itoa(np)+` .* complete$`, out)
		code, out = exitCode(t, "verify", dir) // a run directory holding config.fti
		require.Equal(t, 0, code, "%s", out)
		assert.Contains(t, out, fmt.Sprintf("id 3 L3: %d/%d files verified", 2*np, 2*np))

		lost := filepath.Join(dir, "local", fmt.Sprintf("node%04d", np-1))
		before := readDir(t, lost)
		require.Len(t, before, 2, "a data and a parity file")
		require.NoError(t, os.RemoveAll(lost))
		code, out = exitCode(t, "verify", cfgPath)
		require.Equal(t, 1, code, "%s", out)
		assert.Contains(t, out, "checkpoint file missing")
		code, out = exitCode(t, "rebuild", cfgPath)
		require.Equal(t, 0, code, "%s", out)
		code, out = exitCode(t, "verify", cfgPath)
		require.Equal(t, 0, code, "%s", out)
		after := readDir(t, lost)
		require.Equal(t, len(before), len(after))
		for name, b := range before {
			assert.True(t, bytes.Equal(b, after[name]), "%s rebuilt differently", name)
		}

		// Go recovers what C wrote, and writes the next checkpoint.
		cfg, err := ckpt.LoadConfig(vfd.Sec2{}, cfgPath)
		require.NoError(t, err)
		want300 := readAll(t, filepath.Join(ref300, "out"), np)
		require.NoError(t, comm.Run(np, func(c comm.Comm) error {
			rt, err := ckpt.Init(cfg, c)
			if err != nil {
				return err
			}
			defer endRuntime(rt) // the Go job stops without Finalize: its checkpoint stays
			if rt.Status() != ckpt.Restart {
				return fmt.Errorf("status %v, want restart", rt.Status())
			}
			iter := make([]int32, 1)
			grid := make([]float64, (rows+2)*nx)
			if err := ckpt.Protect(rt, 0, &iter); err != nil {
				return err
			}
			if err := ckpt.Protect(rt, 1, &grid); err != nil {
				return err
			}
			if err := rt.Recover(); err != nil {
				return err
			}
			r := c.Rank()
			if iter[0] != 300 {
				return fmt.Errorf("rank %d: iteration %d, want 300", r, iter[0])
			}
			if !bytes.Equal(f64bytes(grid[nx:(rows+1)*nx]), want300[r]) {
				return fmt.Errorf("rank %d: the grid Go recovered from the C checkpoint differs from the uninterrupted run at 300", r)
			}
			return rt.Checkpoint(40, 1)
		}))

		// C restarts from what Go wrote.
		out = heat(t, f, np, cfgPath, filepath.Join(dir, "out2"), nx, rows, 600, 100, "123")
		assert.Contains(t, out, "This is a restart. Recovering successfully from level 1 with Ckpt. 40 (ckpt")
		for r := 0; r < np; r++ {
			assert.Contains(t, out, fmt.Sprintf("EVENT rank=%d start status=1 iter=300", r))
		}
		want, got := readAll(t, filepath.Join(ref600, "out"), np), readAll(t, filepath.Join(dir, "out2"), np)
		for r := range want {
			assert.True(t, bytes.Equal(want[r], got[r]), "rank %d's final field differs from the uninterrupted run", r)
		}
	})
}
