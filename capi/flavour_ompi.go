//go:build mpi && !mpich

package main

// #cgo pkg-config: ompi
import "C"
