/*
 * ftigo.h: ftigo's extensions to FTI's C interface, in libftigo.
 *
 * They are not FTI's: fti.h declares FTI's interface, this header what
 * ftigo adds for its Fortran module (fti.mod) and its Python package.
 * Every call follows fti.h's conventions: FTI_SCES, FTI_NSCS and FTI_NREC
 * as results, the reason of a failure logged and kept for
 * ftigo_last_error.
 */
#ifndef FTIGO_FTIGO_H
#define FTIGO_FTIGO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * FTI_Init with a Fortran communicator handle (MPI_Fint, as mpi4py's
 * Comm.py2f() and Fortran's integer communicators give it). On success
 * and on FTI_NREC, *appComm receives FTI_COMM_WORLD's Fortran handle;
 * on a head rank (FTI_HEAD) the handle given. The serial library (built
 * without MPI) ignores comm: one rank, an in-process world.
 */
int ftigo_init_f(const char *configFile, int comm, int *appComm);

/*
 * The handle of a type whose elements a checkpoint records typed, so Go
 * and Python read them as such: 1 int8, 2 int16, 3 int32, 4 int64,
 * 5 uint8, 6 uint16, 7 uint32, 8 uint64, 9 float32, 10 float64,
 * 11 complex64, 12 complex128. It is a predefined handle (FTI_INTG ...)
 * where one records that type. FTI_NSCS before FTI_Init or for another
 * number.
 */
int ftigo_elem_type(int elemType);

/*
 * The newest warning or error of the process's session: what the last
 * failed call logged ("" if none). Valid until the next call.
 */
const char *ftigo_last_error(void);

/*
 * FTI_SetAttribute without FTIT_attribute: the name (FTI_ATTRIBUTE_NAME)
 * or the ndims dimensions (FTI_ATTRIBUTE_DIM) of variable id.
 */
int ftigo_set_name(int id, const char *name);
int ftigo_set_dims(int id, int ndims, const int64_t *dims);

/* FTI_InitICP with an int for activate (0 false). */
int ftigo_init_icp(int id, int level, int activate);

/*
 * Snapshot mode (config.fti's ckpt_snapshot) on (1) or off (0) for every
 * later FTI_Init of the process, overriding config.fti: FTI_Checkpoint
 * then blocks only for a copy of the protected variables into staging
 * memory and the checkpoint is written, protected and committed in the
 * background. budget is the staging memory per rank in bytes
 * (snapshot_budget); 0 keeps config.fti's, or the default. FTI_NSCS
 * after FTI_Init or for a negative budget.
 */
int ftigo_set_snapshot(int on, int64_t budget);

/* Logs msg as fn's failure (ftigo_last_error) and returns FTI_NSCS. */
int ftigo_fail(const char *fn, const char *msg);

/*
 * 1 when the job should end: a stop signal, the halt file (ftigo halt)
 * or the allocation's end made the last FTI_Checkpoint or FTI_Snapshot
 * take the final checkpoint. The job then exits with status 0 without
 * FTI_Finalize, which would delete the checkpoints; the relaunch
 * restarts from the final one. 0 otherwise, and before FTI_Init.
 */
int ftigo_should_exit(void);

/*
 * ftigo_init_f on MPI_COMM_WORLD, for callers without MPI bindings of
 * their own: MPI_Init first when MPI is not initialised (plain MPI_Init:
 * MPI_THREAD_SINGLE). ftigo_finalize_world is FTI_Finalize, then
 * MPI_Finalize if ftigo_init_world initialised MPI.
 */
int ftigo_init_world(const char *configFile, int *appComm);
int ftigo_finalize_world(void);

/* 1 when the library was built without MPI (serial), else 0. */
int ftigo_serial(void);

/*
 * Offline reading, without a session, writing nothing. run is a run
 * directory holding config.fti, or a configuration file.
 *
 * ftigo_offline_list returns the committed checkpoints as a JSON array of
 * {"seq", "id", "level", "ranks", "time_ns", "dcp"}; ftigo_offline_vars
 * rank's variables in checkpoint seq as a JSON array of {"id", "name",
 * "type", "elem_size", "count", "size"}. Both return NULL on failure
 * (ftigo_last_error says why); free the result with ftigo_free.
 * ftigo_offline_read reads variable id of rank into dst, whose size n must
 * be the stored size, every block checked against its hash: FTI_SCES, or
 * FTI_NSCS with dst zeroed.
 */
char *ftigo_offline_list(const char *run);
char *ftigo_offline_vars(const char *run, int64_t seq, int rank);
int ftigo_offline_read(const char *run, int64_t seq, int rank, int id, void *dst, int64_t n);
void ftigo_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* FTIGO_FTIGO_H */
