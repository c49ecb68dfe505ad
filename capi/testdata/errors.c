/*
 * errors: every FTI function's error paths through ftigo's libftigo.
 *
 *   errors CONFIG BADCONFIG
 *
 * Calls each function before MPI_Init, before FTI_Init, with bad ids,
 * levels, types, sizes and NULL pointers, after FTI_Finalize and after
 * MPI_Finalize, and prints one "CHECK name got=X want=Y ok|FAIL" line
 * per call. The exit status is the number of failed checks. CONFIG is a
 * valid configuration; BADCONFIG one that FTI_Init must refuse.
 */
#include <mpi.h>
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

static void checkp(const char *name, const void *got, const void *want) {
    check(name, got == want, 1);
}

/* notReady calls every function of a session that does not exist (before
 * FTI_Init, after FTI_Finalize, after a failed FTI_Init) and checks FTI's
 * codes: nothing may crash or succeed. */
static void notReady(const char *when) {
    char n[128];
    int buf[4] = {1, 2, 3, 4};
    fti_id_t t = 12345;
#define NAME(s) (snprintf(n, sizeof n, "%s/%s", when, s), n)
    check(NAME("Status"), FTI_Status(), 0);
    check(NAME("Protect"), FTI_Protect(0, buf, 4, 2), FTI_NSCS);
    check(NAME("InitType"), FTI_InitType(&t, 8), FTI_NSCS);
    check(NAME("InitType.handle"), t, FTI_NSCS);
    check(NAME("InitCompositeType"), FTI_InitCompositeType("x", 8, NULL), FTI_NSCS);
    check(NAME("AddScalarField"), FTI_AddScalarField(11, "a", 2, 0), FTI_NSCS);
    check(NAME("Checkpoint"), FTI_Checkpoint(1, 1), FTI_NSCS);
    check(NAME("Snapshot"), FTI_Snapshot(), FTI_NSCS);
    check(NAME("Recover"), FTI_Recover(), FTI_NREC);
    check(NAME("RecoverVarInit"), FTI_RecoverVarInit(), FTI_NSCS);
    check(NAME("RecoverVar"), FTI_RecoverVar(0), FTI_NSCS);
    check(NAME("RecoverVarFinalize"), FTI_RecoverVarFinalize(), FTI_NSCS);
    check(NAME("GetStoredSize"), FTI_GetStoredSize(0), 0);
    checkp(NAME("Realloc"), FTI_Realloc(0, buf), buf);
    check(NAME("setIDFromString"), FTI_setIDFromString("x"), FTI_NSCS);
    check(NAME("getIDFromString"), FTI_getIDFromString("x"), FTI_NSCS);
    check(NAME("InitICP"), FTI_InitICP(1, 1, true), FTI_NSCS);
    check(NAME("AddVarICP"), FTI_AddVarICP(0), FTI_NSCS);
    check(NAME("FinalizeICP"), FTI_FinalizeICP(), FTI_NSCS);
    FTIT_H5Group g;
    FTIT_hsize_t hs[1] = {4};
    int64_t dl[1] = {4};
    FTIT_attribute att;
    memset(&att, 0, sizeof att);
    check(NAME("InitGroup"), FTI_InitGroup(&g, "g", NULL), FTI_NSCS);
    g.id = 0;
    check(NAME("RenameGroup"), FTI_RenameGroup(&g, "h"), FTI_NSCS);
    check(NAME("DefineGlobalDataset"), FTI_DefineGlobalDataset(1, 1, hs, "g", NULL, 9), FTI_NSCS);
    check(NAME("AddSubset"), FTI_AddSubset(0, 1, hs, hs, 1), FTI_NSCS);
    check(NAME("UpdateGlobalDataset"), FTI_UpdateGlobalDataset(1, 1, hs), FTI_NSCS);
    check(NAME("UpdateSubset"), FTI_UpdateSubset(0, 1, hs, hs, 1), FTI_NSCS);
    check(NAME("GetDatasetRank"), FTI_GetDatasetRank(1), FTI_NSCS);
    checkp(NAME("GetDatasetSpan"), FTI_GetDatasetSpan(1, 1), NULL);
    check(NAME("RecoverDatasetDimension"), FTI_RecoverDatasetDimension(1), FTI_NSCS);
    check(NAME("DefineDataset"), FTI_DefineDataset(0, 1, dl, "d", NULL), FTI_NSCS);
    check(NAME("SetAttribute"), FTI_SetAttribute(0, att, FTI_ATTRIBUTE_NAME), FTI_NSCS);
    check(NAME("Finalize"), FTI_Finalize(), FTI_NSCS);
    FTIT_allConfiguration c = FTI_GetConfig("x", MPI_COMM_NULL);
    check(NAME("GetConfig.nbProc"), c.topology.nbProc, 0);
    FTI_Print(NULL, FTI_WARN);
    FTI_Print("a message while no session runs", FTI_WARN);
#undef NAME
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: errors CONFIG BADCONFIG\n");
        return 2;
    }
    check("beforeMPI/Init", FTI_Init(argv[1], MPI_COMM_WORLD), FTI_NSCS);
    notReady("beforeMPI");
    MPI_Init(&argc, &argv);
    notReady("beforeInit");
    check("Init/NULL config", FTI_Init(NULL, MPI_COMM_WORLD), FTI_NSCS);
    check("Init/NULL comm", FTI_Init(argv[1], MPI_COMM_NULL), FTI_NSCS);
    check("Init/missing file", FTI_Init("/nonexistent/config.fti", MPI_COMM_WORLD), FTI_NSCS);
    check("Init/bad config", FTI_Init(argv[2], MPI_COMM_WORLD), FTI_NSCS);
    notReady("afterFailedInit");

    check("Init", FTI_Init(argv[1], MPI_COMM_WORLD), FTI_SCES);
    check("Init/twice", FTI_Init(argv[1], MPI_COMM_WORLD), FTI_NSCS);
    check("Status", FTI_Status(), 0);
    int rank, size;
    check("FTI_COMM_WORLD usable", MPI_Comm_rank(FTI_COMM_WORLD, &rank), MPI_SUCCESS);
    MPI_Comm_size(FTI_COMM_WORLD, &size);
    int cmp;
    MPI_Comm_compare(FTI_COMM_WORLD, MPI_COMM_WORLD, &cmp);
    check("FTI_COMM_WORLD is a duplicate", cmp, MPI_CONGRUENT);

    /* Predefined types are set by FTI_Init. */
    check("FTI_CHAR", FTI_CHAR, 0);
    check("FTI_DBLE", FTI_DBLE, 9);
    check("FTI_LDBE", FTI_LDBE, 10);

    /* Types. */
    fti_id_t t = 777;
    check("InitType/NULL", FTI_InitType(NULL, 8), FTI_NSCS);
    check("InitType/size 0", FTI_InitType(&t, 0), FTI_NSCS);
    check("InitType/size -4", FTI_InitType(&t, -4), FTI_NSCS);
    check("InitType", FTI_InitType(&t, 12), FTI_SCES);
    check("InitType.handle", t, 11);
    fti_id_t comp = FTI_InitCompositeType("pair", 16, NULL);
    check("InitCompositeType", comp, 12);
    check("InitCompositeType/size 0", FTI_InitCompositeType("z", 0, NULL), FTI_NSCS);
    check("AddScalarField", FTI_AddScalarField(comp, "a", FTI_DBLE, 0), FTI_SCES);
    check("AddScalarField/past the end", FTI_AddScalarField(comp, "b", FTI_DBLE, 9), FTI_NSCS);
    check("AddScalarField/negative offset", FTI_AddScalarField(comp, "b", FTI_INTG, -1), FTI_NSCS);
    check("AddScalarField/unknown field type", FTI_AddScalarField(comp, "b", 99, 8), FTI_NSCS);
    check("AddScalarField/unknown composite", FTI_AddScalarField(99, "b", FTI_INTG, 8), FTI_NSCS);
    check("AddScalarField/not composite", FTI_AddScalarField(t, "b", FTI_INTG, 0), FTI_NSCS);
    check("AddScalarField/basic type", FTI_AddScalarField(FTI_DBLE, "b", FTI_INTG, 0), FTI_NSCS);
    int64_t dims[2] = {2, 0};
    check("AddVectorField/NULL dims", FTI_AddVectorField(comp, "v", FTI_INTG, 8, 1, NULL), FTI_NSCS);
    check("AddVectorField/zero dim", FTI_AddVectorField(comp, "v", FTI_INTG, 8, 2, dims), FTI_NSCS);
    check("AddVectorField/0 dims", FTI_AddVectorField(comp, "v", FTI_INTG, 8, 0, dims), FTI_NSCS);
    check("AddVectorField/33 dims", FTI_AddVectorField(comp, "v", FTI_INTG, 8, 33, dims), FTI_NSCS);
    check("AddVectorField", FTI_AddVectorField(comp, "v", FTI_INTG, 8, 1, dims), FTI_SCES);
    dims[0] = 3;
    check("AddVectorField/too big", FTI_AddVectorField(comp, "w", FTI_INTG, 8, 1, dims), FTI_NSCS);
    FTIT_complexType def;
    memset(&def, 0, sizeof def);
    fti_id_t old = 555;
    FTI_AddSimpleField(NULL, &FTI_INTG, 0, 0, "a");
    FTI_AddSimpleField(&def, &FTI_INTG, 0, 300, "a");
    FTI_AddSimpleField(&def, NULL, 0, 0, "a");
    check("InitComplexType/field type NULL", FTI_InitComplexType(&old, &def, 1, 8, "old", NULL), FTI_NSCS);
    FTI_AddSimpleField(&def, &FTI_INTG, 0, 0, "a");
    check("InitComplexType/missing field", FTI_InitComplexType(&old, &def, 2, 8, "old", NULL), FTI_NSCS);
    check("InitComplexType/NULL def", FTI_InitComplexType(&old, NULL, 1, 8, "old", NULL), FTI_NSCS);
    check("InitComplexType/length 0", FTI_InitComplexType(&old, &def, 0, 8, "old", NULL), FTI_NSCS);
    check("InitComplexType.unchanged", old, 555);
    int ldims[1] = {2};
    FTI_AddComplexField(&def, &FTI_SHRT, 4, 1, ldims, 1, NULL);
    check("InitComplexType", FTI_InitComplexType(&old, &def, 2, 8, "old", NULL), FTI_SCES);
    check("InitComplexType.name", strcmp(def.field[1].name, "T1"), 0);

    /* Protect. */
    double d[8] = {0};
    check("Protect/id -1", FTI_Protect(-1, d, 8, FTI_DBLE), FTI_NSCS);
    check("Protect/id > max_var_id", FTI_Protect(1000, d, 8, FTI_DBLE), FTI_NSCS);
    check("Protect/id = max_var_id", FTI_Protect(999, d, 1, FTI_DBLE), FTI_SCES);
    check("Protect/unknown type", FTI_Protect(1, d, 8, 99), FTI_NSCS);
    check("Protect/negative type", FTI_Protect(1, d, 8, -1), FTI_NSCS);
    check("Protect/NULL pointer", FTI_Protect(1, NULL, 8, FTI_DBLE), FTI_NSCS);
    check("Protect/negative count", FTI_Protect(1, d, -8, FTI_DBLE), FTI_NSCS);
    check("Protect/huge count", FTI_Protect(1, d, INT64_MAX, FTI_DBLE), FTI_NSCS);
    check("Protect/NULL empty", FTI_Protect(2, NULL, 0, FTI_DBLE), FTI_SCES);
    check("Protect", FTI_Protect(1, d, 8, FTI_DBLE), FTI_SCES);
    check("Protect/again", FTI_Protect(1, d, 4, FTI_DBLE), FTI_SCES);
    check("Protect/composite", FTI_Protect(3, d, 2, comp), FTI_SCES);

    /* Names. */
    check("setIDFromString/NULL", FTI_setIDFromString(NULL), FTI_NSCS);
    check("setIDFromString/empty", FTI_setIDFromString(""), FTI_NSCS);
    char longName[300];
    memset(longName, 'x', sizeof longName - 1);
    longName[sizeof longName - 1] = 0;
    check("setIDFromString/too long", FTI_setIDFromString(longName), FTI_NSCS);
    check("setIDFromString", FTI_setIDFromString("temperature"), 0);
    check("getIDFromString", FTI_getIDFromString("temperature"), 0);
    check("getIDFromString/unknown", FTI_getIDFromString("pressure"), -1);
    check("getIDFromString/NULL", FTI_getIDFromString(NULL), FTI_NSCS);

    /* Recovery on a fresh run. */
    check("Recover/fresh", FTI_Recover(), FTI_NREC);
    check("RecoverVarInit/fresh", FTI_RecoverVarInit(), FTI_SCES);
    check("RecoverVar/not protected", FTI_RecoverVar(42), FTI_NSCS);
    check("RecoverVar/fresh", FTI_RecoverVar(1), FTI_NREC);
    check("RecoverVarFinalize", FTI_RecoverVarFinalize(), FTI_SCES);
    check("GetStoredSize/fresh", FTI_GetStoredSize(1), 0);
    checkp("Realloc/fresh", FTI_Realloc(1, d), d);

    /* Levels: agreed by every rank before anything is written; a bad or
     * differing level fails on every rank, never leaving one waiting. */
    check("Checkpoint/level 0", FTI_Checkpoint(1, 0), FTI_NSCS);
    check("Checkpoint/level -1", FTI_Checkpoint(1, -1), FTI_NSCS);
    check("Checkpoint/level 10", FTI_Checkpoint(1, 10), FTI_NSCS);
    /* FTI_L4_DCP without enable_dcp: taken whole at L4 with FTI's warning. */
    check("Checkpoint/level 8 (dCP) whole", FTI_Checkpoint(1, FTI_L4_DCP), FTI_DONE);
    check("Checkpoint/level 9 (HDF5)", FTI_Checkpoint(1, FTI_L4_H5_SINGLE), FTI_NSCS);
    check("Checkpoint/one rank's level invalid", FTI_Checkpoint(1, rank == size - 1 ? 0 : 1), FTI_NSCS);
    check("Checkpoint/ranks disagree", FTI_Checkpoint(1, rank == 0 ? 1 : (size > 1 ? 2 : 1)), size > 1 ? FTI_NSCS : FTI_DONE);
    check("Checkpoint/level 5 downgraded", FTI_Checkpoint(2, FTI_L1_DCP), FTI_DONE);
    check("GetStoredSize/after checkpoint", FTI_GetStoredSize(1), 4 * sizeof(double));
    check("GetStoredSize/unknown id", FTI_GetStoredSize(77), 0);
    check("Checkpoint/L1", FTI_Checkpoint(3, FTI_L1), FTI_DONE);
    check("Snapshot/no interval", FTI_Snapshot(), FTI_SCES);

    /* Incremental checkpoints. */
    check("InitICP/inactive", FTI_InitICP(4, 1, false), FTI_SCES);
    check("AddVarICP/inactive", FTI_AddVarICP(1), FTI_SCES);
    check("FinalizeICP/inactive", FTI_FinalizeICP(), FTI_SCES);
    check("AddVarICP/not open", FTI_AddVarICP(1), FTI_NSCS);
    check("InitICP/level 9", FTI_InitICP(4, 9, true), FTI_NSCS);
    check("InitICP", FTI_InitICP(4, 1, true), FTI_SCES);
    check("InitICP/twice", FTI_InitICP(5, 1, true), FTI_NSCS);
    check("AddVarICP", FTI_AddVarICP(1), FTI_SCES);
    check("AddVarICP/not protected", FTI_AddVarICP(77), FTI_NSCS);
    check("FinalizeICP/variables missing", FTI_FinalizeICP(), FTI_NSCS);
    check("FinalizeICP/not open", FTI_FinalizeICP(), FTI_NSCS);

    /* Not implemented: declared, FTI's error code, never a silent success. */
    char dir[64];
    check("GetStageDir", FTI_GetStageDir(dir, sizeof dir), FTI_NSCS);
    check("SendFile", FTI_SendFile("/tmp/a", "/tmp/b"), FTI_NSCS);
    check("GetStageStatus", FTI_GetStageStatus(0), FTI_NSCS);

    /* HDF5 groups. */
    FTIT_H5Group grp, sub, other, bogus;
    memset(&bogus, 0, sizeof bogus);
    bogus.id = 77;
    check("InitGroup/NULL group", FTI_InitGroup(NULL, "g", NULL), FTI_NSCS);
    check("InitGroup/NULL name", FTI_InitGroup(&grp, NULL, NULL), FTI_NSCS);
    check("InitGroup/empty name", FTI_InitGroup(&grp, "", NULL), FTI_NSCS);
    check("InitGroup/slash", FTI_InitGroup(&grp, "a/b", NULL), FTI_NSCS);
    check("InitGroup/bad parent", FTI_InitGroup(&other, "x", &bogus), FTI_NSCS);
    check("InitGroup", FTI_InitGroup(&grp, "fields", NULL), FTI_SCES);
    check("InitGroup.id", grp.id, 1);
    check("InitGroup.fullName", strcmp(grp.fullName, "/fields"), 0);
    check("InitGroup/twice", FTI_InitGroup(&other, "fields", NULL), FTI_NSCS);
    check("InitGroup/child", FTI_InitGroup(&sub, "sub", &grp), FTI_SCES);
    check("InitGroup/child.fullName", strcmp(sub.fullName, "/fields/sub"), 0);
    check("InitGroup/parent.childrenNo", grp.childrenNo, 1);
    check("RenameGroup/NULL", FTI_RenameGroup(NULL, "h"), FTI_NSCS);
    check("RenameGroup/bad id", FTI_RenameGroup(&bogus, "h"), FTI_NSCS);
    check("RenameGroup/NULL name", FTI_RenameGroup(&sub, NULL), FTI_NSCS);
    check("RenameGroup", FTI_RenameGroup(&sub, "inner"), FTI_SCES);
    check("RenameGroup.fullName", strcmp(sub.fullName, "/fields/inner"), 0);

    /* Global datasets: variable 1 (4 doubles) is row `rank` of a
     * size x 4 dataset. */
    FTIT_hsize_t shape[2] = {size, 4}, off[2] = {rank, 0}, cnt[2] = {1, 4};
    FTIT_hsize_t neg[2] = {-1, 4}, zero[2] = {size, 0}, past[2] = {size, 0};
    check("DefineGlobalDataset/NULL dims", FTI_DefineGlobalDataset(5, 2, NULL, "u", &grp, FTI_DBLE), FTI_NSCS);
    check("DefineGlobalDataset/rank 0", FTI_DefineGlobalDataset(5, 0, shape, "u", &grp, FTI_DBLE), FTI_NSCS);
    check("DefineGlobalDataset/rank 33", FTI_DefineGlobalDataset(5, 33, shape, "u", &grp, FTI_DBLE), FTI_NSCS);
    check("DefineGlobalDataset/NULL name", FTI_DefineGlobalDataset(5, 2, shape, NULL, &grp, FTI_DBLE), FTI_NSCS);
    check("DefineGlobalDataset/bad name", FTI_DefineGlobalDataset(5, 2, shape, "a//b", &grp, FTI_DBLE), FTI_NSCS);
    check("DefineGlobalDataset/unknown type", FTI_DefineGlobalDataset(5, 2, shape, "u", &grp, 99), FTI_NSCS);
    check("DefineGlobalDataset/bad group", FTI_DefineGlobalDataset(5, 2, shape, "u", &bogus, FTI_DBLE), FTI_NSCS);
    check("DefineGlobalDataset/negative extent", FTI_DefineGlobalDataset(5, 2, neg, "u", &grp, FTI_DBLE), FTI_NSCS);
    check("DefineGlobalDataset/negative id", FTI_DefineGlobalDataset(-1, 2, shape, "u", &grp, FTI_DBLE), FTI_NSCS);
    check("DefineGlobalDataset", FTI_DefineGlobalDataset(5, 2, shape, "u", &grp, FTI_DBLE), FTI_SCES);
    check("DefineGlobalDataset/id twice", FTI_DefineGlobalDataset(5, 2, shape, "v", &grp, FTI_DBLE), FTI_NSCS);
    check("DefineGlobalDataset/name twice", FTI_DefineGlobalDataset(6, 2, shape, "u", &grp, FTI_DBLE), FTI_NSCS);
    check("RenameGroup/holds a dataset", FTI_RenameGroup(&grp, "renamed"), FTI_NSCS);
    check("GetDatasetRank", FTI_GetDatasetRank(5), 2);
    check("GetDatasetRank/unknown", FTI_GetDatasetRank(9), FTI_NSCS);
    FTIT_hsize_t *sp = FTI_GetDatasetSpan(5, 2);
    check("GetDatasetSpan", sp != NULL && sp[0] == size && sp[1] == 4, 1);
    checkp("GetDatasetSpan/rank mismatch", FTI_GetDatasetSpan(5, 1), NULL);
    checkp("GetDatasetSpan/unknown", FTI_GetDatasetSpan(9, 2), NULL);
    check("AddSubset/not protected", FTI_AddSubset(42, 2, off, cnt, 5), FTI_NSCS);
    check("AddSubset/unknown dataset", FTI_AddSubset(1, 2, off, cnt, 9), FTI_NSCS);
    check("AddSubset/rank mismatch", FTI_AddSubset(1, 1, off, cnt, 5), FTI_NSCS);
    check("AddSubset/NULL offset", FTI_AddSubset(1, 2, NULL, cnt, 5), FTI_NSCS);
    check("AddSubset/NULL count", FTI_AddSubset(1, 2, off, NULL, 5), FTI_NSCS);
    check("AddSubset/outside", FTI_AddSubset(1, 2, past, cnt, 5), FTI_NSCS);
    check("AddSubset/element size", FTI_AddSubset(3, 2, off, cnt, 5), FTI_NSCS);
    check("UpdateSubset/not a subset", FTI_UpdateSubset(1, 2, off, cnt, 5), FTI_NSCS);
    check("AddSubset", FTI_AddSubset(1, 2, off, cnt, 5), FTI_SCES);
    check("UpdateSubset", FTI_UpdateSubset(1, 2, off, cnt, 5), FTI_SCES);
    check("UpdateSubset/unknown dataset", FTI_UpdateSubset(1, 2, off, cnt, 9), FTI_NSCS);
    check("UpdateGlobalDataset/unknown", FTI_UpdateGlobalDataset(9, 2, shape), FTI_NSCS);
    check("UpdateGlobalDataset/NULL", FTI_UpdateGlobalDataset(5, 2, NULL), FTI_NSCS);
    check("UpdateGlobalDataset/zero extent", FTI_UpdateGlobalDataset(5, 2, zero), FTI_NSCS);
    check("UpdateGlobalDataset", FTI_UpdateGlobalDataset(5, 2, shape), FTI_SCES);
    check("RecoverDatasetDimension/fresh", FTI_RecoverDatasetDimension(5), FTI_NSCS);
    check("RecoverDatasetDimension/unknown", FTI_RecoverDatasetDimension(9), FTI_NSCS);
    /* Declarations that are wrong only together fail the checkpoint on
     * every rank, and leave the previous one. */
    check("Protect/3 of 4 elements", FTI_Protect(1, d, 3, FTI_DBLE), FTI_SCES);
    check("Checkpoint/subset size mismatch", FTI_Checkpoint(10, FTI_L1), FTI_NSCS);
    check("Protect/4 elements again", FTI_Protect(1, d, 4, FTI_DBLE), FTI_SCES);
    FTIT_hsize_t row0[2] = {0, 0};
    check("UpdateSubset/row 0", FTI_UpdateSubset(1, 2, row0, cnt, 5), FTI_SCES);
    check("Checkpoint/overlap or gap", FTI_Checkpoint(11, FTI_L1), rank == 0 && size == 1 ? FTI_DONE : FTI_NSCS);
    check("UpdateSubset/own row", FTI_UpdateSubset(1, 2, off, cnt, 5), FTI_SCES);
    FTIT_hsize_t bigger[2] = {size + 1, 4};
    check("UpdateGlobalDataset/last rank", FTI_UpdateGlobalDataset(5, 2, rank == size - 1 ? bigger : shape), FTI_SCES);
    check("Checkpoint/datasets differ", FTI_Checkpoint(12, FTI_L1), FTI_NSCS);
    check("UpdateGlobalDataset/back", FTI_UpdateGlobalDataset(5, 2, shape), FTI_SCES);
    check("Checkpoint/with dataset", FTI_Checkpoint(13, FTI_L1), FTI_DONE);

    /* A variable's own dataset (shape and name) and attributes. */
    int64_t dl[2] = {2, 2};
    check("DefineDataset/not protected", FTI_DefineDataset(42, 2, dl, "d", NULL), FTI_NSCS);
    check("DefineDataset/NULL dims", FTI_DefineDataset(1, 2, NULL, "d", NULL), FTI_NSCS);
    check("DefineDataset/rank 33", FTI_DefineDataset(1, 33, dl, "d", NULL), FTI_NSCS);
    check("DefineDataset/count mismatch", FTI_DefineDataset(1, 1, dl, "d", NULL), FTI_NSCS);
    check("DefineDataset/bad group", FTI_DefineDataset(1, 2, dl, "d", &bogus), FTI_NSCS);
    check("DefineDataset", FTI_DefineDataset(1, 2, dl, "field", &grp), FTI_SCES);
    check("getIDFromString/DefineDataset name", FTI_getIDFromString("field"), 1);
    check("DefineDataset/name only", FTI_DefineDataset(999, 0, NULL, NULL, NULL), FTI_SCES);
    check("DefineDataset/name taken", FTI_DefineDataset(999, 0, NULL, "field", NULL), FTI_NSCS);
    FTIT_attribute att;
    memset(&att, 0, sizeof att);
    strcpy(att.name, "answer");
    att.dim.ndims = 1;
    att.dim.count[0] = 1;
    check("SetAttribute/not protected", FTI_SetAttribute(42, att, FTI_ATTRIBUTE_NAME), FTI_NSCS);
    check("SetAttribute/bad flag", FTI_SetAttribute(999, att, (FTIT_attributeFlag)8), FTI_NSCS);
    check("SetAttribute/dims", FTI_SetAttribute(999, att, FTI_ATTRIBUTE_DIM), FTI_NSCS);
    check("getIDFromString/not named by a failed call", FTI_getIDFromString("answer"), -1);
    check("SetAttribute/name", FTI_SetAttribute(999, att, FTI_ATTRIBUTE_NAME), FTI_SCES);
    check("getIDFromString/attribute name", FTI_getIDFromString("answer"), 999);
    check("SetAttribute/none", FTI_SetAttribute(999, att, FTI_ATTRIBUTE_NONE), FTI_SCES);
    check("BitFlip", FTI_BitFlip(1), FTI_NSCS);

    /* The session's configuration. */
    FTIT_allConfiguration c = FTI_GetConfig(argv[1], MPI_COMM_WORLD);
    check("GetConfig.nbProc", c.topology.nbProc, size);
    check("GetConfig.myRank", c.topology.myRank, rank);
    check("GetConfig.maxVarId", c.configuration.maxVarId, 999);
    check("GetConfig.test", c.configuration.test, 1);
    check("GetConfig.nbHeads", c.topology.nbHeads, 0);
    check("GetConfig.execution.id set", c.execution.id[0] != '\0', 1);
    FTI_Print("a warning from the application", FTI_WARN);
    FTI_Print("debug output hidden at verbosity 2", FTI_DBUG);
    FTI_Print("unknown priority prints nothing", 42);

    check("Finalize", FTI_Finalize(), FTI_SCES);
    check("FTI_COMM_WORLD after Finalize", MPI_Barrier(FTI_COMM_WORLD), MPI_SUCCESS);
    notReady("afterFinalize");

    /* A second session in the same process (FTI's double_fti_init). */
    check("Init/again", FTI_Init(argv[1], MPI_COMM_WORLD), FTI_SCES);
    check("Protect/second session", FTI_Protect(0, d, 8, FTI_DBLE), FTI_SCES);
    check("InitType/second session", FTI_InitType(&t, 4), FTI_SCES);
    check("InitType.handle/second session", t, 11);
    check("Checkpoint/second session", FTI_Checkpoint(1, FTI_L1), FTI_DONE);
    check("Finalize/again", FTI_Finalize(), FTI_SCES);

    MPI_Finalize();
    check("afterMPI/Init", FTI_Init(argv[1], MPI_COMM_WORLD), FTI_NSCS);
    check("afterMPI/Checkpoint", FTI_Checkpoint(1, 1), FTI_NSCS);
    check("afterMPI/Finalize", FTI_Finalize(), FTI_NSCS);
    printf("FAILURES %d\n", failures);
    return failures;
}
