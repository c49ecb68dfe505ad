//go:build mpi

package mpitest

import "math"

func mathBits(x float64) uint64 { return math.Float64bits(x) }
