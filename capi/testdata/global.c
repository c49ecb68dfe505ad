/*
 * global: global datasets over ftigo's libftigo, restarted on another
 * number of ranks.
 *
 *   global CONFIG write    checkpoint at L4 on N ranks, then exit without FTI_Finalize
 *   global CONFIG reshape  restart on M ranks (status 1): recover from L4, check every
 *                          element, take a level-9 (HDF5 single file) checkpoint, exit
 *                          without FTI_Finalize
 *   global CONFIG vpr      restart on K ranks (status 3) from the level-9 file with
 *                          FTI_RecoverVar, check every element, FTI_Finalize
 *
 * Three global datasets: "fields/temperature" (2-D double, rows split
 * unevenly), "counts" (3-D int, split along the middle dimension) and
 * "iteration" (one long that rank 0 maps, the others map 0 elements).
 * Every element's bits are a hash of its global index, NaN patterns
 * included, so a restored element is right only if every bit is. A
 * restart learns the datasets' shapes with FTI_RecoverDatasetDimension
 * and FTI_GetDatasetSpan, sizes "counts" with FTI_GetStoredSize and
 * FTI_Realloc. One "CHECK name got=X want=Y ok|FAIL" line per check; the
 * exit status is the number of failures.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fti.h"

enum { NY = 13, NX = 7, C0 = 3, C1 = 10, C2 = 4 };
enum { DS_TEMP = 3, DS_COUNTS = 8, DS_ITER = 1 };
enum { V_TEMP = 0, V_COUNTS = 1, V_ITER = 2 };

static int failures = 0;
static int rank, size;

static void check(const char *name, long long got, long long want) {
    int ok = got == want;
    if (!ok) failures++;
    printf("CHECK %s got=%lld want=%lld %s\n", name, got, want, ok ? "ok" : "FAIL");
    fflush(stdout);
}

/* bits is splitmix64 of a dataset's seed and an element's global index
 * (the Go test computes the same to read the HDF5 file). */
static uint64_t bits(uint64_t seed, uint64_t i) {
    uint64_t z = seed * 0x100000000ULL + i + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* part returns the first index and the length of this rank's share of n. */
static void part(int n, int64_t *first, int64_t *len) {
    *first = (int64_t)n * rank / size;
    *len = (int64_t)n * (rank + 1) / size - *first;
}

static void fill(double *t, int64_t r0, int64_t rows, int32_t *c, int64_t m0, int64_t mid, long *it) {
    for (int64_t i = 0; i < rows * NX; i++) {
        uint64_t b = bits(1, (uint64_t)(r0 * NX + i));
        memcpy(&t[i], &b, sizeof b);
    }
    for (int64_t a = 0; a < C0; a++)
        for (int64_t j = 0; j < mid; j++)
            for (int64_t k = 0; k < C2; k++)
                c[(a * mid + j) * C2 + k] = (int32_t)bits(2, (uint64_t)((a * C1 + m0 + j) * C2 + k));
    if (rank == 0) *it = 4242;
}

/* same counts the elements whose bits differ from fill's. */
static long long wrong(const double *t, int64_t r0, int64_t rows, const int32_t *c, int64_t m0, int64_t mid, const long *it) {
    long long bad = 0;
    for (int64_t i = 0; i < rows * NX; i++) {
        uint64_t b = bits(1, (uint64_t)(r0 * NX + i)), got;
        memcpy(&got, &t[i], sizeof got);
        bad += got != b;
    }
    for (int64_t a = 0; a < C0; a++)
        for (int64_t j = 0; j < mid; j++)
            for (int64_t k = 0; k < C2; k++)
                bad += c[(a * mid + j) * C2 + k] != (int32_t)bits(2, (uint64_t)((a * C1 + m0 + j) * C2 + k));
    if (rank == 0) bad += *it != 4242;
    return bad;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: global CONFIG write|reshape|vpr\n");
        return 2;
    }
    const char *mode = argv[2];
    int writing = strcmp(mode, "write") == 0, vpr = strcmp(mode, "vpr") == 0;
    MPI_Init(&argc, &argv);
    check("Init", FTI_Init(argv[1], MPI_COMM_WORLD), FTI_SCES);
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    MPI_Comm_size(FTI_COMM_WORLD, &size);
    check("Status", FTI_Status(), writing ? 0 : (vpr ? 3 : 1));

    FTIT_H5Group fields;
    check("InitGroup", FTI_InitGroup(&fields, "fields", NULL), FTI_SCES);
    FTIT_hsize_t tshape[2] = {NY, NX}, cshape[3] = {C0, C1, C2}, ishape[1] = {1};
    if (!writing) {
        /* The shapes come from the checkpoint. */
        tshape[0] = tshape[1] = 1;
        cshape[0] = cshape[1] = cshape[2] = 1;
    }
    check("DefineGlobalDataset temperature", FTI_DefineGlobalDataset(DS_TEMP, 2, tshape, "temperature", &fields, FTI_DBLE), FTI_SCES);
    check("DefineGlobalDataset counts", FTI_DefineGlobalDataset(DS_COUNTS, 3, cshape, "counts", NULL, FTI_INTG), FTI_SCES);
    check("DefineGlobalDataset iteration", FTI_DefineGlobalDataset(DS_ITER, 1, ishape, "iteration", NULL, FTI_LONG), FTI_SCES);
    if (!writing) {
        check("RecoverDatasetDimension temperature", FTI_RecoverDatasetDimension(DS_TEMP), FTI_SCES);
        check("RecoverDatasetDimension counts", FTI_RecoverDatasetDimension(DS_COUNTS), FTI_SCES);
    }
    check("GetDatasetRank temperature", FTI_GetDatasetRank(DS_TEMP), 2);
    check("GetDatasetRank counts", FTI_GetDatasetRank(DS_COUNTS), 3);
    /* The decomposition follows the shapes FTI reports. */
    FTIT_hsize_t *sp = FTI_GetDatasetSpan(DS_TEMP, 2);
    check("GetDatasetSpan temperature", sp != NULL && sp[0] == NY && sp[1] == NX, 1);
    int64_t ny = sp != NULL ? sp[0] : NY;
    sp = FTI_GetDatasetSpan(DS_COUNTS, 3);
    check("GetDatasetSpan counts", sp != NULL && sp[0] == C0 && sp[1] == C1 && sp[2] == C2, 1);
    int64_t nmid = sp != NULL ? sp[1] : C1;

    int64_t r0, rows, m0, mid;
    part((int)ny, &r0, &rows);
    part((int)nmid, &m0, &mid);
    double *t = calloc((size_t)(rows * NX) + 1, sizeof *t);
    /* counts starts with one element: a restart resizes it with FTI_Realloc. */
    int64_t ccount = writing ? C0 * mid * C2 : 1;
    int32_t *c = calloc((size_t)ccount, sizeof *c);
    long it = 0;
    check("Protect temperature", FTI_Protect(V_TEMP, t, rows * NX, FTI_DBLE), FTI_SCES);
    check("Protect counts", FTI_Protect(V_COUNTS, c, ccount, FTI_INTG), FTI_SCES);
    check("Protect iteration", FTI_Protect(V_ITER, rank == 0 ? &it : NULL, rank == 0 ? 1 : 0, FTI_LONG), FTI_SCES);
    FTIT_hsize_t toff[2] = {r0, 0}, tcnt[2] = {rows, NX};
    FTIT_hsize_t coff[3] = {0, m0, 0}, ccnt[3] = {C0, mid, C2};
    FTIT_hsize_t ioff[1] = {0}, icnt[1] = {rank == 0 ? 1 : 0};
    check("AddSubset temperature", FTI_AddSubset(V_TEMP, 2, toff, tcnt, DS_TEMP), FTI_SCES);
    check("AddSubset counts", FTI_AddSubset(V_COUNTS, 3, coff, ccnt, DS_COUNTS), FTI_SCES);
    check("AddSubset iteration", FTI_AddSubset(V_ITER, 1, ioff, icnt, DS_ITER), FTI_SCES);

    if (writing) {
        fill(t, r0, rows, c, m0, mid, &it);
        check("Checkpoint L4", FTI_Checkpoint(1, FTI_L4), FTI_DONE);
        /* What the restart must not see. */
        memset(t, 0xff, (size_t)(rows * NX) * sizeof *t);
        printf("WROTE rank=%d of %d rows=%lld mid=%lld\n", rank, size, (long long)rows, (long long)mid);
        MPI_Finalize(); /* no FTI_Finalize: the job "fails", the checkpoint stays */
        printf("FAILURES %d\n", failures);
        return failures;
    }

    int64_t want = C0 * mid * C2 * (int64_t)sizeof(int32_t);
    check("GetStoredSize counts", FTI_GetStoredSize(V_COUNTS), want);
    check("GetStoredSize temperature", FTI_GetStoredSize(V_TEMP), rows * NX * (int64_t)sizeof(double));
    c = FTI_Realloc(V_COUNTS, c);
    check("Realloc counts", c != NULL, 1);
    if (vpr) {
        check("RecoverVarInit", FTI_RecoverVarInit(), FTI_SCES);
        check("RecoverVar temperature", FTI_RecoverVar(V_TEMP), FTI_SCES);
        check("RecoverVar counts", FTI_RecoverVar(V_COUNTS), FTI_SCES);
        check("RecoverVar iteration", FTI_RecoverVar(V_ITER), FTI_SCES);
        check("RecoverVarFinalize", FTI_RecoverVarFinalize(), FTI_SCES);
    } else {
        check("Recover", FTI_Recover(), FTI_SCES);
        check("Status after Recover", FTI_Status(), 0);
    }
    check("elements differing", wrong(t, r0, rows, c, m0, mid, &it), 0);
    long long rowsSeen = rows;
    long long total = 0;
    MPI_Allreduce(&rowsSeen, &total, 1, MPI_LONG_LONG, MPI_SUM, FTI_COMM_WORLD);
    check("rows recovered", total, NY);
    printf("RECOVERED rank=%d of %d rows=%lld mid=%lld\n", rank, size, (long long)rows, (long long)mid);

    if (!vpr) {
        check("Checkpoint level 9", FTI_Checkpoint(2, FTI_L4_H5_SINGLE), FTI_DONE);
        MPI_Finalize(); /* the level-9 file is the next run's restart */
        printf("FAILURES %d\n", failures);
        return failures;
    }
    check("Finalize", FTI_Finalize(), FTI_SCES);
    MPI_Finalize();
    printf("FAILURES %d\n", failures);
    return failures;
}
