//go:build mpi && !mpich

package main

// #cgo pkg-config: ompi
import "C"

// mpiFlavour is the MPI implementation the build tags select.
const mpiFlavour = "Open MPI"
