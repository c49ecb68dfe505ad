//go:build mpi || serial

// FTI's C entry points. Each one checks what only C can check (MPI's
// state, communicators, C structs) and calls the Go implementation
// (ftigo_capi_*, capi.go); fti.h is included so the compiler checks every
// definition against the declaration applications compile with.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fti.h"
#include "ftigo.h"
#include "_cgo_export.h"

// FTIGO_HEAD_EXIT is ftigo_capi_init's code for a head rank without
// keep_heads_alive (capi/api.go codeHeadExit).
#define FTIGO_HEAD_EXIT 3


// The predefined type handles are invalid until FTI_Init sets them.
fti_id_t FTI_CHAR = -1;
fti_id_t FTI_SHRT = -1;
fti_id_t FTI_INTG = -1;
fti_id_t FTI_LONG = -1;
fti_id_t FTI_UCHR = -1;
fti_id_t FTI_USHT = -1;
fti_id_t FTI_UINT = -1;
fti_id_t FTI_ULNG = -1;
fti_id_t FTI_SFLT = -1;
fti_id_t FTI_DBLE = -1;
fti_id_t FTI_LDBE = -1;


// publish sets a global both here and in the copy a program may hold. Go
// links c-shared libraries with -Bsymbolic, so this library's code binds
// to its own definition, while a program that reads FTI_COMM_WORLD or
// FTI_DBLE has the linker copy them into its own data (a copy relocation)
// and the dynamic linker resolves every other reference to that copy.
// dlsym on the main program's handle finds it (dlsym(RTLD_DEFAULT) would
// not: a -Bsymbolic object's lookups start with itself).
static void *program_symbol(const char *name) {
    static void *program = NULL;
    if (program == NULL) program = dlopen(NULL, RTLD_LAZY);
    return program == NULL ? NULL : dlsym(program, name);
}

#define PUBLISH(var, value)                                         \
    do {                                                            \
        __typeof__(var) v_ = (value);                               \
        __typeof__(var) *p_ = program_symbol(#var);                 \
        (var) = v_;                                                 \
        if (p_ != NULL && p_ != &(var)) *p_ = v_;                   \
    } while (0)

// publish_types sets the predefined type handles, in FTI's order.
static void publish_types(void) {
    PUBLISH(FTI_CHAR, 0);
    PUBLISH(FTI_SHRT, 1);
    PUBLISH(FTI_INTG, 2);
    PUBLISH(FTI_LONG, 3);
    PUBLISH(FTI_UCHR, 4);
    PUBLISH(FTI_USHT, 5);
    PUBLISH(FTI_UINT, 6);
    PUBLISH(FTI_ULNG, 7);
    PUBLISH(FTI_SFLT, 8);
    PUBLISH(FTI_DBLE, 9);
    PUBLISH(FTI_LDBE, 10);
}

static int fail(const char *fn, const char *msg) {
    return ftigo_capi_fail((char *)fn, (char *)msg);
}

#ifndef FTIGO_SERIAL

MPI_Comm FTI_COMM_WORLD = MPI_COMM_NULL;

// ftigo's own duplicate of the application's communicator: its messages
// never meet the application's, even with MPI_ANY_TAG receives pending on
// FTI_COMM_WORLD.
static MPI_Comm ftigo_comm = MPI_COMM_NULL;

// mpi_usable refuses calls that need MPI before MPI_Init or after MPI_Finalize.
static int mpi_usable(const char *fn) {
    int flag = 0;
    if (MPI_Initialized(&flag) != MPI_SUCCESS || !flag) {
        fail(fn, "MPI is not initialized: call MPI_Init before FTI_Init");
        return 0;
    }
    if (MPI_Finalized(&flag) != MPI_SUCCESS || flag) {
        fail(fn, "MPI is already finalized");
        return 0;
    }
    return 1;
}

int FTI_Init(const char *configFile, MPI_Comm globalComm) {
    if (!mpi_usable("FTI_Init")) return FTI_NSCS;
    if (configFile == NULL) return fail("FTI_Init", "configFile is NULL");
    if (globalComm == MPI_COMM_NULL) return fail("FTI_Init", "globalComm is MPI_COMM_NULL");
    if (ftigo_capi_active()) {
        return fail("FTI_Init", "FTI is already initialized; call FTI_Finalize before FTI_Init again");
    }
    MPI_Comm lib = MPI_COMM_NULL, app = MPI_COMM_NULL;
    if (MPI_Comm_dup(globalComm, &lib) != MPI_SUCCESS) {
        return fail("FTI_Init", "MPI_Comm_dup of globalComm failed");
    }
    if (MPI_Comm_dup(globalComm, &app) != MPI_SUCCESS) {
        MPI_Comm_free(&lib);
        return fail("FTI_Init", "MPI_Comm_dup of globalComm failed");
    }
    int rc = ftigo_capi_init((char *)configFile, (int)MPI_Comm_c2f(lib));
    if (rc == FTI_HEAD || rc == FTIGO_HEAD_EXIT) {
        // head = 1: this rank was a head until the application finalized.
        MPI_Comm_free(&lib);
        MPI_Comm_free(&app);
        if (rc == FTIGO_HEAD_EXIT) {
            // As FTI's heads without keep_heads_alive: never return.
            MPI_Finalize();
            exit(0);
        }
        PUBLISH(FTI_COMM_WORLD, globalComm);
        return FTI_HEAD;
    }
    if (rc != FTI_SCES && rc != FTI_NREC) {
        MPI_Comm_free(&lib);
        MPI_Comm_free(&app);
        PUBLISH(FTI_COMM_WORLD, globalComm); // as FTI leaves it when Init fails
        return rc;
    }
    ftigo_comm = lib;
    int appHandle = ftigo_capi_app_comm();
    if (appHandle != -1) {
        // head = 1: FTI_COMM_WORLD is the application ranks' communicator
        // (a duplicate of the one the Go runtime split off).
        MPI_Comm split = MPI_Comm_f2c((MPI_Fint)appHandle), dup = MPI_COMM_NULL;
        int size = 0, appSize = 0;
        MPI_Comm_size(globalComm, &size);
        MPI_Comm_size(split, &appSize);
        if (appSize != size && MPI_Comm_dup(split, &dup) == MPI_SUCCESS) {
            MPI_Comm_free(&app);
            app = dup;
        }
    }
    // FTI_COMM_WORLD stays valid after FTI_Finalize (codes use it until
    // MPI_Finalize); a new session gets a new one.
    PUBLISH(FTI_COMM_WORLD, app);
    publish_types();
    return rc;
}

int FTI_Finalize(void) {
    if (!mpi_usable("FTI_Finalize")) return FTI_NSCS;
    int rc = ftigo_capi_finalize();
    if (!ftigo_capi_active() && ftigo_comm != MPI_COMM_NULL) {
        MPI_Comm_free(&ftigo_comm);
    }
    return rc;
}

int ftigo_init_f(const char *configFile, int comm, int *appComm) {
    if (appComm == NULL) return fail("ftigo_init_f", "appComm is NULL");
    int rc = FTI_Init(configFile, MPI_Comm_f2c((MPI_Fint)comm));
    *appComm = rc == FTI_SCES || rc == FTI_NREC ? (int)MPI_Comm_c2f(FTI_COMM_WORLD) : comm;
    return rc;
}

int ftigo_serial(void) { return 0; }

static int initialised_mpi = 0;

int ftigo_init_world(const char *configFile, int *appComm) {
    int flag = 0;
    MPI_Initialized(&flag);
    if (!flag) {
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return fail("FTI_Init", "MPI_Init failed");
        initialised_mpi = 1;
    }
    return ftigo_init_f(configFile, (int)MPI_Comm_c2f(MPI_COMM_WORLD), appComm);
}

int ftigo_finalize_world(void) {
    int rc = FTI_Finalize();
    int flag = 0;
    MPI_Finalized(&flag);
    if (initialised_mpi && !flag) MPI_Finalize();
    initialised_mpi = 0;
    return rc;
}

FTIT_allConfiguration FTI_GetConfig(const char *configFile, MPI_Comm globalComm) {
    (void)configFile; (void)globalComm; // as in FTI: the running session's configuration
    FTIT_allConfiguration c;
    ftigo_capi_config(&c);
    return c;
}

#else /* FTIGO_SERIAL: one rank, no MPI */

static int mpi_usable(const char *fn) { (void)fn; return 1; }

int ftigo_init_f(const char *configFile, int comm, int *appComm) {
    if (appComm == NULL) return fail("ftigo_init_f", "appComm is NULL");
    if (configFile == NULL) return fail("FTI_Init", "configFile is NULL");
    *appComm = comm;
    int rc = ftigo_capi_init((char *)configFile, comm);
    if (rc == FTI_SCES || rc == FTI_NREC) publish_types();
    return rc;
}

int ftigo_serial(void) { return 1; }

int ftigo_init_world(const char *configFile, int *appComm) { return ftigo_init_f(configFile, 0, appComm); }

int ftigo_finalize_world(void) { return ftigo_capi_finalize(); }

int FTI_Finalize(void) { return ftigo_capi_finalize(); }

#endif

int FTI_Status(void) { return ftigo_capi_status(); }

int FTI_InitType(fti_id_t *type, int size) {
    if (type == NULL) return fail("FTI_InitType", "type is NULL");
    int id = ftigo_capi_init_type((int64_t)size);
    *type = id;
    return id >= 0 ? FTI_SCES : FTI_NSCS;
}

fti_id_t FTI_InitCompositeType(const char *name, size_t size, FTIT_H5Group *h5group) {
    (void)h5group; // an HDF5 group only places the type in HDF5 files
    if (size > (size_t)INT64_MAX) return fail("FTI_InitCompositeType", "size too large");
    return ftigo_capi_init_composite((char *)name, (int64_t)size);
}

int FTI_AddScalarField(fti_id_t id, const char *name, fti_id_t fieldType, int64_t offset) {
    return ftigo_capi_add_field((char *)"FTI_AddScalarField", id, (char *)name, fieldType, offset, -1, NULL);
}

int FTI_AddVectorField(fti_id_t id, const char *name, fti_id_t fieldType, int64_t offset,
                       int ndims, int64_t *dimSizes) {
    if (dimSizes == NULL) return fail("FTI_AddVectorField", "dimSizes is NULL");
    if (ndims < 1) return fail("FTI_AddVectorField", "ndims must be at least 1");
    return ftigo_capi_add_field((char *)"FTI_AddVectorField", id, (char *)name, fieldType, offset, ndims, dimSizes);
}

// The interface before FTI 1.4.1: fields are written into the caller's
// definition, and FTI_InitComplexType creates the type from it.
void FTI_AddSimpleField(FTIT_complexType *def, FTIT_type *ftiType, size_t offset, int id, char *name) {
    int dim = 1;
    FTI_AddComplexField(def, ftiType, offset, 1, &dim, id, name);
}

void FTI_AddComplexField(FTIT_complexType *def, FTIT_type *ftiType, size_t offset, int rank,
                         int *dimLength, int id, char *name) {
    const char *fn = "FTI_AddComplexField";
    if (def == NULL) { fail(fn, "typeDefinition is NULL"); return; }
    if (id < 0 || id >= FTI_BUFS) { fail(fn, "field id out of range (0..255)"); return; }
    FTIT_typeField *f = &def->field[id];
    memset(f, 0, sizeof *f);
    f->typeID = -1; // an invalid field makes FTI_InitComplexType fail
    if (ftiType == NULL) { fail(fn, "field type is NULL"); return; }
    if (rank < 1 || rank > 32 || dimLength == NULL) { fail(fn, "rank must be 1..32 with dimLength set"); return; }
    if (offset > (size_t)INT32_MAX) { fail(fn, "offset too large"); return; }
    f->typeID = *ftiType;
    f->offset = (int)offset;
    f->rank = rank;
    for (int i = 0; i < rank; i++) f->dimLength[i] = dimLength[i];
    if (name == NULL || name[0] == 0) {
        snprintf(f->name, FTI_BUFS, "T%d", id);
    } else {
        snprintf(f->name, FTI_BUFS, "%s", name);
    }
}

int FTI_InitComplexType(FTIT_type *newType, FTIT_complexType *def, int length, size_t size,
                        char *name, FTIT_H5Group *h5group) {
    const char *fn = "FTI_InitComplexType";
    (void)h5group;
    if (!ftigo_capi_ready((char *)fn)) return FTI_NSCS;
    if (newType == NULL || def == NULL) return fail(fn, "newType or typeDefinition is NULL");
    if (length < 1 || length >= FTI_BUFS) return fail(fn, "a type has 1..255 fields");
    if (size > (size_t)INT64_MAX) return fail(fn, "size too large");
    for (int i = 0; i < length; i++) {
        FTIT_typeField *f = &def->field[i];
        if (f->rank < 1 || f->rank > 32) return fail(fn, "a field's rank must be 1..32 (fields 0..length-1 must be added)");
        for (int j = 0; j < f->rank; j++) {
            if (f->dimLength[j] < 1) return fail(fn, "a field's dimension length must be positive");
        }
    }
    int id = ftigo_capi_init_composite(name, (int64_t)size);
    if (id < 0) return FTI_NSCS;
    for (int i = 0; i < length; i++) {
        FTIT_typeField *f = &def->field[i];
        int rc;
        f->name[FTI_BUFS - 1] = 0;
        if (f->rank == 1 && f->dimLength[0] == 1) {
            rc = ftigo_capi_add_field((char *)fn, id, f->name, f->typeID, f->offset, -1, NULL);
        } else {
            int64_t dims[32];
            for (int j = 0; j < f->rank; j++) dims[j] = f->dimLength[j];
            rc = ftigo_capi_add_field((char *)fn, id, f->name, f->typeID, f->offset, f->rank, dims);
        }
        if (rc != FTI_SCES) return FTI_NSCS;
    }
    if (name != NULL && name[0] != 0) {
        snprintf(def->name, FTI_BUFS, "%s", name);
    } else {
        snprintf(def->name, FTI_BUFS, "Type%d", id);
    }
    def->length = length;
    *newType = id;
    return FTI_SCES;
}

int FTI_Protect(int id, void *ptr, int64_t count, fti_id_t type) {
    return ftigo_capi_protect(id, ptr, count, type);
}

int FTI_setIDFromString(const char *name) { return ftigo_capi_set_id((char *)name); }
int FTI_getIDFromString(const char *name) { return ftigo_capi_get_id((char *)name); }

int FTI_Checkpoint(int id, int level) {
    if (!mpi_usable("FTI_Checkpoint")) return FTI_NSCS;
    return ftigo_capi_checkpoint(id, level);
}

int FTI_Snapshot(void) {
    if (!mpi_usable("FTI_Snapshot")) return FTI_NSCS;
    return ftigo_capi_snapshot();
}

int FTI_Recover(void) {
    if (!mpi_usable("FTI_Recover")) return FTI_NREC;
    return ftigo_capi_recover();
}

int FTI_RecoverVarInit(void) { return ftigo_capi_recover_var_init(); }
int FTI_RecoverVar(int id) { return ftigo_capi_recover_var(id); }
int FTI_RecoverVarFinalize(void) { return ftigo_capi_recover_var_finalize(); }
int64_t FTI_GetStoredSize(int id) { return ftigo_capi_stored_size(id); }
int FTI_SetCompression(int id, FTIT_CPC_MODE mode, int parameter, FTIT_CPC_TYPE type) {
    return ftigo_capi_set_compression(id, (int)mode, parameter, (int)type);
}
void *FTI_Realloc(int id, void *ptr) { return ftigo_capi_realloc(id, ptr); }

int FTI_InitICP(int id, int level, bool activate) { return ftigo_capi_init_icp(id, level, activate ? 1 : 0); }
int FTI_AddVarICP(int varId) { return ftigo_capi_icp_step((char *)"FTI_AddVarICP", varId, 0); }
int FTI_FinalizeICP(void) { return ftigo_capi_icp_step((char *)"FTI_FinalizeICP", 0, 1); }

int FTI_GetStageDir(char *stageDir, int maxLen) { return ftigo_capi_stage_dir(stageDir, maxLen); }

int FTI_SendFile(const char *localPath, const char *remotePath) {
    return ftigo_capi_send_file((char *)localPath, (char *)remotePath);
}

int FTI_GetStageStatus(int requestId) { return ftigo_capi_stage_status(requestId); }

// HDF5 groups, global datasets and variable datasets (datasets.go). A
// group argument is its id, -1 for NULL (the root group).
static int group_id(const FTIT_H5Group *g) { return g == NULL ? -1 : g->id; }

int FTI_InitGroup(FTIT_H5Group *h5group, const char *name, FTIT_H5Group *parent) {
    const char *fn = "FTI_InitGroup";
    if (!ftigo_capi_ready((char *)fn)) return FTI_NSCS;
    if (h5group == NULL) return fail(fn, "h5group is NULL");
    char full[FTI_BUFS];
    int id = ftigo_capi_init_group((char *)name, group_id(parent), full);
    if (id < 0) return FTI_NSCS;
    memset(h5group, 0, sizeof *h5group);
    h5group->id = id;
    snprintf(h5group->name, FTI_BUFS, "%s", name);
    snprintf(h5group->fullName, FTI_BUFS, "%s", full);
    if (parent != NULL && parent->childrenNo >= 0 && parent->childrenNo < FTI_BUFS) {
        parent->childrenID[parent->childrenNo++] = id;
    }
    return FTI_SCES;
}

int FTI_RenameGroup(FTIT_H5Group *h5group, const char *name) {
    const char *fn = "FTI_RenameGroup";
    if (!ftigo_capi_ready((char *)fn)) return FTI_NSCS;
    if (h5group == NULL) return fail(fn, "h5group is NULL");
    char full[FTI_BUFS];
    int rc = ftigo_capi_rename_group(h5group->id, (char *)name, full);
    if (rc != FTI_SCES) return rc;
    snprintf(h5group->name, FTI_BUFS, "%s", name);
    snprintf(h5group->fullName, FTI_BUFS, "%s", full);
    return FTI_SCES;
}

int FTI_SetAttribute(int id, FTIT_attribute attribute, FTIT_attributeFlag flag) {
    attribute.name[FTI_BUFS - 1] = 0;
    return ftigo_capi_set_attribute(id, attribute.name, (int)flag);
}

int FTI_DefineDataset(int id, int rank, int64_t *dimLength, const char *name, FTIT_H5Group *h5group) {
    return ftigo_capi_define_dataset(id, rank, dimLength, (char *)name, group_id(h5group));
}

int FTI_DefineGlobalDataset(int id, int rank, FTIT_hsize_t *dimLength, const char *name,
                            FTIT_H5Group *h5group, fti_id_t type) {
    return ftigo_capi_define_global(id, rank, dimLength, (char *)name, group_id(h5group), type);
}

int FTI_AddSubset(int id, int rank, FTIT_hsize_t *offset, FTIT_hsize_t *count, int datasetId) {
    return ftigo_capi_add_subset(id, rank, offset, count, datasetId, 0);
}

int FTI_UpdateGlobalDataset(int id, int rank, FTIT_hsize_t *dimLength) {
    return ftigo_capi_update_global(id, rank, dimLength);
}

int FTI_UpdateSubset(int id, int rank, FTIT_hsize_t *offset, FTIT_hsize_t *count, int datasetId) {
    return ftigo_capi_add_subset(id, rank, offset, count, datasetId, 1);
}

int FTI_GetDatasetRank(int datasetId) { return ftigo_capi_dataset_rank(datasetId); }

// As in FTI, the extents are returned in a static array, overwritten by
// the next call.
FTIT_hsize_t *FTI_GetDatasetSpan(int datasetId, int rank) {
    static FTIT_hsize_t span[32];
    if (ftigo_capi_dataset_span(datasetId, rank, span) != FTI_SCES) return NULL;
    return span;
}

int FTI_RecoverDatasetDimension(int datasetId) { return ftigo_capi_recover_dim(datasetId); }

int FTI_BitFlip(int datasetId) {
    (void)datasetId;
    return ftigo_capi_unsupported((char *)"FTI_BitFlip", (char *)"bit-flip injection ([injection]) does not exist in ftigo; corrupt files with the vfd fault driver instead");
}

void FTI_Print(const char *msg, int priority) { ftigo_capi_print((char *)msg, priority); }

// ftigo's extensions (ftigo.h).

int ftigo_elem_type(int elemType) { return ftigo_capi_elem_type(elemType); }

const char *ftigo_last_error(void) {
    static char buf[4096];
    ftigo_capi_last_error(buf, (int)sizeof buf);
    return buf;
}

char *ftigo_offline_list(const char *run) { return ftigo_capi_offline_list((char *)run); }

char *ftigo_offline_vars(const char *run, int64_t seq, int rank) {
    return ftigo_capi_offline_vars((char *)run, seq, rank);
}

int ftigo_offline_read(const char *run, int64_t seq, int rank, int id, void *dst, int64_t n) {
    if (dst == NULL && n > 0) return fail("ftigo_offline_read", "dst is NULL");
    return ftigo_capi_offline_read((char *)run, seq, rank, id, dst, n);
}

void ftigo_free(void *p) { free(p); }

int ftigo_set_name(int id, const char *name) {
    if (name == NULL) return fail("FTI_SetAttribute", "name is NULL");
    FTIT_attribute a;
    memset(&a, 0, sizeof a);
    snprintf(a.name, FTI_BUFS, "%s", name);
    return FTI_SetAttribute(id, a, FTI_ATTRIBUTE_NAME);
}

int ftigo_set_dims(int id, int ndims, const int64_t *dims) {
    if (ndims < 1 || ndims > 32 || dims == NULL) return fail("FTI_SetAttribute", "dimensions: 1..32 of them");
    FTIT_attribute a;
    memset(&a, 0, sizeof a);
    a.dim.ndims = ndims;
    for (int i = 0; i < ndims; i++) a.dim.count[i] = dims[i];
    return FTI_SetAttribute(id, a, FTI_ATTRIBUTE_DIM);
}

int ftigo_init_icp(int id, int level, int activate) { return FTI_InitICP(id, level, activate != 0); }

int ftigo_should_exit(void) { return ftigo_capi_should_exit(); }
int ftigo_set_snapshot(int on, int64_t budget) { return ftigo_capi_set_snapshot(on, budget); }

int ftigo_fail(const char *fn, const char *msg) { return fail(fn == NULL ? "?" : fn, msg == NULL ? "" : msg); }
