"""heat.py: heatdis.c's heat solver in numpy, checkpointed with ftigo.

    python3 heat.py CONFIG OUTDIR NX ROWS ITERS CKPT_EVERY LEVELS [crash]

The same grid, arithmetic order and protected variables as the C and
Fortran solvers (0: the iteration, int32; 1: ROWS+2 rows of NX float64),
so each restarts from the others' checkpoints bit-identically.
HEATDIS_PAUSE_MS pauses before each checkpoint, as in heatdis.c (the
benchmark: capi's BenchmarkCheckpointBindings). Under
mpirun it uses mpi4py's COMM_WORLD (FTIGO_NO_MPI4PY=1: none, ftigo
initialises MPI, for an MPI without mpi4py: then one rank only).
"""

import os
import sys
import time

import numpy as np

import ftigo


def event(rank, msg):
    sys.stdout.write("EVENT rank=%d %s\n" % (rank, msg))
    sys.stdout.flush()


def main():
    args = sys.argv[1:]
    if len(args) not in (7, 8):
        sys.exit("usage: heat.py CONFIG OUTDIR NX ROWS ITERS CKPT_EVERY LEVELS [crash]")
    config, outdir = args[0], args[1]
    nx, rows, iters, every = (int(a) for a in args[2:6])
    levels, crash = args[6], len(args) == 8
    comm = None
    if ftigo.library_mpi() != "none" and not os.environ.get("FTIGO_NO_MPI4PY"):
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    rt = ftigo.init(config, comm)
    if comm is not None:
        from mpi4py import MPI
        comm = MPI.Comm.f2py(rt.app_comm_f)
        rank, size = comm.Get_rank(), comm.Get_size()
    else:
        rank, size = 0, 1
    event(rank, "pid pid=%d" % os.getpid())
    it = np.zeros(1, dtype=np.int32)
    h = np.zeros((rows + 2, nx))
    if rank == 0:
        h[1, :] = 100.0
    rt.protect(0, it)
    rt.protect(1, h)
    status = rt.status
    restart = -1
    if status != 0:
        rt.recover()
        restart = int(it[0])
    event(rank, "start status=%d iter=%d" % (status, it[0]))
    g = np.zeros_like(h)
    up = rank - 1 if rank > 0 else None
    down = rank + 1 if rank < size - 1 else None
    grows = rank * rows + np.arange(rows)
    pause = int(os.environ.get("HEATDIS_PAUSE_MS") or 0) / 1000.0
    while it[0] < iters:
        i = int(it[0])
        if every > 0 and i > 0 and i % every == 0 and i != restart and levels[0] != "0":
            cid = i // every
            level = int(levels[(cid - 1) % len(levels)])
            event(rank, "ckpt-begin id=%d level=%d iter=%d" % (cid, level, i))
            if pause > 0:
                time.sleep(pause)
            if comm is not None:
                comm.Barrier()  # time the checkpoint, not the slowest rank's last step
            t0 = time.perf_counter()
            rt.checkpoint(cid, level)
            event(rank, "ckpt-end id=%d level=%d rc=1 sec=%.6f" % (cid, level, time.perf_counter() - t0))
        if comm is not None:
            from mpi4py import MPI
            comm.Sendrecv(h[1], dest=up if up is not None else MPI.PROC_NULL, sendtag=1,
                          recvbuf=h[rows + 1], source=down if down is not None else MPI.PROC_NULL, recvtag=1)
            comm.Sendrecv(h[rows], dest=down if down is not None else MPI.PROC_NULL, sendtag=2,
                          recvbuf=h[0], source=up if up is not None else MPI.PROC_NULL, recvtag=2)
        g[1:rows + 1, 1:nx - 1] = 0.25 * (h[0:rows, 1:nx - 1] + h[2:rows + 2, 1:nx - 1] + h[1:rows + 1, 0:nx - 2] + h[1:rows + 1, 2:nx])
        g[1:rows + 1, 0] = 0.0
        g[1:rows + 1, nx - 1] = 0.0
        g[1:rows + 1][grows == size * rows - 1] = 0.0
        g[1:rows + 1][grows == 0] = 100.0
        h[1:rows + 1] = g[1:rows + 1]
        it[0] += 1
    with open(os.path.join(outdir, "final-%04d.bin" % rank), "wb") as f:
        f.write(h[1:rows + 1].tobytes())
    event(rank, "done iter=%d" % it[0])
    if not crash:
        rt.finalize()
    elif comm is None:
        os._exit(0)  # as a job that dies after its last checkpoint


if __name__ == "__main__":
    main()
