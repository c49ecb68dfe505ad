package main

import (
	"bytes"
	"image/png"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/comm/commtest"
)

func TestDecomposeCoversEveryRowOnce(t *testing.T) {
	for _, tc := range []struct{ ny, size int }{{10, 1}, {10, 3}, {10, 4}, {7, 7}, {128, 4}, {129, 8}} {
		next := 0
		for r := 0; r < tc.size; r++ {
			row0, rows := Decompose(tc.ny, r, tc.size)
			assert.Equal(t, next, row0, "ny=%d size=%d rank=%d", tc.ny, tc.size, r)
			assert.GreaterOrEqual(t, rows, tc.ny/tc.size)
			next += rows
		}
		assert.Equal(t, tc.ny, next, "ny=%d size=%d", tc.ny, tc.size)
	}
}

// solve runs iters steps on n in-process ranks and returns the gathered field.
func solve(t *testing.T, nx, ny, n, iters int) []float64 {
	return solveWrapped(t, nx, ny, n, iters, func(c comm.Comm) comm.Comm { return c })
}

// solveWrapped is solve on communicators wrapped by wrap.
func solveWrapped(t *testing.T, nx, ny, n, iters int, wrap func(comm.Comm) comm.Comm) []float64 {
	t.Helper()
	var mu sync.Mutex
	var field []float64
	err := comm.Run(n, func(c comm.Comm) error {
		c = wrap(c)
		b, err := NewBlock(nx, ny, c.Rank(), c.Size())
		if err != nil {
			return err
		}
		for it := 0; it < iters; it++ {
			if err := b.Exchange(c); err != nil {
				return err
			}
			b.Step(0.24)
		}
		f, err := GatherField(c, b)
		if err != nil {
			return err
		}
		if f != nil {
			mu.Lock()
			field = f
			mu.Unlock()
		}
		return nil
	})
	require.NoError(t, err)
	require.Len(t, field, nx*ny)
	return field
}

func TestParallelSolveIsBitIdenticalToSerial(t *testing.T) {
	const nx, ny, iters = 24, 19, 60
	serial := solve(t, nx, ny, 1, iters)
	for _, n := range []int{2, 3, 4, 8} {
		par := solve(t, nx, ny, n, iters)
		for k := range serial {
			if math.Float64bits(serial[k]) != math.Float64bits(par[k]) {
				t.Fatalf("n=%d: cell %d differs: %v vs %v", n, k, serial[k], par[k])
			}
		}
	}
	// Boundaries stay fixed and heat has entered the interior.
	assert.Equal(t, TopTemp, serial[5])
	assert.Equal(t, BottomTemp, serial[(ny-1)*nx+5])
	assert.Equal(t, LeftTemp, serial[5*nx])
	assert.Equal(t, RightTemp, serial[5*nx+nx-1])
	assert.Greater(t, serial[1*nx+5], 0.0)
	assert.Less(t, serial[1*nx+5], TopTemp)
}

// TestExchangeOnTheFallbacks runs the solver on communicators that only
// offer the byte operations, so the halo exchange, the gather and the
// convergence check take comm's fallbacks: the field is the same bits.
func TestExchangeOnTheFallbacks(t *testing.T) {
	const nx, ny, iters = 17, 13, 30
	want := solve(t, nx, ny, 1, iters)
	for _, n := range []int{2, 3, 5} {
		got := solveWrapped(t, nx, ny, n, iters, commtest.BytesOnly)
		for k := range want {
			require.Equal(t, math.Float64bits(want[k]), math.Float64bits(got[k]), "n=%d cell %d", n, k)
		}
	}
}

// TestSolveConverges runs to a tolerance on 1 to 4 ranks: every rank of
// every run stops after the same number of steps, with the same largest
// change, and the fields are bit-identical.
func TestSolveConverges(t *testing.T) {
	const nx, ny, tol, maxIters = 12, 10, 1e-3, 100_000
	type outcome struct {
		steps  int
		change float64
		field  []float64
	}
	run := func(n int) outcome {
		var mu sync.Mutex
		var out outcome
		stepsSeen := map[int]bool{}
		err := comm.Run(n, func(c comm.Comm) error {
			b, err := NewBlock(nx, ny, c.Rank(), c.Size())
			if err != nil {
				return err
			}
			steps, change, err := b.Solve(c, 0.24, maxIters, tol)
			if err != nil {
				return err
			}
			f, err := GatherField(c, b)
			mu.Lock()
			defer mu.Unlock()
			stepsSeen[steps] = true
			out.steps, out.change = steps, change
			if f != nil {
				out.field = f
			}
			return err
		})
		require.NoError(t, err)
		require.Len(t, stepsSeen, 1, "n=%d: ranks stopped after different step counts %v", n, stepsSeen)
		return out
	}
	serial := run(1)
	require.Less(t, serial.steps, maxIters, "did not converge")
	require.Less(t, serial.change, tol)
	require.Greater(t, serial.change, 0.0)
	// One step fewer would not have converged: Solve stopped at the first step below tol.
	_, before, err := func() (int, float64, error) {
		b, err := NewBlock(nx, ny, 0, 1)
		require.NoError(t, err)
		return b.Solve(commtest.BytesOnly(comm.NewWorld(1)[0]), 0.24, serial.steps-1, 0)
	}()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, before, tol)
	for _, n := range []int{2, 3, 4} {
		par := run(n)
		assert.Equal(t, serial.steps, par.steps, "n=%d", n)
		assert.Equal(t, math.Float64bits(serial.change), math.Float64bits(par.change), "n=%d", n)
		for k := range serial.field {
			require.Equal(t, math.Float64bits(serial.field[k]), math.Float64bits(par.field[k]), "n=%d cell %d", n, k)
		}
	}
}

// TestGatherFieldChecksTheGrid: a rank whose band does not fit the plate
// is an error on every rank, not a wrong field.
func TestGatherFieldChecksTheGrid(t *testing.T) {
	err := comm.Run(3, func(c comm.Comm) error {
		b, err := NewBlock(8, 9, c.Rank(), c.Size())
		if err != nil {
			return err
		}
		if c.Rank() == 2 {
			b.Rows-- // a band one row short
		}
		_, err = GatherField(c, b)
		assert.ErrorIs(t, err, comm.ErrBadArgument, "rank %d", c.Rank())
		return nil
	}, comm.WithTimeout(10*time.Second))
	require.NoError(t, err)
}

func TestStepMatchesHandComputedStencil(t *testing.T) {
	b, err := NewBlock(3, 3, 0, 1)
	require.NoError(t, err)
	// Only the centre cell is interior: new = u + a*(100 + 0 + 75 + 25 - 4*0).
	delta := b.Step(0.25)
	assert.Equal(t, 50.0, b.U[2*3+1])
	assert.Equal(t, 50.0, delta)
}

func TestRenderPNG(t *testing.T) {
	field := []float64{0, 50, 100, 100, 50, 0}
	out, err := RenderPNG(field, 3, 2, 0, 100)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(out))
	require.NoError(t, err)
	scale := 384 / 3
	// Cell (0,0) is the coldest colour, cell (0,2) the hottest.
	r, g, bl, _ := img.At(12+scale/2, 12+scale/2).RGBA()
	c0 := colormap[0]
	assert.Equal(t, [3]uint32{uint32(c0.R), uint32(c0.G), uint32(c0.B)}, [3]uint32{r >> 8, g >> 8, bl >> 8})
	r, g, bl, _ = img.At(12+2*scale+scale/2, 12+scale/2).RGBA()
	c1 := colormap[len(colormap)-1]
	assert.Equal(t, [3]uint32{uint32(c1.R), uint32(c1.G), uint32(c1.B)}, [3]uint32{r >> 8, g >> 8, bl >> 8})
	_, err = RenderPNG(field, 4, 2, 0, 100)
	assert.Error(t, err)
}
