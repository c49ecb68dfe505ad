/*
 * dynamic: typed, named and resizable variables through ftigo's
 * libftigo, over two launches.
 *
 *   dynamic CONFIG write    fresh run: two checkpoints, the second after
 *                           a variable grew; ends without FTI_Finalize
 *   dynamic CONFIG read     restart: names, stored sizes, refused
 *                           mismatches, FTI_Realloc, FTI_RecoverVar,
 *                           FTI_Snapshot's recovery, FTI_Finalize
 *
 * Prints "CHECK name got=X want=Y ok|FAIL" lines; the exit status is the
 * number of failed checks.
 */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fti.h"

static int failures = 0;

static void check(const char *name, long long got, long long want) {
    int ok = got == want;
    if (!ok) failures++;
    printf("CHECK %s got=%lld want=%lld %s\n", name, got, want, ok ? "ok" : "FAIL");
    fflush(stdout);
}

typedef struct particle {
    double x[3];
    int id;
    char tag;
} particle;

typedef struct pair {
    int a;
    short b[2];
} pair;

/* The same types in the same order on every launch. */
static void types(fti_id_t *ptype, fti_id_t *pairType, fti_id_t *blob) {
    *ptype = FTI_InitCompositeType("particle", sizeof(particle), NULL);
    int64_t three[1] = {3};
    check("AddVectorField x", FTI_AddVectorField(*ptype, "x", FTI_DBLE, offsetof(particle, x), 1, three), FTI_SCES);
    check("AddScalarField id", FTI_AddScalarField(*ptype, "id", FTI_INTG, offsetof(particle, id)), FTI_SCES);
    check("AddScalarField tag", FTI_AddScalarField(*ptype, "tag", FTI_CHAR, offsetof(particle, tag)), FTI_SCES);
    FTIT_complexType def;
    int two[1] = {2};
    FTI_AddSimpleField(&def, &FTI_INTG, offsetof(pair, a), 0, "a");
    FTI_AddComplexField(&def, &FTI_SHRT, offsetof(pair, b), 1, two, 1, "b");
    check("InitComplexType", FTI_InitComplexType(pairType, &def, 2, sizeof(pair), "pair", NULL), FTI_SCES);
    check("InitType", FTI_InitType(blob, 24), FTI_SCES);
}

static int counts0(int rank, int k) { return 1000 * rank + 7 * k; }

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: dynamic CONFIG write|read\n");
        return 2;
    }
    int write = strcmp(argv[2], "write") == 0;
    MPI_Init(&argc, &argv);
    check("Init", FTI_Init(argv[1], MPI_COMM_WORLD), FTI_SCES);
    int rank;
    MPI_Comm_rank(FTI_COMM_WORLD, &rank);
    fti_id_t ptype, pairType, blob;
    types(&ptype, &pairType, &blob);
    int np = 5 + rank;
    particle *parts = calloc(np, sizeof *parts);
    pair pairs[3];
    char blobs[2][24];
    long double ld[4];
    unsigned short us[6];

    if (write) {
        check("Status/fresh", FTI_Status(), 0);
        check("setIDFromString counts", FTI_setIDFromString("counts"), 0);
        check("setIDFromString particles", FTI_setIDFromString("particles"), 1);
        check("setIDFromString counts again", FTI_setIDFromString("counts"), 0);
        check("getIDFromString particles", FTI_getIDFromString("particles"), 1);
        int nc = 10 + rank;
        int *counts = malloc(nc * sizeof *counts);
        for (int k = 0; k < nc; k++) counts[k] = counts0(rank, k);
        for (int k = 0; k < np; k++) {
            parts[k] = (particle){{k, -k, 0.5 * k}, 100 * rank + k, (char)('a' + k)};
        }
        for (int k = 0; k < 3; k++) pairs[k] = (pair){rank + k, {(short)k, (short)-k}};
        memset(blobs, 'z' - rank, sizeof blobs);
        for (int k = 0; k < 4; k++) ld[k] = (long double)1 / (3 + k + rank);
        for (int k = 0; k < 6; k++) us[k] = (unsigned short)(65535 - k - rank);
        check("Protect counts", FTI_Protect(0, counts, nc, FTI_INTG), FTI_SCES);
        check("Protect particles", FTI_Protect(1, parts, np, ptype), FTI_SCES);
        check("Protect pairs", FTI_Protect(5, pairs, 3, pairType), FTI_SCES);
        check("Protect blobs", FTI_Protect(6, blobs, 2, blob), FTI_SCES);
        check("Protect ld", FTI_Protect(7, ld, 4, FTI_LDBE), FTI_SCES);
        check("Protect us", FTI_Protect(8, us, 6, FTI_USHT), FTI_SCES);
        check("Checkpoint 1", FTI_Checkpoint(1, FTI_L1), FTI_DONE);
        check("GetStoredSize counts after 1", FTI_GetStoredSize(0), nc * sizeof(int));
        /* counts grows; the next checkpoint stores the new size. */
        nc = 20 + rank;
        counts = realloc(counts, nc * sizeof *counts);
        for (int k = 0; k < nc; k++) counts[k] = counts0(rank, k);
        check("Protect counts grown", FTI_Protect(0, counts, nc, FTI_INTG), FTI_SCES);
        check("Checkpoint 2", FTI_Checkpoint(2, FTI_L2), FTI_DONE);
        check("GetStoredSize counts after 2", FTI_GetStoredSize(0), nc * sizeof(int));
        /* The job dies: no FTI_Finalize, both checkpoints stay. */
        MPI_Barrier(FTI_COMM_WORLD);
        MPI_Finalize();
        printf("FAILURES %d\n", failures);
        return failures;
    }

    check("Status/restart", FTI_Status(), 1);
    /* Names and sizes are known before anything is protected. */
    check("getIDFromString counts", FTI_getIDFromString("counts"), 0);
    check("setIDFromString particles", FTI_setIDFromString("particles"), 1);
    check("setIDFromString new name", FTI_setIDFromString("fresh"), 2);
    int nc = 20 + rank;
    check("GetStoredSize counts", FTI_GetStoredSize(0), nc * sizeof(int));
    check("GetStoredSize particles", FTI_GetStoredSize(1), np * sizeof(particle));
    check("GetStoredSize unknown", FTI_GetStoredSize(4), 0);

    int *counts = malloc(sizeof *counts);
    counts[0] = -1;
    check("Protect counts (1 element)", FTI_Protect(0, counts, 1, FTI_INTG), FTI_SCES);
    check("Protect particles", FTI_Protect(1, parts, np, ptype), FTI_SCES);
    check("Protect pairs", FTI_Protect(5, pairs, 3, pairType), FTI_SCES);
    /* Fewer variables than the checkpoint: FTI_NREC. */
    check("Recover/missing variables", FTI_Recover(), FTI_NREC);
    check("Protect blobs as int", FTI_Protect(6, blobs, 12, FTI_INTG), FTI_SCES);
    check("Protect ld", FTI_Protect(7, ld, 4, FTI_LDBE), FTI_SCES);
    check("Protect us", FTI_Protect(8, us, 6, FTI_USHT), FTI_SCES);
    /* A size or type that differs from the checkpoint: FTI_NREC, memory untouched. */
    check("Recover/size and type mismatch", FTI_Recover(), FTI_NREC);
    check("counts untouched", counts[0], -1);
    check("Status still restart", FTI_Status(), 1);
    int *moved = FTI_Realloc(0, counts);
    check("Realloc moved or grew", moved != NULL, 1);
    counts = moved;
    check("GetStoredSize after Realloc", FTI_GetStoredSize(0), nc * sizeof(int));
    int *same = FTI_Realloc(0, counts);
    check("Realloc to the same size keeps the pointer", same == counts, 1);
    /* The same size but another type (ftigo records element types). */
    check("Recover/type mismatch", FTI_Recover(), FTI_NREC);
    check("counts still untouched", counts[0], -1);
    check("Protect blobs", FTI_Protect(6, blobs, 2, blob), FTI_SCES);

    check("RecoverVarInit", FTI_RecoverVarInit(), FTI_SCES);
    check("RecoverVar particles", FTI_RecoverVar(1), FTI_SCES);
    check("RecoverVar not protected", FTI_RecoverVar(3), FTI_NSCS);
    check("RecoverVarFinalize", FTI_RecoverVarFinalize(), FTI_SCES);
    int bad = 0;
    for (int k = 0; k < np; k++) {
        particle w = {{k, -k, 0.5 * k}, 100 * rank + k, (char)('a' + k)};
        bad += memcmp(&parts[k].x, &w.x, sizeof w.x) != 0 || parts[k].id != w.id || parts[k].tag != w.tag;
    }
    check("particles recovered", bad, 0);
    check("Status after RecoverVar", FTI_Status(), 1);

    /* FTI_Snapshot on a restart recovers everything. */
    check("Snapshot recovers", FTI_Snapshot(), FTI_SCES);
    check("Status after recovery", FTI_Status(), 0);
    bad = 0;
    for (int k = 0; k < nc; k++) bad += counts[k] != counts0(rank, k);
    check("counts recovered", bad, 0);
    bad = 0;
    for (int k = 0; k < 3; k++) bad += pairs[k].a != rank + k || pairs[k].b[0] != k || pairs[k].b[1] != -k;
    check("pairs recovered", bad, 0);
    bad = 0;
    for (int k = 0; k < 24; k++) bad += blobs[1][k] != 'z' - rank;
    check("blobs recovered", bad, 0);
    bad = 0;
    for (int k = 0; k < 4; k++) bad += ld[k] != (long double)1 / (3 + k + rank);
    check("long doubles recovered", bad, 0);
    bad = 0;
    for (int k = 0; k < 6; k++) bad += us[k] != (unsigned short)(65535 - k - rank);
    check("unsigned shorts recovered", bad, 0);
    check("Realloc after recovery", FTI_Realloc(0, counts) == (void *)counts, 1);
    check("Snapshot ticks", FTI_Snapshot(), FTI_SCES);
    check("Checkpoint 3", FTI_Checkpoint(3, FTI_L1), FTI_DONE);
    check("Finalize", FTI_Finalize(), FTI_SCES);
    free(counts);
    free(parts);
    MPI_Finalize();
    printf("FAILURES %d\n", failures);
    return failures;
}
