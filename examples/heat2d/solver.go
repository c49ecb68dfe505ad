package main

import (
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

// Exchange refreshes the halo rows from the neighbouring ranks. It moves
// rows up then down; the first and last ranks only receive or only send in
// each phase, so the chain cannot deadlock even with synchronous sends.
func (b *Block) Exchange(c comm.Comm) error {
	nx := b.NX
	up, down := b.rank-1, b.rank+1
	first := b.U[nx : 2*nx]
	last := b.U[b.Rows*nx : (b.Rows+1)*nx]
	topHalo := b.U[0:nx]
	botHalo := b.U[(b.Rows+1)*nx : (b.Rows+2)*nx]
	sendFirst := float64Bytes(first)
	sendLast := float64Bytes(last)
	recvTop := float64Bytes(topHalo)
	recvBot := float64Bytes(botHalo)
	// Phase 1: every rank sends its first row up and receives the next rank's first row.
	switch {
	case b.size == 1:
	case up < 0:
		if _, err := c.Recv(down, tagUp, recvBot); err != nil {
			return fmt.Errorf("halo from rank %d: %w", down, err)
		}
	case down >= b.size:
		if err := c.Send(up, tagUp, sendFirst); err != nil {
			return fmt.Errorf("halo to rank %d: %w", up, err)
		}
	default:
		if _, err := c.Sendrecv(sendFirst, up, tagUp, recvBot, down, tagUp); err != nil {
			return fmt.Errorf("halo exchange up: %w", err)
		}
	}
	// Phase 2: every rank sends its last row down and receives the previous rank's last row.
	switch {
	case b.size == 1:
	case down >= b.size:
		if _, err := c.Recv(up, tagDown, recvTop); err != nil {
			return fmt.Errorf("halo from rank %d: %w", up, err)
		}
	case up < 0:
		if err := c.Send(down, tagDown, sendLast); err != nil {
			return fmt.Errorf("halo to rank %d: %w", down, err)
		}
	default:
		if _, err := c.Sendrecv(sendLast, down, tagDown, recvTop, up, tagDown); err != nil {
			return fmt.Errorf("halo exchange down: %w", err)
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

// tagGather is the tag of the field gather to rank 0.
const tagGather = 103

// GatherField collects every rank's interior rows on rank 0 and returns
// the whole ny × nx field there (nil on other ranks). Ranks send their
// band to rank 0, which receives them in rank order.
func GatherField(c comm.Comm, b *Block) ([]float64, error) {
	if c.Rank() != 0 {
		if err := c.Send(0, tagGather, float64Bytes(b.Interior())); err != nil {
			return nil, fmt.Errorf("gather field: %w", err)
		}
		return nil, nil
	}
	field := make([]float64, b.NX*b.NY)
	copy(field, b.Interior())
	for r := 1; r < c.Size(); r++ {
		row0, rows := Decompose(b.NY, r, c.Size())
		part := field[row0*b.NX : (row0+rows)*b.NX]
		n, err := c.Recv(r, tagGather, float64Bytes(part))
		if err != nil {
			return nil, fmt.Errorf("gather field from rank %d: %w", r, err)
		}
		if n != len(part)*8 {
			return nil, fmt.Errorf("gather field: rank %d sent %d bytes, want %d", r, n, len(part)*8)
		}
	}
	return field, nil
}

// solveInProcess runs the solver on o.ranks goroutine ranks with no
// checkpoints and returns the final field: the reference every
// interrupted run must match bit for bit.
func solveInProcess(o *options) ([]float64, error) {
	var field []float64
	err := comm.Run(o.ranks, func(c comm.Comm) error {
		b, err := NewBlock(o.nx, o.ny, c.Rank(), c.Size())
		if err != nil {
			return err
		}
		for it := 0; it < o.iters; it++ {
			if err := b.Exchange(c); err != nil {
				return err
			}
			b.Step(o.alpha)
		}
		f, err := GatherField(c, b)
		if f != nil {
			field = f // only rank 0 gets a field
		}
		return err
	})
	return field, err
}
