/*
 * fti.h: FTI 1.6's public C interface, implemented by ftigo (libftigo).
 *
 * Names, types, constants and return codes are FTI's, so C and C++ codes
 * written for FTI compile against this header unchanged and link with
 * -lftigo instead of -lfti. What ftigo does not implement yet is declared
 * all the same and returns FTI_NSCS, logging why (see capi/doc.go for the
 * state of every function).
 *
 * Build libftigo.so for the MPI the application uses (the MPI_Comm type
 * differs between Open MPI and MPICH):
 *   go build -buildmode=c-shared -tags mpi          -o DIR/libftigo.so ./capi   (Open MPI)
 *   go build -buildmode=c-shared -tags 'mpi mpich'  -o DIR/libftigo.so ./capi   (MPICH)
 * and compile with
 *   mpicc prog.c -I.../capi/include -LDIR -lftigo -Wl,-rpath,DIR
 */
#ifndef FTIGO_FTI_H
#define FTIGO_FTI_H

/* FTIGO_SERIAL is defined by ftigo's serial build (no MPI): the calls
 * that take or give an MPI communicator are then absent. */
#ifndef FTIGO_SERIAL
#include <mpi.h>
#endif
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Constants --------------------------------------------------------- */

/** Size of FTI's string buffers (names, paths). */
#define FTI_BUFS 256
/** Word size of FTI's Reed-Solomon encoding (kept for source compatibility). */
#define FTI_WORD 16

/** A checkpoint was taken (FTI_Checkpoint, FTI_Snapshot). */
#define FTI_DONE 1
/** Success. */
#define FTI_SCES 0
/** Failure. */
#define FTI_NSCS -1
/** Nothing recoverable (FTI_Init on a restart, FTI_Recover). */
#define FTI_NREC -2
/** Returned to head ranks (ftigo has no heads). */
#define FTI_HEAD 2

/** Message priorities for FTI_Print (and verbosity levels). */
#define FTI_DBUG 1
#define FTI_INFO 2
#define FTI_WARN 3
#define FTI_EROR 4
#define FTI_IDCP 5

/** Stage request states (FTI_GetStageStatus). */
#define FTI_SI_NINI 0x0
#define FTI_SI_PEND 0x1
#define FTI_SI_ACTV 0x2
#define FTI_SI_SCES 0x3
#define FTI_SI_FAIL 0x4

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Types -------------------------------------------------------------- */

/** Handle of an FTI object (data types). */
typedef int fti_id_t;
/** FTI 1.4 and earlier named data type handles FTIT_type. */
#define FTIT_type fti_id_t

/** Sizes and offsets in the HDF5 calls (int64_t, as in FTI built without HDF5). */
typedef int64_t FTIT_hsize_t;

/** Checkpoint levels (FTI_Checkpoint's second argument). */
typedef enum FTIT_level {
    FTI_L1 = 1,
    FTI_L2,
    FTI_L3,
    FTI_L4,
    FTI_L1_DCP,
    FTI_L2_DCP,
    FTI_L3_DCP,
    FTI_L4_DCP,
    FTI_L4_H5_SINGLE,
    FTI_MIN_LEVEL_ID = FTI_L1,
    FTI_MAX_LEVEL_ID = FTI_L4_H5_SINGLE
} FTIT_level;

/**
 * An HDF5 group (FTI_InitGroup): id is its handle, fullName its path
 * ("/fields"); the global datasets defined in it live under that path in
 * ftigo's HDF5 checkpoints (ckpt_io = 5, level 9).
 */
typedef struct FTIT_H5Group {
    int id;
    char name[FTI_BUFS];
    char fullName[FTI_BUFS];
    int childrenNo;
    int childrenID[FTI_BUFS];
} FTIT_H5Group;

/** Dimensions of a variable (FTI_SetAttribute). */
typedef struct FTIT_shape {
    int ndims;
    int64_t count[32];
} FTIT_shape;

/** Descriptive attributes of a variable (FTI_SetAttribute). */
typedef struct FTIT_attribute {
    char name[FTI_BUFS];
    FTIT_shape dim;
} FTIT_attribute;

/** Which attributes FTI_SetAttribute sets (bitwise or). */
typedef enum FTIT_attributeFlag {
    FTI_ATTRIBUTE_NONE = 0,
    FTI_ATTRIBUTE_NAME = 1,
    FTI_ATTRIBUTE_DIM = 2
} FTIT_attributeFlag;

/**
 * One field of a composite type in the interface FTI had before 1.4.1
 * (FTI_AddSimpleField, FTI_AddComplexField, FTI_InitComplexType), kept by
 * ftigo for codes that still use it.
 */
typedef struct FTIT_typeField {
    fti_id_t typeID;
    int offset;
    int rank;
    int dimLength[32];
    char name[FTI_BUFS];
} FTIT_typeField;

/** A composite type definition, filled by FTI_AddSimpleField/FTI_AddComplexField. */
typedef struct FTIT_complexType {
    char name[FTI_BUFS];
    int length;
    FTIT_typeField field[FTI_BUFS];
} FTIT_complexType;

/*
 * What FTI_GetConfig returns. ftigo fills the fields below, named as in
 * FTI; FTI's internal fields that have no meaning in ftigo (MPI tags, dCP
 * tables, I/O modes, head ranks) are not present, so a code reading them
 * fails to compile rather than read garbage.
 */
typedef struct FTIT_configuration {
    char cfgFile[FTI_BUFS];   /* configuration file */
    int saveLastCkpt;         /* [basic] keep_last_ckpt */
    bool keepL4Ckpt;          /* [basic] keep_l4_ckpt */
    int verbosity;            /* [basic] verbosity */
    int blockSize;            /* [advanced] block_size, bytes */
    int transferSize;         /* [advanced] transfer_size, bytes */
    int maxVarId;             /* [basic] max_var_id */
    int test;                 /* [advanced] local_test */
    char localDir[FTI_BUFS];  /* [basic] ckpt_dir */
    char glbalDir[FTI_BUFS];  /* [basic] glbl_dir */
    char metadDir[FTI_BUFS];  /* [basic] meta_dir */
} FTIT_configuration;

typedef struct FTIT_topology {
    int nbProc;     /* ranks */
    int nbNodes;    /* nodes */
    int myRank;     /* this rank in FTI_COMM_WORLD */
    int splitRank;  /* the same: ftigo has no heads */
    int nodeSize;   /* ranks per node */
    int nbHeads;    /* always 0 */
    int nbApprocs;  /* application ranks per node (= nodeSize) */
    int groupSize;  /* nodes per group */
    int sectorID;
    int nodeID;
    int groupID;
    int amIaHead;   /* always 0 */
    int nodeRank;   /* this rank's index within its node */
    int groupRank;  /* this rank's position in its group ring */
    int right;      /* right neighbour in the ring (a rank) */
    int left;       /* left neighbour in the ring (a rank) */
} FTIT_topology;

typedef struct FTIT_checkpoint {
    int ckptIntv;   /* FTI_Snapshot interval in minutes (rounded up), 0 if off */
} FTIT_checkpoint;

typedef struct FTIT_execution {
    char id[FTI_BUFS]; /* the run id (FTI's exec_id): it names the run's directories */
    int reco;       /* FTI_Status() */
    int ckptId;     /* id of the checkpoint this run restarted from, 0 if none */
    int ckptLvel;   /* its level */
} FTIT_execution;

typedef struct FTIT_allConfiguration {
    FTIT_configuration configuration;
    FTIT_execution execution;
    FTIT_topology topology;
    FTIT_checkpoint checkpoint[5];
} FTIT_allConfiguration;

/* ---- Globals (valid after FTI_Init) -------------------------------------- */

#ifndef FTIGO_SERIAL
/** The application's communicator: use it instead of MPI_COMM_WORLD. */
extern MPI_Comm FTI_COMM_WORLD;
#endif

/** Predefined data types: char, short, int, long, their unsigned forms, float, double, long double. */
extern fti_id_t FTI_CHAR;
extern fti_id_t FTI_SHRT;
extern fti_id_t FTI_INTG;
extern fti_id_t FTI_LONG;
extern fti_id_t FTI_UCHR;
extern fti_id_t FTI_USHT;
extern fti_id_t FTI_UINT;
extern fti_id_t FTI_ULNG;
extern fti_id_t FTI_SFLT;
extern fti_id_t FTI_DBLE;
extern fti_id_t FTI_LDBE;

/* ---- Lifecycle ------------------------------------------------------------ */

#ifndef FTIGO_SERIAL
int FTI_Init(const char *configFile, MPI_Comm globalComm);
#endif
int FTI_Status(void);
int FTI_Finalize(void);

/* ---- Data types ----------------------------------------------------------- */

int FTI_InitType(fti_id_t *type, int size);
fti_id_t FTI_InitCompositeType(const char *name, size_t size, FTIT_H5Group *h5group);
int FTI_AddScalarField(fti_id_t id, const char *name, fti_id_t fieldType, int64_t offset);
int FTI_AddVectorField(fti_id_t id, const char *name, fti_id_t fieldType, int64_t offset,
                       int ndims, int64_t *dimSizes);
/* Before FTI 1.4.1 (kept by ftigo): fill a definition, then create the type from it. */
void FTI_AddSimpleField(FTIT_complexType *typeDefinition, FTIT_type *ftiType, size_t offset,
                        int id, char *name);
void FTI_AddComplexField(FTIT_complexType *typeDefinition, FTIT_type *ftiType, size_t offset,
                         int rank, int *dimLength, int id, char *name);
int FTI_InitComplexType(FTIT_type *newType, FTIT_complexType *typeDefinition, int length,
                        size_t size, char *name, FTIT_H5Group *h5group);

/* ---- Protection and checkpoints ------------------------------------------ */

int FTI_Protect(int id, void *ptr, int64_t count, fti_id_t type);
int FTI_setIDFromString(const char *name);
int FTI_getIDFromString(const char *name);
int FTI_Checkpoint(int id, int level);
int FTI_Snapshot(void);

/* ---- Recovery ------------------------------------------------------------- */

int FTI_Recover(void);
int FTI_RecoverVarInit(void);
int FTI_RecoverVar(int id);
int FTI_RecoverVarFinalize(void);
int64_t FTI_GetStoredSize(int id);
void *FTI_Realloc(int id, void *ptr);

/* ---- Compression (FTI's compression branch; ftigo adds FTI_CPC_ZSTD) ----- */

/** How FTI_SetCompression stores a variable. */
typedef enum FTIT_CPC_MODE {
    FTI_CPC_NONE = 0,   /* as it is */
    FTI_CPC_FPZIP = 1,  /* not offered by ftigo */
    FTI_CPC_ZFP = 2,    /* not offered by ftigo */
    FTI_CPC_SINGLE = 3, /* double stored as float (lossy) */
    FTI_CPC_HALF = 4,   /* double or float stored as half (lossy) */
    FTI_CPC_STRIP = 5,  /* mantissa cut to `parameter` bits (lossy) */
    FTI_CPC_ZSTD = 16   /* zstd per dCP block (lossless, ftigo) */
} FTIT_CPC_MODE;

/** What FTI_SetCompression's parameter means. */
typedef enum FTIT_CPC_TYPE {
    FTI_CPC_TYPE_NONE = 0,
    FTI_CPC_ACCURACY = 1, /* not offered by ftigo */
    FTI_CPC_PRECISION = 2 /* parameter counts mantissa bits */
} FTIT_CPC_TYPE;

int FTI_SetCompression(int id, FTIT_CPC_MODE mode, int parameter, FTIT_CPC_TYPE type);

/* ---- Incremental checkpoints (not implemented by ftigo yet) --------------- */

int FTI_InitICP(int id, int level, bool activate);
int FTI_AddVarICP(int varId);
int FTI_FinalizeICP(void);

/* ---- Staging (not implemented by ftigo yet) ------------------------------- */

int FTI_GetStageDir(char *stageDir, int maxLen);
int FTI_SendFile(const char *localPath, const char *remotePath);
int FTI_GetStageStatus(int requestId);

/*
 * ---- HDF5 groups, global datasets, restarts on another rank count ---------
 * Global datasets let a restart on any number of ranks recover each
 * rank's subsets (FTI_Recover and FTI_RecoverVar are then collective).
 * FTI_SetAttribute with FTI_ATTRIBUTE_DIM returns FTI_NSCS (not stored).
 */

int FTI_InitGroup(FTIT_H5Group *h5group, const char *name, FTIT_H5Group *parent);
int FTI_RenameGroup(FTIT_H5Group *h5group, const char *name);
int FTI_SetAttribute(int id, FTIT_attribute attribute, FTIT_attributeFlag flag);
int FTI_DefineDataset(int id, int rank, int64_t *dimLength, const char *name, FTIT_H5Group *h5group);
int FTI_DefineGlobalDataset(int id, int rank, FTIT_hsize_t *dimLength, const char *name,
                            FTIT_H5Group *h5group, fti_id_t type);
int FTI_AddSubset(int id, int rank, FTIT_hsize_t *offset, FTIT_hsize_t *count, int datasetId);
int FTI_UpdateGlobalDataset(int id, int rank, FTIT_hsize_t *dimLength);
int FTI_UpdateSubset(int id, int rank, FTIT_hsize_t *offset, FTIT_hsize_t *count, int datasetId);
int FTI_GetDatasetRank(int datasetId);
FTIT_hsize_t *FTI_GetDatasetSpan(int datasetId, int rank);
int FTI_RecoverDatasetDimension(int datasetId);

/* ---- Miscellaneous -------------------------------------------------------- */

int FTI_BitFlip(int datasetId);
#ifndef FTIGO_SERIAL
FTIT_allConfiguration FTI_GetConfig(const char *configFile, MPI_Comm globalComm);
#endif
void FTI_Print(const char *msg, int priority);

#ifdef __cplusplus
}
#endif

#endif /* FTIGO_FTI_H */
