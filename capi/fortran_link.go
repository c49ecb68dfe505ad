//go:build fortran && (mpi || serial)

package main

// With the build tag fortran, libftigo.so holds the Fortran module fti's
// procedures too (capi/fortran, compiled by cgo's Fortran compiler).
import _ "github.com/ftigo/ftigo/capi/fortran"
