// Package mpitest runs a restart on another number of ranks under MPI
// (build tag mpi): a checkpoint written by 4 in-process ranks is
// recovered by the MPI processes, each seeing only its own node's
// directory of ckpt_dir as with node-local disks, so the data of the
// other nodes travels over MPI. TestAsyncUnderMPI checkpoints with the
// post-processing in the background (inline_lL = 0) while the solver
// calls collectives on the world, and restarts from the L4 result:
//
//	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
//	  go test -tags mpi -exec "mpirun.openmpi -np 3 -x GOMAXPROCS=1" ./ckpt/mpitest/
//
// API stability: none: mpitest holds tests run under mpirun.
package mpitest
