/*
 * snapshot: ftigo_set_snapshot (snapshot mode from C) through libftigo.
 *
 *   snapshot CONFIG write LEVEL
 *   snapshot CONFIG icp LEVEL
 *   snapshot CONFIG read
 *
 * write turns snapshot mode on before FTI_Init (config.fti leaves it
 * off), checks that a negative budget and a call after FTI_Init are
 * refused, protects an array, checkpoints it at LEVEL and overwrites it
 * at once, then finalizes (keep_last_ckpt = 1 keeps the checkpoint).
 * icp does the same with FTI_InitICP, FTI_AddVarICP and FTI_FinalizeICP,
 * overwriting the array right after FTI_AddVarICP and again after
 * FTI_FinalizeICP.
 * read restarts and checks that every element is the value at the call.
 * One "CHECK" line per check; the exit status is the number of failed
 * checks.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fti.h"
#include "ftigo.h"

#define N 65536

static int failures = 0;

static void check(const char *name, long long got, long long want) {
    int ok = got == want;
    if (!ok) failures++;
    printf("CHECK %s got=%lld want=%lld %s\n", name, got, want, ok ? "ok" : "FAIL");
    fflush(stdout);
}

static double value(int rank, int i) { return rank * 1e6 + i * 0.5; }

int main(int argc, char **argv) {
    int icp = argc > 2 && strcmp(argv[2], "icp") == 0;
    if (argc < 3 || ((strcmp(argv[2], "write") == 0 || icp) && argc != 4)) {
        fprintf(stderr, "usage: snapshot CONFIG write|icp LEVEL | snapshot CONFIG read\n");
        return 2;
    }
    int write = strcmp(argv[2], "write") == 0 || icp;
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    static double x[N];
    if (write) {
        check("set_snapshot/negative budget", ftigo_set_snapshot(1, -1), FTI_NSCS);
        check("set_snapshot", ftigo_set_snapshot(1, (int64_t)1 << 24), FTI_SCES);
    }
    check("Init", FTI_Init(argv[1], MPI_COMM_WORLD), FTI_SCES);
    check("set_snapshot/after Init", ftigo_set_snapshot(0, 0), FTI_NSCS);
    check("Protect", FTI_Protect(0, x, N, FTI_DBLE), FTI_SCES);
    if (write) {
        check("Status/fresh", FTI_Status(), 0);
        for (int i = 0; i < N; i++) x[i] = value(rank, i);
        if (icp) {
            check("InitICP", FTI_InitICP(1, atoi(argv[3]), 1), FTI_SCES);
            check("AddVarICP", FTI_AddVarICP(0), FTI_SCES);
            for (int i = 0; i < N; i++) x[i] = -2; /* after the add: never in the checkpoint */
            check("FinalizeICP", FTI_FinalizeICP(), FTI_SCES);
        } else {
            check("Checkpoint", FTI_Checkpoint(1, atoi(argv[3])), FTI_DONE);
        }
        for (int i = 0; i < N; i++) x[i] = -1; /* after the call: never in the checkpoint */
    } else {
        check("Status/restart", FTI_Status() != 0, 1);
        check("Recover", FTI_Recover(), FTI_SCES);
        int bad = 0;
        for (int i = 0; i < N; i++) bad += x[i] != value(rank, i);
        check("elements as at the call", bad, 0);
    }
    check("Finalize", FTI_Finalize(), FTI_SCES);
    MPI_Finalize();
    printf("FAILURES %d\n", failures);
    return failures;
}
