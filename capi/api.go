//lint:file-ignore U1000 the C entry points in capi.go (build tag mpi) are the only callers of some methods; staticcheck -tags mpi checks them

package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"unsafe"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// FTI's return codes (fti.h).
const (
	codeSuccess    = 0  // FTI_SCES
	codeFailure    = -1 // FTI_NSCS
	codeNoRecovery = -2 // FTI_NREC
	codeCheckpoint = 1  // FTI_DONE
	codeHead       = 2  // FTI_HEAD: a head rank with keep_heads_alive = 1, after the job's finalize
	// codeHeadExit is ftigo's own: a head rank without keep_heads_alive,
	// after the job's finalize; fti.c then ends the process as FTI's
	// heads do (MPI_Finalize, exit(0)).
	codeHeadExit    = 3
	maxNameLen      = 255
	maxProtectBytes = math.MaxInt64 / 2
)

// session states.
type state int

const (
	stateNone   state = iota // before FTI_Init, or after FTI_Finalize
	stateReady               // FTI_Init succeeded
	stateFailed              // FTI_Init returned FTI_NREC: nothing runs until FTI_Finalize
)

// cvar is one variable protected through FTI_Protect.
type cvar struct {
	id    int
	ptr   unsafe.Pointer
	count int64
	typ   *ctype
}

func (v *cvar) bytes() int64 { return v.count * int64(v.typ.size) }

// library is one rank's FTI session: everything the C entry points do,
// over any comm.Comm, so that the tests can drive it in-process. The cgo
// layer holds one per process and serialises the calls.
type library struct {
	out, errOut io.Writer
	sizes       cSizes
	// worldRank names the process in messages logged before FTI_Init.
	worldRank func() int
	// realloc is C's realloc behind FTI_Realloc.
	realloc func(p unsafe.Pointer, n uintptr) unsafe.Pointer
	// opts are extra ckpt options (tests).
	opts []ckpt.Option
	// wrongThread, when set, says why the calling thread may not make
	// the session's MPI calls ("" when it may).
	wrongThread func(c comm.Comm) string
	// trace is FTIGO_TRACE's and FTIGO_CPUPROFILE's state (trace.go).
	trace tracer

	state     state
	finalized bool // FTI_Finalize has ended a session
	initErr   error
	rank      int
	comm      comm.Comm
	cfg       ckpt.Config
	cfgPath   string
	rt        *ckpt.Runtime
	log       *zap.Logger
	status    int
	types     *typeTable
	vars      map[int]*cvar
	names     map[string]int // FTI_setIDFromString
	idNames   map[int]string
	stored    map[int]int64 // sizes in the newest checkpoint this run took
	groups    *groupTable   // FTI_InitGroup
	dsGroup   map[int]int   // global dataset id -> its group
	subsetOf  map[int]int   // variable id -> the global dataset it is a subset of

	// lastMsg is the newest warning or error logged (ftigo_last_error).
	lastMsg string
	// extTypes are the handles of ftigo_elem_type, by element type.
	extTypes map[fileformat.ElemType]int

	// snap is ftigo_set_snapshot's setting for the next FTI_Init (nil:
	// config.fti's).
	snap *snapSetting

	reallocID  int // FTI_Realloc in progress (-1: none)
	reallocPtr unsafe.Pointer
}

func newLibrary(out, errOut io.Writer, sizes cSizes) *library {
	return &library{out: out, errOut: errOut, sizes: sizes, reallocID: -1}
}

// logger returns the session's logger, or one at verbosity 2 (info)
// before FTI_Init has read the configuration.
func (l *library) logger() *zap.Logger {
	if l.log != nil {
		return l.log
	}
	rank := 0
	if l.worldRank != nil {
		rank = l.worldRank()
	}
	return l.recorded(ckpt.NewFTILogger(2, l.out, l.errOut).With(zap.Int("rank", rank)))
}

// ready reports whether a session is running; if not it logs why fn
// cannot run.
func (l *library) ready(fn string) bool {
	switch l.state {
	case stateReady:
		if l.wrongThread != nil {
			if why := l.wrongThread(l.comm); why != "" {
				l.logger().Warn(fn + ": " + why)
				return false
			}
		}
		return true
	case stateFailed:
		l.logger().Warn(fn+": FTI_Init returned FTI_NREC (no checkpoint could be recovered on every rank); "+
			"nothing runs until FTI_Finalize, and every checkpoint is kept", zap.Error(l.initErr))
	default:
		if l.finalized {
			l.logger().Warn(fn + ": FTI is finalized; call FTI_Init to start a new session")
		} else {
			l.logger().Warn(fn + ": FTI is not initialized; call FTI_Init first")
		}
	}
	return false
}

// agree reports whether ok holds on every rank (a communication failure
// counts as false everywhere it is seen). Collective.
func (l *library) agree(ok bool) bool {
	v := int64(0)
	if ok {
		v = 1
	}
	all, err := l.comm.AllreduceInt64(v, comm.Min)
	if err != nil {
		l.logger().Error("agreeing with the other ranks failed", zap.Error(err))
		return false
	}
	return all == 1
}

// fail logs msg for fn and returns FTI_NSCS.
func (l *library) fail(fn, msg string, fields ...zap.Field) int {
	l.logger().Warn(fn+": "+msg, fields...)
	return codeFailure
}

// init is FTI_Init: it reads the configuration the way FTI reads it,
// starts the checkpoint runtime on c (a communicator the caller owns) and,
// on a restart, finds and rebuilds the newest recoverable checkpoint.
// FTI_NREC leaves the session failed: ftigo never restarts fresh while a
// checkpoint exists. Collective.
func (l *library) init(path string, c comm.Comm) int {
	const fn = "FTI_Init"
	if l.state != stateNone {
		return l.fail(fn, "FTI is already initialized; call FTI_Finalize before FTI_Init again")
	}
	l.rank = c.Rank()
	cfg, err := ckpt.LoadConfig(vfd.Sec2{}, path)
	if err == nil {
		l.snap.apply(&cfg)
	}
	l.comm = c
	if !l.agree(err == nil) {
		l.comm = nil
		if err == nil {
			err = errors.New("another rank could not read it")
		}
		l.logger().Error(fn+": cannot load the configuration file", zap.String("file", path), zap.Error(err))
		return codeFailure
	}
	// The runtime prints the lines of its default logger, as a Go
	// program's does, and keeps its warnings and errors as the last
	// message (ftigo_last_error). The default logger prints the
	// warnings, so they go nowhere else. The library's own lines go
	// through the runtime's logger.
	log := l.recorded(ckpt.NewFTILogger(cfg.Verbosity, l.out, l.errOut))
	opts := append([]ckpt.Option{ckpt.WithLogger(log), ckpt.WithWarnings(nil)}, l.opts...)
	log = log.With(zap.Int("rank", c.Rank()))
	if !cfg.LocalTest {
		// FTI groups ranks into nodes by host name unless local_test = 1.
		if host, herr := os.Hostname(); herr == nil {
			opts = append(opts, ckpt.WithNodeID(func(int) string { return host }))
		}
	}
	rt, err := ckpt.Init(cfg, c, opts...)
	if errors.Is(err, ckpt.ErrHead) {
		// head = 1: this rank served as its node's head until every
		// application rank finalized.
		l.comm = nil
		l.finalized = true
		if cfg.KeepHeadsAlive {
			return codeHead
		}
		return codeHeadExit
	}
	if err != nil {
		if errors.Is(err, ckpt.ErrUnrecoverable) {
			l.state, l.initErr, l.log = stateFailed, err, log
			log.Error(fn+": this is a restart, but no checkpoint can be recovered on every rank; "+
				"every checkpoint is kept (repair the storage, or remove meta_dir to start afresh)", zap.Error(err))
			return codeNoRecovery
		}
		l.comm = nil
		log.Error(fn+" failed", zap.String("file", path), zap.Error(err))
		return codeFailure
	}
	log = rt.Logger()
	l.state, l.initErr, l.log = stateReady, nil, log
	l.cfg, l.cfgPath, l.rt = cfg, path, rt
	// With head = 1 the library's collectives run between the application
	// ranks only (FTI_COMM_WORLD).
	l.comm, l.rank = rt.Comm(), rt.Comm().Rank()
	c = l.comm
	l.status = int(rt.Status())
	l.types = newTypeTable(l.sizes)
	l.vars, l.names, l.idNames, l.stored = map[int]*cvar{}, map[string]int{}, map[int]string{}, map[int]int64{}
	l.groups, l.dsGroup, l.subsetOf = newGroupTable(), map[int]int{}, map[int]int{}
	if err := l.trace.start(l.rank); err != nil {
		log.Warn(fn+": FTIGO_CPUPROFILE: no profile", zap.Error(err))
	}
	if c.Rank() == 0 {
		log.Info("FTI has been initialized by ftigo", zap.String("config", path), zap.Int("ranks", c.Size()),
			zap.Int("status", l.status))
	}
	return codeSuccess
}

// release ends the session state (FTI_Finalize, or a failed FTI_Init).
func (l *library) release() {
	l.state, l.finalized = stateNone, true
	l.rt, l.comm, l.log, l.initErr = nil, nil, nil, nil
	l.vars, l.names, l.idNames, l.stored, l.types = nil, nil, nil, nil, nil
	l.extTypes = nil
	l.groups, l.dsGroup, l.subsetOf = nil, nil, nil
	l.status = 0
}

// finalize is FTI_Finalize. Collective.
func (l *library) finalize() int {
	const fn = "FTI_Finalize"
	switch l.state {
	case stateNone:
		return l.fail(fn, "FTI is not initialized")
	case stateFailed:
		l.logger().Warn(fn + ": FTI_Init had failed (FTI_NREC); the session is released and every checkpoint is kept")
		l.release()
		return codeFailure
	}
	err := l.rt.Finalize()
	l.trace.stop()
	log, rank := l.log, l.rank
	l.release()
	if err != nil {
		log.Error(fn+" failed", zap.Error(err))
		return codeFailure
	}
	if rank == 0 {
		log.Info("FTI has been finalized by ftigo")
	}
	return codeSuccess
}

// statusCode is FTI_Status: 0 fresh run, 1 restart, 2 restart from the
// checkpoint kept by keep_last_ckpt; 0 again once FTI_Recover succeeded
// or a new checkpoint superseded the restart data.
func (l *library) statusCode() int {
	if l.state != stateReady {
		return 0
	}
	return l.status
}

// typeOf returns protected-type handle tid.
func (l *library) typeOf(tid int) (*ctype, error) { return l.types.get(tid) }

// initType is FTI_InitType: an opaque type of size bytes.
func (l *library) initType(size int64) int {
	if !l.ready("FTI_InitType") {
		return codeFailure
	}
	ct, err := l.types.add("", size, false)
	if err != nil {
		return l.fail("FTI_InitType", err.Error())
	}
	return ct.id
}

// initCompositeType is FTI_InitCompositeType.
func (l *library) initCompositeType(name string, size int64) int {
	if !l.ready("FTI_InitCompositeType") {
		return codeFailure
	}
	ct, err := l.types.add(name, size, true)
	if err != nil {
		return l.fail("FTI_InitCompositeType", err.Error())
	}
	return ct.id
}

// addField is FTI_AddScalarField (dims nil) and FTI_AddVectorField.
func (l *library) addField(fn string, id int, name string, fieldType int, offset int64, dims []int64) int {
	if !l.ready(fn) {
		return codeFailure
	}
	if err := l.types.addField(id, name, fieldType, offset, dims); err != nil {
		return l.fail(fn, err.Error())
	}
	return codeSuccess
}

// protect is FTI_Protect: registers count elements of type tid at ptr
// under id, or re-registers id with a new pointer, count and type. The
// memory is read in place by every checkpoint and written in place by
// FTI_Recover. Local.
func (l *library) protect(id int, ptr unsafe.Pointer, count int64, tid int) int {
	const fn = "FTI_Protect"
	if !l.ready(fn) {
		return codeFailure
	}
	if id < 0 || id > l.cfg.MaxVarID {
		return l.fail(fn, fmt.Sprintf("id %d out of bounds ([basic] max_var_id = %d)", id, l.cfg.MaxVarID))
	}
	ct, err := l.typeOf(tid)
	if err != nil {
		return l.fail(fn, fmt.Sprintf("variable %d: %v", id, err))
	}
	switch {
	case count < 0:
		return l.fail(fn, fmt.Sprintf("variable %d: negative count %d", id, count))
	case count > maxProtectBytes/int64(ct.size):
		return l.fail(fn, fmt.Sprintf("variable %d: %d elements of %d bytes is too large", id, count, ct.size))
	case ptr == nil && count > 0:
		return l.fail(fn, fmt.Sprintf("variable %d: NULL pointer for %d elements", id, count))
	}
	v := &cvar{id: id, ptr: ptr, count: count, typ: ct}
	if err := l.protectRaw(v); err != nil {
		return l.fail(fn, fmt.Sprintf("variable %d", id), zap.Error(err))
	}
	if prev, ok := l.vars[id]; ok {
		l.log.Debug(fmt.Sprintf("Variable ID %d re-protected: %d -> %d bytes", id, prev.bytes(), v.bytes()))
	}
	l.vars[id] = v
	l.log.Debug(fmt.Sprintf("Variable ID %d to protect (%d x %s). Current ckpt. size per rank is %.2fMB.",
		id, count, ct.name, float64(l.protectedBytes())/(1<<20)))
	return codeSuccess
}

// protectRaw registers v's memory with the runtime.
func (l *library) protectRaw(v *cvar) error {
	var mem []byte
	if n := v.bytes(); n > 0 {
		mem = unsafe.Slice((*byte)(v.ptr), n)
	}
	id := v.id
	return ckpt.ProtectRaw(l.rt, id, ckpt.Raw{
		Type: v.typ.elem, ElemSize: v.typ.size, Mem: mem, Name: l.idNames[id],
		Resize: func(n int64) ([]byte, error) { return l.resize(id, n) },
	})
}

func (l *library) protectedBytes() int64 {
	var n int64
	for _, v := range l.vars {
		n += v.bytes()
	}
	return n
}

// resize is a protected variable's ckpt.Raw.Resize: only FTI_Realloc may
// change the size of C memory; FTI_Recover and FTI_RecoverVar refuse a
// stored size that differs from the protected one, as FTI does.
func (l *library) resize(id int, n int64) ([]byte, error) {
	v := l.vars[id]
	if l.reallocID != id || v == nil {
		have := int64(-1)
		if v != nil {
			have = v.bytes()
		}
		return nil, fmt.Errorf("%w: cannot recover %d bytes into variable %d protected with %d bytes; "+
			"call FTI_Realloc, or FTI_Protect it with FTI_GetStoredSize bytes", ckpt.ErrVarMismatch, n, id, have)
	}
	p := l.realloc(l.reallocPtr, uintptr(n))
	if p == nil {
		return nil, fmt.Errorf("realloc of %d bytes failed", n)
	}
	v.ptr, v.count = p, n/int64(v.typ.size)
	return unsafe.Slice((*byte)(p), n), nil
}

// mapLevel turns FTI_Checkpoint's level into an ftigo level (1..4, 8
// for FTI_L4_DCP, 9 for FTI_L4_H5_SINGLE), or says why it cannot be taken. Levels 5-7 stay FTI's
// full L1-L3 here (ftigo's Go API makes them differential).
func mapLevel(level int) (int, string, bool) {
	switch {
	case level >= 1 && level <= 4:
		return level, "", true
	case level >= 5 && level <= 7:
		return level - 4, fmt.Sprintf("dCP only implemented for level 4! setting to level %d...", level-4), true
	case level == 8:
		// FTI_L4_DCP: differential with enable_dcp, else whole with
		// FTI's warning (the runtime decides).
		return level, "", true
	case level == ckpt.LevelH5Single:
		// FTI_L4_H5_SINGLE: one HDF5 file with h5_single_file_enable,
		// refused by the runtime otherwise.
		return level, "", true
	}
	return 0, fmt.Sprintf("Invalid level id %d! Aborting checkpoint creation... (use FTI_L1..FTI_L4)", level), false
}

// checkpoint is FTI_Checkpoint. Collective; every rank gets the same
// result, FTI_DONE when the checkpoint was committed. Every call reaches
// the runtime, whose first step agrees on the id and level over all ranks,
// so a level that is bad or differs on some rank fails everywhere and
// never leaves the others waiting; a level ftigo cannot take goes in as
// 0, which the runtime refuses after that agreement.
func (l *library) checkpoint(id, level int) int {
	const fn = "FTI_Checkpoint"
	if !l.ready(fn) {
		return codeFailure
	}
	lvl, msg, ok := mapLevel(level)
	if ok && msg != "" {
		l.log.Warn(fn + ": " + msg)
	}
	var err error
	l.trace.around(l.rank, id, level, func() int {
		err = l.rt.Checkpoint(int64(id), lvl) // lvl is 0 when !ok
		return 0
	})
	switch {
	case errors.Is(err, ckpt.ErrMismatchedCall):
		why := fmt.Sprintf("ranks passed different ids or levels (here id %d, level %d)", id, level)
		if !ok {
			why += "; and here: " + msg
		}
		return l.fail(fn, why, zap.Error(err))
	case !ok:
		if err == nil {
			l.log.Error(fn + ": the runtime accepted level 0")
		}
		return l.fail(fn, msg)
	case err != nil:
		return codeFailure // the runtime logged it, with the error
	}
	if lvl != ckpt.LevelH5Single {
		// A level-9 file stands outside the levels' rotation: it
		// supersedes no restart data and is not what FTI_Recover reads
		// in this run.
		l.committed()
	}
	return codeCheckpoint
}

// committed records the protected sizes of the checkpoint just taken
// (FTI_GetStoredSize after a checkpoint). A checkpoint taken on a restart
// before FTI_Recover supersedes the restart data (ckpt no longer offers
// it), so the run continues as recovered: FTI_Status returns 0 and
// FTI_Snapshot checkpoints instead of failing to recover.
func (l *library) committed() {
	l.status = 0
	clear(l.stored)
	for id, v := range l.vars {
		l.stored[id] = v.bytes()
	}
}

// snapshot is FTI_Snapshot: on a restart it recovers; otherwise it
// checkpoints when a level's interval is due. Collective.
func (l *library) snapshot() int {
	const fn = "FTI_Snapshot"
	if !l.ready(fn) {
		return codeFailure
	}
	if l.status != 0 {
		return l.recover(fn)
	}
	lvl, err := l.rt.Snapshot()
	if err != nil {
		return l.fail(fn, "checkpoint failed", zap.Error(err))
	}
	if lvl > 0 {
		l.committed()
		return codeCheckpoint
	}
	return codeSuccess
}

// config is the part of FTI_GetConfig ftigo can fill.
type config struct {
	ok                                           bool
	cfgFile, localDir, globalDir, metaDir, run   string
	keepLast, keepL4, localTest                  bool
	verbosity, blockSize, transferSize, maxVarID int
	nbProc, nbNodes, myRank, nodeSize, groupSize int
	nodeID, groupID, sectorID, groupRank         int
	right, left, nodeRank                        int
	intervalMinutes                              [5]int
	reco, ckptID, ckptLevel                      int
}

// getConfig is FTI_GetConfig.
func (l *library) getConfig() config {
	if !l.ready("FTI_GetConfig") {
		return config{}
	}
	c, p := l.cfg, l.rt.Placement()
	out := config{
		ok: true, cfgFile: l.cfgPath, localDir: c.CkptDir, globalDir: c.GlblDir, metaDir: c.MetaDir,
		keepLast: c.KeepLastCkpt, keepL4: c.KeepL4Ckpt, localTest: c.LocalTest,
		verbosity: c.Verbosity, blockSize: c.BlockSize, transferSize: c.TransferSize, maxVarID: c.MaxVarID,
		nbProc: l.comm.Size(), nbNodes: p.Nodes, myRank: l.rank, nodeSize: p.NodeSize, groupSize: p.GroupSize,
		nodeID: p.Node, groupID: p.Group, sectorID: p.Sector, groupRank: p.GroupRank,
		right: p.Right, left: p.Left, nodeRank: p.NodeRank,
		reco: l.status, run: l.rt.Run(),
	}
	for lv := 1; lv <= 4; lv++ {
		out.intervalMinutes[lv] = int(math.Ceil(c.Interval[lv].Minutes()))
	}
	if m := l.rt.Recovered(); m != nil {
		out.ckptID, out.ckptLevel = int(m.ID), int(m.Level)
	}
	return out
}
