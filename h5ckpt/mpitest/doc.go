// Package mpitest runs the HDF5 checkpoint under MPI: real processes, each
// with its own handle on one shared file (build tag mpi):
//
//	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
//	  go test -tags mpi -exec "mpirun.openmpi -np 3 -x GOMAXPROCS=1" ./h5ckpt/mpitest/
//
// API stability: none: mpitest holds tests run under mpirun.
package mpitest
