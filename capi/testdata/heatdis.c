/*
 * heatdis: a 2-D heat-distribution solver checkpointed through FTI's C
 * API (ftigo's libftigo), for the capi tests and benchmark.
 *
 *   heatdis CONFIG OUTDIR NX ROWS ITERS CKPT_EVERY LEVELS [crash]
 *
 * Each rank owns ROWS rows of NX cells plus a halo row above and below;
 * the plate's top edge is held at 100, the others at 0. Every CKPT_EVERY
 * iterations the solver checkpoints, cycling through LEVELS (e.g. "1234";
 * "0" never checkpoints). It protects its grid and its iteration counter,
 * recovers them on a restart and ends by writing its rows to
 * OUTDIR/final-RANK.bin. With "crash" it ends without FTI_Finalize, as a
 * job that dies after its last checkpoint: every checkpoint is kept.
 * Progress goes to stdout as "EVENT ..." lines (flushed) for the test
 * that kills and relaunches it.
 */
#define _XOPEN_SOURCE 500
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "fti.h"

/* event prints one progress line for the test, in one write: ranks
 * share the launcher's output, and a line written in pieces interleaves
 * with other ranks' lines. */
static void event(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void event(int rank, const char *fmt, ...) {
    char line[512];
    int n = snprintf(line, sizeof line, "EVENT rank=%d ", rank);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    fwrite(line, 1, (size_t)n, stdout);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc != 8 && !(argc == 9 && strcmp(argv[8], "crash") == 0)) {
        fprintf(stderr, "usage: heatdis CONFIG OUTDIR NX ROWS ITERS CKPT_EVERY LEVELS [crash]\n");
        return 2;
    }
    const char *config = argv[1], *outdir = argv[2], *levels = argv[7];
    int nx = atoi(argv[3]), rows = atoi(argv[4]), iters = atoi(argv[5]), every = atoi(argv[6]);
    int nlevels = (int)strlen(levels);
    int crash = argc == 9;
    /* HEATDIS_PAUSE_MS: a pause before each checkpoint (the benchmark
     * gives C and Go the same idle time, whatever their compute speed). */
    const char *pause = getenv("HEATDIS_PAUSE_MS");
    int pauseMs = pause != NULL ? atoi(pause) : 0;

    /* HEATDIS_THREAD_MULTIPLE: ask for MPI_THREAD_MULTIPLE; FTI's codes
     * call plain MPI_Init, which grants MPI_THREAD_SINGLE. */
    int provided = -1;
    if (getenv("HEATDIS_THREAD_MULTIPLE") != NULL) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
        MPI_Query_thread(&provided);
    }
    int rc = FTI_Init(config, MPI_COMM_WORLD);
    if (rc != FTI_SCES) {
        fprintf(stderr, "FTI_Init returned %d\n", rc);
        MPI_Abort(MPI_COMM_WORLD, rc == FTI_NREC ? 20 : 21);
    }
    int rank, size;
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    MPI_Comm_size(FTI_COMM_WORLD, &size);
    event(rank, "pid pid=%d", (int)getpid());
    event(rank, "thread provided=%s", provided == MPI_THREAD_MULTIPLE ? "multiple"
                                      : provided == MPI_THREAD_SERIALIZED ? "serialized"
                                      : provided == MPI_THREAD_FUNNELED ? "funneled" : "single");

    size_t cells = (size_t)(rows + 2) * nx;
    double *h = malloc(cells * sizeof(double));
    double *g = malloc(cells * sizeof(double));
    int i = 0;
    if (h == NULL || g == NULL) MPI_Abort(FTI_COMM_WORLD, 22);
    for (size_t k = 0; k < cells; k++) h[k] = 0;
    if (rank == 0) {
        for (int x = 0; x < nx; x++) h[nx + x] = 100.0; /* the plate's top row */
    }
    if (FTI_Protect(0, &i, 1, FTI_INTG) != FTI_SCES || FTI_Protect(1, h, (int64_t)cells, FTI_DBLE) != FTI_SCES) {
        MPI_Abort(FTI_COMM_WORLD, 23);
    }
    int status = FTI_Status();
    int restartIter = -1;
    if (status != 0) {
        rc = FTI_Recover();
        if (rc != FTI_SCES) {
            fprintf(stderr, "rank %d: FTI_Recover returned %d\n", rank, rc);
            MPI_Abort(FTI_COMM_WORLD, 24);
        }
        restartIter = i;
    }
    event(rank, "start status=%d iter=%d", status, i);

    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    for (; i < iters; i++) {
        if (every > 0 && i > 0 && i % every == 0 && i != restartIter && levels[0] != '0') {
            int id = i / every;
            int level = levels[(id - 1) % nlevels] - '0';
            event(rank, "ckpt-begin id=%d level=%d iter=%d", id, level, i);
            if (pauseMs > 0) usleep((useconds_t)pauseMs * 1000);
            /* Time the checkpoint, not the wait for the slowest rank's last step. */
            MPI_Barrier(FTI_COMM_WORLD);
            double t0 = MPI_Wtime();
            rc = FTI_Checkpoint(id, level);
            double t = MPI_Wtime() - t0;
            event(rank, "ckpt-end id=%d level=%d rc=%d sec=%.6f", id, level, rc, t);
            if (rc != FTI_DONE) MPI_Abort(FTI_COMM_WORLD, 25);
        }
        /* Halo exchange: my first row goes up, my last row goes down. */
        MPI_Sendrecv(&h[nx], nx, MPI_DOUBLE, up, 1, &h[(size_t)(rows + 1) * nx], nx, MPI_DOUBLE, down, 1,
                     FTI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&h[(size_t)rows * nx], nx, MPI_DOUBLE, down, 2, &h[0], nx, MPI_DOUBLE, up, 2,
                     FTI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int r = 1; r <= rows; r++) {
            int grow = rank * rows + r - 1;
            for (int x = 0; x < nx; x++) {
                size_t k = (size_t)r * nx + x;
                if (grow == 0) {
                    g[k] = 100.0;
                } else if (grow == size * rows - 1 || x == 0 || x == nx - 1) {
                    g[k] = 0.0;
                } else {
                    g[k] = 0.25 * (h[k - nx] + h[k + nx] + h[k - 1] + h[k + 1]);
                }
            }
        }
        memcpy(&h[nx], &g[nx], (size_t)rows * nx * sizeof(double));
    }

    char path[4096];
    snprintf(path, sizeof path, "%s/final-%04d.bin", outdir, rank);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(&h[nx], sizeof(double), (size_t)rows * nx, f) != (size_t)rows * nx || fclose(f) != 0) {
        fprintf(stderr, "rank %d: cannot write %s\n", rank, path);
        MPI_Abort(FTI_COMM_WORLD, 26);
    }
    event(rank, "done iter=%d", i);
    if (!crash && FTI_Finalize() != FTI_SCES) MPI_Abort(MPI_COMM_WORLD, 27);
    free(h);
    free(g);
    MPI_Finalize();
    return 0;
}
