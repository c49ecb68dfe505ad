package ckpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/internal/policy"
	"github.com/ftigo/ftigo/vfd"
)

// Status says how the run started.
type Status int

// Run statuses, with FTI_Status's numbers.
const (
	// Fresh is a first run: nothing to recover.
	Fresh Status = 0
	// Restart is a restart from the newest recoverable checkpoint.
	Restart Status = 1
	// RestartKept is a restart from the checkpoint the previous run kept at
	// Finalize (keep_last_ckpt).
	RestartKept Status = 2
	// RestartVPR is a restart from a level-9 HDF5 file (FTI's variate
	// processor restart), on any number of ranks.
	RestartVPR Status = 3
)

// String returns "fresh", "restart" or "restart-kept".
func (s Status) String() string {
	switch s {
	case Fresh:
		return "fresh"
	case Restart:
		return "restart"
	case RestartKept:
		return "restart-kept"
	case RestartVPR:
		return "restart-vpr"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// Option configures [Init].
type Option func(*options)

type options struct {
	logger *zap.Logger
	// stdout and stderr are where the default logger prints (WithOutput).
	stdout, stderr io.Writer
	warn           io.Writer
	warnSet        bool
	now            func() time.Time
	local          vfd.Driver
	global         vfd.Driver
	meta           vfd.Driver
	levels         []levels.Level
	nodeID         func(rank int) string
	// restartImage is the Env.ImageLimit of every rank when set
	// (WithRestartImage), else [restartImageDefault].
	restartImage    int64
	restartImageSet bool
	// pageHandover lets Recover remap the image's pages into the
	// variables (WithPageHandover; default: comm.IsInProcess).
	pageHandover    bool
	pageHandoverSet bool
	// lockHeld says the caller (RebuildOffline) holds the run's locks;
	// run is then the run's id.
	lockHeld bool
	run      string
	// offline makes Init open the checkpoints without restarting from one
	// (RebuildCheckpointsOffline recovers each itself).
	offline bool
	// postStart, when set, is called by the background poster before it
	// starts (tests hold it there).
	postStart func()
	// signals replaces the stop signals (tests); getenv reads the
	// environment (Slurm's job end time; default os.Getenv).
	signals chan os.Signal
	getenv  func(string) string
}

// WithLogger sets the logger. Without it (or with nil) the runtime
// prints as FTI does, at the configuration's verbosity: see
// [NewFTILogger] and [WithOutput]. WithLogger(zap.NewNop()) silences
// it. The runtime adds the fields "rank" (the rank in the communicator
// given to Init) and, with head = 1, "app-rank" (the rank among the
// application ranks) or "head"; it filters the logger at the
// verbosity.
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.logger = l } }

// WithOutput sets where the default logger prints (see [NewFTILogger]):
// information and debug lines to stdout, warnings and errors to stderr
// (default os.Stdout and os.Stderr; nil: nowhere). Without effect with
// [WithLogger].
func WithOutput(stdout, stderr io.Writer) Option {
	return func(o *options) { o.stdout, o.stderr = orDiscard(stdout), orDiscard(stderr) }
}

// WithWarnings sets where rank 0 prints, besides the log, the warnings a
// user must see even when the log goes elsewhere: a restart that skipped
// unrecoverable newer checkpoints and fell back to an older one (nil:
// nowhere). By default they are printed on os.Stderr when [WithLogger]
// is given, and only by the default logger otherwise.
func WithWarnings(w io.Writer) Option {
	return func(o *options) { o.warn, o.warnSet = orDiscard(w), true }
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// WithClock sets the clock used for timing and Snapshot intervals.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithDriver sets the driver of all three storage areas (default vfd.Sec2{}).
func WithDriver(d vfd.Driver) Option {
	return func(o *options) { o.local, o.global, o.meta = d, d, d }
}

// WithDrivers sets the drivers of the node-local, global and meta areas separately.
func WithDrivers(local, global, meta vfd.Driver) Option {
	return func(o *options) { o.local, o.global, o.meta = local, global, meta }
}

// withLevels registers level implementations after the built-in ones:
// levels.Local1, Partner2, RS3, and Global4 with Inline.
// (Inline: each rank writes its L4 data straight into the global container.)
// A later registration of the same level number wins.
// So withLevels(levels.Global4{}) restores the local-then-copy L4.
// Only tests use it, through export_test.go.
func withLevels(ls ...levels.Level) Option {
	return func(o *options) { o.levels = append(o.levels, ls...) }
}

// WithNodeID names the node of this rank (a host name); rank is the
// rank in the communicator given to Init (with head = 1 too: the
// application ranks keep the node the function named for their rank
// there). By default nodes are simulated (rank/node_size) under
// local_test, taken from the communicator when it implements
// comm.NodeIDer, and simulated otherwise.
func WithNodeID(f func(rank int) string) Option { return func(o *options) { o.nodeID = f } }

// DefaultRestartImage is the most [WithRestartImage] allows by default:
// 1 GiB per rank, and no more than a quarter of the node's memory for
// all its ranks together (physical memory / (4 × node_size)).
const DefaultRestartImage = 1 << 30

// restartImageDefault is the default Env.ImageLimit for nodeSize ranks
// per node (see DefaultRestartImage).
func restartImageDefault(nodeSize int) int64 {
	limit := int64(DefaultRestartImage)
	if mem := vfd.PhysicalMemory(); mem > 0 {
		limit = min(limit, mem/int64(4*max(nodeSize, 1)))
	}
	return limit
}

// WithRestartImage sets how large this rank's data of the checkpoint a
// restart recovers may be for Init to keep it in memory (default: see
// [DefaultRestartImage]; zero or negative: never). Init verifies every
// byte of the checkpoint before the run goes on; with the data in memory
// it reads each byte from storage once, as it verifies it, and Recover
// hands the verified bytes over to the protected variables, instead of
// reading the files a second time: the whole memory pages of the image
// that line up with a variable's become the variable's (Linux mremap; no
// byte copied, no page of the variable touched; vfd.MovePages), the rest
// is copied. A variable restored that way and asked for again before the
// others were (RecoverVar) is read from storage and checked again. The memory (the size of the rank's
// checkpoint file) is held from Init until the data is restored (Recover,
// or RecoverVar of every variable), the next checkpoint, Finalize or
// Close. A differential checkpoint's chain and an L4 HDF5 file
// (ckpt_io = 5) are always read from storage. On a restart of another
// shape the same limit bounds all the old ranks' files a rank verifies
// and keeps: it then sends the other ranks what they need of them over
// the communicator (each byte is read from storage once), and lets go of
// them once Recover has restored every variable.
func WithRestartImage(bytes int64) Option {
	return func(o *options) { o.restartImage, o.restartImageSet = bytes, true }
}

// WithPageHandover says whether Recover may hand the restart image's
// memory pages over to the protected variables (see [WithRestartImage])
// instead of copying them. By default it does so only when every rank is
// a goroutine of this process (the in-process world, comm.IsInProcess):
// under MPI a variable may have been registered with the network device
// by the MPI library's registration cache, which remapping its pages
// behind the library's back would leave pointing at the old pages, so
// the bytes are copied there unless the caller turns this on.
func WithPageHandover(on bool) Option {
	return func(o *options) { o.pageHandover, o.pageHandoverSet = on, true }
}

// Runtime is one rank's checkpoint runtime. Its collective methods (Init,
// Checkpoint, Snapshot, Finalize) must be called by every rank in the same
// order; Protect, Recover, RecoverVar, StoredSize, Realloc and Close are
// local. A Runtime is used by one goroutine (its rank's).
//
// Every method of a nil *Runtime (what a failed Init returns) returns an
// error wrapping [ErrNilArgument], or the zero value for those without an
// error result; none panics.
type Runtime struct {
	cfg    Config
	c      comm.Comm
	log    *zap.Logger
	now    func() time.Time
	topo   *partner.Topology
	env    *levels.Env
	eng    *levels.Engine
	status Status
	claim  *runClaim // the run's locks (rank 0)
	run    string    // the run's id (run.go)

	vars  map[int]*variable
	order []int // protect order
	// comp holds the compression set for a variable (SetCompression,
	// ProtectWith); it outlives a new Protect of the same id.
	comp map[int]Compression

	// recovered is what Recover reads: the checkpoint Init restarted
	// from, then the last checkpoint this run committed.
	recovered *levels.Manifest
	from      *levels.Manifest // the checkpoint Init restarted from
	src       levels.Source    // where Recover reads: a data file, an L4 task, or a chain's image
	srcTask   *levels.File     // with ckpt_io = 5: src is the L4 HDF5 file this entry describes
	stored    *storedFile      // the data file Recover reads, opened lazily
	imageRead map[int32]bool   // variables restored from src.Image so far
	handover  bool             // Recover may take src.Image's pages (WithPageHandover)
	restored  bool             // Recover has run, or a checkpoint was taken (Snapshot then ticks)
	lastID    int64
	last      *levels.Manifest // the newest checkpoint this run committed
	// layout is the FTI-FF layout of the last committed checkpoint (or of
	// the recovered file), passed to the next fileformat.Write.
	layout *fileformat.Layout
	// images holds, with enable_dcp, the image (layout and block hashes)
	// of every committed checkpoint this run wrote or recovered: the
	// parents a differential checkpoint may build on.
	images map[uint64]fileformat.Parent

	snap      snapState
	finalized bool
	closed    bool

	// Global datasets (global.go): this rank's definitions and the
	// subsets of its variables; dsVersion counts changes, dsChecked is
	// the version the last collective check saw.
	datasets  map[int32]Dataset
	subsets   map[int]fileformat.Subset
	dsVersion uint64
	dsChecked uint64
	// reshape is set after a restart from data of another shape
	// (reshape.go), until the run commits a checkpoint of its own.
	reshape *reshapeState
	// nodeStore is the local area of node n as this rank sees it.
	nodeStore func(n int) levels.Store
	// vpr is the level-9 HDF5 file state (h5single.go).
	vpr vprState
	// post is the asynchronous post-processing state (async.go).
	post postState
	// scopy is the snapshot mode's state (ckpt_snapshot, snapcopy.go).
	scopy copyState
	// icp is the incremental checkpoint open on this rank (icp.go).
	icp *icpState
	// icpInactive: the last BeginICP had activate = false, so AddVarICP
	// and FinalizeICP do nothing until the next BeginICP.
	icpInactive bool
	// stage is the staging queue (staging.go).
	stage stager
	// topoIDs are every rank's node id, gathered only when the ranks are
	// not placed on nodes in blocks (topology.go, heads.go).
	topoIDs []string
	// pol is the interval and stop state (interval.go, stop.go).
	pol policyState
}

// usable returns nil when the runtime can take the call.
func (r *Runtime) usable(call string) error {
	switch {
	case r == nil:
		return fmt.Errorf("%w: %s on a nil *ckpt.Runtime (did Init fail?)", ErrNilArgument, call)
	case r.closed:
		return fmt.Errorf("%w: %s after Close", ErrClosed, call)
	case r.finalized:
		return ErrFinalized
	}
	return nil
}

// Init starts the runtime on this rank: it validates cfg for the
// communicator's size, locks meta_dir against other jobs, finds the
// job's run (the one meta_dir names, the one cfg.Run names, or a new
// one; see the package documentation) and locks its directory, builds the
// topology (remapped onto replacement nodes on a restart), creates the
// directories, puts the checkpoint metadata in order (repairing a damaged
// or missing manifest copy from the other one), removes what a crashed
// run left half-written, and on a restart recovers the newest checkpoint
// every rank can read before it returns: every file of it is verified,
// lost or damaged files are rebuilt from redundancy, and an unrecoverable
// checkpoint is passed over for the next older one, with a warning on
// rank 0's standard error (see [WithWarnings]) and in the log naming
// what was skipped and why. Collective; the status and any error are
// identical on every rank.
//
// A checkpoint written by another number of ranks or another placement,
// or a level-9 HDF5 file, is recovered too: every old rank's data is
// verified by a rank that can read it, and Recover redistributes it (see
// the package documentation).
//
// Init never starts fresh while a checkpoint exists: a restart whose
// checkpoints are all unrecoverable returns an error wrapping
// [ErrUnrecoverable], one whose checkpoint metadata is lost (files or
// damaged manifests, no valid manifest copy) an error wrapping
// [ErrMetadataLost] naming them, and meta_dir or the run in use by
// another job or runtime an error wrapping [ErrLocked] naming it.
func Init(cfg Config, c comm.Comm, opts ...Option) (rt *Runtime, err error) {
	if c == nil {
		return nil, fmt.Errorf("%w: Init needs a communicator, got a nil comm.Comm", ErrNilArgument)
	}
	o := options{local: vfd.Sec2{}, global: vfd.Sec2{}, meta: vfd.Sec2{}, stdout: os.Stdout, stderr: os.Stderr}
	for _, opt := range opts {
		opt(&o)
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.getenv == nil {
		o.getenv = os.Getenv
	}
	cfg = cfg.withDefaults()
	if o.logger == nil {
		o.logger = NewFTILogger(cfg.Verbosity, o.stdout, o.stderr)
		if !o.warnSet {
			o.warn = io.Discard // the default logger prints them
		}
	} else if !o.warnSet {
		o.warn = os.Stderr
	}
	o.logger = atVerbosity(o.logger, cfg.Verbosity)
	start, worldRank := o.now(), c.Rank()
	r := &Runtime{cfg: cfg, c: c, log: rankLogger(o.logger, worldRank, -1), now: o.now, vars: map[int]*variable{}}
	r.post.hook = o.postStart
	if c.Rank() == 0 {
		for _, w := range cfg.Warnings {
			r.log.Warn("config: " + w)
		}
		if cfg.EnableDCP {
			mode := "dcp_mode not set"
			if name, ok := map[int]string{dcpModeMD5: "MD5", dcpModeCRC32: "CRC32"}[cfg.DCPMode]; ok {
				mode = fmt.Sprintf("dcp_mode = %d (%s in FTI) accepted", cfg.DCPMode, name)
			}
			r.log.Info(fmt.Sprintf("dCP enabled: %s, but ftigo hashes every dCP block with BLAKE3-256; blocks of %d bytes, chains of at most %d layers",
				mode, cfg.DCPBlockSize, cfg.DCPStackSize),
				zap.Int("dcp-mode", cfg.DCPMode), zap.Int("dcp-block-size", cfg.DCPBlockSize), zap.Int("dcp-stack-size", cfg.DCPStackSize))
		}
	}
	verr := cfg.Validate(c.Size())
	if err := comm.Agree(c, verr, "validate config"); err != nil {
		var ae *comm.AgreedError
		if verr != nil && errors.As(err, &ae) && len(ae.Ranks) == c.Size() {
			// Every rank refused its configuration (the same file, as a
			// rule): its own reason, without the vote around it.
			return nil, verr
		}
		return nil, err
	}
	var headNode comm.Comm
	if cfg.Head {
		s, serr := splitHeads(c, cfg, o)
		if serr != nil {
			return nil, serr
		}
		if s.head {
			defer catchStopSignals(cfg)()
			return nil, runHead(cfg, o, s, r.log.With(zap.Bool(fieldHead, true)))
		}
		// The application ranks run as a job of node_size-1 ranks per node,
		// on the nodes the split found.
		c, headNode = s.app, s.node
		o.nodeID = func(int) string { return s.nodeID }
		cfg.NodeSize--
		r.c, r.cfg = c, cfg
		r.log = rankLogger(o.logger, worldRank, c.Rank())
		defer func() {
			if err != nil {
				// The head waits for this rank's announcement: it learns
				// that Init failed here and ends too.
				_ = sendMsg(headNode, 0, binary.LittleEndian.AppendUint64(nil, headInitFailed))
				_ = headNode.Close()
				_ = c.Close()
			}
		}()
	}
	if err := r.takeRun(o); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			r.releaseLock()
		}
	}()
	topo, err := r.buildTopology(o)
	if err != nil {
		return nil, err
	}
	r.topo = topo
	node := topo.NodeOf(c.Rank())
	if !o.pageHandoverSet {
		o.pageHandover = comm.IsInProcess(c)
	}
	r.handover = o.pageHandover
	if !o.restartImageSet {
		o.restartImage = restartImageDefault(cfg.NodeSize)
	}
	r.env = &levels.Env{
		Comm: c, Topo: topo, Rank: c.Rank(),
		Local:        levels.Store{Driver: o.local, Dir: cfg.NodeDir(node, r.run)},
		Global:       levels.Store{Driver: o.global, Dir: cfg.GlobalDir(r.run)},
		Meta:         levels.Store{Driver: o.meta, Dir: cfg.MetaDir},
		Run:          r.run,
		BlockSize:    cfg.BlockSize,
		TransferSize: cfg.TransferSize,
		Logger:       r.log,
		Now:          o.now,
		ImageLimit:   o.restartImage,
	}
	ls := cfg.levelList(&partner.Buffers{}, o)
	policy := levels.FTIPolicy{KeepL4: cfg.KeepL4Ckpt, KeepLast: cfg.KeepLast}
	localDrv := o.local
	run := r.run
	r.nodeStore = func(n int) levels.Store {
		return levels.Store{Driver: localDrv, Dir: cfg.NodeDir(n, run)}
	}
	r.eng, err = levels.NewEngine(r.env, levels.Config{Levels: ls, Policy: policy, NodeStore: r.nodeStore})
	if err != nil {
		return nil, err
	}
	if err := r.eng.Open(); err != nil {
		return nil, fmt.Errorf("ckpt: %w", err)
	}
	if err := r.openVPR(o.global); err != nil {
		return nil, err
	}
	if o.offline {
		return r, nil // no restart, no background worker: the offline rebuild
	}
	if err := r.restart(o.warn, start); err != nil {
		r.eng.Wait()
		return nil, err
	}
	r.post.node = headNode
	if err := r.openPost(); err != nil {
		r.eng.Wait()
		return nil, err
	}
	if headNode != nil {
		if err := r.announceHead(); err != nil {
			r.eng.Wait()
			r.post.node = nil
			return nil, fmt.Errorf("ckpt: head = 1: %w", err)
		}
	}
	r.startPolicy(o, start)
	return r, nil
}

// restart finds the checkpoint to restart from, newest first, among the
// committed checkpoints and the level-9 HDF5 files, and prepares Recover
// for it; nothing to restart from is a fresh run. Collective.
func (r *Runtime) restart(warn io.Writer, start time.Time) error {
	c := r.c
	committed := r.eng.Committed()
	vprs := r.vpr.records
	if len(committed) == 0 && len(vprs) == 0 {
		r.status = Fresh
		r.log.Debug("fresh run")
		return nil
	}
	// A level-9 file newer than every committed checkpoint is tried
	// first; older ones only when no committed checkpoint is recoverable.
	newestM := int64(math.MinInt64)
	if len(committed) > 0 {
		newestM = committed[len(committed)-1].Time
	}
	var vprErrs []error
	tryVPR := func(newer bool) (bool, error) {
		for i := len(vprs) - 1; i >= 0; i-- {
			if (vprs[i].Time > newestM) != newer {
				continue
			}
			err := r.restartVPR(vprs[i])
			if err == nil {
				if c.Rank() == 0 {
					wall := r.now().Sub(start)
					r.log.Info(fmt.Sprintf("This is a restart. Recovering successfully from level 9 with Ckpt. %d (%s, written by %d ranks) in %.3f sec.",
						vprs[i].ID, vprs[i].Path, r.OldRanks(), wall.Seconds()),
						zap.Int64("ckpt-id", vprs[i].ID), zap.String("file", vprs[i].Path),
						zap.Int("old-ranks", r.OldRanks()), zap.Stringer("status", r.status), zap.Duration("wall", wall))
				}
				return true, nil
			}
			vprErrs = append(vprErrs, err)
			if c.Rank() == 0 {
				r.log.Warn("level-9 HDF5 file not recoverable, trying an older checkpoint", zap.String("file", vprs[i].Path), zap.Error(err))
			}
		}
		return false, nil
	}
	if ok, err := tryVPR(true); ok || err != nil {
		return err
	}
	var merr error
	if len(committed) > 0 {
		r.countLostNodes(committed)
		m, src, err := r.eng.Recover()
		if err == nil {
			var st *reshapeState
			rs := r.eng.Reshaped()
			if rs != nil {
				st = &reshapeState{what: fmt.Sprintf("checkpoint %s (id %d, %v, %d ranks)", m.Dir(), m.ID, m.Level, m.Ranks), oldRanks: m.Ranks}
				r.reshape = st // nothing of this rank's own to open
			}
			r.restartFrom(m, src)
			if st != nil {
				if err := r.startReshape(st, rs.Verified, rs.Home); err != nil {
					return fmt.Errorf("ckpt: restart: %w", err)
				}
				r.layout = nil
			}
			if c.Rank() == 0 {
				r.warnSkipped(warn, m)
				// FTI's two lines in one, with the time Init took to find,
				// verify and rebuild the checkpoint.
				wall := r.now().Sub(start)
				where := m.Dir()
				if r.OldRanks() != c.Size() {
					where += fmt.Sprintf(", written by %d ranks", r.OldRanks())
				}
				r.log.Info(fmt.Sprintf("This is a restart. Recovering successfully from level %d with Ckpt. %d (%s) in %.3f sec.", int(m.Level), m.ID, where, wall.Seconds()),
					zap.Int64("ckpt-id", m.ID), zap.Stringer("ckpt-level", m.Level), zap.String("dir", m.Dir()), zap.Stringer("status", r.status),
					zap.Int("old-ranks", r.OldRanks()), zap.Duration("wall", wall))
			}
			return nil
		}
		merr = err
	}
	if ok, err := tryVPR(false); ok || err != nil {
		return err
	}
	if merr == nil {
		merr = ErrUnrecoverable // only level-9 files, none recoverable
	}
	return fmt.Errorf("ckpt: restart: %w", errors.Join(append([]error{merr}, vprErrs...)...))
}

// warnSkipped tells the user, on w and in the log, which newer
// checkpoints the restart passed over and why (rank 0).
func (r *Runtime) warnSkipped(w io.Writer, from *levels.Manifest) {
	skipped := r.eng.Skipped()
	if len(skipped) == 0 {
		return
	}
	var b strings.Builder
	for _, s := range skipped {
		fmt.Fprintf(&b, "ftigo: warning: checkpoint %d (%v, %s) is unrecoverable and was skipped: %v\n",
			s.Manifest.ID, s.Manifest.Level, s.Manifest.Dir(), s.Err)
	}
	fmt.Fprintf(&b, "ftigo: warning: restarting from the older checkpoint %d (%v, %s)\n", from.ID, from.Level, from.Dir())
	_, _ = io.WriteString(w, b.String())
	ids := make([]string, len(skipped))
	for i, s := range skipped {
		ids[i] = fmt.Sprintf("%d (%v, %s)", s.Manifest.ID, s.Manifest.Level, s.Manifest.Dir())
	}
	r.log.Warn(fmt.Sprintf("restarting from the older checkpoint %d (%v): skipped unrecoverable checkpoint(s) %s",
		from.ID, from.Level, strings.Join(ids, ", ")), zap.Int64("ckpt-id", from.ID), zap.Strings("skipped", ids))
}

// releaseLock releases the run's locks if this rank holds them.
func (r *Runtime) releaseLock() error {
	err := r.claim.Close()
	r.claim = nil
	return err
}

// restartFrom makes m, with this rank's data at src, the checkpoint the
// run restarts from.
func (r *Runtime) restartFrom(m *levels.Manifest, src levels.Source) {
	r.closeStored()
	r.recovered, r.from, r.src, r.srcTask, r.lastID = m, m, src, nil, m.ID
	if f, ok := m.DataFile(r.c.Rank()); ok && f.Attrs[levels.AttrDigest] == levels.DigestH5 && m.Ranks == r.c.Size() {
		r.srcTask = &f // the data lives in the L4 HDF5 file
	}
	// The next checkpoint continues the recovered file's layout.
	if st, err := r.openStored(); err == nil {
		r.layout = st.layout
		if rd, ok := st.r.(*fileformat.Reader); ok {
			r.keepImage(m, fileformat.Parent{Layout: rd.Layout(), Summary: rd.Summary()})
		}
	} else {
		r.log.Debug("recovered file's layout unreadable; the next checkpoint lays variables out afresh", zap.Error(err))
	}
	r.status = Restart
	if m.Kept {
		r.status = RestartKept
	}
}

// Status reports whether there is data to recover, with FTI_Status's
// values: Restart (or RestartKept) after Init restarted from a
// checkpoint, Fresh on a first run and, as in FTI, once Recover has
// succeeded. [Runtime.Recovered] keeps saying where the run restarted
// from. A nil runtime reports Fresh.
func (r *Runtime) Status() Status {
	if r == nil {
		return Fresh
	}
	return r.status
}

// Wait blocks until this rank's background work has finished: the
// post-processing of the last checkpoint (asynchronous levels; see
// [Runtime.CheckpointWait], which also returns its failure) and the
// deletion of superseded checkpoint files; Checkpoint and Finalize wait by
// themselves. A job that ends without Finalize calls [Runtime.Close],
// which waits too and also releases meta_dir's lock. Local.
func (r *Runtime) Wait() {
	if r == nil || r.eng == nil {
		return
	}
	r.drainPost()
	r.eng.Wait()
}

// Close ends this rank's use of the runtime without Finalize, for a job
// that stops early and wants its checkpoints kept for the next run (as if
// it had been killed): it waits for the background deletion of
// superseded checkpoints, closes the data file Recover reads and, on
// rank 0, releases meta_dir's lock so that another runtime (the next
// launch, or a test's next Init in the same process) may use the
// directories. Every committed checkpoint stays. Local; Close after
// Close or Finalize does nothing. Every other call afterwards returns
// an error wrapping [ErrClosed].
func (r *Runtime) Close() error {
	if r == nil {
		return fmt.Errorf("%w: Close on a nil *ckpt.Runtime (did Init fail?)", ErrNilArgument)
	}
	if r.closed || r.finalized {
		return nil
	}
	r.closed = true
	r.abortICP()
	r.closePost() // a checkpoint in flight is finished, or left at L1
	defer r.endPolicy(policy.EndClose)
	r.drainStaging()
	r.dropImage()
	r.closeStored()
	if r.reshape != nil {
		r.reshape.close()
	}
	r.eng.Release()
	return r.releaseLock()
}

func (r *Runtime) protect(v *variable) error {
	if err := r.usable("Protect"); err != nil {
		return err
	}
	if v.id < 0 || v.id > r.cfg.MaxVarID {
		return fmt.Errorf("%w: %d (must be 0..max_var_id %d)", ErrBadID, v.id, r.cfg.MaxVarID)
	}
	if _, ok := r.vars[v.id]; !ok {
		r.order = append(r.order, v.id)
	}
	r.vars[v.id] = v
	r.snapReserve(v)
	return nil
}

// Unprotect removes a variable from future checkpoints (nothing for a
// nil runtime).
func (r *Runtime) Unprotect(id int) {
	if r == nil {
		return
	}
	if _, ok := r.vars[id]; !ok {
		return
	}
	delete(r.vars, id)
	delete(r.comp, id)
	r.scopy.drop(id)
	if _, ok := r.subsets[id]; ok {
		delete(r.subsets, id)
		r.dsVersion++
	}
	for i, x := range r.order {
		if x == id {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
}
