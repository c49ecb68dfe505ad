package ckpt

import (
	"errors"

	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// Sentinel errors of the ckpt package. Every error the runtime returns from
// a collective call is identical on every rank.
var (
	// ErrConfig is wrapped by every configuration error; the message says
	// which key to change.
	ErrConfig = errors.New("ckpt: invalid configuration")
	// ErrLevelUnavailable is returned by Checkpoint for a level with no
	// implementation in this build, or one the topology cannot support.
	ErrLevelUnavailable = levels.ErrLevelUnavailable
	// ErrNoCheckpoint is returned by Recover, RecoverVar and StoredSize on a
	// fresh run before its first checkpoint, where there is nothing to
	// recover.
	ErrNoCheckpoint = errors.New("ckpt: no checkpoint to recover")
	// ErrUnrecoverable is returned by Init on a restart when committed
	// checkpoints exist but none can be recovered on every rank. ftigo never
	// falls back silently to a fresh start.
	ErrUnrecoverable = levels.ErrUnrecoverable
	// ErrNotProtected is returned for a variable id that was never protected.
	ErrNotProtected = errors.New("ckpt: variable not protected")
	// ErrVarMismatch is returned by Recover and RecoverVar when a protected
	// variable's element type or size differs from the stored one, or the
	// stored checkpoint lacks a protected variable.
	ErrVarMismatch = errors.New("ckpt: protected variable does not match the checkpoint")
	// ErrBadType is returned by Protect for an element type that holds
	// pointers (slices, strings, maps, interfaces, pointers) and so cannot be
	// stored byte for byte; implement [Serializer] instead.
	ErrBadType = errors.New("ckpt: element type is not fixed-size and pointer-free")
	// ErrBadID is returned for a negative id or one above max_var_id.
	ErrBadID = errors.New("ckpt: bad id")
	// ErrNameTaken is returned by Protect for a name another protected
	// variable already has: names must identify variables (RecoverVarByName).
	ErrNameTaken = errors.New("ckpt: variable name already protected under another id")
	// ErrBackground is wrapped by the error of a failed asynchronous
	// post-processing (inline_lL = 0): the checkpoint stays committed at
	// L1 and the one before it at its level. The message names the
	// checkpoint, the level, the ranks that failed and why. Checkpoint
	// (which then takes no new checkpoint) or Finalize reports it once;
	// CheckpointDone and CheckpointWait report it without clearing it.
	ErrBackground = errors.New("ckpt: background post-processing failed")
	// ErrICP is returned for a misuse of incremental checkpoints
	// (AddVarICP or FinalizeICP without BeginICP, BeginICP or Checkpoint
	// while one is open, a variable protected after BeginICP) and, on the
	// ranks concerned, when FinalizeICP finds protected variables that
	// were never added (then nothing is committed).
	ErrICP = errors.New("ckpt: incremental checkpoint")
	// ErrStaging is returned by the staging calls (StageDir, SendFile,
	// StageStatus, StageWait) without enable_staging = 1, or for a bad
	// request.
	ErrStaging = errors.New("ckpt: staging")
	// ErrHead is returned by Init on a head rank (head = 1): the rank
	// served as its node's post-processing rank until every application
	// rank finalized, and the job is over for it — the caller returns
	// (FTI's heads return FTI_HEAD with keep_heads_alive = 1 and never
	// return otherwise; ftigo's always return, with this error).
	ErrHead = errors.New("ckpt: this rank was a head: it post-processed its node's checkpoints until the application finalized; the job is over for it")
	// ErrHeadAppFailed is returned by Init on a head rank when Init failed
	// on the application ranks (which return the reason).
	ErrHeadAppFailed = errors.New("ckpt: this rank was a head: Init failed on the application ranks, see their error")
	// ErrFinalized is returned by every call after Finalize.
	ErrFinalized = errors.New("ckpt: runtime finalized")
	// ErrMetadataLost is returned by Init when a checkpoint's files or
	// damaged manifests exist but no valid manifest copy does, and no
	// marker says it was being written or deleted: its metadata was lost.
	// The message names the checkpoint, the damaged copies and the
	// surviving files, and says how to proceed; nothing is changed.
	ErrMetadataLost = levels.ErrMetadataLost
	// ErrOtherRun is returned when a file a run would overwrite or
	// restore from was written by another run (a level-9 HDF5 file in a
	// shared h5_single_file_dir): the message names the file and both runs.
	ErrOtherRun = errors.New("ckpt: file of another run")
	// ErrLocked is returned by Init (on every rank) and RebuildOffline
	// when another job, runtime or offline tool holds meta_dir's lock,
	// or the lock of the run's directory in glbl_dir. The message names
	// the holder as its lock file records it: program, pid, host and
	// start time.
	ErrLocked = vfd.ErrLocked
	// ErrNilArgument is returned by Init for a nil communicator and by
	// every method of a nil *Runtime (what a failed Init returns), and by
	// Protect and ProtectValue given a nil runtime.
	ErrNilArgument = errors.New("ckpt: nil argument")
	// ErrClosed is returned by every call after [Runtime.Close] (except
	// Close itself).
	ErrClosed = errors.New("ckpt: runtime closed")
	// ErrMismatchedCall is returned when ranks call a collective with
	// different arguments (checkpoint id or level).
	ErrMismatchedCall = errors.New("ckpt: ranks disagree on the call's arguments")
	// ErrDataset is wrapped by every error about global datasets and
	// subsets (DefineDataset, AddSubset, and their check at Checkpoint and
	// at a redistributing Recover), together with the dataset package's
	// sentinel saying what is wrong (dataset.ErrOverlap, ErrGap,
	// ErrDuplicate, ErrInvalid, ErrUnknown, ErrMismatch).
	ErrDataset = errors.New("ckpt: global dataset")
)
