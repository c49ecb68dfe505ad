/*
 * staging: FTI's staging calls through libftigo.
 *
 *   staging CONFIG DESTDIR
 *
 * CONFIG has enable_staging = 1. Each rank writes a file into the staging
 * directory, sends it to DESTDIR/rank<r> with FTI_SendFile, polls
 * FTI_GetStageStatus until the copy is done and checks the copy; a
 * missing source ends in FTI_SI_FAIL; a buffer too small for the
 * directory name is refused. One "CHECK" line per check; the exit status
 * is the number of failed checks.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fti.h"

static int failures = 0;

static void check(const char *name, long long got, long long want) {
    int ok = got == want;
    if (!ok) failures++;
    printf("CHECK %s got=%lld want=%lld %s\n", name, got, want, ok ? "ok" : "FAIL");
    fflush(stdout);
}

static int wait_status(int id) {
    for (int i = 0; i < 20000; i++) {
        int st = FTI_GetStageStatus(id);
        if (st != FTI_SI_PEND && st != FTI_SI_ACTV) return st;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: staging CONFIG DESTDIR\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check("Init", FTI_Init(argv[1], MPI_COMM_WORLD), FTI_SCES);

    char tiny[4];
    check("GetStageDir/small buffer", FTI_GetStageDir(tiny, sizeof tiny), FTI_NSCS);
    char dir[1024];
    check("GetStageDir", FTI_GetStageDir(dir, sizeof dir), FTI_SCES);

    char src[1200], dst[1200], want[64];
    snprintf(src, sizeof src, "%s/out%d", dir, rank);
    snprintf(dst, sizeof dst, "%s/rank%d", argv[2], rank);
    snprintf(want, sizeof want, "staged by rank %d\n", rank);
    FILE *f = fopen(src, "w");
    check("fopen in the staging dir", f != NULL, 1);
    if (f) {
        fputs(want, f);
        fclose(f);
    }
    check("GetStageStatus/unknown", FTI_GetStageStatus(42), FTI_SI_NINI);
    int id = FTI_SendFile(src, dst);
    check("SendFile id", id >= 0, 1);
    check("SendFile done", wait_status(id), FTI_SI_SCES);
    char got[64] = {0};
    FILE *g = fopen(dst, "r");
    check("copy exists", g != NULL, 1);
    if (g) {
        if (fgets(got, sizeof got, g) == NULL) got[0] = 0;
        fclose(g);
    }
    check("copy content", strcmp(got, want), 0);

    char missing[1200];
    snprintf(missing, sizeof missing, "%s/no-such-file-%d", dir, rank);
    int bad = FTI_SendFile(missing, dst);
    check("SendFile/missing id", bad > id, 1);
    check("SendFile/missing fails", wait_status(bad), FTI_SI_FAIL);
    check("SendFile/NULL", FTI_SendFile(NULL, dst), FTI_NSCS);

    check("Finalize", FTI_Finalize(), FTI_SCES);
    check("staging dir removed", access(src, F_OK), -1);
    MPI_Finalize();
    printf("FAILURES %d\n", failures);
    return failures;
}
