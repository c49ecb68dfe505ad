// Package mpitest runs ckpt's restarts under MPI (build tag mpi). It
// holds tests only.
//
// A checkpoint written by 4 in-process ranks is recovered by the MPI
// processes on another number of ranks. Each process sees only its own
// node's directory of ckpt_dir, as with node-local disks, so the data of
// the other nodes travels over MPI. TestAsyncUnderMPI checkpoints with
// the post-processing in the background (inline_lL = 0) while the solver
// calls collectives on the world, and restarts from the L4 result:
//
//	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
//	  go test -tags mpi -exec "mpirun.openmpi -np 3 -x GOMAXPROCS=1" ./ckpt/mpitest/
//
// The head tests run with head = 1: each node holds a head and an
// application rank, and every process sees only its node's directory.
//
//   - TestHeadsUnderMPI has the heads raise checkpoints at L2, L3 and L4.
//   - TestHeadsICPUnderMPI does it with incremental checkpoints, and with
//     a variable missing at FinalizeICP, which commits nothing.
//   - TestHeadsReplacementUnderMPI relaunches onto replacement nodes
//     (node directories deleted). The data comes back from the partner
//     copies or the parity, bit for bit, and the relaunched heads go on
//     raising checkpoints.
//
// They need an even number of processes, at least 4 (under MPICH:
// mpirun.mpich, -tags 'mpi mpich'):
//
//	go test -tags mpi -run 'TestHeads.*UnderMPI' -exec "mpirun.openmpi -np 4 -x GOMAXPROCS=1" ./ckpt/mpitest/
//
// API stability: none: mpitest holds tests run under mpirun.
package mpitest
