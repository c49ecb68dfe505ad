//go:build mpi && mpich

package main

// #cgo pkg-config: mpich
import "C"

// mpiFlavour is the MPI implementation the build tags select.
const mpiFlavour = "MPICH"
