package dataset

import (
	"fmt"
	"slices"
)

// Dims returns a balanced grid of n ranks in nd dimensions, as
// MPI_Dims_create does: the extents multiply to n, are as close to each
// other as the prime factors of n allow, and do not increase.
func Dims(n, nd int) ([]int, error) {
	if n < 1 || nd < 1 || nd > MaxRank {
		return nil, fmt.Errorf("%w: %d ranks in %d dimensions", ErrInvalid, n, nd)
	}
	var primes []int
	m := n
	for f := 2; f*f <= m; f++ {
		for m%f == 0 {
			primes = append(primes, f)
			m /= f
		}
	}
	if m > 1 {
		primes = append(primes, m)
	}
	dims := make([]int, nd)
	for i := range dims {
		dims[i] = 1
	}
	// Largest factors first, each onto the currently smallest extent.
	for i := len(primes) - 1; i >= 0; i-- {
		k := 0
		for j := range dims {
			if dims[j] < dims[k] {
				k = j
			}
		}
		dims[k] *= primes[i]
	}
	slices.SortFunc(dims, func(a, b int) int { return b - a })
	return dims, nil
}

// Block returns the hyperslab of rank in the block decomposition of shape
// over grid, ranks numbered row-major over the grid (the last grid
// dimension varies fastest). Extents that do not divide evenly give the
// first shape[k] mod grid[k] ranks of dimension k one element more.
func Block(shape []int64, grid []int, rank int) (offset, count []int64, err error) {
	if len(shape) != len(grid) || len(shape) == 0 {
		return nil, nil, fmt.Errorf("%w: shape %v and grid %v", ErrInvalid, shape, grid)
	}
	total := 1
	for _, g := range grid {
		if g < 1 {
			return nil, nil, fmt.Errorf("%w: grid %v", ErrInvalid, grid)
		}
		total *= g
	}
	if rank < 0 || rank >= total {
		return nil, nil, fmt.Errorf("%w: rank %d of a %v grid", ErrInvalid, rank, grid)
	}
	offset = make([]int64, len(shape))
	count = make([]int64, len(shape))
	r := rank
	for k := len(shape) - 1; k >= 0; k-- {
		c := int64(r % grid[k])
		r /= grid[k]
		g := int64(grid[k])
		base, rem := shape[k]/g, shape[k]%g
		count[k] = base
		if c < rem {
			count[k]++
		}
		offset[k] = c*base + min(c, rem)
	}
	return offset, count, nil
}
