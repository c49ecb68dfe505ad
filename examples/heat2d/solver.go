package main

import (
	"errors"
	"fmt"
	"math"

	"github.com/ftigo/ftigo/comm"
)

// Boundary temperatures of the plate. The edges are held fixed; the
// interior starts at Initial and diffuses towards equilibrium.
const (
	TopTemp    = 100.0
	BottomTemp = 0.0
	LeftTemp   = 75.0
	RightTemp  = 25.0
	Initial    = 0.0
)

// halo exchange tags
const (
	tagUp   = 101
	tagDown = 102
)

// Block is one rank's share of the nx × ny plate: a band of whole rows
// [Row0, Row0+Rows) stored with one halo row above and one below, so the
// buffer holds (Rows+2)·NX values. The buffer U is what the solver
// protects for checkpoints (without the halo rows' meaning: they are
// refreshed by the first exchange after a restart).
type Block struct {
	NX, NY     int
	Row0, Rows int
	U, next    []float64
	rank, size int
}

// Decompose returns the first row and row count of rank's band when ny
// rows are spread over size ranks: the first ny%size ranks take one row more.
func Decompose(ny, rank, size int) (row0, rows int) {
	base, extra := ny/size, ny%size
	rows = base
	if rank < extra {
		rows++
	}
	row0 = rank*base + min(rank, extra)
	return row0, rows
}

// NewBlock allocates rank's band and sets the initial field and the fixed
// boundary values.
func NewBlock(nx, ny, rank, size int) (*Block, error) {
	if nx < 3 || ny < 3 {
		return nil, fmt.Errorf("heat2d: grid %dx%d too small (need at least 3x3)", nx, ny)
	}
	if size > ny {
		return nil, fmt.Errorf("heat2d: %d ranks for %d rows: every rank needs at least one row", size, ny)
	}
	row0, rows := Decompose(ny, rank, size)
	b := &Block{NX: nx, NY: ny, Row0: row0, Rows: rows, rank: rank, size: size}
	b.U = make([]float64, (rows+2)*nx)
	b.next = make([]float64, (rows+2)*nx)
	for i := 0; i < rows; i++ {
		for j := 0; j < nx; j++ {
			b.U[(i+1)*nx+j] = boundaryOr(row0+i, j, nx, ny, Initial)
		}
	}
	copy(b.next, b.U)
	return b, nil
}

// boundaryOr returns the fixed temperature of global cell (gi, j) when it
// lies on the plate's edge, and v otherwise. Corners belong to the top and
// bottom edges.
func boundaryOr(gi, j, nx, ny int, v float64) float64 {
	switch {
	case gi == 0:
		return TopTemp
	case gi == ny-1:
		return BottomTemp
	case j == 0:
		return LeftTemp
	case j == nx-1:
		return RightTemp
	}
	return v
}

// Interior returns the band without its halo rows (a view into U).
func (b *Block) Interior() []float64 { return b.U[b.NX : (b.Rows+1)*b.NX] }

// Exchange refreshes the halo rows from the neighbouring ranks: it posts
// the receives of both halo rows and the sends of both edge rows
// (comm.Irecv, comm.Isend) and waits for all of them, which cannot
// deadlock whatever order the neighbours post in. The rows travel as
// float64 slices; the first and last ranks have one neighbour only.
func (b *Block) Exchange(c comm.Comm) error {
	nx := b.NX
	up, down := b.rank-1, b.rank+1
	var reqs [4]comm.Request
	var errs [4]error
	if up >= 0 {
		// The rank above sends its last row down into our top halo, and
		// receives our first row into its bottom halo.
		reqs[0], errs[0] = comm.Irecv(c, up, tagDown, b.U[0:nx])
		reqs[1], errs[1] = comm.Isend(c, up, tagUp, b.U[nx:2*nx])
	}
	if down < b.size {
		reqs[2], errs[2] = comm.Irecv(c, down, tagUp, b.U[(b.Rows+1)*nx:(b.Rows+2)*nx])
		reqs[3], errs[3] = comm.Isend(c, down, tagDown, b.U[b.Rows*nx:(b.Rows+1)*nx])
	}
	if err := errors.Join(errs[:]...); err != nil {
		return fmt.Errorf("halo exchange: %w", err)
	}
	if err := comm.WaitAll(reqs[:]...); err != nil {
		return fmt.Errorf("halo exchange: %w", err)
	}
	for _, k := range []int{0, 2} {
		if reqs[k] == nil {
			continue
		}
		if n, _ := reqs[k].Wait(); n != nx {
			return fmt.Errorf("halo exchange: a halo row of %d values, want %d", n, nx)
		}
	}
	return nil
}

// Step advances the band by one explicit Euler step of the heat equation
// with diffusion number alpha (stable for alpha ≤ 0.25) and returns the
// largest change of any cell. Halo rows must be current. The arithmetic
// is the same on every run, so results are bit-for-bit reproducible.
func (b *Block) Step(alpha float64) float64 {
	nx := b.NX
	var delta float64
	for i := 1; i <= b.Rows; i++ {
		gi := b.Row0 + i - 1
		row := i * nx
		if gi == 0 || gi == b.NY-1 {
			copy(b.next[row:row+nx], b.U[row:row+nx])
			continue
		}
		b.next[row] = b.U[row]
		b.next[row+nx-1] = b.U[row+nx-1]
		for j := 1; j < nx-1; j++ {
			k := row + j
			u := b.U[k]
			lap := b.U[k-nx] + b.U[k+nx] + b.U[k-1] + b.U[k+1] - 4*u
			v := u + alpha*lap
			b.next[k] = v
			if d := math.Abs(v - u); d > delta {
				delta = d
			}
		}
	}
	b.U, b.next = b.next, b.U
	return delta
}

// float64Bytes views a float64 slice as its little-endian bytes in memory.
func float64Bytes(v []float64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafeBytes(v)
}

// GatherField collects every rank's interior rows on rank 0 (comm.Gather:
// the bands, in rank order, are the plate's rows in order) and returns the
// whole ny × nx field there, nil on other ranks.
func GatherField(c comm.Comm, b *Block) ([]float64, error) {
	var field []float64
	if c.Rank() == 0 {
		field = make([]float64, b.NX*b.NY)
	}
	if err := comm.Gather(c, 0, b.Interior(), field); err != nil {
		return nil, fmt.Errorf("gather field: %w", err)
	}
	return field, nil
}

// MaxChange returns the largest change of any cell of the whole plate in
// the last step, given this rank's Step result: an Allreduce(Max) of a
// float64, which is exact, so every rank sees the same value and a
// convergence test stops every rank at the same iteration.
func MaxChange(c comm.Comm, local float64) (float64, error) {
	return comm.AllreduceValue(c, local, comm.Max)
}

// Solve advances the band by up to iters steps (Exchange, Step) and, when
// tol > 0, stops after the first step whose largest change over the whole
// plate ([MaxChange]) is below tol. It returns the number of steps taken
// and the last step's largest change over the plate (0 when no step ran).
func (b *Block) Solve(c comm.Comm, alpha float64, iters int, tol float64) (steps int, change float64, err error) {
	for steps < iters {
		if err := b.Exchange(c); err != nil {
			return steps, change, err
		}
		local := b.Step(alpha)
		steps++
		if change, err = MaxChange(c, local); err != nil {
			return steps, change, fmt.Errorf("step %d: %w", steps, err)
		}
		if tol > 0 && change < tol {
			break
		}
	}
	return steps, change, nil
}

// solveInProcess runs the solver on the job's application ranks
// (o.ranks, less the heads with -heads) as goroutines with no
// checkpoints and returns the final field: the reference every
// interrupted run must match bit for bit.
func solveInProcess(o *options) ([]float64, error) {
	var field []float64
	err := comm.Run(o.appRanks(o.ranks, o.nodes), func(c comm.Comm) error {
		b, err := NewBlock(o.nx, o.ny, c.Rank(), c.Size())
		if err != nil {
			return err
		}
		if _, _, err := b.Solve(c, o.alpha, o.iters, 0); err != nil {
			return err
		}
		f, err := GatherField(c, b)
		if f != nil {
			field = f // only rank 0 gets a field
		}
		return err
	})
	return field, err
}
