//go:build fortran

// Package fortran is the Fortran module fti (fti.f90, FTI 1.6's Fortran
// interface over libftigo's C ABI) as a cgo package, so that a build of
// capi with the build tag fortran links the module's procedures into
// libftigo.so: Fortran codes then link with -lftigo alone. The compiled
// module (fti.mod) comes from compiling fti.f90 with the application's
// Fortran compiler (capi/build.sh does both). gen.go writes fti.f90.
package fortran

import "C"
