//go:build !mpi

package main

// mpiLibrary returns "": this binary was built without the mpi tag.
func mpiLibrary() string { return "" }
